"""The task side of `lancens join`: a small Python data source, `lancens_join`.

The driver (`pipeline/join.py`) plans the job and hands it over as one JSON option. Each input
partition of the reader is one unit of work that needs nothing but storage:

* mode `join`: one partition group of a storage-partitioned join. The task opens the group's
  left and right partition tables at the versions the driver resolved (it never reads
  `__manifest`), joins them in Arrow and yields the joined record batches. Rows never leave the
  task that read them, so the physical plan has no Exchange.
* mode `side`: one partition table of one side, for the ordinary (shuffle) join Spark runs when
  the two layouts are not compatible.

Lance (through `store.tables`) and pyarrow are imported inside the functions the task calls:
PySpark forks its Python workers from a daemon and Lance is not fork-safe, so nothing
Lance-native may run before a fork.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema

from lancens_cli.config import NamespaceConfig
from lancens_cli.pipeline.task_failures import marked_iter
from lancens_cli.store.storage import Storage

FORMAT = "lancens_join"
BATCH_ROWS = 64 * 1024


def encode_schema(schema: Any) -> str:
    """An Arrow schema as text that survives the trip through a Spark option."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> Any:
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


class JoinPartition(InputPartition):
    """One task's work: a group (mode join) or one partition table (mode side)."""

    def __init__(self, index: int, work: dict[str, Any]) -> None:
        super().__init__(index)
        self.work = work


class LancensJoinSource(DataSource):
    """`spark.read.format("lancens_join").schema(S).option("job", JSON).load()`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        job = json.loads(self.options["job"])
        return from_arrow_schema(decode_schema(job["schema"]))

    def reader(self, schema: Any) -> Any:
        return JoinReader(json.loads(self.options["job"]))


class JoinReader(DataSourceReader):
    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job

    def partitions(self) -> list[JoinPartition]:
        work = self.job["work"] or [None]  # Spark wants at least one partition
        return [JoinPartition(i, w) for i, w in enumerate(work)]

    @marked_iter
    def read(self, partition: JoinPartition) -> Iterator[Any]:  # type: ignore[override]
        if partition.work is None:
            return
        schema = decode_schema(self.job["schema"])
        if self.job["mode"] == "join":
            table = join_group(self.job, partition.work)
        else:
            side = self.job["side"]
            table = read_side(self.job[side], partition.work, schema)
        if table is None or table.num_rows == 0:
            return
        yield from table.select(schema.names).cast(schema).to_batches(max_chunksize=BATCH_ROWS)


def _storage(side: dict[str, Any]) -> Any:
    return Storage(NamespaceConfig(root=side["root"], storage_options=dict(side["storage"])))


def read_side(side: dict[str, Any], tables: list[dict[str, Any]], schema: Any) -> Any:
    """The rows of one side's partition tables, renamed to the output names, in `schema`."""
    import pyarrow as pa

    from lancens_cli.store.tables import open_published

    storage = _storage(side)
    columns = [src for src, _ in side["columns"]]
    names = [out for _, out in side["columns"]]
    target = pa.schema([schema.field(n) for n in names])
    parts = []
    for row in tables:
        data = open_published(storage, row).to_table(columns=columns)
        parts.append(data.rename_columns(names).cast(target))
    return pa.concat_tables(parts) if parts else target.empty_table()


def join_group(job: dict[str, Any], group: dict[str, Any]) -> Any:
    """The Arrow join of one group's left and right partition tables."""
    schema = decode_schema(job["schema"])
    left_schema, right_schema = (
        decode_schema(job["left_schema"]),
        decode_schema(job["right_schema"]),
    )
    how = job["how"]
    if not group["left"] or (how == "inner" and not group["right"]):
        return None
    left = read_side(job["left"], group["left"], left_schema)
    right = read_side(job["right"], group["right"], right_schema)
    if left.num_rows == 0 or (how == "inner" and right.num_rows == 0):
        return None
    left_keys, right_keys = job["left_keys"], job["right_keys"]
    right = _align_keys(left, right, left_keys, right_keys)
    joined = left.join(
        right,
        keys=left_keys,
        right_keys=right_keys,
        join_type="inner" if how == "inner" else "left outer",
        coalesce_keys=False,
        use_threads=False,  # one task per group, and Spark runs as many tasks as cores
    )
    return joined.select(schema.names)


def _align_keys(left: Any, right: Any, left_keys: list[str], right_keys: list[str]) -> Any:
    """Integer keys of different widths compare by value: give the right key the left's type."""
    for lk, rk in zip(left_keys, right_keys, strict=True):
        want = left.schema.field(lk).type
        if right.schema.field(rk).type != want:
            index = right.schema.get_field_index(rk)
            right = right.set_column(index, rk, right.column(rk).cast(want))
    return right
