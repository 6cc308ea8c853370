"""What `check` learns of each partition table from one open of it.

`check` of a partitioned root asks four things of every partition table: whether its latest
version and its branches are whole (the table checks), which version of main is its latest
(the published-version check), its published schema and field ids (the schema checks), and
which of its data files no version references (the debris check). Asked one check at a time,
each opened the table again: three or four Lance opens a table, and `check` of 10,000
partition tables took 34 s against 7 s for `versions`. One pass opens each table once, before
the checks, and keeps the answers (a schema shared by many tables is kept once); each check
then reports from them in its own order, and asks the table itself only when the pass did not
look at it (no committed version, a row the trust boundary refuses, two rows at one location).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lancens_cli.errors import CatalogDamagedError, InvalidTableStateError, LancensError
from lancens_cli.parallel import ordered
from lancens_cli.partition.rows import partition_table_rows
from lancens_cli.partition.schema import lance_ids_by_path
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.service.unreferenced_data import unreferenced_files
from lancens_cli.store.catalog_rows import LATEST, PublishedRef, open_published
from lancens_cli.store.manifest import ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.verify import committed_manifests, table_files, verify_opening

Finding = tuple[str, str, bool]  # code, message, fixable: as the table checks report one


@dataclass(frozen=True, slots=True)
class TableLook:
    """One partition table, looked at once. `latest`: main's latest version (None: it did
    not open); `schema`: the published version's (Arrow schema, Lance field ids by path), None
    when that version does not open, and `schema_known` False when the pass did not ask."""

    problems: tuple[Finding, ...]
    latest: int | None
    schema: tuple[Any, dict[str, int]] | None
    schema_known: bool
    unreferenced: tuple[tuple[str, bool], ...] | None


def look_at_partition_tables(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    grace: timedelta,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> dict[str, TableLook]:
    """Every published partition table the pass can look at, by location."""
    try:
        layout = layout_of(snapshot)
    except CatalogDamagedError:
        return {}  # reported by the partition checks, which then ask nothing of the tables
    if layout is None:
        return {}
    verdicts = row_locations(ns.storage, snapshot)
    rows = [
        row
        for row in partition_table_rows(snapshot.rows, layout.specs)
        if row.get("location") and verdicts.problem(row["object_id"]) is None
    ]
    shared = Counter(row["location"] for row in rows)
    rows = [row for row in rows if shared[row["location"]] == 1]
    schemas = _Schemas()
    advance = progress(len(rows)) if progress else None
    looks: dict[str, TableLook] = {}
    workers = 4 if ns.storage.is_local else 16

    def look(row: dict[str, Any]) -> tuple[str, TableLook | None]:
        return row["location"], _look(ns, row, grace, schemas)

    for location, found in ordered(look, rows, workers):
        if found is not None:
            looks[location] = found
        if advance:
            advance()
    return looks


def _look(
    ns: Namespace, row: dict[str, Any], grace: timedelta, schemas: _Schemas
) -> TableLook | None:
    """One table's answers, from one listing of its files and one open of its latest
    version; None for a table with no committed version (the table checks ask it)."""
    location = row["location"]
    present = table_files(ns.storage, location)
    if not committed_manifests(present):
        return None
    try:
        problems, latest = verify_opening(ns.storage, location, present)
    except LancensError as exc:
        return TableLook((("table_unloadable", exc.message, False),), None, None, False, None)
    found = tuple((p.code, p.message, False) for p in problems)
    if latest is None:  # the schema checks ask its published version themselves, as always
        return TableLook(found, None, None, False, None)
    version = int(latest.version)
    ref = PublishedRef.of(row)
    published = latest if ref == LATEST or ref.main_version == version else None
    known = True
    if published is None:
        try:
            published = open_published(ns.storage, row)
        except InvalidTableStateError:
            published = None
        except LancensError:
            known = False  # the schema checks open it themselves, as they always did
    schema = schemas.kept(published) if published is not None else None
    unreferenced = tuple(unreferenced_files(ns, latest, location, grace, present))
    return TableLook(found, version, schema, known, unreferenced)


def schema_known(looks: dict[str, TableLook], row: dict[str, Any]) -> tuple[bool, Any]:
    """Whether the pass knows a row's published schema and field ids, and they (the schema
    checks' `published_table_schemas(known=...)`)."""
    look = looks.get(row["location"])
    return (False, None) if look is None else (look.schema_known, look.schema)


def latest_known(looks: dict[str, TableLook], location: str) -> int | None:
    """Main's latest version of a table the pass opened (None: ask the table)."""
    look = looks.get(location)
    return None if look is None else look.latest


class _Schemas:
    """Schemas and field ids, each kept once however many tables share it (a million
    partition tables have a handful of schema generations between them)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[Any, ...], tuple[Any, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def kept(self, dataset: Any) -> tuple[Any, dict[str, int]]:
        schema = dataset.schema
        ids = lance_ids_by_path(dataset.lance_schema)
        key = (schema.serialize().to_pybytes(), tuple(sorted(ids.items())))
        with self._lock:
            return self._kept.setdefault(key, (schema, ids))
