"""`lancens update ID --set 'col = expr' --where PRED`: rows of one table given new values.

As `delete ID` (delete.py), the table is no partition table and is read at its newest
version. The matching rows are read, given their new values as `update` gives a namespace's
(DataFusion, `service/partitioned/update.new_values`: the same types, refusals and wrapped
integers), written as new fragments, and the old rows deleted, all in one Lance `Update`
committed compare-and-swap on the version read; when another writer commits first, the rows are
read again on top of its version and the update made again (the fragments written for the
lost attempt are left for `check --fix` and `prune`, as a dead write's are). On a table with
stable row ids the rows written anew keep the ids they had, as Lance's own update keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lance.fragment import RowIdSequence

from lancens_cli.errors import InvalidTableStateError
from lancens_cli.models import Identifier, Result
from lancens_cli.service.catalog.table_rows.delete import (
    changed_table,
    commit_on_newest,
    lance_filter,
)
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.update import Assignment, new_values, parse_assignments
from lancens_cli.store.lance_input import write_fragments
from lancens_cli.store.partition_tables import replacement
from lancens_cli.store.storage import Storage

_ROW_ID = "_rowid"


@dataclass
class TableUpdate(Result):
    table: str
    location: str
    where: str
    sets: list[str]
    filter: str  # the Lance filter of the rows updated
    rows: int  # rows updated (a dry run: that would be)
    version_before: int
    version: int  # the table's version after (unchanged when no row matched)
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "table": self.table,
            "location": self.location,
            "where": self.where,
            "set": self.sets,
            "filter": self.filter,
            "rows_updated": self.rows,
            "version_before": self.version_before,
            "version": self.version,
        }


def check_table_update(
    ns: Namespace, ident: Identifier, sets: list[str], where: str, delimiter: str = "."
) -> None:
    """Refuse what `update_table` would refuse, reading no row (before a confirmation)."""
    dataset, _ = changed_table(ns, ident, delimiter, "update")
    lance_filter(where, dataset.schema)
    parse_assignments(sets, dataset.schema)


def update_table(
    ns: Namespace,
    ident: Identifier,
    sets: list[str],
    where: str,
    dry_run: bool = False,
    delimiter: str = ".",
) -> TableUpdate:
    """Give the rows `where` holds for their new values; with `dry_run`, count them. Input
    errors come first, before a row is read."""
    dataset, location = changed_table(ns, ident, delimiter, "update")
    condition = lance_filter(where, dataset.schema)
    assignments = parse_assignments(sets, dataset.schema)
    name = ident.display(delimiter)
    version = int(dataset.version)
    result = TableUpdate(name, location, where, list(sets), condition, 0, version, version)
    if dry_run:
        result.rows, result.dry_run = int(dataset.count_rows(filter=condition)), True
        return result
    result.rows, result.version = _update(ns.storage, location, condition, assignments, name)
    return result


def _update(
    storage: Storage, location: str, condition: str, assignments: list[Assignment], name: str
) -> tuple[int, int]:
    """The rows updated and the table's version after."""

    def change(line: Any) -> tuple[Any, int]:
        stable = bool(getattr(line, "has_stable_row_ids", False))
        rows = line.to_table(filter=condition, with_row_id=stable)
        if not rows.num_rows:
            return None, 0
        ids = rows.column(_ROW_ID) if stable else None
        rows = rows.drop_columns([_ROW_ID]) if stable else rows
        # in the table's own schema, to the names Lance gives a map's or a list's children
        changed = new_values(rows, assignments, line.schema).cast(line.schema)
        uri, options = storage.uri(location), storage.lance_options
        fragments = write_fragments(changed, uri, schema=line.schema, storage_options=options)
        if ids is not None:
            _carry_row_ids(fragments, ids)
        operation, deleted = replacement(line, condition, fragments)
        if deleted != rows.num_rows:  # the deletion files must name exactly the rows read
            raise InvalidTableStateError(f"{name}: the rows changed while they were read")
        return operation, rows.num_rows

    return commit_on_newest(storage, location, change, f"cannot update {name}", name)


def _carry_row_ids(fragments: list[Any], ids: Any) -> None:
    """Give the rows written anew the stable row ids they had (Lance's own update keeps them):
    a reader of what changed then pairs each row's old and new values, and what refers to a
    row by its id still finds it. The fragments hold the rows in the order they were read."""
    start = 0
    for fragment in fragments:
        held = ids.slice(start, fragment.physical_rows).combine_chunks()
        fragment.row_id_meta = RowIdSequence(held.to_numpy()).to_inline_metadata()
        start += fragment.physical_rows
