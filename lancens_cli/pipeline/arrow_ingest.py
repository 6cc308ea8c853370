"""`lancens ingest` of Parquet and ORC at Arrow speed: no row crosses the JVM.

Spark's Parquet reader would hand every row to the JVM and back to a Python worker as Arrow
before it is split and written. Here Spark only distributes the work: the driver lists the
files' row groups (ORC: stripes) from their footers, one Spark job runs one task per group of
them (`spark.range(...).mapInArrow`), and each task reads its row groups with pyarrow, conforms
them to the columns Spark would have given (`files_source.py`), and hands them to the same
writer the `lancens` data source uses (`write.py`): the task writes fragments, the driver
commits them all in one `__manifest` commit, or aborts and removes what the tasks wrote. The
commit path, the checks and the errors are the data source's; only the road of the rows is
shorter. A task holds about one chunk of rows (`write_task.CHUNK_ROWS`) at a time.

pyarrow's Parquet and ORC readers are imported inside the functions that read, which PySpark
pickles by value to the tasks.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lancens_cli.pipeline.files_source import conform_batch, open_source
from lancens_cli.pipeline.session import task_slots

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lancens_cli.pipeline.write import LancensWriter

FORMATS = ("parquet", "orc")  # what pyarrow reads by row group (stripe) natively
_MESSAGE_SCHEMA = pa.schema([("message", pa.binary())])


def row_groups(paths: list[str], fmt: str, base: str | None, storage: dict[str, str]) -> list:
    """(path, row group) of every source file, from the footers; an empty file has none."""
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    units = []
    for path in paths:
        with open_source(base, storage, path) as handle:
            if fmt == "parquet":
                count = pq.ParquetFile(handle).num_row_groups
            else:
                count = orc.ORCFile(handle).nstripes
        units += [(path, i) for i in range(count)]
    return units


def _unit_batches(
    units: list[tuple[str, int]],
    fmt: str,
    base: str | None,
    storage: dict[str, str],
    target: Any,
) -> Iterator[Any]:
    """The rows of `units`, row group by row group, in Spark's columns and types."""
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    for path, part in units:
        with open_source(base, storage, path) as handle:
            if fmt == "parquet":
                batches: Iterable[Any] = pq.ParquetFile(handle).iter_batches(row_groups=[part])
            else:
                batches = [orc.ORCFile(handle).read_stripe(part)]
            for batch in batches:
                yield conform_batch(batch, target, path)


def _task_function(
    writer: LancensWriter,
    units: list[tuple[str, int]],
    fmt: str,
    base: str | None,
    storage: dict[str, str],
    target: Any,
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """What each task runs: its ids' row groups through the writer, one commit message."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        mine = [units[i] for batch in batches for i in batch.column("id").to_pylist()]
        if mine:
            message = writer.write(_unit_batches(mine, fmt, base, storage, target))
            yield pa.RecordBatch.from_pydict(
                {"message": [pickle.dumps(message)]}, schema=_MESSAGE_SCHEMA
            )

    return run


def write_row_groups(
    spark: SparkSession,
    writer: LancensWriter,
    units: list[tuple[str, int]],
    fmt: str,
    base: str | None,
    storage: dict[str, str],
    target: Any,
) -> None:
    """Run the job and commit what its tasks wrote, or abort: the data source's protocol."""
    messages: list[Any] = []
    try:
        if units:
            count = max(1, min(len(units), task_slots(spark)))
            run = _task_function(writer, units, fmt, base, storage, target)
            rows = spark.range(0, len(units), 1, count).mapInArrow(run, "message binary")
            messages = [pickle.loads(row["message"]) for row in rows.collect()]
    except BaseException:
        writer.abort(messages)
        raise
    writer.commit(messages)
