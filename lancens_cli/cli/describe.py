"""`lancens describe`: the root, a namespace or a table.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import Target
from lancens_cli.cli.session import session


def describe(
    ident: Target = None,
    versions: Annotated[
        bool, typer.Option("--versions", help="Also list the table's versions.")
    ] = False,
) -> None:
    """Describe the root (mode, config, counts, __manifest), a namespace or a table."""
    from lancens_cli.service.describe import describe as describe_object

    session().emit(
        describe_object(
            session().namespace,
            session().ident(ident),
            versions=versions,
            delimiter=session().delimiter,
        )
    )
