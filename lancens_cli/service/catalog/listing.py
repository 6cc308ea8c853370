"""`ls`: namespaces and tables of a namespace, with where each is known from and its state."""

from __future__ import annotations

import bisect
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lancens_cli.errors import InvalidInputError
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
from lancens_cli.partition.rows import top_namespace
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.label import PartitionLabel
from lancens_cli.service.partitioned.layout import partition_summary
from lancens_cli.service.partitioned.naming import partition_labels
from lancens_cli.store.containment import directory_location_problem, row_locations, shown
from lancens_cli.store.manifest import properties_problem
from lancens_cli.store.tables import table_state

ROW_KEYS = ("object_id", "object_type", "location")
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
    snapshot = ns.snapshot()
    ns.require_namespace(ident, snapshot)

    verdicts = row_locations(ns.storage, snapshot)
    summary = partition_summary(snapshot) if snapshot.exists else None
    partitions = _PartitionView(snapshot, summary)
    child = snapshot.child_table(ident.object_id, recursive=recursive)
    rows = {  # object_id -> (object_type, location, position in `child`); no dict per row
        object_id: (kind, location, position)
        for position, (object_id, kind, location) in enumerate(
            zip(*(child.column(c).to_pylist() for c in ROW_KEYS), strict=True)
        )
        if all_rows or not partitions.is_level(object_id, kind)
    }
    directories, both = _directory_tables(ns, snapshot, rows) if ident.is_root else ({}, set())
    keys = sorted(rows.keys() | directories.keys())
    if page_token:
        after = Identifier.parse(page_token, delimiter).object_id
        keys = keys[bisect.bisect_right(keys, after) :]
    more = limit is not None and len(keys) > limit
    # Entries (and row dicts) are made for the page's rows only, taken from Arrow in one go
    page = keys[:limit]
    in_rows = [key for key in page if key in rows]
    taken = child.take([rows[key][2] for key in in_rows]).to_pylist() if in_rows else []
    page_rows = dict(zip(in_rows, taken, strict=True))
    ordered = [
        _row_entry(page_rows[key], verdicts, partitions, both, delimiter)
        if key in page_rows
        else _directory_entry(ns, key, directories[key])
        for key in page
    ]
    next_token = ordered[-1].id if more else None
    tables = [e for e in ordered if e.kind == KIND_TABLE and not e.state]
    if with_state and tables:
        _fill_states(ns, tables)
    listing = Listing(ident.display(delimiter), ordered, next_token)
    if ident.is_root:
        listing.partitioning = summary
    return listing


class _PartitionView:
    """What `ls` shows of a partitioned root's own rows, from the root's `partition_summary`
    (empty for any other root, and for damaged partition metadata: listed as rows)."""

    def __init__(self, snapshot: Any, summary: dict[str, Any] | None) -> None:
        self.labels: dict[str, PartitionLabel] = {}
        self.spec_namespaces: set[str] = set()
        self.current: str | None = None
        self.specs: dict[str, str] = {}
        self.counts: dict[str, Any] = {}
        if summary is None or "unreadable" in summary:
            return
        versions = summary["spec_versions"]
        self.labels = partition_labels(snapshot)
        self.spec_namespaces = {f"v{v}" for v in versions}
        self.current = f"v{summary['current_spec']}"
        self.specs = {f"v{v}": ", ".join(summary["spec_fields"][str(v)]) for v in versions}
        self.counts = {f"v{v}": summary["partitions_by_spec"][str(v)] for v in versions}

    def is_level(self, object_id: str, object_type: str) -> bool:
        """A namespace between `v<N>` and a partition table (one per partition level)."""
        return (
            object_type == KIND_NAMESPACE
            and OBJECT_ID_DELIMITER in object_id
            and top_namespace(object_id) in self.spec_namespaces
        )


def _row_entry(
    row: dict[str, Any],
    verdicts: Any,
    partitions: _PartitionView,
    both: set[str],
    delimiter: str,
) -> Entry:
    """A catalog row as `ls` shows it: a refused location shown, never opened."""
    object_id = row["object_id"]
    location = row["location"] if row["object_type"] == KIND_TABLE else None
    state = ""
    if row["object_type"] == KIND_NAMESPACE:
        damaged = properties_problem(row)
        state = STATE_OK if damaged is None else f"{STATE_DAMAGED}: {damaged}"
    problem = verdicts.problem(object_id)
    if problem is not None:
        location, state = shown(problem.location), f"{STATE_REFUSED}: {problem.reason}"
    in_directory = row["object_type"] == KIND_TABLE and row["location"] in both
    return Entry(
        id=Identifier.from_object_id(object_id).display(delimiter),
        kind=row["object_type"],
        location=location,
        source=SOURCE_BOTH if in_directory else SOURCE_MANIFEST,
        state=state,
        label=partitions.labels.get(object_id),
        spec=partitions.specs.get(object_id),
        current=object_id == partitions.current,
        partitions=partitions.counts.get(object_id),
    )


def _directory_tables(
    ns: Namespace, snapshot: Any, rows: dict[str, tuple[str, Any, int]]
) -> tuple[dict[str, str], set[str]]:
    """Spec 000: the root's `<name>.lance` directories, deduplicated by location and name
    against the listed rows (object_id -> (object_type, location, position)): those no row
    knows (name -> location), and the locations that both a row and a directory hold."""
    known = {location for kind, location, _ in rows.values() if kind == KIND_TABLE}
    only: dict[str, str] = {}
    both: set[str] = set()
    for name, location in ns.visible_dir_tables(snapshot).items():
        if location in known:
            both.add(location)
        elif name not in rows:
            only[name] = location
    return only, both


def _directory_entry(ns: Namespace, name: str, location: str) -> Entry:
    problem = directory_location_problem(ns.storage, location)
    state = "" if problem is None else f"{STATE_REFUSED}: {problem}"
    return Entry(id=name, kind=KIND_TABLE, location=location, source=SOURCE_DIRECTORY, state=state)


def _fill_states(ns: Namespace, tables: list[Entry]) -> None:
    """Classify table directories; remote stores are asked in parallel."""

    def state(entry: Entry) -> str:
        return table_state(ns.storage, entry.location) if entry.location else "missing"

    if ns.storage.is_local or len(tables) < 4:
        for entry in tables:
            entry.state = state(entry)
        return
    with ThreadPoolExecutor(max_workers=16) as pool:
        for entry, result in zip(tables, pool.map(state, tables), strict=True):
            entry.state = result


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
