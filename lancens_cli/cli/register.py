"""`lancens register` and `lancens deregister`."""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.app import app
from lancens_cli.cli.common import SESSION, command


@command(app, "register")
def register(
    ident: Annotated[str, typer.Argument(metavar="ID", help="Name to register the table under.")],
    location: Annotated[
        str, typer.Argument(metavar="LOCATION", help="Table directory, relative to the root.")
    ],
    allow_non_lance: Annotated[
        bool,
        typer.Option("--allow-non-lance", help="Register a directory that is not (yet) a table."),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change.")] = False,
) -> None:
    """Register an existing table directory in the manifest under a name."""
    from lancens_cli.service.drop import register as register_table

    SESSION.emit(
        register_table(
            SESSION.namespace,
            SESSION.ident(ident),
            location,
            allow_non_lance=allow_non_lance,
            dry_run=dry_run,
        )
    )


@command(app, "deregister")
def deregister(
    ident: Annotated[str, typer.Argument(metavar="ID", help="Table to forget.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change.")] = False,
) -> None:
    """Forget a table but keep its files."""
    from lancens_cli.service.drop import deregister as deregister_table

    SESSION.emit(deregister_table(SESSION.namespace, SESSION.ident(ident), dry_run=dry_run))
