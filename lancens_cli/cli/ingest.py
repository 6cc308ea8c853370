"""`lancens ingest`: files into a partitioned namespace (or a table) through Spark.

The Spark pipeline is imported inside the command so that `lancens --help` starts without pyspark,
pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lancens_cli.cli.options import AllowMissingColumns, Branch, Conf, DryRun, Master, Remote
from lancens_cli.cli.output import message
from lancens_cli.cli.progress import spark_progress
from lancens_cli.cli.session import session
from lancens_cli.cli.spark_options import spark_session
from lancens_cli.cli.views import summary_of


def ingest(
    sources: Annotated[
        list[str],
        typer.Argument(
            metavar="SOURCE...",
            help="Files, directories or globs: local paths, s3://bucket/..., gs://bucket/...",
            show_default=False,
        ),
    ],
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="parquet, csv (with a header), json (lines) or orc."),
    ] = None,
    into: Annotated[
        str | None,
        typer.Option(
            "--into",
            metavar="ID",
            help="Write into this table (created when missing) instead of the partitioned root.",
        ),
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="append, or overwrite: replace the partitions (or the table) the input touches.",
        ),
    ] = "append",
    dry_run: DryRun = False,
    branch: Branch = None,
    allow_missing_columns: AllowMissingColumns = False,
    master: Master = None,
    remote: Remote = None,
    conf: Conf = None,
) -> None:
    """Read files with Spark and write them into the partitioned namespace at the root (or a
    table): tasks write each partition's fragments, the driver publishes them all in one
    __manifest commit. A failed job publishes nothing. Namespace columns the input lacks are
    filled with NULL (and named); a partition source column is refused unless
    --allow-missing-columns, as `write` does, before Spark starts."""
    from lancens_cli.pipeline.ingest import ingest as run

    ident = session().ident(into) if into is not None else None

    def start(watch: Any) -> Any:
        if not session().json:
            message("ingest: starting Spark")
        return watch(spark_session(master, conf, remote, data_source=False))

    with spark_progress("ingest") as watch:
        result = run(
            lambda: start(watch),
            session().namespace,
            sources,
            fmt=fmt,
            into=ident,
            mode=mode,
            dry_run=dry_run,
            delimiter=session().delimiter,
            debug=session().debug,
            branch=branch,
            allow_missing_columns=allow_missing_columns,
        )
    session().emit(result)
    if result.filled_with_null:
        message(f"ingest: the input lacks {', '.join(result.filled_with_null)}: filled with NULL")
    message(f"{summary_of(result)} (Spark start {result.spark_start_seconds:.1f} s)")
