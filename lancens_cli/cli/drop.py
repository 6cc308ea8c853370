"""`lancens drop`.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.common import confirm_destruction
from lancens_cli.cli.options import DryRun, Yes
from lancens_cli.cli.progress import progress_bar
from lancens_cli.cli.session import session
from lancens_cli.words import plural


def drop(
    ident: Annotated[str, typer.Argument(metavar="ID", help="Table or namespace to drop.")],
    cascade: Annotated[
        bool, typer.Option("--cascade", help="Drop a non-empty namespace with everything in it.")
    ] = False,
    keep_data: Annotated[
        bool, typer.Option("--keep-data", help="Forget the tables but keep their files.")
    ] = False,
    dry_run: DryRun = False,
    yes: Yes = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Delete the data even if other tables read it (they break)."),
    ] = False,
) -> None:
    """Drop a table or a namespace, deleting table data unless --keep-data.

    Refused (exit 5) when another table outside the drop reads the data through a base path
    (a shallow clone), unless --force.
    """
    from lancens_cli.service.catalog.drop import drop as drop_object
    from lancens_cli.service.catalog.drop import plan_drop, refuse_breaking

    ns = session().namespace
    target = session().ident(ident)
    if not dry_run and not keep_data:
        plan = plan_drop(
            ns, target, cascade=cascade, delimiter=session().delimiter, dependents=not force
        )
        if not force:
            refuse_breaking(plan, target, session().delimiter)  # before asking, not after
        tables = sum(1 for c in plan.changes if c.kind == "table")
        if tables:
            confirm_destruction(
                f"drop {ident} and delete the data of {plural(tables, 'table')}", yes
            )
    with progress_bar("deleting table data") as start:
        result = drop_object(
            ns,
            target,
            cascade=cascade,
            keep_data=keep_data,
            dry_run=dry_run,
            delimiter=session().delimiter,
            force=force,
            progress=start,
        )
    session().emit(result)
