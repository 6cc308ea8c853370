"""The change feed: every row inserted or deleted between two versions, and the version that did it.

Between `__manifest` versions A (exclusive) and B, every version v in (A, B] is one step: each
partition table whose published reference differs between v - 1 and v is compared at the two
table versions they publish (`Step`). A table first published at v gained all its rows; one no
longer published lost all of them. Otherwise the two versions' fragments are compared, from
their manifests alone:

- a fragment in both with the same data files and the same deletion file is unchanged and never
  read;
- a fragment in both whose deletion file differs lost the rows live before and not after, which
  are read by address (by row id on a table with stable row ids) from the version where they were
  alive; rows live after and not before (a restore) are inserts;
- fragments only before lost their rows, fragments only after gained theirs. When a step has both
  (a compaction, an overwrite, columns rewritten), rows written back with the values they had are
  moves, not changes: the reader cancels equal rows of the step (`Step.by_content`). A step whose
  table versions only compacted or indexed (their transactions say so) changes nothing.

On a table with stable row ids, a row deleted and inserted in one step with the same row id is
one row updated: the reader pairs them as `update_preimage` and `update_postimage`. Each change
carries the version that published it and that version's commit time. One table read alone
(`scan ID --changes`) is walked the same way over its own versions.

What cannot be told is refused naming the version: a `__manifest` version or a table version a
prune removed. Lance loads where a table is opened (`store.catalog_rows`); the version history
reader (`store.version_pick`) is imported inside the functions that use it, as in
`incremental.py`, whose module the data source's workers import.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from lancens_cli.errors import InvalidInputError, TableVersionNotFoundError
from lancens_cli.partition.rows import dotted, partition_table_rows
from lancens_cli.service.history.incremental import live_rows as _live
from lancens_cli.service.history.transactions import operation_of
from lancens_cli.service.partitioned.layout import layout_from_metadata
from lancens_cli.store.catalog_rows import PublishedRef, open_published
from lancens_cli.store.opened_versions import OPENED, version_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from lancens_cli.service.namespace import Namespace
    from lancens_cli.store.storage import Storage

INSERT = "insert"
DELETE = "delete"
PREIMAGE = "update_preimage"
POSTIMAGE = "update_postimage"

# the change feed's own columns, as Delta's change data feed names them
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)

# operations that move rows without changing any (their table versions need no comparing)
_MOVES = frozenset(("Rewrite", "CreateIndex", "UpdateConfig", "ReserveFragments"))
_READ_ERRORS = (OSError, ValueError, RuntimeError)
_OPENERS = 8  # tables compared at once
_TAKEN_PER_SIDE = 1 << 20  # rows one side takes by address at most: a Spark task's share
T = TypeVar("T")


@dataclass(frozen=True)
class Side:
    """Rows of one table version that a step deleted (read where they were alive) or inserted."""

    kind: str  # INSERT or DELETE
    location: str
    version: int
    branch: str | None
    fragments: tuple[int, ...]
    rows: tuple[int, ...] | None  # for `_take_rows`: addresses (ids with stable row ids); None: all
    count: int  # rows it holds


@dataclass(frozen=True)
class Step:
    """What one version did to one table."""

    table: str  # the partition table's dotted name, or the table's identifier
    key: str  # unique per table and step: the reader reads a step's sides together
    commit_version: int
    commit_time: datetime
    sides: tuple[Side, ...]
    by_content: bool  # equal rows deleted and inserted are moves, not changes
    row_ids: bool  # stable row ids: a row id deleted and inserted is an update

    @property
    def paired(self) -> bool:
        """Whether its rows must be read together (moves cancelled, updates paired)."""
        kinds = {side.kind for side in self.sides}
        return len(kinds) == 2 and (self.by_content or self.row_ids)


def namespace_changes(
    ns: Namespace, start: int, end: int, then: Callable[[Step], list[T]]
) -> list[T]:
    """`then` of every step of the partition tables between `__manifest` versions `start`
    (exclusive; 0: the start of everything) and `end`, in their order. `then` runs in the
    thread that found the step, just after the step gave back the table versions it opened
    (`store.opened_versions`: a pylance dataset serves one thread at a time), so they are
    there to be lent to it, not opened again."""
    latest = ns.manifest.pinned(end).open_dataset()
    if latest is None:
        raise InvalidInputError("the root has no __manifest: it is not a partitioned namespace")
    from lancens_cli.store.version_pick import version_history

    times = dict(version_history(latest))  # every readable version, whichever is checked out
    layout = layout_from_metadata(dict(latest.metadata or {}))
    if layout is None:
        raise InvalidInputError("the root is not a partitioned namespace")
    before = _tables_at(latest, start, layout.specs, times, start, end) if start else {}
    asked: list[tuple[int, str, dict[str, Any] | None, dict[str, Any] | None]] = []
    for version in range(start + 1, end + 1):
        after = _tables_at(latest, version, layout.specs, times, start, end)
        for object_id in sorted(set(before) | set(after)):
            old, new = before.get(object_id), after.get(object_id)
            if old is None or new is None or not _alike(old, new):
                asked.append((version, object_id, old, new))
        before = after

    def one(item: tuple[int, str, dict[str, Any] | None, dict[str, Any] | None]) -> list[T]:
        version, object_id, old, new = item
        name = dotted(object_id)
        step = _step(ns.storage, old, new, f"partition table {name}")
        if step is None:
            return []
        sides, by_content, row_ids = step
        key = f"{version}/{object_id}"
        return then(Step(name, key, version, times[version], sides, by_content, row_ids))

    with ThreadPoolExecutor(max_workers=_OPENERS) as pool:  # Lance releases the GIL
        return [found for each in pool.map(one, asked) for found in each]


def table_changes(
    storage: Storage, location: str, dataset: Any, branch: str | None, start: int | None, what: str
) -> list[Step]:
    """Every step of one table (opened at the version read, on `branch`) after its version
    `start` (None: from its first version), each version its own step."""
    from lancens_cli.store.version_pick import version_history

    end = int(dataset.version)
    times = dict(version_history(dataset))
    on_main: set[int] = set()
    if branch is not None:  # a branch's versions before it forked are main's
        forked = min(times, default=end + 1)
        from lancens_cli.store.tables import open_table

        main = dict(version_history(open_table(storage, location)))
        on_main = {v for v in main if v < forked}
        times = {**{v: main[v] for v in on_main}, **times}
    first = start if start is not None else 0
    steps = []
    for version in range(first + 1, end + 1):
        if version not in times:
            raise TableVersionNotFoundError(
                f"{what}: version {version} was pruned, so what it changed cannot be told; "
                "read changes from a later version"
            )
        before = None if version - 1 in on_main else branch
        old = _line_row(location, version - 1, before) if version > 1 else None
        new = _line_row(location, version, None if version in on_main else branch)
        step = _step(storage, old, new, what)
        if step is not None:
            sides, by_content, row_ids = step
            key = f"{version}/{location}"
            steps.append(Step(what, key, version, times[version], sides, by_content, row_ids))
    return steps


def _line_row(location: str, version: int, branch: str | None) -> dict[str, Any]:
    return {"location": location, **PublishedRef(version, branch).columns()}


def _tables_at(
    latest: Any, version: int, specs: Any, times: dict[int, datetime], start: int, end: int
) -> dict[str, dict[str, Any]]:
    """The partition table rows `__manifest` `version` publishes, by object id."""
    if version not in times:
        raise TableVersionNotFoundError(
            f"__manifest version {version} was pruned, so the changes between versions {start} "
            f"and {end} cannot be told; read changes from a later version"
        )
    try:
        rows = latest.checkout_version(version).to_table().to_pylist()
    except _READ_ERRORS:
        raise TableVersionNotFoundError(
            f"__manifest version {version} cannot be read, so the changes between versions "
            f"{start} and {end} cannot be told"
        ) from None
    return {row["object_id"]: row for row in partition_table_rows(rows, specs)}


def _alike(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return old.get("location") == new.get("location") and PublishedRef.of(old) == PublishedRef.of(
        new
    )


def _opened(
    held: ExitStack, storage: Storage, row: dict[str, Any], what: str
) -> tuple[Any, str | None]:
    """The table version `row` publishes, lent until `held` closes."""
    ref = PublishedRef.of(row)
    try:
        if ref.version is not None and ref.tag is None:
            dataset = held.enter_context(
                OPENED.lent(storage, row["location"], ref.version, ref.branch)
            )
            branch = ref.branch_in(dataset)  # no tag: asks nothing of the table
        else:
            dataset = open_published(storage, row)
            branch = ref.branch_in(dataset)
            key = version_key(storage, row["location"], int(dataset.version), branch)
            held.callback(OPENED.give, key, dataset)  # the planner and the reader lend it next
    except Exception:  # noqa: BLE001 - any failure to open a version means it cannot be read
        raise TableVersionNotFoundError(
            f"{what}: its {ref.words()} cannot be read (pruned?), so what changed there "
            "cannot be told; read changes from a later version"
        ) from None
    return dataset, branch


def _step(
    storage: Storage, old: dict[str, Any] | None, new: dict[str, Any] | None, what: str
) -> tuple[tuple[Side, ...], bool, bool] | None:
    """The sides of one table's change from row `old` to row `new` (None: not published),
    whether equal rows cancel, whether row ids pair; None when nothing changed. The versions
    it opens are given back when it returns, for the planner and the reader to lend."""
    with ExitStack() as held:
        before = _opened(held, storage, old, what) if old is not None else None
        after = _opened(held, storage, new, what) if new is not None else None
        if before is None or after is None:
            return _appeared_or_gone(old, before, new, after)
        assert old is not None and new is not None
        row_ids = _stable_ids(before[0], after[0])
        sides = _compared(old["location"], before, new["location"], after, row_ids)
        if len({side.kind for side in sides}) < 2:  # a move deletes what it inserts: two kinds
            return (tuple(sides), False, row_ids) if sides else None
        same_line = old["location"] == new["location"] and before[1] == after[1]
        since, until = int(before[0].version), int(after[0].version)
        if same_line and _only_moves(after[0], since, until, after[1]):
            return None
        gone = any(s.kind == DELETE and s.rows is None for s in sides)
        came = any(s.kind == INSERT and s.rows is None for s in sides)
        return tuple(sides), gone and came, row_ids


def _stable_ids(*opened: Any) -> bool:
    return all(bool(getattr(dataset, "has_stable_row_ids", False)) for dataset in opened)


def _appeared_or_gone(
    old: dict[str, Any] | None,
    before: tuple[Any, str | None] | None,
    new: dict[str, Any] | None,
    after: tuple[Any, str | None] | None,
) -> tuple[tuple[Side, ...], bool, bool] | None:
    """A table published on one side only: every row it holds there inserted or deleted."""
    kind, found, row = (INSERT, after, new) if after is not None else (DELETE, before, old)
    if found is None or row is None:
        return None
    dataset, branch = found
    fragments = [metadata for _, metadata in _with_metadata(dataset)]
    side = _whole(kind, row["location"], dataset, branch, fragments)
    return ((side,), False, _stable_ids(dataset)) if side is not None else None


def _only_moves(dataset: Any, since: int, until: int, branch: str | None) -> bool:
    """Whether every version after `since` up to `until` on the line only moved rows."""
    if until <= since:
        return False
    line = dataset
    for version in range(since + 1, until + 1):
        if branch is not None:
            try:
                line = dataset.checkout_version((branch, version))
            except _READ_ERRORS:
                return False
        operation = operation_of(line, version)
        if operation is None or type(operation).__name__ not in _MOVES:
            return False
    return True


def _whole(
    kind: str, location: str, dataset: Any, branch: str | None, fragments: list[Any]
) -> Side | None:
    """Every live row of the fragments of `dataset` whose metadata `fragments` are."""
    ids = tuple(int(m.id) for m in fragments if _live(m))
    count = sum(_live(m) for m in fragments)
    if not ids:
        return None
    return Side(kind, location, int(dataset.version), branch, ids, None, count)


def _compared(
    old_location: str,
    before: tuple[Any, str | None],
    new_location: str,
    after: tuple[Any, str | None],
    row_ids: bool,
) -> list[Side]:
    """The sides between two versions of a table (or two tables), by their fragments."""
    (old, old_branch), (new, new_branch) = before, after
    same_table = old_location == new_location
    then = {_key(m): (f, m) for f, m in _with_metadata(old)}
    now = {_key(m): (f, m) for f, m in _with_metadata(new)}
    if not same_table:
        then_only, now_only, kept = list(then.values()), list(now.values()), []
    else:
        then_only = [f for k, f in then.items() if k not in now]
        now_only = [f for k, f in now.items() if k not in then]
        kept = [(then[k], now[k]) for k in then if k in now]
    sides = [
        _whole(DELETE, old_location, old, old_branch, [m for _, m in then_only]),
        _whole(INSERT, new_location, new, new_branch, [m for _, m in now_only]),
    ]
    changed = [
        (was, is_now) for was, is_now in kept if _deletion_key(was[1]) != _deletion_key(is_now[1])
    ]
    alive_then = _live_rows(old, [was for was, _ in changed], row_ids)
    alive_now = _live_rows(new, [is_now for _, is_now in changed], row_ids)
    lost: list[tuple[int, Any]] = []
    gained: list[tuple[int, Any]] = []
    for (_, was), (_, is_now) in changed:
        fid = int(was.id)
        size = max(was.physical_rows or 0, is_now.physical_rows or 0)
        went, came = _row_diff(fid, size, alive_then[fid], alive_now[fid], row_ids)
        lost += [(fid, went)] if len(went) else []
        gained += [(fid, came)] if len(came) else []
    sides += _taken(DELETE, old_location, int(old.version), old_branch, lost)
    sides += _taken(INSERT, new_location, int(new.version), new_branch, gained)
    return [side for side in sides if side is not None]


def _with_metadata(dataset: Any) -> list[tuple[Any, Any]]:
    """Each fragment of `dataset` with its metadata, read once (pylance builds it anew each
    time it is asked)."""
    return [(fragment, fragment.metadata) for fragment in dataset.get_fragments()]


def _key(metadata: Any) -> tuple[int, tuple[str, ...]]:
    """A fragment's identity: its id and data files (a fragment rewritten in place is another)."""
    files = metadata.files  # `_path`: pylance makes a class each time `path` is read
    return int(metadata.id), tuple(getattr(f, "_path", None) or f.path for f in files)


def _deletion_key(metadata: Any) -> tuple[Any, ...] | None:
    deletion = metadata.deletion_file
    if deletion is None:
        return None
    return (deletion.id, deletion.read_version, deletion.num_deleted_rows, str(deletion.file_type))


def _taken(
    kind: str, location: str, version: int, branch: str | None, found: list[tuple[int, Any]]
) -> list[Side]:
    """Sides taking `found` rows (per fragment id, its rows as a numpy array) of one table
    version: the fragments' rows together, up to `_TAKEN_PER_SIDE` rows a side (one `_take_rows`
    reads them all, where a side a fragment cost a read each)."""
    import numpy as np

    sides: list[Side] = []
    fragments: list[int] = []
    rows: list[Any] = []
    count = 0
    for position, (fid, taken) in enumerate(found):
        fragments.append(fid)
        rows.append(taken)
        count += len(taken)
        if count >= _TAKEN_PER_SIDE or position == len(found) - 1:
            joined = tuple(np.concatenate(rows).tolist())
            sides.append(Side(kind, location, version, branch, tuple(fragments), joined, count))
            fragments, rows, count = [], [], 0
    return sides


def _row_diff(fid: int, size: int, before: Any, after: Any, row_ids: bool) -> tuple[Any, Any]:
    """The rows of fragment `fid` (of `size` physical rows) live before and not after, and
    after and not before, as numpy arrays: addresses (row ids on a table with stable row ids)."""
    import numpy as np

    if row_ids:  # ids in the order Lance gives them
        return (
            before[~np.isin(before, after, assume_unique=True)],
            after[~np.isin(after, before, assume_unique=True)],
        )
    # addresses of one fragment: a mask over its physical rows, in address order
    first = fid << 32
    for alive in (before, after):  # a manifest that does not record its rows: as many as seen
        size = max(size, int(alive.max()) - first + 1 if len(alive) else 0)
    alive_before = np.zeros(size, dtype=bool)
    alive_before[(before - np.uint64(first)).astype(np.int64)] = True
    alive_after = np.zeros(size, dtype=bool)
    alive_after[(after - np.uint64(first)).astype(np.int64)] = True
    went = np.flatnonzero(alive_before & ~alive_after).astype(np.uint64) + np.uint64(first)
    came = np.flatnonzero(alive_after & ~alive_before).astype(np.uint64) + np.uint64(first)
    return went, came


def _live_rows(dataset: Any, fragments: list[tuple[Any, Any]], row_ids: bool) -> dict[int, Any]:
    """The live rows of each of `fragments` (a fragment of `dataset` and its metadata), by
    fragment id, as numpy arrays of addresses (or row ids): without a deletion file every row
    of its data files, else as Lance's scan of no column gives them (one scan for all the
    fragments that need one)."""
    import numpy as np

    found: dict[int, Any] = {}
    scanned = []
    for fragment, metadata in fragments:
        fid = int(metadata.id)
        if metadata.deletion_file is None and not row_ids:
            first = fid << 32
            found[fid] = np.arange(first, first + (metadata.physical_rows or 0), dtype=np.uint64)
        else:
            found[fid] = np.array([], dtype=np.uint64)
            scanned.append(fragment)
    if not scanned:
        return found
    scanner = dataset.scanner(
        columns=[], with_row_address=True, with_row_id=row_ids, fragments=scanned
    )
    batches = list(scanner.to_batches())
    if not batches:
        return found
    addresses = np.concatenate([b.column("_rowaddr").to_numpy() for b in batches])
    rows = np.concatenate([b.column("_rowid").to_numpy() for b in batches]) if row_ids else None
    owners = addresses >> np.uint64(32)
    for fragment in scanned:
        fid = int(fragment.fragment_id)
        found[fid] = (rows if rows is not None else addresses)[owners == np.uint64(fid)]
    return found
