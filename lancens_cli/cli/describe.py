"""`lancens describe`: the root, a namespace or a table.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import Target
from lancens_cli.cli.partition_option import Partition, SpecVersion, partition_target
from lancens_cli.cli.session import session


def describe(
    ident: Target = None,
    versions: Annotated[
        bool, typer.Option("--versions", help="Also list the table's versions.")
    ] = False,
    partition: Partition = None,
    spec_version: SpecVersion = None,
) -> None:
    """Describe the root (mode, config, counts, __manifest), a namespace or a table (also a
    partition table by its values: --partition K=V)."""
    from lancens_cli.service.describe import describe as describe_object

    target = partition_target(ident, partition, spec_version) or session().ident(ident)
    session().emit(
        describe_object(
            session().namespace,
            target,
            versions=versions,
            delimiter=session().delimiter,
        )
    )
