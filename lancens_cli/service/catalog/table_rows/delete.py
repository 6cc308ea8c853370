"""`lancens delete ID --where`: rows removed from one table (not a partition table).

A table outside a partitioned namespace is read at its newest version (no `__manifest` row
publishes a version of it): the delete is a Lance Delete committed on the newest version, made
again on top of a concurrent writer's (whose rows are then judged too). A partition table is
refused: its rows are deleted through its namespace, in one commit with its other partitions
(service/partitioned/delete.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lance

from lancens_cli.errors import InvalidInputError, InvalidTableStateError, lance_message
from lancens_cli.models import Identifier, Result
from lancens_cli.partition.predicate import to_sql
from lancens_cli.partition.rows import partition_rows
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.delete import delete_condition
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.store.catalog_rows import LATEST, PublishedRef
from lancens_cli.store.commit import TABLE_COMMIT_ATTEMPTS, retry_on_conflict
from lancens_cli.store.containment import directory_location_problem
from lancens_cli.store.partition_tables import deletion
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import open_table


@dataclass
class TableDelete(Result):
    table: str
    location: str
    where: str
    filter: str  # the Lance filter the rows were deleted by
    rows: int  # rows deleted (a dry run: that would be)
    version_before: int
    version: int  # the table's version after the delete (unchanged when no row matched)
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "table": self.table,
            "location": self.location,
            "where": self.where,
            "filter": self.filter,
            "rows_deleted": self.rows,
            "version_before": self.version_before,
            "version": self.version,
        }


def check_table_delete(ns: Namespace, ident: Identifier, where: str, delimiter: str = ".") -> None:
    """Refuse what `delete_from_table` would refuse, reading no row (before a confirmation)."""
    dataset, _ = changed_table(ns, ident, delimiter)
    lance_filter(where, dataset.schema)


def delete_from_table(
    ns: Namespace, ident: Identifier, where: str, dry_run: bool = False, delimiter: str = "."
) -> TableDelete:
    """Delete the rows `where` holds for from one table; with `dry_run`, count them. Input
    errors (the condition, a partition table, a location lancens will not open) come first."""
    dataset, location = changed_table(ns, ident, delimiter)
    condition = lance_filter(where, dataset.schema)
    name = ident.display(delimiter)
    result = TableDelete(name, location, where, condition, 0, dataset.version, dataset.version)
    if dry_run:
        result.rows, result.dry_run = int(dataset.count_rows(filter=condition)), True
        return result
    result.rows, result.version = _delete(ns.storage, location, condition, name)
    return result


def _delete(storage: Storage, location: str, condition: str, name: str) -> tuple[int, int]:
    """The rows deleted and the table's version after: a Delete committed compare-and-swap on
    the newest version, made again on a newer one when another writer got there first; no
    commit when no row matches (Lance's own delete would make an empty version)."""
    return commit_on_newest(
        storage,
        location,
        lambda line: deletion(line, condition),
        f"cannot delete from {name}",
        name,
    )


def commit_on_newest(
    storage: Storage,
    location: str,
    change: Callable[[Any], tuple[Any, int]],
    failure: str,
    name: str,
) -> tuple[int, int]:
    """The one commit path of a row change of one table: `change(line)` gives the operation on
    the newest version (None: nothing to commit) and the rows it changes; when another writer
    committed while it was worked out, `change` is made again on the newer version, so that
    writer's rows are changed too; else the operation is committed on the version read. A
    writer committing in the instant between is one Lance itself puts the change on top of
    when the two cannot conflict (an append; else the commit fails and is made again): the
    change is then in, and is never made twice (an `update` of `v = v + 1` would add 2). The
    rows changed and the table's version after."""
    found = 0

    def attempt() -> int | None:
        nonlocal found
        line = open_table(storage, location)
        operation, found = change(line)
        if operation is None:
            return int(line.version)
        if line.latest_version != line.version:
            return None  # another writer committed meanwhile: worked out again on top of it
        done = lance.LanceDataset.commit(
            line,
            operation,
            read_version=line.version,
            max_retries=0,
            storage_options=storage.lance_options,
        )
        return int(done.version)

    version = retry_on_conflict(
        attempt,
        failed=lambda exc: InvalidTableStateError(f"{failure}: {lance_message(exc)}"),
        gave_up=f"table {name} kept changing; gave up after {TABLE_COMMIT_ATTEMPTS}",
    )
    return found, version


def changed_table(
    ns: Namespace, ident: Identifier, delimiter: str, verb: str = "delete"
) -> tuple[Any, str]:
    """The table a row change of one table (`verb`: delete, update, merge) works on, at its
    newest version, and its location; refused: a partition table, a table `__manifest` pins,
    a location lancens will not open."""
    ns.require_root()
    snapshot = ns.snapshot()
    ref = ns.require_table(ident, snapshot)
    layout = layout_of(snapshot) if snapshot.exists else None
    if layout is not None and any(partition_rows([ref.row or {}], layout.specs)):
        raise InvalidInputError(
            f"{ident.display(delimiter)} is a partition table: {verb} through its namespace "
            f"(lancens {verb} without ID), which publishes every partition together"
        )
    if PublishedRef.of(ref.row) != LATEST:  # readers are sent to a version the delete is not
        raise InvalidInputError(
            f"{ident.display(delimiter)}: __manifest sends readers to "
            f"{PublishedRef.of(ref.row).words()}, not to its newest version; a {verb} there "
            "would not be seen"
        )
    problem = directory_location_problem(ns.storage, ref.location)
    if problem is not None:
        raise InvalidInputError(f"{ident.display(delimiter)}: {problem}")
    return open_table(ns.storage, ref.location), ref.location


def lance_filter(where: str, schema: Any) -> str:
    return to_sql(delete_condition(where, schema))
