"""`lancens join`: join two partitioned namespaces on Spark, partition group by partition group.

The Spark pipeline and the join planner are imported inside the commands so that `lancens --help`
starts without pyspark, pyarrow or Lance.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

import typer

from lancens_cli.cli.options import (
    Conf,
    JoinKeys,
    LeftRoot,
    Master,
    Remote,
    RightRoot,
    SinceTimestamp,
    SinceVersion,
    TimestampAsOf,
    VersionAsOf,
)
from lancens_cli.cli.output import message
from lancens_cli.cli.progress import spark_progress
from lancens_cli.cli.session import session
from lancens_cli.cli.spark_options import spark_session
from lancens_cli.cli.views import join_explain_lines
from lancens_cli.errors import InvalidInputError

DEFAULT_LIMIT = 20


JoinHow = Annotated[str, typer.Option("--how", help="inner or left (outer).")]
JoinColumns = Annotated[
    list[str] | None,
    typer.Option(
        "--columns",
        "-c",
        metavar="a,l.b,r.c",
        help="Output columns (output names, or l.<col> / r.<col>), in this order.",
    ),
]
JoinWhere = Annotated[
    str | None,
    typer.Option(
        "--where",
        "-w",
        metavar="SQL",
        help="Spark SQL condition over any output column (or l.<col> / r.<col>), applied to "
        "the joined rows before --columns picks what is shown.",
    ),
]
JoinTo = Annotated[
    str | None,
    typer.Option("--to", metavar="PATH", help="Write the rows as files here (a new path)."),
]
JoinFormat = Annotated[str, typer.Option("--format", help="Format of --to: parquet, csv, json.")]
JoinLimit = Annotated[
    int | None,
    typer.Option(
        "--limit",
        "-n",
        min=0,
        help=f"Rows to print (default {DEFAULT_LIMIT}; 0: all), or to write with --to.",
    ),
]
JoinCountOnly = Annotated[bool, typer.Option("--count", help="Print the number of rows only.")]
JoinExplainOnly = Annotated[
    bool,
    typer.Option("--explain", help="Print the partition groups and Spark's physical plan."),
]


def join(
    left_root: LeftRoot,
    right_root: RightRoot,
    on: JoinKeys = ...,  # type: ignore[assignment]
    how: JoinHow = "inner",
    columns: JoinColumns = None,
    where: JoinWhere = None,
    to: JoinTo = None,
    fmt: JoinFormat = "parquet",
    limit: JoinLimit = None,
    count: JoinCountOnly = False,
    explain: JoinExplainOnly = False,
    version_as_of: VersionAsOf = None,
    timestamp_as_of: TimestampAsOf = None,
    since_version: SinceVersion = None,
    since_timestamp: SinceTimestamp = None,
    master: Master = None,
    remote: Remote = None,
    conf: Conf = None,
) -> None:
    """Join two partitioned namespaces on Spark without a shuffle when their layouts allow.

    Plans like join-plan (every spec version holding partitions), pins each partition table's
    published version in the driver, then runs one Spark task per partition group; each task
    joins its group's tables in Arrow, so rows are never shuffled. When the layouts are not
    compatible, says why on stderr and runs an ordinary Spark (shuffle) join.

    Time travel: --timestamp-as-of reads both roots as of one moment; --version-as-of N reads
    each root as its own __manifest version N published it. --since-version A (or
    --since-timestamp) joins only the rows the left root gained after its __manifest version
    A (an incremental read, as `scan --since-version`) with the whole right side.

    A column name found on both sides is output as l_<name> and r_<name>; other columns keep
    their names. Prints rows (--limit), a --count, or writes files (--to). Exit codes: 2 for a
    bad --on, --how, --columns, --where or a root that is not a partitioned namespace, and for
    an incremental join that cannot be told as appends (all found before Spark starts); 3 when
    a root or the --since-version does not exist; 4 when --to exists.
    """

    from lancens_cli.pipeline import join as job_module
    from lancens_cli.pipeline.scan import require_output_format
    from lancens_cli.pipeline.task_failures import spark_errors

    if session().root is not None:
        raise InvalidInputError("join takes LEFT_ROOT and RIGHT_ROOT as arguments, not --root")
    if sum((count, explain, to is not None)) > 1:
        raise InvalidInputError("give at most one of --count, --explain and --to")
    require_output_format(fmt)
    since = None
    if since_version is not None or since_timestamp is not None:
        since = (None if since_version is None else str(since_version), since_timestamp)
    job, where = _plan(
        left_root, right_root, on, how, columns, where, version_as_of, timestamp_as_of, since
    )
    job.keys_never_null = to is None  # files: every column nullable, as Spark writes a join
    started = time.monotonic()
    spark = spark_session(master, conf, remote)
    _quiet_analysis_log()
    with spark_errors("the join"):
        df = _filtered(job.dataframe(spark), where).select(*[c.name for c in job.selected])
        if explain:
            result: Any = job_module.JoinExplain(job, job_module.physical_plan(df))
            if session().json:
                session().emit(result)
            else:
                typer.echo("\n".join(join_explain_lines(result)))
            return
        if to is not None:
            out = df.limit(limit) if limit else df
            with spark_progress("join --to") as watch:  # a bar of Spark tasks, on a terminal
                result = job_module.write_files(watch(spark), out, to, fmt, job.spj)
        elif count:
            result = job_module.JoinCount(df.count(), job.spj)
        else:
            limit = DEFAULT_LIMIT if limit is None else limit
            result = job_module.collect_rows(df, limit, job.spj)
    session().emit(result)
    if not session().json:
        kind = "storage-partitioned" if job.spj else "shuffle"
        message(f"{kind} join done in {time.monotonic() - started:.1f}s")


def _plan(
    left_root: str,
    right_root: str,
    on: list[str],
    how: str,
    columns: list[str] | None,
    where: str | None,
    version_as_of: int | None,
    timestamp_as_of: str | None,
    since: tuple[str | None, str | None] | None = None,
) -> tuple[Any, str | None]:
    """The join job, planned and pinned in the driver, and `--where` as Spark is to read it:
    whatever is wrong with them is refused before Spark starts."""
    from lancens_cli.pipeline import join as job_module
    from lancens_cli.service.history.incremental import FLAG_NAMES
    from lancens_cli.service.join.plan import parse_on

    keys = [parse_on(text) for text in on]
    wanted = job_module.parse_columns(columns)
    left = session().namespace_at(left_root)
    right = session().namespace_at(right_root).as_of(version_as_of, timestamp_as_of)
    left = left.as_of(version_as_of, timestamp_as_of)
    job = job_module.plan_job(
        left,
        right,
        keys,
        how,
        wanted,
        filtered=where is not None,
        since=since,
        since_names=FLAG_NAMES,
    )
    checked = job_module.checked_where(where, job)
    job.pin()
    if not job.spj and not session().json:
        message(f"join: no storage-partitioned join ({job.fallback_reasons[0]}); shuffling")
    return job, checked


def _quiet_analysis_log() -> None:
    """PySpark logs every analysis error with its JVM trace; ours is one line (unless --debug)."""
    if not session().debug:
        logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


def _filtered(df: Any, where: str | None) -> Any:
    """`--where` as Spark SQL over the output columns; a bad condition is invalid input."""
    if where is None:
        return df

    try:
        return df.filter(where)
    except Exception as exc:  # Spark's AnalysisException / ParseException
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InvalidInputError(f"--where {where!r}: {first}") from None
