"""`check` of a partitioned namespace's layout, as `__manifest` records it: the guard flag, the
partition columns and values, and the spec-version namespaces, with a repair that rebuilds
partition values from the data; then the namespace schema's field numbering
(`field_numbering.py`) and each partition table's schema (`evolve_schema.py`). What readers
reach through `read_*` is `published_check.py`'s.

A writer that does not know spec 004 (the reference, should our writer flag have been removed)
rewrites `__manifest` without the `partition_field_*` and `read_*` columns. Every partition
value can be found again: all rows of a partition table share its partition values, so one row
of each table, run through the spec's transforms, gives the values of the table and of its
ancestor namespaces.
"""

from __future__ import annotations

from typing import Any

import pyarrow.types as pt

from lancens_cli.errors import CatalogDamagedError
from lancens_cli.models import KIND_NAMESPACE, KIND_TABLE, MANIFEST_TABLE
from lancens_cli.partition.rows import dotted, partition_rows
from lancens_cli.partition.schema import top_level_ids
from lancens_cli.partition.spec import TIME_TRANSFORMS, PartitionSpec
from lancens_cli.partition.time_ranges import zone_of
from lancens_cli.partition.transforms import apply_field
from lancens_cli.service.catalog.manifest_rows import partition_namespace_row
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.evolve_schema import (
    SchemaKnown,
    check_table_schemas,
    published_table_schemas,
)
from lancens_cli.service.partitioned.field_numbering import check_numbering, fix_numbering
from lancens_cli.service.partitioned.layout import (
    PartitionLayout,
    layout_of,
    manifest_columns,
)
from lancens_cli.store.manifest import (
    PARTITIONED_WRITER_FLAG,
    WRITER_FLAGS_KEY,
    ManifestEdit,
    ManifestSnapshot,
)
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.tables import open_table

FIXABLE = ("partition_guard_missing", "partition_columns_missing", "spec_namespace_missing")


def check_partitions(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    report: Any,
    known: SchemaKnown | None = None,
) -> None:
    """The layout's own checks, then every published partition table's schema (`known`: a
    row's published schema when known without opening the table: `published_table_schemas`)."""
    try:
        layout = layout_of(snapshot)
    except CatalogDamagedError as exc:
        report.add("partition_metadata", None, MANIFEST_TABLE, exc.message)
        return
    if layout is None:
        return
    names = set(snapshot.table.schema.names)
    missing = [c.name for c in manifest_columns(layout.fields) if c.name not in names]
    if missing and not snapshot.writer_flags & PARTITIONED_WRITER_FLAG:
        # without the columns: a writer that does not know spec 004 rewrote __manifest. With
        # them, the flag is only ours to add (a namespace another tool laid out as the spec
        # says is not damaged; our next write adds it)
        report.add(
            "partition_guard_missing",
            None,
            MANIFEST_TABLE,
            "the partitioned-namespace writer flag is not set: a writer that does not know "
            "partition columns may drop them",
            fixable=True,
        )
    if missing:
        report.add(
            "partition_columns_missing",
            None,
            MANIFEST_TABLE,
            f"__manifest lacks {', '.join(missing)} (rewritten by a writer that does not know "
            "partition columns?); --fix rebuilds them from the partition tables",
            fixable=True,
        )
    for spec in layout.specs:
        row = snapshot.get(spec.namespace)
        if row is None or row["object_type"] != KIND_NAMESPACE:
            report.add(
                "spec_namespace_missing",
                spec.namespace,
                None,
                f"spec-version namespace {spec.namespace} is missing",
                fixable=row is None,
            )
    if not missing:
        _check_inheritance(snapshot, layout, report)
        _check_zoned_time_values(ns, snapshot, layout, report)

    tables = published_table_schemas(ns.storage, snapshot, layout, known)
    unlike_lance = check_numbering(snapshot, layout, tables, report)
    check_table_schemas(snapshot, layout, tables, report, compare_ids=not unlike_lance)


def _check_inheritance(snapshot: ManifestSnapshot, layout: PartitionLayout, report: Any) -> None:
    """Every row carries the partition values of all its ancestors (spec, Appendix C)."""
    for spec in layout.specs:
        for found in partition_rows(snapshot.rows, [spec]):
            row = found.row
            for depth in range(2, len(found.parts)):
                ancestor = snapshot.get(found.ancestor(depth))
                if ancestor is None:
                    continue
                level = spec.fields[depth - 2] if depth - 2 < len(spec.fields) else None
                if level is not None and ancestor.get(level.column) != row.get(level.column):
                    report.add(
                        "partition_value_mismatch",
                        dotted(found.object_id),
                        row.get("location"),
                        f"{level.column} differs from its ancestor {dotted(found.ancestor(depth))}",
                    )


def _zoned_time_fields(spec: PartitionSpec, layout: PartitionLayout) -> list[Any]:
    """The spec's year / month / day / hour fields over a timestamp in a zone other than UTC:
    the ones an older lancens computed in UTC instead of the zone's wall time."""
    by_id = top_level_ids(layout.schema)
    found = []
    for f in spec.fields:
        if f.transform is None or f.transform.type not in TIME_TRANSFORMS:
            continue
        source = by_id.get(f.source_ids[0])
        if source is not None and pt.is_timestamp(source.type) and zone_of(source.type):
            found.append((f, source.name))
    return found


def _check_zoned_time_values(
    ns: Namespace, snapshot: ManifestSnapshot, layout: PartitionLayout, report: Any
) -> None:
    """Each stored time partition value over a zoned timestamp equals its derived expression,
    `date_part(part, col0)`, in the column's zone, for every row of the table (spec 004)."""
    verdicts = row_locations(ns.storage, snapshot)
    for spec in layout.specs:
        fields = _zoned_time_fields(spec, layout)
        if not fields:
            continue
        for found in partition_rows(snapshot.rows, [spec], KIND_TABLE):
            row = found.row
            if row.get("read_version") is None or verdicts.problem(found.object_id) is not None:
                continue
            data = open_table(ns.storage, row["location"], row["read_version"])
            columns = sorted({name for _, name in fields})
            rows = data.to_table(columns=columns)
            for f, name in fields:
                values = apply_field(f, [rows.column(name)], rows.num_rows).to_pylist()
                wrong = sorted({v for v in values if v != row.get(f.column)}, key=repr)
                if wrong:
                    report.add(
                        "partition_value_disagrees",
                        dotted(found.object_id),
                        row.get("location"),
                        f"{f.column} = {row.get(f.column)!r}, but date_part('{f.transform.type}', "
                        f"{name}) in the column's zone gives {wrong[:5]!r} for some rows (written "
                        "by a lancens that took time parts in UTC); filters on "
                        f"{name} may miss these rows. Rewrite the namespace: `lancens scan --to "
                        "DIR` (a read without --where), then `add-partition-spec` and `write` "
                        "(or `ingest`) it into a new root",
                    )


def fix_partitions(ns: Namespace, report: Any) -> None:
    fix_numbering(ns, report)
    findings = [f for f in report.findings if f.fixable and f.code in FIXABLE]
    if not findings:
        return
    unknown: list[str] = []

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        layout = layout_of(snapshot)
        if layout is None:
            return
        if not snapshot.writer_flags & PARTITIONED_WRITER_FLAG:
            edit.set_metadata(
                {WRITER_FLAGS_KEY: str(snapshot.writer_flags | PARTITIONED_WRITER_FLAG)}
            )
        edit.add_columns(manifest_columns(layout.fields))
        for spec in layout.specs:
            if snapshot.get(spec.namespace) is None:
                edit.add(partition_namespace_row(spec.namespace))
        names = set(snapshot.table.schema.names)
        if any(c.name not in names for c in manifest_columns(layout.fields)):
            unknown[:] = _rebuild_values(ns, snapshot, edit, layout)

    ns.manifest.mutate(plan)
    for finding in findings:
        finding.fixed = True
        finding.message += "; fixed"
    for object_id in unknown:
        report.add(
            "partition_values_unknown",
            dotted(object_id),
            None,
            "an empty partition table: its partition values cannot be found again from data",
        )


def _rebuild_values(
    ns: Namespace, snapshot: ManifestSnapshot, edit: ManifestEdit, layout: PartitionLayout
) -> list[str]:
    """Partition values of every row under each v<N>, from one row of each partition table."""
    verdicts = row_locations(ns.storage, snapshot)
    values_of: dict[str, dict[str, Any]] = {}
    unknown = []
    for spec in layout.specs:
        for found in partition_rows(snapshot.rows, [spec], KIND_TABLE):
            row, oid = found.row, found.object_id
            if verdicts.problem(oid) is not None:
                unknown.append(oid)  # never opened (store/containment.py)
                continue
            values, version = _values_from_data(ns, row, spec, layout)
            if values is None:
                unknown.append(oid)
                continue
            # the rewrite lost read_version too: pin what is there now, so that a later
            # write's unpublished versions do not become visible as "the latest"
            values_of[oid] = {**values, "read_version": row.get("read_version") or version}
            for depth in range(2, len(found.parts)):
                level_fields = spec.fields[: depth - 1]
                values_of.setdefault(
                    found.ancestor(depth), {f.column: values[f.column] for f in level_fields}
                )
    for oid, values in values_of.items():
        if snapshot.get(oid) is not None:
            edit.replace(oid, **values)
    return unknown


def _values_from_data(
    ns: Namespace, row: dict, spec: PartitionSpec, layout: PartitionLayout
) -> tuple[dict[str, Any] | None, int]:
    dataset = open_table(ns.storage, row["location"])
    sample = dataset.to_table(limit=1)
    if sample.num_rows == 0:
        return None, dataset.version
    by_id = top_level_ids(layout.schema)
    values = {}
    for f in spec.fields:
        sources = [
            sample.column(by_id[i].name).combine_chunks()
            if i in by_id and by_id[i].name in sample.column_names
            else None
            for i in f.source_ids
        ]
        values[f.column] = apply_field(f, sources, 1)[0].as_py()
    return values, dataset.version
