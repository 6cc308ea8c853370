"""`lancens ingest` of Parquet and ORC at Arrow speed: no row crosses the JVM.

Spark's Parquet reader would hand every row to the JVM and back to a Python worker as Arrow
before it is split and written. Here Spark only distributes the work: the driver lists the
files' row groups (ORC: stripes) from their footers, one Spark job runs one task per group of
them, and each task reads its row groups with pyarrow, conforms
them to the columns Spark would have given (`files_source.py`), and hands them to the same
writer the `lancens` data source uses (`write.py`): the task writes fragments, the driver
commits them all in one `__manifest` commit, or aborts and removes what the tasks wrote. The
commit path, the checks and the errors are the data source's; only the road of the rows is
shorter. A task holds about one chunk of rows (`write_task.CHUNK_ROWS`) at a time.

The job is an RDD of row-group ids (`parallelize(...).mapPartitions`): nothing in it needs
Spark SQL, and a JVM that has just started would spend seconds planning and compiling a
DataFrame query before its first task. A Spark Connect session has no RDDs: there the ids are
`spark.range(...).mapInArrow`.

pyarrow's Parquet and ORC readers are imported inside the functions that read, which PySpark
pickles by value to the tasks.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lancens_cli import interrupt
from lancens_cli.pipeline.files_source import conform_batch, open_source
from lancens_cli.pipeline.spark_session import is_connect, task_slots

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lancens_cli.pipeline.write_commit import LancensWriter

FORMATS = ("parquet", "orc")  # what pyarrow reads by row group (stripe) natively
_MESSAGE_SCHEMA = pa.schema([("message", pa.binary())])


@dataclass(frozen=True)
class RowGroupFiles:
    """Parquet or ORC sources (local, or under an object store's `base`) and the Spark columns
    their rows are conformed to; plain data, pickled to the tasks."""

    paths: list[str]
    fmt: str
    base: str | None
    storage: dict[str, str]
    target: Any  # the Arrow schema of the Spark columns

    @contextmanager
    def _reader(self, path: str) -> Iterator[Any]:
        """pyarrow's ParquetFile or ORCFile over one source, closed after use."""
        import pyarrow.orc as orc
        import pyarrow.parquet as pq

        with open_source(self.base, self.storage, path) as handle:
            yield (pq.ParquetFile if self.fmt == "parquet" else orc.ORCFile)(handle)

    def units(self) -> list[tuple[str, int]]:
        """(path, row group) of every file, from the footers; an empty file has none."""
        found = []
        for path in self.paths:
            with self._reader(path) as reader:
                count = reader.num_row_groups if self.fmt == "parquet" else reader.nstripes
            found += [(path, i) for i in range(count)]
        return found

    def batches(self, units: list[tuple[str, int]]) -> Iterator[Any]:
        """The rows of `units`, row group by row group, in Spark's columns and types."""
        for path, part in units:
            with self._reader(path) as reader:
                if self.fmt == "parquet":
                    read: Iterable[Any] = reader.iter_batches(row_groups=[part])
                else:
                    read = [reader.read_stripe(part)]
                for batch in read:
                    yield conform_batch(batch, self.target, path)


def _task_function(
    work: Callable[[Iterator[Any]], Any], files: RowGroupFiles, units: list[tuple[str, int]]
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """What each task of a Connect job runs: `work` over its ids' row groups, its answer
    pickled."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        mine = [units[i] for batch in batches for i in batch.column("id").to_pylist()]
        if mine:
            answer = work(files.batches(mine))
            yield pa.RecordBatch.from_pydict(
                {"message": [pickle.dumps(answer)]}, schema=_MESSAGE_SCHEMA
            )

    return run


def _rdd_task_function(
    work: Callable[[Iterator[Any]], Any], files: RowGroupFiles, units: list[tuple[str, int]]
) -> Callable[[Iterable[int]], Iterator[Any]]:
    """What each task of an RDD job runs: `work` over its ids' row groups."""

    def run(ids: Iterable[int]) -> Iterator[Any]:
        mine = [units[i] for i in ids]
        if mine:
            yield work(files.batches(mine))

    return run


def over_row_groups(
    spark: SparkSession,
    work: Callable[[Iterator[Any]], Any],
    files: RowGroupFiles,
    units: list[tuple[str, int]],
) -> list[Any]:
    """One job, one task per slot over the row groups, each running `work` over its row
    groups' batches; their answers (one per task that had any)."""
    count = max(1, min(len(units), task_slots(spark)))
    if is_connect(spark):
        run = _task_function(work, files, units)
        rows = spark.range(0, len(units), 1, count).mapInArrow(run, "message binary")
        return [pickle.loads(row["message"]) for row in rows.collect()]
    ids = spark.sparkContext.parallelize(range(len(units)), count)
    return ids.mapPartitions(_rdd_task_function(work, files, units)).collect()


def over_frame(frame: Any, work: Callable[[Iterator[Any]], Any]) -> list[Any]:
    """`work` over each task's batches of a DataFrame; their answers (one per task)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        answer = work(iter(batches))
        yield pa.RecordBatch.from_pydict(
            {"message": [pickle.dumps(answer)]}, schema=_MESSAGE_SCHEMA
        )

    return [
        pickle.loads(row["message"]) for row in frame.mapInArrow(run, "message binary").collect()
    ]


def write_row_groups(spark: SparkSession, writer: LancensWriter, files: RowGroupFiles) -> None:
    """Run the job and commit what its tasks wrote, or abort: the data source's protocol."""
    messages: list[Any] = []
    try:
        units = files.units()
        if units:
            messages = over_row_groups(spark, writer.write, files, units)
        interrupt.checkpoint()  # a Ctrl-C once the tasks are done: abort, publish nothing
    except BaseException:
        writer.abort(messages)
        raise
    writer.commit(messages)
