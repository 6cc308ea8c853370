"""`lancens diff`: what changed between two versions of a partitioned root or of one table.

The service module is imported inside the command so that `lancens --help` starts without pyarrow
or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.partition_option import Partition, SpecVersion, partition_target
from lancens_cli.cli.session import session
from lancens_cli.models import MANIFEST_TABLE, Identifier

_SIDES = "of __manifest without ID, else of the table"
FromVersion = Annotated[
    str | None, typer.Option("--from-version", metavar="N", help=f"The earlier version ({_SIDES}).")
]
ToVersion = Annotated[
    str | None,
    typer.Option(
        "--to-version", metavar="N", help=f"The later version ({_SIDES}); default: the latest."
    ),
]
FromTimestamp = Annotated[
    str | None,
    typer.Option(
        "--from-timestamp",
        metavar="TS",
        help="The earlier version: the newest committed at or before TS (ISO 8601; UTC without "
        "an offset).",
    ),
]
ToTimestamp = Annotated[
    str | None,
    typer.Option(
        "--to-timestamp",
        metavar="TS",
        help="The later version: the newest committed at or before TS.",
    ),
]


def diff(
    ident: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="A table (its versions), or nothing: the partitions of a partitioned root.",
        ),
    ] = None,
    from_version: FromVersion = None,
    to_version: ToVersion = None,
    from_timestamp: FromTimestamp = None,
    to_timestamp: ToTimestamp = None,
    partition: Partition = None,
    spec_version: SpecVersion = None,
) -> None:
    """Show what changed between two versions. Changes nothing.

    Without ID, on a partitioned root: the partitions added, removed and changed between two
    __manifest versions (rows at each, and what Lance's transactions say each table version in
    between did), the spec versions added and the schema changes. With ID: every version of
    the table after --from up to --to, with its operation, rows and bytes.
    """
    from lancens_cli.service.history.diff import diff as diff_versions

    if ident == MANIFEST_TABLE and not partition:
        target = Identifier((MANIFEST_TABLE,))
    else:
        target = partition_target(ident, partition, spec_version) or session().ident(ident)
    result = diff_versions(
        session().namespace,
        target,
        from_version=from_version,
        to_version=to_version,
        from_timestamp=from_timestamp,
        to_timestamp=to_timestamp,
        delimiter=session().delimiter,
    )
    session().emit(result)
