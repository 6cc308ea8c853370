"""`lancens tag-partitions`.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import DryRun
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of


def tag_partitions(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The tag to make.")],
    publish: Annotated[
        bool,
        typer.Option(
            "--publish", help="Publish read_tag=NAME on every partition row: readers stay on it."
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Move a tag of that name that names another version."),
    ] = False,
    dry_run: DryRun = False,
) -> None:
    """Tag every partition table at the version __manifest publishes for it (a named snapshot
    of the partitioned namespace); --publish makes readers read the tag.

    A tag of that name at another version is refused (exit 5) unless --force; a later write
    moves the partitions it touches off the tag.
    """
    from lancens_cli.service.partitioned.tags import tag_partitions as run

    result = run(session().namespace, name, publish=publish, force=force, dry_run=dry_run)
    session().emit(result)
    message(summary_of(result))
