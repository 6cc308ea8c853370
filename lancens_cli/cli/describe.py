"""`lancens describe`: the root, a namespace or a table."""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.app import app
from lancens_cli.cli.common import SESSION, command


@command(app, "describe")
def describe(
    ident: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="Namespace or table (default: the root).")
    ] = None,
    versions: Annotated[
        bool, typer.Option("--versions", help="Also list the table's versions.")
    ] = False,
) -> None:
    """Describe the root (mode, config, counts, __manifest), a namespace or a table."""
    from lancens_cli.service.describe import describe as describe_object

    SESSION.emit(
        describe_object(
            SESSION.namespace, SESSION.ident(ident), versions=versions, delimiter=SESSION.delimiter
        )
    )
