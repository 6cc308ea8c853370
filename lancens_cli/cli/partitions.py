"""`lancens partitions`.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import TimestampAsOf, VersionAsOf
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.errors import InvalidInputError
from lancens_cli.words import plural


def partitions(
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            "-w",
            metavar="PREDICATE",
            help="SQL filter over the namespace's columns, e.g. \"event_date = DATE "
            "'2025-12-10' AND country = 'US'\".",
        ),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Print the __manifest query and what is pushed.")
    ] = False,
    version_as_of: VersionAsOf = None,
    timestamp_as_of: TimestampAsOf = None,
    sort: Annotated[
        str,
        typer.Option(
            "--sort",
            metavar="table|rows|bytes",
            help="Order of the partition tables: by id, or largest first by rows or bytes.",
        ),
    ] = "table",
    no_sizes: Annotated[
        bool,
        typer.Option(
            "--no-sizes",
            help="Skip the rows and bytes of each table (one read of its Lance manifest each).",
        ),
    ] = False,
) -> None:
    """List the partition tables a filter must read (partition pruning), across all spec
    versions, with location, read_version / branch / tag, partition values, and rows and bytes
    at the published version (from Lance's manifests); what each version's scans must still
    apply is printed on stderr."""
    from lancens_cli.service.partitioned.partitions import select_partitions, with_sizes

    if no_sizes and sort != "table":
        raise InvalidInputError(f"--sort {sort} needs the sizes: drop --no-sizes")
    ns = session().namespace.as_of(version_as_of, timestamp_as_of)
    selection = select_partitions(ns, where, label="--where")
    if not no_sizes:
        with_sizes(ns, selection, sort)
    if explain and not session().json:
        message(selection.manifest_query)
        for version, parts in selection.pushed.items():
            message(f"{version}: pushed to partitions: {' AND '.join(parts) or '(nothing)'}")
    session().emit(selection)
    if not session().json:
        message(f"{len(selection.matches)} of {plural(selection.total, 'partition table')} match")
        for version, residual in selection.residual.items():
            if residual:
                message(f"{version}: left for the scan: {residual}")
        for part in selection.not_used:
            message(
                f"not used for pruning (the answer is a superset): {part['condition']} "
                f"({part['reason']})"
            )
