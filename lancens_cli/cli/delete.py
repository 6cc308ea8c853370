"""`lancens delete --where`: rows removed from a partitioned namespace in one commit.

The service and store modules are imported inside the command so that `lancens --help` starts
without pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.common import confirm_destruction
from lancens_cli.cli.options import DryRun, RowCondition, Yes, one_condition
from lancens_cli.cli.output import message
from lancens_cli.cli.progress import progress_bar
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of
from lancens_cli.words import plural


def delete(
    table: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="One table to delete from (default: the partitioned namespace at the root).",
        ),
    ] = None,
    conditions: RowCondition = ...,  # type: ignore[assignment]
    dry_run: DryRun = False,
    yes: Yes = False,
) -> None:
    """Delete the rows a condition holds for from a partitioned namespace.

    The partition tables the condition can match (as `partitions --where` selects them, in
    every spec version) get Lance's delete of their matching rows, and every changed table is
    published in one __manifest commit: readers see all of the delete or none of it. A
    partition another writer changed meanwhile is deleted from again on top of that write;
    a matching partition created meanwhile fails the delete, nothing published. --dry-run
    counts the rows that would go, reading only those tables. With ID, the rows of that one
    table (Lance's delete; a partition table is deleted from through its namespace).
    """
    from lancens_cli.service.partitioned.delete import count_deletes, delete_rows, plan_delete

    ns, where = session().namespace, one_condition(conditions)
    if table is not None:
        _delete_from_table(table, where, dry_run, yes)
        return
    plan = plan_delete(ns, where)
    if dry_run:
        result = count_deletes(ns, plan)
    else:
        tables = plural(len(plan.targets), "partition table")
        confirm_destruction(f"delete the rows where {where} from {tables}", yes)
        with progress_bar("deleting from partition tables") as start:
            result = delete_rows(ns, plan, progress=start)
    session().emit(result)
    message(summary_of(result))


def _delete_from_table(table: str, where: str, dry_run: bool, yes: bool) -> None:
    from lancens_cli.service.catalog.table_rows.delete import check_table_delete, delete_from_table

    ns, ident = session().namespace, session().ident(table)
    if not dry_run:  # bad input is said before the question
        check_table_delete(ns, ident, where, delimiter=session().delimiter)
        confirm_destruction(f"delete the rows where {where} from {ident.display()}", yes)
    result = delete_from_table(ns, ident, where, dry_run=dry_run, delimiter=session().delimiter)
    session().emit(result)
    message(summary_of(result))
