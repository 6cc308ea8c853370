"""The task side of `lancens join`: what each Spark task runs, and how work is packed into tasks.

The driver (`pipeline/join.py`) plans the job and hands it to `mapInArrow` over one id per task
(`spark.range(n, numPartitions=n)`), on a local session or a Spark Connect server alike. A unit
of work needs nothing but storage:

* mode `join`: one partition group of a storage-partitioned join. The task opens the group's
  left and right partition tables at the versions the driver resolved (it never reads
  `__manifest`), joins them in Arrow and yields the joined record batches. Rows never leave the
  task that read them, so the physical plan has no Exchange.
* mode `side`: one partition table of one side, for the ordinary (shuffle) join Spark runs when
  the two layouts are not compatible.

Units are packed into as many tasks as the session runs at once (`pack`), the largest first
onto the least loaded task: a task costs about 50 ms to start in its Python worker, which at
one task per group was most of a join of 500,000 rows. A task works through its units one after
another, so its memory is bounded by its largest unit, never by the sum.

Lance (through `store.tables`) and DataFusion are imported inside the functions a task calls:
PySpark forks its Python workers from a daemon and neither is fork-safe, so nothing of theirs
may run before a fork (DataFusion also costs 0.6 s to import, which `--help` must not pay).
"""

from __future__ import annotations

import base64
import heapq
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from lancens_cli.config import NamespaceConfig
from lancens_cli.pipeline.task_failures import marked_iter
from lancens_cli.store.storage import Storage

# Rows a batch holds: read (Lance's default of 8,192 leaves a side of many small chunks, which
# the hash join then walks one by one: a group of 625,000 x 125,000 rows takes 36 ms of CPU to
# join from 8,192-row chunks, 25 ms from 65,536-row ones, and its read 15% less), joined and
# handed to Spark
BATCH_ROWS = 64 * 1024
# The names a join's two sides are registered under in its thread's DataFusion context.
_LEFT, _RIGHT = "lancens_left", "lancens_right"
_CONTEXTS = threading.local()


def encode_schema(schema: Any) -> str:
    """An Arrow schema as text that survives JSON."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> Any:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def pack(sizes: list[int], tasks: int) -> list[list[int]]:
    """The indexes of `sizes` in at most `tasks` lists of nearly equal total size (largest
    first onto the least loaded list), each list in its original order; no empty list."""
    count = min(tasks, len(sizes))
    if count <= 0:
        return []
    loads = [(0, i) for i in range(count)]
    packed: list[list[int]] = [[] for _ in range(count)]
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        load, task = heapq.heappop(loads)
        packed[task].append(index)
        heapq.heappush(loads, (load + max(sizes[index], 1), task))
    return [sorted(p) for p in packed]


def task_function(
    job: dict[str, Any], packed: list[list[dict[str, Any]]]
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """What each task runs (`mapInArrow` over one id per task): its units, one after another,
    as record batches of the job's schema."""

    @marked_iter
    def run(batches: Iterable[Any]) -> Iterator[Any]:
        schema = decode_schema(job["schema"])
        for batch in batches:
            for task in batch.column("id").to_pylist():
                for unit in packed[task]:
                    yield from _unit_batches(job, unit, schema)

    return run


def _unit_batches(job: dict[str, Any], unit: dict[str, Any], schema: Any) -> Iterator[Any]:
    if job["mode"] == "join":
        table = join_group(job, unit)
    else:
        table = read_side(job[job["side"]], unit["tables"], schema)
    if table is None or table.num_rows == 0:
        return
    yield from table.select(schema.names).cast(schema).to_batches(max_chunksize=BATCH_ROWS)


def _storage(side: dict[str, Any]) -> Any:
    return Storage(NamespaceConfig(root=side["root"], storage_options=dict(side["storage"])))


def read_side(side: dict[str, Any], tables: list[dict[str, Any]], schema: Any) -> Any:
    """The rows of one side's partition tables, renamed to the output names, in `schema`: the
    types Spark takes (`join.spark_arrow_type`), so a vector is cast to a list here, before the
    join, and only a column whose type differs is converted."""
    from lancens_cli.store.catalog_rows import open_published

    storage = _storage(side)
    columns = [src for src, _ in side["columns"]]
    names = [out for _, out in side["columns"]]
    target = pa.schema([schema.field(n) for n in names])
    parts = []
    for row in tables:
        dataset = open_published(storage, row)
        data = _new_rows(dataset, row["new"], columns) if "new" in row else None
        if data is None:
            data = dataset.to_table(columns=columns, batch_size=BATCH_ROWS)
        parts.append(data.rename_columns(names).cast(target))
    return pa.concat_tables(parts) if parts else target.empty_table()


def _new_rows(dataset: Any, new: list[list[Any]], columns: list[str]) -> Any:
    """Only the rows an incremental join reads of a table: whole fragments, or a window of
    one (service/history/incremental.py)."""
    from lancens_cli.service.history.incremental import in_window

    tables = []
    for fragment_id, offset, count in new:
        scanner = dataset.scanner(
            columns=columns,
            batch_size=BATCH_ROWS,
            fragments=[dataset.get_fragment(fragment_id)],
            with_row_address=offset is not None,
        )
        data = scanner.to_table()
        if offset is not None:
            data = in_window(data, fragment_id, offset, count).select(columns)
        tables.append(data)
    return pa.concat_tables(tables) if tables else dataset.schema.empty_table().select(columns)


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
    return hash_join(left, right, left_keys, right_keys, how).select(schema.names)


def hash_join(left: Any, right: Any, left_keys: list[str], right_keys: list[str], how: str) -> Any:
    """`left` joined to `right` on equal keys (SQL: a NULL key matches nothing), every column of
    both, by DataFusion's hash join on one thread (Spark runs as many tasks as cores).

    DataFusion joins a group of 625,000 x 125,000 rows in a third of the time Arrow's own
    `Table.join` takes. Columns go in under positional names and come out under their own, so
    no name is ever read as SQL (a `.` or capitals would be).
    """
    left_names, right_names = left.column_names, right.column_names
    left = left.rename_columns([f"l{i}" for i in range(len(left_names))])
    right = right.rename_columns([f"r{i}" for i in range(len(right_names))])
    context = _join_context()
    try:
        joined = context.from_arrow(left, name=_LEFT).join(
            context.from_arrow(right, name=_RIGHT),
            how="inner" if how == "inner" else "left",
            left_on=[f"l{left_names.index(k)}" for k in left_keys],
            right_on=[f"r{right_names.index(k)}" for k in right_keys],
            coalesce_duplicate_keys=False,
        )
        table = joined.to_arrow_table()
    finally:  # the context outlives this join: it must not keep the sides' rows
        for name in (_LEFT, _RIGHT):
            if context.table_exist(name):
                context.deregister_table(name)
    order = [*left.column_names, *right.column_names]
    return table.select(order).rename_columns([*left_names, *right_names])


def _join_context() -> Any:
    """This thread's DataFusion context, made once: making one costs about 3 ms, a tenth of
    joining a group of 625,000 x 125,000 rows, and a task joins its groups one by one."""
    context = getattr(_CONTEXTS, "context", None)
    if context is None:
        from datafusion import SessionConfig, SessionContext

        config = SessionConfig().with_target_partitions(1).with_batch_size(BATCH_ROWS)
        context = _CONTEXTS.context = SessionContext(config)
    return context


def _align_keys(left: Any, right: Any, left_keys: list[str], right_keys: list[str]) -> Any:
    """Integer keys of different widths compare by value: give the right key the left's type."""
    for lk, rk in zip(left_keys, right_keys, strict=True):
        want = left.schema.field(lk).type
        if right.schema.field(rk).type != want:
            index = right.schema.get_field_index(rk)
            right = right.set_column(index, rk, right.column(rk).cast(want))
    return right
