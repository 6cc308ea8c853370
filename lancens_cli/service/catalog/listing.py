"""`ls`: namespaces and tables of a namespace, with where each is known from and its state."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    SOURCE_BOTH,
    SOURCE_DIRECTORY,
    SOURCE_MANIFEST,
    STATE_OK,
    Entry,
    Identifier,
    Listing,
)
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import partition_summary
from lancens_cli.store.containment import directory_location_problem, row_locations, shown
from lancens_cli.store.manifest import properties_problem
from lancens_cli.store.tables import table_state

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
) -> Listing:
    """List a namespace's children (all descendants with `recursive`), sorted by id.

    Pagination: `page_token` is the id of the last entry of the previous page.
    """
    if limit is not None and limit < 1:
        raise InvalidInputError(f"--limit must be at least 1, not {limit}")
    ns.require_root()
    snapshot = ns.snapshot()
    ns.require_namespace(ident, snapshot)

    entries: dict[str, Entry] = {}
    verdicts = row_locations(ns.storage, snapshot)
    refused: set[str] = set()
    for row in snapshot.children(ident.object_id, recursive=recursive):
        child = Identifier.from_object_id(row["object_id"])
        problem = verdicts.problem(row["object_id"])
        location = row["location"] if row["object_type"] == KIND_TABLE else None
        state = ""
        if row["object_type"] == KIND_NAMESPACE:
            damaged = properties_problem(row)
            state = STATE_OK if damaged is None else f"{STATE_DAMAGED}: {damaged}"
        if problem is not None:  # shown, never opened
            refused.add(row["object_id"])
            location, state = shown(problem.location), f"{STATE_REFUSED}: {problem.reason}"
        entries[row["object_id"]] = Entry(
            id=child.display(delimiter),
            kind=row["object_type"],
            location=location,
            source=SOURCE_MANIFEST,
            state=state,
        )
    if ident.is_root:
        _merge_directory_tables(ns, snapshot, entries)

    keys = sorted(entries)
    if page_token:
        after = Identifier.parse(page_token, delimiter).object_id
        keys = [k for k in keys if k > after]
    ordered = [entries[k] for k in keys]
    next_token = None
    if limit is not None and len(ordered) > limit:
        ordered = ordered[:limit]
        next_token = ordered[-1].id
    tables = [e for e in ordered if e.kind == KIND_TABLE and not e.state]
    if with_state and tables:
        _fill_states(ns, tables)
    listing = Listing(ident.display(delimiter), ordered, next_token)
    if ident.is_root and snapshot.exists:
        listing.partitioning = partition_summary(snapshot)
    return listing


def _merge_directory_tables(ns: Namespace, snapshot, entries: dict[str, Entry]) -> None:
    """Spec 000: merge root `<name>.lance` directories, deduplicated by location and name."""
    by_location = {e.location: e for e in entries.values() if e.kind == KIND_TABLE}
    for name, location in ns.visible_dir_tables(snapshot).items():
        known = by_location.get(location)
        if known is not None:
            known.source = SOURCE_BOTH
        elif name not in entries:
            problem = directory_location_problem(ns.storage, location)
            state = "" if problem is None else f"{STATE_REFUSED}: {problem}"
            entries[name] = Entry(
                id=name, kind=KIND_TABLE, location=location, source=SOURCE_DIRECTORY, state=state
            )


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
