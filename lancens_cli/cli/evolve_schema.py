"""`lancens evolve-schema`.

The partition and service modules are imported inside the command so that `lancens --help` starts
without pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import DryRun
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of


def evolve_schema(
    add: Annotated[
        list[str] | None,
        typer.Option(
            "--add", metavar="'NAME TYPE'", help="Add a nullable column, e.g. 'score int64'."
        ),
    ] = None,
    rename: Annotated[
        list[str] | None,
        typer.Option("--rename", metavar="OLD=NEW", help="Rename a column (its field id stays)."),
    ] = None,
    drop: Annotated[
        list[str] | None,
        typer.Option("--drop", metavar="NAME", help="Drop a column (a spec over it reads NULL)."),
    ] = None,
    widen: Annotated[
        list[str] | None,
        typer.Option(
            "--widen",
            metavar="NAME=TYPE",
            help="Widen a column: int8->int16->int32->int64, float32->float64, date32->timestamp.",
        ),
    ] = None,
    dry_run: DryRun = False,
) -> None:
    """Change the namespace schema of a partitioned root and bring every partition table to it.

    Each partition table gets a new version at the new schema (Lance drop_columns,
    alter_columns, add_columns); the schema and every new read_version are then published
    through __manifest. A change already in place is skipped, so a rerun finishes an
    interrupted evolution.
    """
    from lancens_cli.partition.schema_evolution import parse_changes
    from lancens_cli.service.partitioned.evolve_schema import evolve_schema as run

    changes = parse_changes(add or [], rename or [], drop or [], widen or [])
    result = run(session().namespace, changes, dry_run=dry_run)
    session().emit(result)
    message(summary_of(result))
