"""`ls`: namespaces and tables of a namespace, with where each is known from and its state."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, overload

import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import CatalogDamagedError, InvalidInputError
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    MANIFEST_TABLE,
    OBJECT_ID_DELIMITER,
    SOURCE_BOTH,
    SOURCE_DIRECTORY,
    SOURCE_MANIFEST,
    STATE_OK,
    Entry,
    Identifier,
    Listing,
)
from lancens_cli.partition.rows import spec_of_row, specs_by_namespace
from lancens_cli.partition.spec import PARTITION_COLUMN_PREFIX, PartitionSpec
from lancens_cli.service.catalog import listing_index
from lancens_cli.service.namespace import NameRange, Namespace
from lancens_cli.service.partitioned.label import PartitionLabel
from lancens_cli.service.partitioned.layout import (
    PartitionLayout,
    layout_from_metadata,
    partition_summary,
    readable_layout,
)
from lancens_cli.service.partitioned.naming import label_of
from lancens_cli.store import listing_cache
from lancens_cli.store.arrow_text import arrow_strings, contiguous, sorted_repeats
from lancens_cli.store.containment import directory_location_problem, shown
from lancens_cli.store.manifest import properties_problem
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.tables import V1_SUFFIX, table_state

STATE_REFUSED = "refused"  # a location lancens will not open (store/containment.py)
STATE_DAMAGED = "damaged"  # a row whose stored properties cannot be read (`check` reports it)


def list_namespace(
    ns: Namespace,
    ident: Identifier,
    *,
    recursive: bool = False,
    limit: int | None = None,
    page_token: str | None = None,
    with_state: bool = True,
    delimiter: str = ".",
    all_rows: bool = False,
) -> Listing:
    """List a namespace's children (all descendants with `recursive`), sorted by id.

    On a partitioned root a partition table carries its values, a spec-version namespace its
    spec and partition count; the namespaces between them (random names, one per level) are
    listed only with `all_rows`. Pagination: `page_token` is the id of the last entry of the
    previous page.
    """
    if limit is not None and limit < 1:
        raise InvalidInputError(f"--limit must be at least 1, not {limit}")
    ns.require_root()
    whole_root = ident.is_root  # the root's children, or with `recursive` everything
    indexable = whole_root and not all_rows  # the index holds what `ls` lists by default
    found = listing_index.find(ns, recursive) if indexable else None
    # a long listing without --limit is listed whole, and keeps the index it found as it was
    kept_long = found is not None and limit is None and found.long
    if found is not None and not kept_long:  # a page, or a short whole listing
        indexed = listing_index.page(ns, found, _after(page_token, delimiter), limit)
        if indexed is not None:
            listed = _indexed_listing(ns, ident, indexed, delimiter, with_state)
            if listed is not None:
                return listed
    start = listing_index.Start(ns)
    snapshot = ns.snapshot(columns=_shown_column)  # nothing else of a row is listed
    ns.require_namespace(ident, snapshot)
    after = _after(page_token, delimiter)  # a namespace that is not there is said first

    summary = partition_summary(snapshot) if snapshot.exists else None
    partitions = _PartitionView(readable_layout(snapshot), summary)
    child, positions, ids, id_order = _listed_rows(snapshot, ident, recursive, partitions, all_rows)
    directories = (
        _directory_tables(ns, snapshot, child, _page_range(ns, ids, after, limit))
        if ident.is_root
        else _NO_DIRECTORIES
    )
    verdicts = row_locations(ns.storage, snapshot)  # after the listing: its links are kept
    # Every key is sorted in Arrow; Python objects are made for the page's entries only.
    if len(directories.names):
        keys = pa.concat_arrays([ids.cast(pa.string()), directories.names])
        order = pc.sort_indices(keys)
    else:  # the rows alone: in the order their ids were sorted in to find repeats
        keys, order = ids.cast(pa.string()), id_order
    readable = summary is None or "unreadable" not in summary
    judged = verdicts.by_spelling_alone and not directories.real
    if indexable and not kept_long and readable and judged:
        whole = _Sorted(keys, order, child, positions)
        big = max(len(keys), snapshot.table.num_rows) >= listing_cache.CACHED_FROM
        if big:  # many entries to list, or few of a big catalog
            _keep_index(ns, start, snapshot.version, whole, directories, recursive, summary)
    if after is not None:
        order = order.filter(pc.greater(keys.take(order), after))
    more = limit is not None and len(order) > limit
    page = _PageEntries(
        order[:limit] if limit is not None else order,
        _EntryMaker(ns, snapshot, child, directories, verdicts, partitions, delimiter, with_state),
    )
    next_token = page[len(page) - 1].id if more else None
    listing = Listing(ident.display(delimiter), page, next_token)
    if ident.is_root:
        listing.partitioning = summary
    return listing


def _after(page_token: str | None, delimiter: str) -> str | None:
    """The key a page starts after."""
    return _stand_in(Identifier.parse(page_token, delimiter).object_id) if page_token else None


ENTRY_CHUNK = 4096  # entries made (and table states looked up) at a time


class _EntryMaker:
    """Makes the entries of some of a listing's positions (positions in its sorted keys: a
    listed row below the row count, a root directory above it)."""

    def __init__(
        self,
        ns: Namespace,
        snapshot: Any,
        child: Any,
        directories: _Directories,
        verdicts: Any,
        partitions: _PartitionView,
        delimiter: str,
        with_state: bool,
    ) -> None:
        self.ns, self.snapshot, self.child, self.directories = ns, snapshot, child, directories
        self.verdicts, self.partitions, self.delimiter = verdicts, partitions, delimiter
        self.with_state = with_state
        self.row_count = child.num_rows
        # for every listed row: worked out with the directories, else when a long page asks
        self._in_directory: Any = directories.held

    def __call__(self, positions: list[int]) -> list[Entry]:
        count = self.row_count
        row_positions = pa.array([p for p in positions if p < count], pa.int64())
        rows = self.child.take(row_positions).to_pylist()
        in_directory = self._in_directory_of(row_positions, rows, len(positions))
        next_row = iter(zip(rows, in_directory, strict=True))
        made = [
            _row_entry(*next(next_row), self.verdicts, self.partitions, self.delimiter)
            if position < count
            else _directory_entry(self.ns, *self._directory(position - count))
            for position in positions
        ]
        tables = [e for e in made if e.kind == KIND_TABLE and not e.state]
        if self.with_state and tables:
            _fill_states(self.ns, tables)
        return made

    def _directory(self, index: int) -> tuple[str, str]:
        """The name and location of the listing's `index`th directory-only table."""
        real = self.directories.real.get(index)
        if real is not None:
            return real
        return self.directories.names[index].as_py(), self.directories.locations[index].as_py()

    def _in_directory_of(self, positions: Any, rows: list[dict[str, Any]], asked: int) -> list:
        """Whether a root `<name>.lance` directory also holds each row's location. A chunk of
        a long page takes it from one test of every listed row (hashing all the directories
        once); a short page asks which directories hold its own few locations."""
        held = self._listed_directory_holds(positions, rows, asked)
        after, until = self.directories.between
        if after is None and until is None:
            return held
        return [  # a location whose name the page's listing did not cover is asked of itself
            found or (_outside(row["location"], after, until) and self._lists(row["location"]))
            for found, row in zip(held, rows, strict=True)
        ]

    def _lists(self, location: str) -> bool:
        return self.ns.lists_directory(self.snapshot, location)

    def _listed_directory_holds(
        self, positions: Any, rows: list[dict[str, Any]], asked: int
    ) -> list:
        directories = self.directories.all_locations
        if not len(directories):
            return [False] * len(rows)
        if asked >= ENTRY_CHUNK:
            if self._in_directory is None:
                locations = self.child.column("location").combine_chunks()
                self._in_directory = pc.is_in(locations, value_set=directories)
            return self._in_directory.take(positions).to_pylist()
        wanted = pa.array([row["location"] for row in rows], pa.string())
        held = set(directories.filter(pc.is_in(directories, value_set=wanted)).to_pylist())
        return [row["location"] in held for row in rows]


def _outside(location: Any, after: str | None, until: str | None) -> bool:
    """Whether a root `<name>.lance` location's name lies outside (after, until]."""
    if not isinstance(location, str) or not location.endswith(V1_SUFFIX):
        return False
    name = location[: -len(V1_SUFFIX)]
    return (after is not None and name <= after) or (until is not None and name > until)


class _PageEntries(Sequence[Entry]):
    """A page's entries, made ENTRY_CHUNK at a time as they are read: `ls --json` of a million
    tables never holds a million entries (or row dicts) at once. A page of at most one chunk
    is made once and kept; a longer one is made again each time it is read."""

    def __init__(self, positions: Any, make: _EntryMaker) -> None:
        self._positions = positions  # Arrow indices into the sorted keys
        self._make = make
        self._kept: list[Entry] | None = None
        if len(positions) <= ENTRY_CHUNK:
            self._kept = make(positions.to_pylist())

    def __len__(self) -> int:
        return len(self._positions)

    def __iter__(self) -> Iterator[Entry]:
        if self._kept is not None:
            yield from self._kept
            return
        for start in range(0, len(self._positions), ENTRY_CHUNK):
            yield from self._make(self._positions[start : start + ENTRY_CHUNK].to_pylist())

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if self._kept is not None:
            return self._kept[index]
        if isinstance(index, slice):
            return self._make(self._positions.to_pylist()[index])
        return self._make([self._positions[index].as_py()])[0]


def _listed_rows(
    snapshot: Any, ident: Identifier, recursive: bool, partitions: _PartitionView, all_rows: bool
) -> tuple[Any, Any, Any, Any]:
    """The catalog rows `ls` lists, as an Arrow table: the namespace's children (less the
    partition levels, unless `all_rows`), one row per object id (the last, as a reader that
    keys rows by id keeps); each one's position in the snapshot; their ids in one array; and
    their order by id (a sort of a million ids takes a second: made once, to find repeats,
    and kept)."""
    levels = partitions.level_mask if not all_rows and partitions.spec_namespaces else None
    # the snapshot holds the shown columns alone (`list_namespace` read it so)
    child, positions = snapshot.child_table_and_positions(ident.object_id, recursive, levels)
    ids = contiguous(child.column("object_id"))
    order = pc.sort_indices(ids)
    if len(sorted_repeats(ids, order)):
        last = sorted({object_id: i for i, object_id in enumerate(ids.to_pylist())}.values())
        child, positions = child.take(last), positions.take(last)
        ids = contiguous(child.column("object_id"))
        order = pc.sort_indices(ids)
    return child, positions, ids, order


# The columns of a row that `ls` shows something of, with each partition column (a copy of
# the rest, for a million rows, is memory and dicts for nothing).
LISTED_COLUMNS = frozenset({"object_id", "object_type", "location", "metadata"})


def _shown_column(name: str) -> bool:
    return name in LISTED_COLUMNS or name.startswith(PARTITION_COLUMN_PREFIX)


class _Sorted(NamedTuple):
    """A whole listing's keys and their order, and its rows with their snapshot positions."""

    keys: Any
    order: Any
    child: Any
    positions: Any


def _keep_index(
    ns: Namespace,
    start: listing_index.Start,
    version: int,
    listed: _Sorted,
    directories: _Directories,
    recursive: bool,
    partitioning: dict[str, Any] | None,
) -> None:
    """Hand a whole listing of the root (and a partitioned root's summary) to
    `listing_index`, in the order it lists."""
    count = listed.child.num_rows
    if count == 0:
        return
    order = listed.order.cast(pa.int64())
    is_row = pc.less(order, count)
    row_at = pc.if_else(is_row, order, 0)
    locations = listed.child.column("location").combine_chunks()
    held = directories.held
    if held is None:
        held = pc.fill_null(pc.is_in(locations, value_set=directories.all_locations), False)
    unnamed = directories.all_locations.filter(pc.invert(directories.named))
    checked = pc.and_(held, pc.is_in(locations, value_set=unnamed))  # no row names its directory
    row_side = pc.if_else(checked, locations, pa.scalar(None, pa.string())).take(row_at)
    dir_side = (
        directories.locations.take(pc.if_else(is_row, 0, pc.subtract(order, count)))
        if len(directories.locations)
        else pa.nulls(len(order), pa.string())
    )
    listed_index = listing_index.Listed(
        keys=listed.keys.take(order),
        positions=pc.if_else(is_row, listed.positions.take(row_at), -1),
        locations=pc.if_else(is_row, row_side, dir_side),
        held=pc.and_(is_row, held.take(row_at)),
        marker_check=pc.or_(pc.invert(is_row), checked.take(row_at)),
        marked=list(directories.marked),
    )
    listing_index.keep(ns, start, version, listed_index, recursive, partitioning)


def _indexed_listing(
    ns: Namespace,
    ident: Identifier,
    indexed: listing_index.IndexedPage,
    delimiter: str,
    with_state: bool,
) -> Listing | None:
    """A page read from the listing index, its entries made as the whole listing makes them.
    The index is kept only of a readable partition layout, of the same `__manifest` version;
    were it unreadable all the same, None: the whole listing names what is wrong."""
    try:
        layout = layout_from_metadata(indexed.metadata or {})
    except CatalogDamagedError:
        return None  # the whole listing names what is wrong
    partitions = _PartitionView(layout, indexed.partitioning)
    entries = [
        _row_entry(indexed.rows[row], indexed.held[row], _ACCEPTED, partitions, delimiter)
        if row is not None
        else _directory_entry(ns, name, location or "")
        for row, name, location in indexed.entries
    ]
    tables = [e for e in entries if e.kind == KIND_TABLE and not e.state]
    if with_state and tables:
        _fill_states(ns, tables)
    next_token = entries[-1].id if indexed.more and entries else None
    listing = Listing(ident.display(delimiter), entries, next_token)
    listing.partitioning = indexed.partitioning
    return listing


class _Accepted:
    """The verdicts of a catalog whose every table row its spelling alone accepted (the
    listing index is kept only for such a catalog)."""

    def problem(self, object_id: str) -> None:
        return None


_ACCEPTED = _Accepted()


class _PartitionView:
    """What `ls` shows of a partitioned root's own rows, from its layout and its
    `partition_summary` (empty for any other root, and for damaged partition metadata: listed
    as rows)."""

    def __init__(self, layout: PartitionLayout | None, summary: dict[str, Any] | None) -> None:
        self._by_namespace: dict[str, PartitionSpec] = {}  # a page's rows are labelled by them
        self.spec_namespaces: set[str] = set()
        self.current: str | None = None
        self.specs: dict[str, str] = {}
        self.counts: dict[str, Any] = {}
        if summary is None or "unreadable" in summary:
            return
        versions = summary["spec_versions"]
        self._by_namespace = specs_by_namespace(layout.specs) if layout else {}
        self.spec_namespaces = {f"v{v}" for v in versions}
        self.current = f"v{summary['current_spec']}"
        self.specs = {f"v{v}": ", ".join(summary["spec_fields"][str(v)]) for v in versions}
        self.counts = {f"v{v}": summary["partitions_by_spec"][str(v)] for v in versions}

    def label(self, row: dict[str, Any]) -> PartitionLabel | None:
        """The partition values of a partition table's row (None: another row)."""
        spec = spec_of_row(row, self._by_namespace, KIND_TABLE)
        return label_of(spec, row) if spec is not None else None

    def level_mask(self, rows: Any) -> Any:
        """Which of `rows` (an Arrow table) are namespaces between `v<N>` and a partition
        table (one per partition level)."""
        ids = rows.column("object_id")
        below_spec = pa.repeat(False, len(ids))
        for namespace in self.spec_namespaces:
            below_spec = pc.or_(below_spec, pc.starts_with(ids, namespace + OBJECT_ID_DELIMITER))
        level = pc.and_(pc.equal(rows.column("object_type"), KIND_NAMESPACE), below_spec)
        return pc.fill_null(level, False)  # a row of no type is listed, as it was


def _row_entry(
    row: dict[str, Any],
    in_directory: bool,
    verdicts: Any,
    partitions: _PartitionView,
    delimiter: str,
) -> Entry:
    """A catalog row as `ls` shows it: a refused location shown, never opened;
    `in_directory`, whether a root `<name>.lance` directory also holds its location."""
    object_id = row["object_id"]
    location = row["location"] if row["object_type"] == KIND_TABLE else None
    state = ""
    if row["object_type"] == KIND_NAMESPACE:
        damaged = properties_problem(row)
        state = STATE_OK if damaged is None else f"{STATE_DAMAGED}: {damaged}"
    problem = verdicts.problem(object_id)
    if problem is not None:
        location, state = shown(problem.location), f"{STATE_REFUSED}: {problem.reason}"
    in_directory = in_directory and row["object_type"] == KIND_TABLE
    return Entry(
        id=Identifier.display_of(object_id, delimiter),
        kind=row["object_type"],
        location=location,
        source=SOURCE_BOTH if in_directory else SOURCE_MANIFEST,
        state=state,
        label=partitions.label(row),
        spec=partitions.specs.get(object_id),
        current=object_id == partitions.current,
        partitions=partitions.counts.get(object_id),
    )


class _Directories(NamedTuple):
    """The root's `<name>.lance` directories as `ls` lists them, in Arrow: those no listed
    row knows (`names` -> `locations`; for a name that is not UTF-8, a stand-in that `real`
    maps from its position to the name and location), and the locations of all of them
    (all those named in `between`, when the listing covered only a page's names)."""

    names: Any
    locations: Any
    all_locations: Any
    real: dict[int, tuple[str, str]]
    between: NameRange = (None, None)
    named: Any = pa.array([], pa.bool_())  # of `all_locations`: a row has the same id
    marked: Sequence[str] = ()  # the locations a deregistration marker hid
    held: Any = None  # of the listed rows: a directory holds its location (None: not asked)


_NONE = pa.array([], pa.string())
_NO_DIRECTORIES = _Directories(names=_NONE, locations=_NONE, all_locations=_NONE, real={})


def _page_range(ns: Namespace, ids: Any, after: str | None, limit: int | None) -> NameRange:
    """The names a page's directories can have: past the page token, and, when more rows
    than the page follow it, up to the last row that fills the page (a directory after that
    would sort after the page). Only an object store gains from it: it lists in order, and
    stops there; a local directory is listed whole either way."""
    if limit is None or ns.storage.is_local:
        return (None, None)
    following = ids if after is None else ids.filter(pc.greater(ids, after))
    if len(following) <= limit:
        return (after, None)
    ordered = following.take(pc.sort_indices(following))
    return (after, ordered[limit - 1].as_py())


def _directory_tables(
    ns: Namespace, snapshot: Any, rows: Any, between: NameRange = (None, None)
) -> _Directories:
    """Spec 000: the root's `<name>.lance` directories (at least those named in `between`),
    deduplicated against the listed rows by location and by name; and, for a listing big
    enough to be kept (`_keep_index`), which rows' locations a directory holds."""
    listed = ns.dir_table_columns(between)
    big = rows.num_rows + len(listed[0]) >= listing_cache.CACHED_FROM
    with ThreadPoolExecutor(max_workers=1) as pool:
        # hashing a million directory locations for the rows takes as long as hashing the
        # rows' ids for the directories (`visible_of`): on the other core, at the same time
        holding = pool.submit(_rows_held, rows, listed[1]) if big else None
        found = ns.visible_of(snapshot, listed)
        held = holding.result() if holding is not None else None
    names, locations, named, odd = found.names, found.locations, found.named, found.odd
    if held is not None:
        held = _less_hidden(held, rows, found.hidden)
    if not len(names) and not odd:
        return _NO_DIRECTORIES._replace(marked=found.marked, held=held)
    # `named`: by any row's id; at the root, a name (no `$`) can equal only a listed row's id.
    # So a row at `<its id>.lance` hides no directory `named` does not: only the others are
    # looked up by location (at a million rows, a hash of none rather than of every row).
    tables = rows.filter(pc.equal(rows.column("object_type"), KIND_TABLE))
    usual = pc.binary_join_element_wise(tables.column("object_id"), V1_SUFFIX, "")
    moved = tables.filter(
        pc.invert(pc.fill_null(pc.equal(tables.column("location"), usual), False))
    )
    known = pc.or_(pc.is_in(locations, value_set=moved.column("location").combine_chunks()), named)
    only = pc.invert(known)
    names, only_locations = names.filter(only), locations.filter(only)
    real = {len(names) + i: pair for i, pair in enumerate(sorted(odd.items()))}
    if real:  # sorted and paged by a printable stand-in; shown as they are
        stand_ins = pa.array([_stand_in(name) for name, _ in real.values()], pa.string())
        names = pa.concat_arrays([names, stand_ins])
        only_locations = pa.concat_arrays([only_locations, stand_ins])
    return _Directories(names, only_locations, locations, real, between, named, found.marked, held)


def _rows_held(rows: Any, locations: Any) -> Any:
    """Whether each row's location is among the listed directories' (hidden ones too). The
    answer is combined, not the locations: a copy of a million of them was 40 MiB."""
    if not len(locations):
        return pa.repeat(False, rows.num_rows)
    found = pc.is_in(rows.column("location"), value_set=locations)
    return pc.fill_null(found, False).combine_chunks()


def _less_hidden(held: Any, rows: Any, hidden: Sequence[str]) -> Any:
    """`_rows_held` of the visible directories alone: less the few `visible_of` hid (a
    finished rename's old directory, a deregistration marker's)."""
    if not hidden:
        return held
    locations = rows.column("location").combine_chunks()
    hidden_text, _ = arrow_strings(list(hidden))  # a location not UTF-8 is no row's in Arrow
    gone = pc.fill_null(pc.is_in(locations, value_set=hidden_text), False)
    return pc.and_(held, pc.invert(gone))


def _stand_in(text: str) -> str:
    """A name that is not UTF-8, as text Arrow can sort: each undecodable byte (a surrogate,
    as `os.scandir` gives it) as U+FFFD, which sorts it after the names of other tables, as
    its surrogates did."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _directory_entry(ns: Namespace, name: str, location: str) -> Entry:
    problem = directory_location_problem(ns.storage, location)
    state = "" if problem is None else f"{STATE_REFUSED}: {problem}"
    return Entry(id=name, kind=KIND_TABLE, location=location, source=SOURCE_DIRECTORY, state=state)


STATE_READERS = 8  # threads looking into table directories at once (the waits overlap)
STATES_ALONE = 64  # tables a chunk looks into in its own thread first, timing them
# A table's directory listed from the kernel's cache takes 10-30 us; from disk, a millisecond.
# Threads pay off only for the waits: on cached directories they fight over Python's lock
# (`ls -R --json` of a million cached partition tables: 64 s in one thread, 95 s in eight).
WAITED_PER_TABLE_S = 200e-6


def _fill_states(ns: Namespace, tables: list[Entry]) -> None:
    """Classify table directories. A remote store is asked sixteen at a time; a local chunk
    that waits on the disk (timed on its first tables) is looked into eight at a time."""

    def state(entry: Entry) -> str:
        return table_state(ns.storage, entry.location) if entry.location else "missing"

    def states(share: list[Entry]) -> None:
        for entry in share:
            entry.state = state(entry)

    if not ns.storage.is_local:
        if len(tables) < 4:
            states(tables)
            return
        with ThreadPoolExecutor(max_workers=16) as pool:
            for entry, result in zip(tables, pool.map(state, tables), strict=True):
                entry.state = result
        return
    first, rest = tables[:STATES_ALONE], tables[STATES_ALONE:]
    started = time.perf_counter()
    states(first)
    if not rest or (time.perf_counter() - started) / len(first) < WAITED_PER_TABLE_S:
        states(rest)  # the kernel holds them (or none is left): no thread would gain
        return
    with ThreadPoolExecutor(max_workers=STATE_READERS) as pool:  # a share each, no hand-over
        list(pool.map(states, [rest[i::STATE_READERS] for i in range(STATE_READERS)]))


NESTED_ROOTS_LOOKED_AT = 200  # directories a root that holds nothing is searched for roots


def roots_below(ns: Namespace) -> list[str]:
    """When the root holds no `__manifest` and no table, the directories right below it that
    are namespace roots themselves (the parent of real roots was given as `--root`)."""
    if not ns.storage.root_exists() or ns.snapshot().exists:
        return []
    if ns.visible_dir_tables(ns.snapshot()):
        return []
    found = []
    directories = sorted(e.name for e in ns.storage.list_dir("") if e.is_dir)
    for name in directories[:NESTED_ROOTS_LOOKED_AT]:
        if name.startswith(".") or directory_location_problem(ns.storage, name) is not None:
            continue  # never followed out of the root (store/containment.py)
        if ns.storage.is_dir(f"{name}/{MANIFEST_TABLE}"):
            found.append(name)
    return found


def nested_roots_message(ns: Namespace, names: list[str]) -> str:
    """What `ls` says and `check` reports about a root that holds only other roots."""
    shown_names = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    example = (
        ns.storage.uri(names[0]) if ns.storage.is_local else f"{ns.storage.root_uri}/{names[0]}"
    )
    return (
        f"{ns.storage.root_uri} holds no catalog, but {shown_names} below it "
        f"{'is a namespace root' if len(names) == 1 else 'are namespace roots'}: "
        f"did you mean --root {example}?"
    )
