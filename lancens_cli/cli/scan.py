"""`lancens scan`: read a table or a partitioned namespace with Spark (pruned, filtered).

The Spark pipeline is imported inside the command so that `lancens --help` starts without pyspark,
pyarrow or Lance.
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from typing import Annotated, Any

import typer

from lancens_cli.cli.options import Conf, Master, Remote, TimestampAsOf, VersionAsOf
from lancens_cli.cli.output import message, plain_row
from lancens_cli.cli.progress import spark_progress
from lancens_cli.cli.session import session
from lancens_cli.cli.spark_options import spark_named, spark_session
from lancens_cli.config import parse_size
from lancens_cli.errors import InvalidInputError
from lancens_cli.words import noun, plural

ScanTarget = Annotated[
    str | None,
    typer.Argument(
        metavar="[ID]",
        help="A table to read; without it, the whole partitioned namespace of the root.",
    ),
]
ScanWhere = Annotated[
    str | None,
    typer.Option(
        "--where",
        "-w",
        metavar="PREDICATE",
        help="Spark SQL condition over the columns (functions, arithmetic, LIKE, CASE, "
        "...); Spark applies it, and the conjuncts lancens understands prune partition "
        "tables and filter in Lance (--explain says which).",
    ),
]
ScanColumns = Annotated[
    str | None,
    typer.Option("--columns", metavar="A,B", help="Columns to return (default: all)."),
]
ScanLimit = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=0,
        help="At most this many rows (default 20 on a terminal, all when piped).",
    ),
]
ScanCountOnly = Annotated[bool, typer.Option("--count", help="Print the number of rows.")]
ScanTo = Annotated[
    str | None,
    typer.Option("--to", metavar="PATH", help="Write the rows as files with Spark."),
]
ScanFormat = Annotated[str, typer.Option("--format", help="Format of --to: parquet, csv or json.")]
# `--since-version` / `--since-timestamp` as `join` takes them, and for one table (ID) its own
ScanSinceVersion = Annotated[
    int | None,
    typer.Option(
        "--since-version",
        metavar="A",
        min=0,
        help="Only the rows appended after __manifest version A (with ID: the table's version "
        "A), exclusive (0: from the start), up to the version read (an incremental read).",
    ),
]
ScanSinceTimestamp = Annotated[
    str | None,
    typer.Option(
        "--since-timestamp",
        metavar="TS",
        help="Only the rows appended after the newest __manifest version (with ID: table "
        "version) committed at or before TS (ISO 8601; UTC without an offset).",
    ),
]
ScanChanges = Annotated[
    bool,
    typer.Option(
        "--changes",
        help="The change feed: every row inserted or deleted after --since-version (or "
        "--since-timestamp) up to the version read, with _change_type (insert, delete, "
        "update_preimage, update_postimage), _commit_version and _commit_timestamp.",
    ),
]
ScanNet = Annotated[
    bool,
    typer.Option(
        "--net",
        help="With --changes: the net effect only, each row inserted or deleted as many times "
        "as the versions between add up to (no commit columns).",
    ),
]
ScanEngine = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="auto|local|spark",
        help="auto: a --count that Lance's manifests answer exactly (no condition, or one the "
        "partitions decide whole) is answered from them, and a read with nothing left for "
        "Spark to evaluate that plans at most --local-max-bytes is read in this process; the "
        "rest goes to Spark. local: in this process, or exit 2 saying why not. spark: always "
        "Spark (so is any --master, --remote, --conf, LANCENS_SPARK_MASTER, SPARK_REMOTE or a "
        "profile's spark settings).",
    ),
]
ScanLocalMaxBytes = Annotated[
    str,
    typer.Option(
        "--local-max-bytes",
        metavar="SIZE",
        help="The most data files (as the manifests record them) a read in this process may "
        "plan, e.g. 64MiB, 1GiB (--engine auto).",
    ),
]
ScanExplain = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="Show the tables chosen per spec version, the filters pushed and the "
        "physical plan; reads no rows.",
    ),
]


def scan(
    identifier: ScanTarget = None,
    where: ScanWhere = None,
    columns: ScanColumns = None,
    limit: ScanLimit = None,
    count: ScanCountOnly = False,
    to: ScanTo = None,
    fmt: ScanFormat = "parquet",
    explain: ScanExplain = False,
    version_as_of: VersionAsOf = None,
    timestamp_as_of: TimestampAsOf = None,
    since_version: ScanSinceVersion = None,
    since_timestamp: ScanSinceTimestamp = None,
    changes: ScanChanges = False,
    net: ScanNet = False,
    master: Master = None,
    remote: Remote = None,
    conf: Conf = None,
    engine: ScanEngine = "auto",
    local_max_bytes: ScanLocalMaxBytes = "64MiB",
) -> None:
    """Read rows with Spark through the lancens data source: print them, count them, or
    write them as Parquet, CSV or JSON files.

    A read resolves __manifest once and reads every partition table at the version it
    publishes, so it sees each write whole or not at all. With --since-version (or
    --since-timestamp) only the rows appended after that version are read, each once (with ID:
    after that version of the table; 0: every row); what cannot be told as appends (a delete,
    an overwrite, a restore) is refused in words, before Spark starts; --changes reads them
    too, every row inserted or deleted with the version that did it (--net: the net effect).
    A --count that Lance's
    manifests answer (no condition, or one the partitions decide whole) needs no Spark, and a
    small read with nothing left for Spark to evaluate is read in this process (--engine).
    """

    from lancens_cli.pipeline.scan import check_request, run_scan
    from lancens_cli.pipeline.spark_session import DEFAULT_MASTER, runs_on

    asked = {
        "identifier": identifier,
        "where": where,
        "count": count,
        "to": to,
        "fmt": fmt,
        "explain": explain,
        "version_as_of": version_as_of,
        "timestamp_as_of": timestamp_as_of,
        "since_version": since_version,
        "since_timestamp": since_timestamp,
        "changes": changes,
        "net": net,
    }
    request = _request(asked, columns, limit)
    started = time.monotonic()
    named = spark_named(master, conf, remote)
    why_spark = _without_spark(request, engine, named, local_max_bytes, started)
    if why_spark is None:
        return
    check_request(request)  # a bad --where, or an incremental read refused: before Spark starts
    if explain and named is None:
        master = DEFAULT_MASTER  # the JVM's plan: a Spark Connect client cannot reach it
    message(f"scan: starting Spark ({why_spark})")
    # while files are written, a bar of Spark tasks (on a terminal only)
    progress = spark_progress("scan --to") if to else nullcontext(lambda spark: spark)
    with progress as watch:
        spark = watch(spark_session(master, conf, remote))
        message(f"scan: reading (Spark on {runs_on(spark)})")
        result = run_scan(spark, request)
    if explain:
        result.engine_reason = why_spark
    _report(result, explain, time.monotonic() - started)


def _without_spark(
    request: Any, engine: str, named: str | None, max_bytes: str, started: float
) -> str | None:
    """Answer without Spark when the engine allows it: from Lance's manifests (a count), or
    read in this process (a small read with nothing left for Spark). None: answered; else why
    Spark reads it."""
    from lancens_cli.pipeline.local_read import LocalRead, plan_local
    from lancens_cli.pipeline.scan import ScanCount, count_from_manifests

    if engine not in ("auto", "local", "spark"):
        raise InvalidInputError(f"--engine {engine!r}: auto, local or spark")
    limit = parse_size("--local-max-bytes", max_bytes)
    if engine == "spark":
        return "--engine spark"
    if named is not None and engine == "auto":
        return f"{named} names a Spark"
    if request.count and not request.explain:
        counted = count_from_manifests(request)
        if counted is not None:
            _report(ScanCount(counted), False, time.monotonic() - started, "Lance's manifests")
            return None
    local = plan_local(request, limit if engine == "auto" else sys.maxsize)
    if not isinstance(local, LocalRead):
        if engine == "local":
            raise InvalidInputError(f"--engine local: {local}; the read needs Spark")
        return local
    result = local.run()
    _report(result, request.explain, time.monotonic() - started, "in this process")
    return None


def _request(asked: dict[str, Any], columns: str | None, limit: int | None) -> Any:
    """The scan the options ask for, checked before Spark starts (exit 2), with the root, its
    storage options, the `--columns` list and what the terminal implies."""
    from lancens_cli.pipeline.scan import TERMINAL_LIMIT, ScanRequest, require_output_format

    if sum(bool(asked[x]) for x in ("count", "to", "explain")) > 1:
        raise InvalidInputError("--count, --to and --explain exclude one another")
    if asked["net"] and not asked["changes"]:
        raise InvalidInputError("--net is of the change feed: give --changes too")
    since = asked["since_version"] is not None or asked["since_timestamp"] is not None
    if asked["changes"] and not since:
        raise InvalidInputError(
            "--changes reads the changes after a version: give --since-version (0: from the "
            "start) or --since-timestamp"
        )
    require_output_format(asked["fmt"])
    wanted = [c.strip() for c in columns.split(",")] if columns is not None else None
    if wanted is not None and not all(wanted):
        raise InvalidInputError("--columns: give column names separated by commas")
    tty = sys.stdout.isatty()
    if limit is None and tty and not session().json:
        limit = TERMINAL_LIMIT
    ns = session().namespace
    ns.require_root()
    return ScanRequest(
        root=ns.config.root,
        storage=dict(ns.config.storage_options),
        delimiter=session().delimiter,
        columns=wanted,
        limit=limit,
        stream=not tty and not session().json,
        **asked,
    )


def _report(result: Any, explain: bool, seconds: float, engine: str = "Spark") -> None:
    """The result on stdout, what happened on stderr (`engine`: what answered)."""
    from lancens_cli.pipeline.scan import ScanCount, ScanStream, ScanWritten

    if isinstance(result, ScanStream):
        _print_stream(result)
        message(f"scan: done in {seconds:.1f}s ({engine})")
        return
    if isinstance(result, ScanCount) and not session().json:
        typer.echo(str(result.count))
    else:
        session().emit(result)
    if isinstance(result, ScanWritten):
        message(f"scan: wrote {result.format} files to {result.path} in {seconds:.1f}s ({engine})")
    elif explain and not session().json:
        _print_explain(result)
    elif getattr(result, "truncated", False):
        message(
            f"scan: first {plural(len(result.rows), 'row')} shown in {seconds:.1f}s "
            f"({engine}); --limit for more"
        )
    else:
        message(f"scan: done in {seconds:.1f}s ({engine})")


def _print_stream(result) -> None:
    write = sys.stdout.write
    for row in result.rows:
        write(plain_row(row) + "\n")


def _print_explain(result) -> None:
    engine = "this process" if result.engine == "local" else "Spark"
    message(f"read by {engine}: {result.engine_reason}")
    total = "" if result.partitions_total is None else f" of {result.partitions_total}"
    tables = noun(result.partitions_total or len(result.tables), "table")
    slices = plural(result.slices, "Spark task" if result.engine == "spark" else "slice")
    message(f"{len(result.tables)}{total} {tables} read, in {slices}")
    message(f"pushed to lancens: {' AND '.join(result.pushed) or '(nothing)'}")
    message(f"left to Spark: {result.left_to_spark or '(nothing)'}")
    message("physical plan:" if result.engine == "spark" else "plan:")
    message(result.plan)
