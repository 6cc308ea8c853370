"""`lancens register` and `lancens deregister`.

The service module is imported inside the commands so that `lancens --help` starts without pyarrow
or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import DryRun
from lancens_cli.cli.session import session


def register(
    ident: Annotated[str, typer.Argument(metavar="ID", help="Name to register the table under.")],
    location: Annotated[
        str, typer.Argument(metavar="LOCATION", help="Table directory, relative to the root.")
    ],
    allow_non_lance: Annotated[
        bool,
        typer.Option("--allow-non-lance", help="Register a directory that is not (yet) a table."),
    ] = False,
    dry_run: DryRun = False,
) -> None:
    """Register an existing table directory in the manifest under a name."""
    from lancens_cli.service.catalog.drop import register as register_table

    session().emit(
        register_table(
            session().namespace,
            session().ident(ident),
            location,
            allow_non_lance=allow_non_lance,
            dry_run=dry_run,
        )
    )


def deregister(
    ident: Annotated[str, typer.Argument(metavar="ID", help="Table to forget.")],
    dry_run: DryRun = False,
) -> None:
    """Forget a table but keep its files."""
    from lancens_cli.service.catalog.drop import deregister as deregister_table

    session().emit(deregister_table(session().namespace, session().ident(ident), dry_run=dry_run))
