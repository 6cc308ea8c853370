"""`lancens write`: rows from a local file into a partitioned namespace.

The service and store modules are imported inside the command so that `lancens --help` starts
without pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import AllowMissingColumns, Branch, DryRun, SourceFile, SourceFormat
from lancens_cli.cli.output import message
from lancens_cli.cli.progress import progress_bar
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of


def write(
    root_argument: Annotated[
        str | None,
        typer.Argument(metavar="[ROOT]", help="The partitioned namespace (or --root)."),
    ] = None,
    source: SourceFile = ...,  # type: ignore[assignment]
    fmt: SourceFormat = None,
    branch: Branch = None,
    dry_run: DryRun = False,
    allow_missing_columns: AllowMissingColumns = False,
) -> None:
    """Write rows into a partitioned namespace under its current partition spec.

    Each partition's rows go to its dataset table (created when new); then every touched
    partition's read_version is recorded in one __manifest commit: readers see all of the
    write or none of it. With --branch the rows go to that branch of each partition table
    and read_branch is published with read_version. Namespace columns the input lacks are
    filled with NULL (and named); a partition source column is refused unless
    --allow-missing-columns.
    """
    from lancens_cli.service.partitioned.write import source_types, write_partitioned
    from lancens_cli.store.sources import open_source

    if root_argument is not None:
        session().merge(root=root_argument)
    data = open_source(source, fmt, target=source_types(session().namespace, source, fmt))
    with progress_bar("writing partition tables") as start:
        result = write_partitioned(
            session().namespace,
            data,
            branch=branch,
            progress=start,
            dry_run=dry_run,
            allow_missing_columns=allow_missing_columns,
        )
    session().emit(result)
    if result.filled_with_null:
        message(f"write: the input lacks {', '.join(result.filled_with_null)}: filled with NULL")
    message(summary_of(result))
