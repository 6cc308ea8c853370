"""`lancens check`."""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.app import app
from lancens_cli.cli.common import SESSION, command


@command(app, "check")
def check(
    ident: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="Namespace or table (default: the root).")
    ] = None,
    fix: Annotated[
        bool, typer.Option("--fix", help="Repair what is safe; never deletes data.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --fix: only say what it would repair.")
    ] = False,
    grace_minutes: Annotated[
        int,
        typer.Option(
            "--grace-minutes",
            min=0,
            help="Staged __manifest files younger than this may belong to a commit in flight.",
        ),
    ] = 60,
) -> None:
    """Verify a namespace: exit 0 when healthy, 1 with one finding per line when not."""
    from datetime import timedelta

    from lancens_cli.cli.progress import progress_bar
    from lancens_cli.errors import ExitCode
    from lancens_cli.output import message
    from lancens_cli.service.check import check as run_check
    from lancens_cli.words import plural

    with progress_bar("checking tables") as start:
        report = run_check(
            SESSION.namespace,
            SESSION.ident(ident),
            fix=fix,
            dry_run=dry_run,
            grace=timedelta(minutes=grace_minutes),
            delimiter=SESSION.delimiter,
            progress=start,
        )
    SESSION.emit(report)
    if not SESSION.json:
        message(
            f"{plural(report.tables_checked, 'table')}, "
            f"{plural(report.namespaces_checked, 'namespace')} checked: "
            + ("healthy" if report.healthy else plural(report.open_findings, "problem"))
        )
    if not report.healthy:
        raise typer.Exit(ExitCode.ERROR)
