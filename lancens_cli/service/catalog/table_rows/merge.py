"""`lancens merge ID --from FILE --on KEY`: an upsert into one table (not a partition table).

The table is read at its newest version, as `delete ID` reads it (delete.py), and the
merge is Lance's own `merge_insert`, one commit that Lance itself makes again on top of a
concurrent writer. What Lance would not refuse is refused first, as the namespace's merge
refuses it (service/partitioned/merge.py): a key twice in the source, a key matching two rows
of the table (Delta's multiple-match rule), an unknown `--on`, a source lacking a column, a bad
`--where`. `--delete-not-matched-by-source [--where PRED]` is Lance's
`when_not_matched_by_source_delete`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import InvalidInputError, InvalidTableStateError, lance_message
from lancens_cli.models import Identifier, Result, json_value
from lancens_cli.partition.predicate import to_sql
from lancens_cli.service.catalog.table_rows.delete import changed_table
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.merge import Unmatched, merge_keys, merge_source


@dataclass
class TableMerge(Result):
    table: str
    source_rows: int
    matched: int
    updated: int
    inserted: int
    deleted: int
    version_before: int
    version: int
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "table": self.table,
            "source_rows": self.source_rows,
            "rows_matched": self.matched,
            "rows_updated": self.updated,
            "rows_inserted": self.inserted,
            "rows_deleted": self.deleted,
            "version_before": self.version_before,
            "version": self.version,
        }


def merge_into_table(
    ns: Namespace,
    ident: Identifier,
    data: Any,
    on: list[str],
    when_matched: str = "update",
    when_not_matched: str = "insert",
    unmatched: Unmatched | None = None,
    dry_run: bool = False,
    delimiter: str = ".",
) -> TableMerge:
    """Upsert the source rows into one table by `on`; every input error first."""
    dataset, _ = changed_table(ns, ident, delimiter, "merge")
    schema = dataset.schema
    keys = merge_keys(on, schema, when_matched, when_not_matched)
    gone = to_sql(node) if unmatched is not None and (node := unmatched.node(schema)) else None
    source = merge_source(data, schema, keys, "column of the table")
    matched, deleted = _planned(dataset, source, keys, unmatched is not None, gone)
    name = ident.display(delimiter)
    version = int(dataset.version)
    result = TableMerge(name, source.num_rows, matched, 0, 0, 0, version, version, dry_run)
    result.updated = matched if when_matched == "update" else 0
    result.inserted = source.num_rows - matched if when_not_matched == "insert" else 0
    result.deleted = deleted
    if dry_run or not (result.updated or result.inserted or result.deleted):
        return result
    builder = dataset.merge_insert(keys)
    if when_matched == "update":
        builder = builder.when_matched_update_all()
    if when_not_matched == "insert":
        builder = builder.when_not_matched_insert_all()
    if unmatched is not None:
        builder = builder.when_not_matched_by_source_delete(gone)
    try:
        done = builder.execute(source)
    except (OSError, ValueError, RuntimeError) as exc:
        raise InvalidTableStateError(f"cannot merge into {name}: {lance_message(exc)}") from None
    result.updated = int(done.get("num_updated_rows", result.updated))
    result.inserted = int(done.get("num_inserted_rows", result.inserted))
    result.deleted = int(done.get("num_deleted_rows", result.deleted))
    result.version = int(dataset.version)  # Lance moves the dataset to the version it made
    return result


def _planned(
    dataset: Any, source: pa.Table, keys: list[str], deleting: bool, gone: str | None
) -> tuple[int, int]:
    """The table's rows the source's keys match (a key matching two is refused) and, when
    `deleting`, the rows `gone` holds for (every row: None) whose key the source lacks."""
    wanted = source.select(keys).append_column("__seen", pa.repeat(True, source.num_rows))
    read = dataset.to_table(columns=keys)
    joined = read.join(wanted, keys, join_type="inner")
    counted = joined.group_by(keys).aggregate([([], "count_all")])
    twice = counted.filter(pc.greater(counted.column("count_all"), 1))
    if twice.num_rows:
        key = {k: json_value(twice.column(k)[0].as_py()) for k in keys}
        raise InvalidInputError(
            f"merge: key {key} matches {twice.column('count_all')[0].as_py()} rows of the "
            "table; nothing was written (a key must match at most one row)"
        )
    deleted = 0
    if deleting:
        held = dataset.to_table(columns=keys, filter=gone) if gone else read
        deleted = held.join(wanted, keys, join_type="left anti").num_rows
    return joined.num_rows, deleted
