"""How the commands of partitioned namespaces show their results: add-partition-spec,
evolve-schema, partitions, tag-partitions and write. The helpers a view needs are imported inside
it, so that `lancens --help` starts without pyarrow or Lance."""

from __future__ import annotations

from typing import Any

from lancens_cli.cli.views.cells import would_prefix
from lancens_cli.cli.views.registry import View, summary, view
from lancens_cli.models import Identifier, json_value
from lancens_cli.words import plural


@view("lancens_cli.service.partitioned.spec_change.SpecChange")
def _spec_change(r: Any) -> View:
    from lancens_cli.schema_json import type_to_json

    rows = []
    for f in r.spec.fields:
        sources = r.sources.get(f.field_id, [])
        how = f.transform.display(sources) if f.transform else f"expr({f.expression})"
        note = "reused" if f.field_id in r.reused else ""
        rows.append([f.field_id, how, type_to_json(f.result_type)["type"], f.column, note])
    columns = ["field_id", "definition", "result_type", "manifest column", "note"]
    return View(columns, rows, "partition spec")


@summary("lancens_cli.service.partitioned.spec_change.SpecChange")
def _spec_change_summary(r: Any) -> str:
    if r.action == "exists" and not r.new_columns:
        return f"partition spec v{r.spec.id} is already the current spec: nothing to do"
    verb = {"create": "created", "evolve": "added", "exists": "already current"}[r.action]
    would = "would be " if r.dry_run and r.action != "exists" else ""
    columns = ", ".join(n for n, _ in r.new_columns) or "none"
    return f"partition spec v{r.spec.id} {would}{verb}; new __manifest columns: {columns}"


@view("lancens_cli.service.partitioned.evolve_schema.SchemaEvolution")
def _schema_evolution(r: Any) -> View:
    return View(["change", "outcome"], [[c.text(), o] for c, o in r.changes], "schema evolution")


@summary("lancens_cli.service.partitioned.evolve_schema.SchemaEvolution")
def _schema_evolution_summary(r: Any) -> str:
    would = "would be " if r.dry_run else ""
    return (
        f"{plural(r.tables, 'partition table')} {would}brought to the schema, "
        f"{r.up_to_date} already at it; "
        f"{plural(r.manifest_commits, '__manifest commit')}"
    )


@view("lancens_cli.service.partitioned.partitions.PartitionSelection")
def _partitions(r: Any) -> View:
    from lancens_cli.service.partitioned.label import PartitionLabel

    rows = [
        [
            m.table,
            f"v{m.spec_version}",
            PartitionLabel(m.spec_version, tuple(m.values.items())).text(),
            m.rows,
            m.bytes,
            m.published.version,
            m.published.branch or m.published.tag,
            m.location,
        ]
        for m in r.matches
    ]
    columns = ["table", "spec", "partition", "rows", "size", "read_version", "branch/tag"]
    columns.append("location")
    return View(
        columns,
        rows,
        "partition tables",
        sizes=("size",),
        optional=("location", "branch/tag", "read_version", "spec"),
    )


@view("lancens_cli.service.partitioned.tags.TagResult")
def _tags(r: Any) -> View:
    rows = [
        [
            Identifier.from_object_id(t.table_id).display(),
            t.branch or "main",
            t.version,
            would_prefix(r.dry_run and t.action != "exists") + t.action,
        ]
        for t in r.tables
    ]
    return View(["table", "branch", "version", "action"], rows, f"tag {r.name}")


@summary("lancens_cli.service.partitioned.tags.TagResult")
def _tags_summary(r: Any) -> str:
    made = sum(1 for t in r.tables if t.action != "exists")
    verb = "would tag" if r.dry_run else "tagged"
    text = f"{verb} {plural(len(r.tables), 'partition table')} {r.name} ({made} new or moved)"
    if r.publish:
        text += (
            "; read_tag would be published"
            if r.dry_run
            else f"; read_tag published in __manifest version {r.manifest_version}"
        )
    return text


_WRITE_ACTIONS = {"create": "created", "replace": "replaced", "append": "appended"}


def _write_action(t: Any, dry_run: bool) -> str:
    action = "create" if t.created else ("replace" if t.overwrite else "append")
    return f"would {action}" if dry_run else _WRITE_ACTIONS[action]


@view("lancens_cli.service.partitioned.write.PartitionWrite")
def _partition_write(r: Any) -> View:
    header = [*r.fields, "rows", "read_version", "action", "table"]
    rows = [
        [
            *(json_value(v) for v in t.values),
            t.row_count,
            t.version,
            _write_action(t, r.dry_run),
            None if r.dry_run and t.created else Identifier.from_object_id(t.table_id).display(),
        ]
        for t in r.partitions
    ]
    return View(header, rows, "partitions to write" if r.dry_run else "partitions written")


@summary("lancens_cli.service.partitioned.write.PartitionWrite")
def _partition_write_summary(r: Any) -> str:
    """What `write` did, with the `__manifest` version it made: a pipeline's checkpoint."""
    created = sum(1 for t in r.partitions if t.created)
    branch = r.partitions[0].branch if r.partitions else None
    what = (
        f"{plural(r.rows, 'row')} into {plural(len(r.partitions), 'partition')} of "
        f"spec v{r.spec_id} ({created} new)" + (f" on branch {branch}" if branch else "")
    )
    if r.dry_run:
        return f"dry run: would write {what}; nothing changed"
    if not r.partitions:
        return f"wrote {what}; nothing to publish"
    return f"wrote {what}, __manifest version {r.manifest_version}"


@view("lancens_cli.service.partitioned.delete.PartitionDelete")
def _partition_delete(r: Any) -> View:
    header = ["table", "spec", "values", "rows", "read_version", "filter"]
    rows = [
        [
            p.table,
            f"v{p.spec_version}",
            ", ".join(f"{k}={json_value(v)}" for k, v in p.values.items()),
            p.rows,
            p.read_version,
            p.filter,
        ]
        for p in r.partitions
    ]
    return View(header, rows, "rows that would be deleted" if r.dry_run else "rows deleted")


@summary("lancens_cli.service.partitioned.delete.PartitionDelete")
def _partition_delete_summary(r: Any) -> str:
    """What `delete` did, with the `__manifest` version that published it."""
    rows = plural(r.rows, "row")
    tables = f"{plural(len(r.partitions), 'partition table')} of {r.partitions_total}"
    changed = sum(1 for p in r.partitions if p.rows)
    if r.dry_run:
        return (
            f"dry run: would delete {rows} from {plural(changed, 'partition table')} "
            f"({tables} read); nothing changed"
        )
    if not r.rows:
        return f"no row matched in {tables}; nothing changed"
    return (
        f"deleted {rows} from {plural(changed, 'partition table')}, "
        f"__manifest version {r.manifest_version}"
    )


@summary("lancens_cli.service.catalog.table_rows.delete.TableDelete")
def _table_delete_summary(r: Any) -> str:
    rows = plural(r.rows, "row")
    if r.dry_run:
        return f"dry run: would delete {rows} from {r.table}; nothing changed"
    if r.version == r.version_before:
        return f"no row of {r.table} matched; nothing changed"
    return f"deleted {rows} from {r.table}, now at version {r.version}"


@summary("lancens_cli.service.catalog.table_rows.update.TableUpdate")
def _table_update_summary(r: Any) -> str:
    rows = plural(r.rows, "row")
    if r.dry_run:
        return f"dry run: would update {rows} of {r.table}; nothing changed"
    if r.version == r.version_before:
        return f"no row of {r.table} matched; nothing changed"
    return f"updated {rows} of {r.table}, now at version {r.version}"


@summary("lancens_cli.service.catalog.table_rows.merge.TableMerge")
def _table_merge_summary(r: Any) -> str:
    what = (
        f"{plural(r.source_rows, 'source row')}: {r.matched} matched, {r.updated} updated, "
        f"{r.inserted} inserted" + (f", {r.deleted} the source lacks deleted" if r.deleted else "")
    )
    if r.dry_run:
        return f"dry run: {what}; nothing changed"
    if r.version == r.version_before:
        return f"{what}; nothing changed"
    return f"merged {what} into {r.table}, now at version {r.version}"


def _rewritten_tables(r: Any, command: str) -> View:
    """The tables a row change (`update`, `merge`) writes: its rows out and in."""
    from lancens_cli.service.partitioned.label import PartitionLabel

    header = ["table", "values", "rows_deleted", "rows_written", "read_version", "created"]
    rows = [
        [
            p["table"],
            PartitionLabel(0, tuple(p["values"].items())).text(),
            p["rows_deleted"],
            p["rows_written"],
            p["read_version"],
            p["created"],
        ]
        for p in r.partitions
    ]
    title = f"tables the {command} would write" if r.dry_run else "tables written"
    return View(header, rows, title)


@view("lancens_cli.service.partitioned.update.PartitionUpdate")
def _partition_update(r: Any) -> View:
    return _rewritten_tables(r, "update")


@summary("lancens_cli.service.partitioned.update.PartitionUpdate")
def _partition_update_summary(r: Any) -> str:
    rows = plural(r.rows, "row")
    moved = f" ({r.moved} to another partition)" if r.moved else ""
    if r.dry_run:
        return f"dry run: would update {rows}{moved}; nothing changed"
    if not r.rows:
        return f"no row matched in {plural(r.tables_read, 'partition table')}; nothing changed"
    return f"updated {rows}{moved}, __manifest version {r.manifest_version}"


@view("lancens_cli.service.partitioned.merge.PartitionMerge")
def _partition_merge(r: Any) -> View:
    return _rewritten_tables(r, "merge")


@summary("lancens_cli.service.partitioned.merge.PartitionMerge")
def _partition_merge_summary(r: Any) -> str:
    what = (
        f"{plural(r.source_rows, 'source row')}: {r.matched} matched, {r.updated} updated, "
        f"{r.inserted} inserted"
    )
    if r.deleted:
        what += f", {r.deleted} the source lacks deleted"
    if r.dry_run:
        return f"dry run: {what}; nothing changed"
    if not r.updated and not r.inserted and not r.deleted:
        return f"{what}; nothing changed"
    return f"merged {what}, __manifest version {r.manifest_version}"
