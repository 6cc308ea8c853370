"""`lancens check`.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer

from lancens_cli.cli.options import DryRun, Target
from lancens_cli.cli.output import message
from lancens_cli.cli.progress import progress_bar
from lancens_cli.cli.session import session
from lancens_cli.errors import ExitCode, InvalidInputError
from lancens_cli.words import plural


def check(
    ident: Target = None,
    fix: Annotated[
        bool, typer.Option("--fix", help="Repair what is safe; never deletes data.")
    ] = False,
    dry_run: DryRun = False,
    grace_minutes: Annotated[
        int,
        typer.Option(
            "--grace-minutes",
            min=0,
            help="Staged __manifest files younger than this may belong to a commit in flight.",
        ),
    ] = 60,
    drop_refused_rows: Annotated[
        bool,
        typer.Option(
            "--drop-refused-rows",
            help="With --fix: remove catalog rows whose location lancens refuses to touch "
            "(bad_location); only the rows, never what they point at.",
        ),
    ] = False,
) -> None:
    """Verify a namespace: exit 0 when healthy, 1 with one finding per line when not."""

    from lancens_cli.service.check import check as run_check

    if drop_refused_rows and not fix:
        raise InvalidInputError("--drop-refused-rows goes with --fix")
    with progress_bar("checking tables") as start:
        report = run_check(
            session().namespace,
            session().ident(ident),
            fix=fix,
            dry_run=dry_run,
            grace=timedelta(minutes=grace_minutes),
            delimiter=session().delimiter,
            progress=start,
            drop_refused_rows=drop_refused_rows,
        )
    session().emit(report)
    if not session().json:
        message(
            f"{plural(report.tables_checked, 'table')}, "
            f"{plural(report.namespaces_checked, 'namespace')} checked: "
            + ("healthy" if report.healthy else plural(report.open_findings, "problem"))
        )
    if not report.healthy:
        raise typer.Exit(ExitCode.ERROR)
