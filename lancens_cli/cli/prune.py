"""`lancens prune`.

The service modules and the Spark pipeline are imported inside the command so that `lancens --help`
starts without pyspark, pyarrow or Lance.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lancens_cli.cli.common import confirm_destruction
from lancens_cli.cli.options import (
    Conf,
    DryRun,
    ForceWindow,
    Grace,
    Master,
    OlderThan,
    Remote,
    Retain,
    Yes,
)
from lancens_cli.cli.output import message
from lancens_cli.cli.partition_option import Partition, SpecVersion, partition_target
from lancens_cli.cli.progress import freed_progress_bar
from lancens_cli.cli.session import session
from lancens_cli.cli.spark_options import spark_session
from lancens_cli.cli.views import prune_title
from lancens_cli.config import load_spark_profile
from lancens_cli.errors import ExitCode
from lancens_cli.models import Result
from lancens_cli.words import plural

if TYPE_CHECKING:
    from lancens_cli.service.prune.work import PruneWork


def _default_parallel() -> int:
    return min(32, (os.cpu_count() or 2) * 4)  # I/O bound: more threads than cores


Parallel = Annotated[
    int | None,
    typer.Option(
        "--parallel",
        min=1,
        help="Tables processed at once (default: 4 x CPUs); with Spark, per task.",
    ),
]
DeleteRateLimit = Annotated[
    int | None,
    typer.Option(
        "--delete-rate-limit",
        min=1,
        metavar="N",
        help="Delete at most N objects a second over the whole run, Lance's cleanups included "
        "(to spare a shared bucket's request budget). Default: no limit.",
    ),
]
Full = Annotated[
    bool,
    typer.Option(
        "--full", help="Evaluate every table, also those the last run's record shows unchanged."
    ),
]
OptimizeIndexes = Annotated[
    bool,
    typer.Option(
        "--optimize-indexes",
        help="Also bring every table's indexes current (rows added since a build), and "
        "build the namespace's index definitions a partition table lacks.",
    ),
]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose",
        help="On a terminal, list every table, also those with nothing to do (a pipe and "
        "--json always do).",
    ),
]


@dataclass
class PruneOnTerminal(Result):
    """A prune report as a terminal shows it without --verbose: the summary and the tables with
    something to do (cli/views/catalog.py); its JSON is the report's."""

    report: Any

    def to_json(self) -> Any:
        return self.report.to_json()


def prune(
    idents: Annotated[
        list[str] | None,
        typer.Argument(metavar="[ID]...", help="Tables or namespaces to prune (default: all)."),
    ] = None,
    older_than: OlderThan = "7d",
    retain: Retain = 1,
    grace: Grace = "24h",
    compact: Annotated[
        bool, typer.Option("--compact", help="Also compact small fragments of tables.")
    ] = False,
    optimize_indexes: OptimizeIndexes = False,
    dry_run: DryRun = False,
    yes: Yes = False,
    force: ForceWindow = False,
    parallel: Parallel = None,
    full: Full = False,
    delete_rate_limit: DeleteRateLimit = None,
    verbose: Verbose = False,
    master: Master = None,
    remote: Remote = None,
    conf: Conf = None,
    partition: Partition = None,
    spec_version: SpecVersion = None,
) -> None:
    """Expire old table and __manifest versions and remove debris, keeping every version a
    reader can be sent to (published, tagged, branched, cloned, newest, young).

    Each run leaves a record (.lancens-prune/record.json.gz) of what it saw; the next run with
    the same options skips a table whose files, published versions and clones are unchanged
    and in which nothing has aged into the policy. --full ignores the record.

    With --master (or --conf, or a profile's [spark] settings) the per-table work runs as
    Spark tasks, one per group of tables; the rest stays on this machine.

    --optimize-indexes: Lance's index optimisation on every table, the namespace's index
    definitions built where a partition table lacks them, published in one __manifest commit.

    Exit codes: 0 done or nothing to do, 4 another prune runs on this root, 5 refused by a
    safety rail, 6 some tables failed (the rest done).

    On a terminal only the tables with something to do are listed (--verbose: every table).
    """
    from lancens_cli.service.prune.policy import PrunePolicy
    from lancens_cli.service.prune.quiet import answer, may_answer
    from lancens_cli.service.prune.work import PruneWork
    from lancens_cli.store.storage import Storage

    policy = PrunePolicy.from_options(older_than, retain, grace, force)
    spark = _wants_spark(master, conf, remote)
    if spark:
        from lancens_cli.pipeline.spark_session import require_pyspark

        require_pyspark()  # before any question or change: exit 2 with the install hint
    targets = [session().ident(i) for i in idents or []]
    named = partition_target(None, partition, spec_version)
    if named is not None:  # a partition table by its values, beside any IDs
        targets.append(named)
    config = session().config()
    # Locally, Lance is opened only when the run must look (service/prune/quiet.py); an object
    # store's root is the namespace's own, its client made once
    storage = Storage(config) if config.scheme == "file" else session().namespace.storage
    if not dry_run:
        storage.require_root()
        confirm_destruction(
            f"prune {storage.root_uri}: delete versions older than {older_than} and debris "
            f"older than {grace}",
            yes,
        )
    work = PruneWork(compact, bool(session().indexes), optimize_indexes)
    report = None
    if may_answer(storage, work, dry_run=dry_run, full=full, named=bool(targets), spark=spark):
        report = answer(storage, policy, work, session().delimiter)
    if report is None:
        spark_args = (master, conf, remote) if spark else None
        report = _run(targets, policy, dry_run, work, parallel, full, delete_rate_limit, spark_args)
    _emit(report, dry_run, verbose)


def _emit(report, dry_run: bool, verbose: bool) -> None:
    """The report on stdout (on a terminal without --verbose, only the tables with something
    to do), its summary on stderr; exit 6 when tables failed."""
    brief = not (verbose or session().json) and sys.stdout.isatty()
    session().emit(PruneOnTerminal(report) if brief else report)
    message(prune_title(report) + ("; dry run: nothing changed" if dry_run else ""))
    if report.failed:
        names = ", ".join(t.table or t.location for t in report.failed)
        message(f"{plural(len(report.failed), 'table')} failed: {names}; rerun prune for them")
        raise typer.Exit(ExitCode.PARTIAL)


def _run(
    targets,
    policy,
    dry_run: bool,
    work: PruneWork,
    parallel: int | None,
    full: bool,
    delete_rate_limit: int | None,
    spark: tuple | None,
):
    """The run that looks at the root (service/prune/run.py), in threads or on Spark; `work`:
    the `PruneWork` of --compact, --indexes, --optimize-indexes."""
    from lancens_cli.service.prune.run import prune as run_prune

    ns = session().namespace
    tasks = _spark_tables(*spark) if spark else None
    with freed_progress_bar("pruning", "tables") as start:
        return run_prune(
            ns,
            targets,
            policy,
            work=work,
            dry_run=dry_run,
            parallel=parallel or _default_parallel(),
            delimiter=session().delimiter,
            progress=start,
            tasks=tasks,
            full=full,
            delete_rate_limit=delete_rate_limit,
        )


def _wants_spark(master: str | None, conf: list[str] | None, remote: str | None) -> bool:
    """Spark was asked for: `--master`, `--remote`, `--conf`, or the profile's `[spark]` table.

    `LANCENS_SPARK_MASTER` alone does not send a prune to Spark: it only says where Spark runs
    when a command runs Spark.
    """
    if master is not None or remote is not None or conf:
        return True

    return bool(load_spark_profile(session().profile or os.environ.get("LANCENS_PROFILE")))


def _spark_tables(master: str | None, conf: list[str] | None, remote: str | None):
    """The runner that sends the per-table work to Spark tasks."""
    from lancens_cli.pipeline.prune_tasks import SparkTables
    from lancens_cli.pipeline.spark_session import runs_on

    message("prune: starting Spark")
    spark = spark_session(master, conf, remote)
    message(f"prune: per-table work as Spark tasks on {runs_on(spark)}")
    return SparkTables(spark)
