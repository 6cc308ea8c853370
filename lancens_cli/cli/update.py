"""`lancens update --set 'col = expr' --where PRED`: rows changed in place, in one commit.

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


def update(
    table: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="One table to update (default: the partitioned namespace at the root).",
        ),
    ] = None,
    sets: Annotated[
        list[str],
        typer.Option(
            "--set",
            help="'column = expression' (SQL, evaluated by DataFusion over each row); repeat "
            "for more columns.",
        ),
    ] = ...,  # type: ignore[assignment]
    conditions: RowCondition = ...,  # type: ignore[assignment]
    dry_run: DryRun = False,
    yes: Yes = False,
) -> None:
    """Give the rows a condition holds for new values in a partitioned namespace.

    The rows are found as `delete` finds them, read at the versions __manifest publishes, and
    written back with their new values: in their own table (Lance's update) when their
    partition stays, moved to the table their new values select when it changes. Every
    changed table is published in one __manifest commit. A matched partition another writer
    changed meanwhile fails the update, nothing published: run it again. With ID, the rows
    of that one table (not a partition table), in one Lance commit on its newest version.
    """
    from lancens_cli.service.partitioned.update import plan_update, update_rows

    ns, where = session().namespace, one_condition(conditions)
    if table is not None:
        _update_table(table, sets, where, dry_run, yes)
        return
    plan = plan_update(ns, sets, where)
    if not dry_run:
        tables = plural(len(plan.rows_of.targets), "partition table")
        confirm_destruction(f"update the rows where {where} in {tables}", yes, harm="change rows")
    with progress_bar("updating partition tables") as start:
        result = update_rows(ns, plan, dry_run=dry_run, progress=None if dry_run else start)
    session().emit(result)
    message(summary_of(result))


def _update_table(table: str, sets: list[str], where: str, dry_run: bool, yes: bool) -> None:
    from lancens_cli.service.catalog.table_rows.update import check_table_update, update_table

    ns, ident, delimiter = session().namespace, session().ident(table), session().delimiter
    if not dry_run:  # bad input is said before the question
        check_table_update(ns, ident, sets, where, delimiter=delimiter)
        confirm_destruction(
            f"update the rows where {where} in {ident.display()}", yes, harm="change rows"
        )
    result = update_table(ns, ident, sets, where, dry_run=dry_run, delimiter=delimiter)
    session().emit(result)
    message(summary_of(result))
