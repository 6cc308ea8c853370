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

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lancens_cli.pipeline.spark_session import cancelled_on_interrupt, is_connect, task_slots
from lancens_cli.pipeline.task_failures import from_spark, stop_if_interrupted
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.compact import Compaction
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.report import TableStatus
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
_ROW_SCHEMA = pa.schema([("row", pa.string())])


def groups_of(count: int, slots: int) -> int:
    """How many tasks for `count` tables: every slot busy, at most TABLES_PER_TASK per task."""
    if count == 0:
        return 0
    return min(count, max(slots, -(-count // TABLES_PER_TASK)))


def _task_function(
    job: dict[str, Any], groups: list[list[tuple[int, dict]]]
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """What each Spark task runs (`mapInArrow` over one id per task): the group of that id,
    one JSON text per table."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        for batch in batches:
            for group in batch.column("id").to_pylist():
                rows = [json.dumps(row) for row in run_group(job, groups[group])]
                yield pa.RecordBatch.from_pydict({"row": rows}, schema=_ROW_SCHEMA)

    return run


class SparkTables:
    """A `TableRunner` for service/prune/run.py that runs the tables on a Spark session, its
    own or a Spark Connect server's: one DataFrame job, one task per group of tables."""

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
        slots = task_slots(self.spark)
        count = groups_of(len(works), slots)
        if job["delete_rate_limit"]:  # the run's rate, shared by the tasks running at once
            job["delete_rate_limit"] = max(1, job["delete_rate_limit"] // min(count, slots))
        items = [(i, w.to_json()) for i, w in enumerate(works)]
        groups = [items[g::count] for g in range(count)]  # spread big and small tables evenly
        described = _described(
            self.spark, f"lancens prune: {len(works)} table(s) in {count} task(s)"
        )
        with described, cancelled_on_interrupt():  # Ctrl-C cancels the job
            try:
                ids = self.spark.range(0, count, 1, count)  # one id, so one group, per task
                collected = ids.mapInArrow(_task_function(job, groups), "row string").collect()
            except Exception as exc:  # the job failed as a whole: no table's outcome is known
                stop_if_interrupted()
                reason = from_spark(exc, "prune").message
                return [(_unknown(w, reason), None) for w in works]
        done: list[tuple[TableResult, Compaction | None] | None] = [None] * len(works)
        for text in collected:
            row = json.loads(text["row"])
            result = TableResult.from_json(row["result"])
            done[row["index"]] = (result, compaction_from_json(row["compaction"]))
            advance(result.bytes_freed)
        # a table without a row never happens unless Spark lost one: say so, do not guess
        lost = "its Spark task returned no result"
        return [entry or (_unknown(works[i], lost), None) for i, entry in enumerate(done)]


@contextmanager
def _described(spark: SparkSession, text: str) -> Iterator[None]:
    """The job's name in Spark's UI (a session of our own; Connect has no job description)."""
    if is_connect(spark):
        yield
        return
    spark.sparkContext.setJobDescription(text)
    try:
        yield
    finally:
        spark.sparkContext.setJobDescription(None)


def _unknown(work: TableWork, reason: str) -> TableResult:
    result = TableResult(work.plan.object_id, work.plan.location, status=TableStatus.FAILED)
    result.error = f"{reason}; rerun prune"
    return result
