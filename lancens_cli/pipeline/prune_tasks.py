"""`prune --master`: the per-table work of a prune as Spark tasks, one task per group of tables.

The driver does everything up to the per-table plans (the lease, `__manifest`, which versions
of which table stay and why: service/prune/run.py) and everything after (`__manifest` maintenance,
debris, the report, the lease's release). In between, the tables' plans go to Spark as plain
data, split into groups; each task runs its group through `run_group` (service/prune/table.py),
the same `run_table` the local thread pool calls, and returns one JSON-able dict per table.

A table that fails in a task is that table's result (`failed`, exit 6), the rest go on. A task
that dies outright (its worker killed) fails Spark's job: then every table of the run is
reported failed with the reason, since which of them finished cannot be known; each step is
safe to stop anywhere, and the next prune finishes the work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from lancens_cli.pipeline.task_failures import from_spark
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.compact import Compaction
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.table import (
    TableResult,
    TableWork,
    compaction_from_json,
    job_settings,
    run_group,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLES_PER_TASK = 100  # a group: enough tables to outweigh a task's start, few enough to spread


def groups_of(count: int, slots: int) -> int:
    """How many tasks for `count` tables: every slot busy, at most TABLES_PER_TASK per task."""
    if count == 0:
        return 0
    return min(count, max(slots, -(-count // TABLES_PER_TASK)))


def _task(job: dict[str, Any], groups: Iterable[list[tuple[int, dict]]]) -> Iterator[dict]:
    """What a Spark task runs: its partition's group(s) of tables."""
    for group in groups:
        yield from run_group(job, group)


class SparkTables:
    """A `TableRunner` for service/prune/run.py that runs the tables on a Spark session."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __call__(
        self,
        ns: Namespace,
        works: list[TableWork],
        policy: PrunePolicy,
        dry_run: bool,
        parallel: int,
        advance: Callable[[int], None],
    ) -> list[tuple[TableResult, Compaction | None]]:
        if not works:
            return []
        job = job_settings(ns, policy, dry_run, parallel)
        context = self.spark.sparkContext
        count = groups_of(len(works), context.defaultParallelism)
        items = [(i, w.to_json()) for i, w in enumerate(works)]
        groups = [items[g::count] for g in range(count)]  # spread big and small tables evenly
        context.setJobDescription(f"lancens prune: {len(works)} table(s) in {count} task(s)")
        try:
            rows = (
                context.parallelize(groups, count)
                .mapPartitions(lambda part: _task(job, part))
                .collect()
            )
        except Exception as exc:  # the job failed as a whole: no table's outcome is known
            reason = from_spark(exc, "prune").message
            return [(_unknown(w, reason), None) for w in works]
        finally:
            context.setJobDescription(None)
        done: list[tuple[TableResult, Compaction | None]] = [None] * len(works)  # type: ignore[list-item]
        for row in rows:
            result = TableResult.from_json(row["result"])
            done[row["index"]] = (result, compaction_from_json(row["compaction"]))
            advance(result.bytes_freed)
        for i, entry in enumerate(done):
            if entry is None:  # never happens unless Spark lost a row: say so, do not guess
                done[i] = (_unknown(works[i], "its Spark task returned no result"), None)
        return done


def _unknown(work: TableWork, reason: str) -> TableResult:
    result = TableResult(work.plan.object_id, work.plan.location, status="failed")
    result.error = f"{reason}; rerun prune"
    return result
