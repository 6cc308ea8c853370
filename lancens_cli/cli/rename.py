"""`lancens rename`.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.dry_run import note_location_pattern
from lancens_cli.cli.options import DryRun
from lancens_cli.cli.session import session


def rename(
    old: Annotated[str, typer.Argument(metavar="OLD", help="Table or namespace to rename.")],
    new: Annotated[
        str, typer.Argument(metavar="NEW", help="New name, possibly in another namespace.")
    ],
    keep_location: Annotated[
        bool,
        typer.Option("--keep-location", help="Leave a root V1 table's directory where it is."),
    ] = False,
    dry_run: DryRun = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Move the directory even if other tables read it (they break)."
        ),
    ] = False,
) -> None:
    """Rename a table (also into another namespace) or a namespace.

    A root table in a V1 <name>.lance directory moves to a V2 <hash>_<id> directory, as the
    spec says; a rerun after an interruption completes the move. The table's branches move with
    it; a move that would break another table reading it (a shallow clone) is refused (exit 5).
    """
    from lancens_cli.service.catalog.rename import rename as rename_object

    result = rename_object(
        session().namespace,
        session().ident(old),
        session().ident(new),
        keep_location=keep_location,
        dry_run=dry_run,
        delimiter=session().delimiter,
        force=force,
    )
    session().emit(result)
    note_location_pattern(result, session().json)
