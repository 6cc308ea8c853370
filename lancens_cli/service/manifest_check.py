"""`check` of `__manifest` and of what its rows name: the catalog's schema and feature flags,
each row's object id, parent, location and properties, and every table a row names, opened and
verified (`store/verify.py`), in threads.

It stands apart from `check.py`, which orders the checks and applies the fixes, and from
`debris_check.py`, which finds what no row names: here every finding starts from a row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import InvalidInputError, LancensError
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    MANIFEST_TABLE,
    STATE_DECLARED,
    STATE_UNCOMMITTED,
    Identifier,
    validate_name,
)
from lancens_cli.parallel import ordered
from lancens_cli.partition.rows import split_id
from lancens_cli.service.catalog.manifest_rows import (
    RENAME_INTENT_KEY,
    RENAMED_FROM_KEY,
    rename_intent,
)
from lancens_cli.service.check_report import CheckReport
from lancens_cli.service.debris_check import UNCOMMITTED_WRITE, abandoned
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.table_looks import TableLook
from lancens_cli.store.containment import directory_location_problem, shown
from lancens_cli.store.manifest import (
    BASE_COLUMNS,
    KNOWN_READER_FLAGS,
    KNOWN_WRITER_FLAGS,
    ManifestSnapshot,
    decode_properties,
    metadata_problem,
    properties_problem,
)
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.tables import table_state
from lancens_cli.store.verify import committed_manifests, table_files, verify_table


def check_manifest(snapshot: ManifestSnapshot, report: CheckReport) -> None:
    schema = snapshot.table.schema
    base_objects = schema.field("base_objects") if "base_objects" in schema.names else None
    if base_objects is None or not pa.types.is_list(base_objects.type):
        report.add("manifest_schema", None, MANIFEST_TABLE, "base_objects is not a list column")
    if schema.field("object_id").nullable or schema.field("object_type").nullable:
        report.add(
            "manifest_schema", None, MANIFEST_TABLE, "object_id/object_type must be non-nullable"
        )
    extras = [n for n in schema.names if n not in BASE_COLUMNS]
    unknown = [
        n
        for n in extras
        if not n.startswith("partition_field_")
        and n not in ("read_version", "read_branch", "read_tag")
    ]
    if unknown:
        report.add(
            "manifest_schema", None, MANIFEST_TABLE, f"columns we do not understand: {unknown}"
        )
    if snapshot.reader_flags & ~KNOWN_READER_FLAGS or snapshot.writer_flags & ~KNOWN_WRITER_FLAGS:
        report.add(
            "manifest_feature_flags",
            None,
            MANIFEST_TABLE,
            f"feature flags reader={snapshot.reader_flags} writer={snapshot.writer_flags} "
            "are not ones this version understands",
        )
    # counted in Arrow: a Python string and count for every row is a tenth of a GB at 1M
    counts = pc.value_counts(snapshot.table.column("object_id"))
    shared = counts.filter(pc.greater(counts.field("counts"), 1)).to_pylist()
    for found in sorted(shared, key=lambda c: c["values"]):
        object_id, count = found["values"], found["counts"]
        report.add(
            "duplicate_object_id", object_id, None, f"{count} rows share object_id {object_id!r}"
        )


def _check_table_properties(ns, row: dict, name: str, report) -> None:
    """A table row's metadata: readable, and no rename left half done."""
    location = row["location"]
    bad_metadata = metadata_problem(row.get("metadata"))
    if bad_metadata is not None:
        report.add("bad_metadata", name, shown(location or ""), bad_metadata)
    properties = decode_properties(row.get("metadata"))
    if RENAME_INTENT_KEY in properties:
        report.add("interrupted_rename", name, location, _interrupted_rename(ns, row, properties))
    if RENAMED_FROM_KEY in properties and ns.storage.exists(properties[RENAMED_FROM_KEY]):
        report.add(
            "interrupted_rename",
            name,
            properties[RENAMED_FROM_KEY],
            "the old directory of a finished rename is still there; rerun the rename",
        )


def check_rows(
    ns,
    snapshot,
    rows,
    report,
    delimiter,
    grace: timedelta,
    progress=None,
    drop_refused=False,
    looks: dict[str, TableLook] | None = None,
) -> None:
    """Every row's own checks, and every table's (`looks`: the tables one pass has opened
    already, service/table_looks.py, whose findings are reported here in the rows' order)."""
    tables = []
    verdicts = row_locations(ns.storage, snapshot)
    for row in rows:
        object_id, kind, location = row["object_id"], row["object_type"], row["location"]
        name = shown(Identifier.from_object_id(object_id).display(delimiter))
        try:
            for part in split_id(object_id):
                validate_name(part)
        except InvalidInputError as exc:
            report.add("invalid_object_id", name, location, exc.message)
        parent = Identifier.from_object_id(object_id).parent
        if not parent.is_root and not ns.namespace_exists(parent, snapshot):
            report.add(
                "missing_parent", name, location, f"parent namespace {parent.display()} is missing"
            )
        if kind == KIND_NAMESPACE:
            report.namespaces_checked += 1
            if location:
                report.add("bad_location", name, location, "a namespace row has a location")
            damaged = properties_problem(row)
            if damaged is not None:  # never fixed: only the user knows what they should say
                report.add("bad_properties", name, None, f"{damaged} (read as none)")
            continue
        if kind != KIND_TABLE:
            report.add("bad_object_type", name, location, f"unknown object_type {kind!r}")
            continue
        _check_table_properties(ns, row, name, report)
        refused = verdicts.problem(object_id)
        if refused is not None:  # reported, never opened (store/containment.py)
            report.add("bad_location", name, shown(refused.location), refused.reason, drop_refused)
            report.refused_rows[len(report.findings) - 1] = (object_id, location)
            continue
        if object_id not in snapshot:  # a `<name>.lance` directory found by listing
            problem = directory_location_problem(ns.storage, location)
            if problem is not None:
                report.add("bad_location", name, shown(location), problem)
                continue
        tables.append((name, location))
    report.tables_checked = len(tables)
    _verify_tables(ns, snapshot, tables, report, grace, progress, looks or {})


def _verify_tables(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    tables: list[tuple[str, str]],
    report: CheckReport,
    grace: timedelta,
    progress: Callable[[int], Callable[[], None]] | None,
    looked: dict[str, TableLook],
) -> None:
    """Every table's own checks (name, location), reported in order; a table `looked` at
    already is reported from what that look found."""
    registered: list[dict[str, str]] = []  # every registered location, made when first asked
    lock = threading.Lock()

    def is_registered(location: str) -> bool:
        """(Asked of a table with no committed version only: the debris of a killed create.)"""
        with lock:
            if not registered:
                registered.append(snapshot.locations())
        return location in registered[0]

    def verify(item):
        name, location = item
        look = looked.get(location)
        if look is not None:
            return name, location, list(look.problems)
        # one listing of a committed table's files serves every question asked of it
        present = table_files(ns.storage, location)
        if committed_manifests(present):
            return name, location, _problems_of(ns, location, present)
        state = table_state(ns.storage, location)
        if state == STATE_DECLARED:
            return name, location, []
        if state == "missing":
            return name, location, [("table_missing", "the table directory does not exist", False)]
        if state == STATE_UNCOMMITTED and not is_registered(location):
            # a root `<name>.lance` known only from its directory: the debris of a killed
            # create (or a copy in progress), like an abandoned V2 directory
            return name, location, [abandoned(ns, location, grace, UNCOMMITTED_WRITE)]
        return name, location, _problems_of(ns, location)

    workers = 4 if ns.storage.is_local else 16
    opened = sum(1 for _, location in tables if location not in looked)
    advance = progress(opened) if progress and opened else None
    for name, location, problems in ordered(verify, tables, workers):  # bounded, unlike pool.map
        for code, message, fixable in problems:
            report.add(code, name, location, message, fixable)
        if advance and location not in looked:
            advance()


def _problems_of(
    ns: Namespace, location: str, present: set[str] | None = None
) -> list[tuple[str, str, bool]]:
    """`verify_table`'s problems as findings (code, message, fixable)."""
    try:
        problems = verify_table(ns.storage, location, present)
        return [(p.code, p.message, False) for p in problems]
    except LancensError as exc:
        return [("table_unloadable", exc.message, False)]


def _interrupted_rename(ns: Namespace, row: dict, properties: dict[str, str]) -> str:
    """What to do about a row a rename journaled; never advice that cannot complete."""
    intent = rename_intent(row) or {}
    copy = intent.get("location")
    source_gone = not row["location"] or not ns.storage.exists(row["location"])
    if source_gone and not (copy and table_state(ns.storage, copy) == "ok"):
        name = Identifier.from_object_id(row["object_id"]).display()
        return (
            f"a rename was interrupted ({properties[RENAME_INTENT_KEY]}) and the table's data "
            f"is gone (dropped meanwhile?); `lancens drop {name} --yes` removes the row"
        )
    return (
        f"a rename was interrupted ({properties[RENAME_INTENT_KEY]}); "
        "rerun the same `lancens rename` to complete it"
    )
