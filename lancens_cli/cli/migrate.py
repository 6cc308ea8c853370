"""`lancens migrate-v1`.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import DryRun
from lancens_cli.cli.output import message
from lancens_cli.cli.progress import progress_bar
from lancens_cli.cli.session import session
from lancens_cli.errors import ExitCode
from lancens_cli.words import plural


def migrate_v1(
    dry_run: DryRun = False,
    check: Annotated[
        bool,
        typer.Option("--check", help="Change nothing; exit 7 if tables are left to migrate."),
    ] = False,
    legacy: Annotated[
        bool,
        typer.Option("--legacy", help="Also register spec-001 tables in <name> directories."),
    ] = False,
) -> None:
    """Register every V1 <name>.lance table of the root in __manifest, in one commit.

    Idempotent: a second run changes nothing. Exit codes: 0 done (or nothing to do), 7 with
    --check when tables are left to migrate, 6 when some directories had to be skipped.
    """
    from lancens_cli.service.catalog.migrate import migrate_v1 as migrate

    with progress_bar("scanning table directories") as start:
        report = migrate(
            session().namespace, dry_run=dry_run, check=check, legacy=legacy, progress=start
        )
    session().emit(report)
    if check:
        if report.pending:
            message(f"{plural(report.pending, 'table')} left to migrate")
            raise typer.Exit(ExitCode.PENDING)
        if report.skipped:
            message(f"{plural(report.skipped, 'directory')} cannot be migrated; see the report")
            raise typer.Exit(ExitCode.PARTIAL)
        message("nothing left to migrate")
        return
    if dry_run:
        message(f"dry run: {plural(report.pending, 'table')} would be registered; nothing changed")
        return
    if report.migrated == 0 and report.pending == 0:
        message("nothing to migrate: every V1 table is already registered")
    if report.skipped:
        message(f"{plural(report.skipped, 'directory')} skipped; see the report")
        raise typer.Exit(ExitCode.PARTIAL)
    if report.complete:
        message(
            "every V1 table is registered: directory listing can now be turned off with "
            "--no-dir-listing, LANCENS_DIR_LISTING_ENABLED=false or "
            "dir_listing_enabled = false in the profile"
        )
