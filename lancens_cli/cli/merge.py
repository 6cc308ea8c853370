"""`lancens merge --from FILE --on KEY`: an upsert into a partitioned namespace, one commit.

The service and store modules are imported inside the command so that `lancens --help` starts
without pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lancens_cli.cli.common import confirm_destruction
from lancens_cli.cli.options import Conf, DryRun, Master, Remote, Yes
from lancens_cli.cli.output import message
from lancens_cli.cli.progress import progress_bar, spark_progress
from lancens_cli.cli.session import session
from lancens_cli.cli.spark_options import spark_session
from lancens_cli.cli.views import summary_of

MergeTarget = Annotated[
    str | None,
    typer.Argument(
        metavar="[ID]",
        help="One table to merge into (default: the partitioned namespace at the root).",
    ),
]
MergeOn = Annotated[
    list[str],
    typer.Option("--on", help="The key column(s) rows are matched by (repeat, or a,b)."),
]
WhenMatched = Annotated[
    str,
    typer.Option("--when-matched", help="update (the source row replaces it) or ignore."),
]
WhenNotMatched = Annotated[
    str,
    typer.Option("--when-not-matched", help="insert (the source row is added) or ignore."),
]
DeleteUnmatched = Annotated[
    bool,
    typer.Option(
        "--delete-not-matched-by-source",
        help="Also delete the rows whose key the source lacks (among those --where holds "
        "for; without it, every row): the namespace then mirrors the source there.",
    ),
]
MergeSource = Annotated[
    str | None,
    typer.Option(
        "--from",
        metavar="SOURCE",
        help="The rows to merge: a Parquet, Arrow, CSV, JSON lines or Lance file; on Spark "
        "also a directory or glob of Parquet, ORC, CSV or JSON files, or s3://, gs://.",
    ),
]
MergeFormat = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Format of --from: parquet, arrow, csv, jsonl, lance; on Spark parquet, orc, "
        "csv, jsonl (default: from the names).",
    ),
]
MergeEngine = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="auto|local|spark",
        help="auto: Spark for a source larger than --local-max-bytes, a directory or glob of "
        "files, one on an object store, or when --master, --remote or --conf is given; else "
        "this process. local / spark: always that one.",
    ),
]
MergeLocalMaxBytes = Annotated[
    str,
    typer.Option(
        "--local-max-bytes",
        metavar="SIZE",
        help="The largest source file merged in this process (--engine auto), e.g. 512MiB.",
    ),
]
UnmatchedWhere = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        help="With --delete-not-matched-by-source: the rows it may delete, as `delete "
        "--where` reads a condition. Give it once.",
    ),
]


def merge(
    table: MergeTarget = None,
    source: MergeSource = ...,  # type: ignore[assignment]
    fmt: MergeFormat = None,
    on: MergeOn = ...,  # type: ignore[assignment]
    when_matched: WhenMatched = "update",
    when_not_matched: WhenNotMatched = "insert",
    delete_unmatched: DeleteUnmatched = False,
    where: UnmatchedWhere = None,
    dry_run: DryRun = False,
    yes: Yes = False,
    engine: MergeEngine = "auto",
    local_max_bytes: MergeLocalMaxBytes = "512MiB",
    master: Master = None,
    remote: Remote = None,
    conf: Conf = None,
) -> None:
    """Upsert rows into a partitioned namespace by a key (MERGE INTO).

    Each source row is matched by its key against the rows every partition table publishes;
    a matched row is replaced by the source row (--when-matched ignore: kept), an unmatched
    one inserted (--when-not-matched ignore: left out). Rows are routed by the current spec,
    the rows they replace deleted, all in one __manifest commit; a row whose partition values
    change moves. A key twice in the source, or matching two rows, is refused before
    anything is written; a NULL key matches nothing. --delete-not-matched-by-source deletes,
    in the same commit, the rows (--where: those a condition holds for) whose key the source
    lacks; it asks on a terminal and needs --yes off one. With ID, into that one table (not a
    partition table): Lance's merge_insert on its newest version, with the same refusals.
    On Spark (--engine), tasks read and write the source rows; only its keys come to this
    process.
    """
    from lancens_cli.cli.options import one_condition
    from lancens_cli.errors import InvalidInputError
    from lancens_cli.pipeline.merge_job import SparkMerge
    from lancens_cli.service.partitioned.merge import Unmatched, merge_rows
    from lancens_cli.service.partitioned.write import source_types
    from lancens_cli.store.sources import open_source

    if source is None:
        raise typer.BadParameter("give the rows to merge: --from FILE")
    if where and not delete_unmatched:
        raise InvalidInputError("--where is of --delete-not-matched-by-source: give it too")
    unmatched = Unmatched(one_condition(where) if where else None) if delete_unmatched else None
    why_spark = _why_spark(engine, source, fmt, local_max_bytes, master, remote, conf)
    if table is not None:
        if why_spark is not None and (engine == "spark" or master or remote or conf):
            raise InvalidInputError(
                "a merge into one table runs in this process: drop --engine spark, --master, "
                "--remote and --conf (Spark merges into the partitioned root: drop ID)"
            )
        data = open_source(source, fmt, target=_table_types(table, source, fmt))
        _merge_into_table(table, data, on, when_matched, when_not_matched, unmatched, dry_run, yes)
        return
    if unmatched is not None and not dry_run:  # a bad condition is said before the question
        from lancens_cli.service.partitioned.write import partitioned_target

        unmatched.node(partitioned_target(session().namespace)[1].schema)
        rows = f"the rows where {unmatched.where}" if unmatched.where else "every row"
        confirm_destruction(f"delete {rows} whose key the source lacks", yes)
    if why_spark is not None:
        asked = SparkMerge(
            [source], fmt, on, when_matched, when_not_matched, unmatched, dry_run, session().debug
        )
        result = _merge_on_spark(asked, why_spark, master, remote, conf)
    else:
        data = open_source(source, fmt, target=source_types(session().namespace, source, fmt))
        with progress_bar("merging into partition tables") as start:
            result = merge_rows(
                session().namespace,
                data,
                on,
                when_matched=when_matched,
                when_not_matched=when_not_matched,
                dry_run=dry_run,
                progress=None if dry_run else start,
                unmatched=unmatched,
            )
    session().emit(result)
    message(summary_of(result))


def _why_spark(
    engine: str,
    source: str,
    fmt: str | None,
    max_bytes: str,
    master: str | None,
    remote: str | None,
    conf: list[str] | None,
) -> str | None:
    """Why the merge runs on Spark, in words (None: in this process). An Arrow file or a Lance
    dataset is read here only: refused on Spark, before it starts."""
    import glob
    import os

    from lancens_cli.config import parse_size
    from lancens_cli.errors import InvalidInputError
    from lancens_cli.pipeline.merge_job import FORMATS
    from lancens_cli.store.sources import format_of_name

    if engine not in ("auto", "local", "spark"):
        raise InvalidInputError(f"--engine {engine!r}: auto, local or spark")
    limit = parse_size("--local-max-bytes", max_bytes)
    dataset = os.path.isdir(os.path.join(source, "_versions"))
    here_only = dataset or (fmt or format_of_name(source)) in ("arrow", "lance")
    why = _named_spark(engine, master, remote, conf)
    if why is not None and here_only:
        raise InvalidInputError(
            f"--from {source}: an Arrow file or a Lance dataset is merged in this process "
            "(--engine local, no --master, --remote or --conf)"
        )
    if why is not None or engine == "local" or here_only:
        return why
    if source.startswith(("s3://", "gs://")):
        return "the source is on an object store"
    if glob.has_magic(source):
        return "the source is a glob"
    if os.path.isdir(source):
        return "the source is a directory of files"
    readable = (fmt or format_of_name(source)) in FORMATS  # one Spark reads
    if readable and os.path.isfile(source) and os.path.getsize(source) > limit:
        return f"the source is larger than --local-max-bytes ({max_bytes})"
    return None


def _named_spark(
    engine: str, master: str | None, remote: str | None, conf: list[str] | None
) -> str | None:
    """What asks for Spark by name: `--engine spark`, or a flag naming a Spark."""
    if engine == "spark":
        return "--engine spark"
    if engine == "auto" and (master is not None or remote is not None or conf):
        return "--master, --remote or --conf"
    return None


def _merge_on_spark(
    asked: Any, why: str, master: str | None, remote: str | None, conf: list[str] | None
) -> Any:
    """The merge with Spark's tasks reading and writing the source rows."""
    from lancens_cli.pipeline.merge_job import merge_on_spark

    def start(watch: Any) -> Any:
        if not session().json:
            message(f"merge: starting Spark ({why})")
        return watch(spark_session(master, conf, remote, data_source=False))

    with spark_progress("merge") as watch:
        return merge_on_spark(lambda: start(watch), session().namespace, asked)


def _table_types(table: str, source: str, fmt: str | None) -> Any:
    """The table's schema when the source is CSV (its text columns stay text), else None."""
    from lancens_cli.service.catalog.table_rows.delete import changed_table
    from lancens_cli.store.sources import is_csv

    if not is_csv(source, fmt):
        return None
    ns, ident, delimiter = session().namespace, session().ident(table), session().delimiter
    return changed_table(ns, ident, delimiter, "merge")[0].schema


def _merge_into_table(
    table: str,
    data: Any,
    on: list[str],
    when_matched: str,
    when_not_matched: str,
    unmatched: Any,
    dry_run: bool,
    yes: bool,
) -> None:
    from lancens_cli.service.catalog.table_rows.delete import changed_table
    from lancens_cli.service.catalog.table_rows.merge import merge_into_table

    ns, ident, delimiter = session().namespace, session().ident(table), session().delimiter
    if unmatched is not None and not dry_run:  # bad input is said before the question
        unmatched.node(changed_table(ns, ident, delimiter, "merge")[0].schema)
        rows = f"the rows where {unmatched.where}" if unmatched.where else "every row"
        confirm_destruction(f"delete {rows} of {ident.display()} whose key the source lacks", yes)
    result = merge_into_table(
        ns, ident, data, on, when_matched, when_not_matched, unmatched, dry_run, delimiter
    )
    session().emit(result)
    message(summary_of(result))
