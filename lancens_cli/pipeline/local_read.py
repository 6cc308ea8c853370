"""`scan` read in this process: small reads that Spark would answer no better, without a JVM.

A read qualifies when nothing of `--where` is left for Spark to evaluate (every conjunct prunes
partitions or filters in Lance) and the data files the plan reads are small: at most
`--local-max-bytes` (64 MiB by default) as the manifests record them. It is planned as
the data source's driver plans it (`read_plan.plan_pieces`, the same slices in the same order)
and each piece is read with the code Spark's tasks run (`slices.read_slice`), in the Arrow
schema Spark's tasks hand over (`spark_arrow_schema`), so the rows, their order and their printed
form (`row_values.py`) are the ones Spark gives. `--to` writes Parquet files here too (to a local
directory, as Spark lays one out); CSV and JSON text and object-store targets stay Spark's.
Anything else returns the reason Spark reads it, in words, for stderr and `--explain`.
`pyarrow.parquet` (for `--to` alone), `service.history.incremental` (its flag names, Lance
behind them) and the change feed's modules (`--net`) are imported inside the functions that use
them.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lancens_cli import interrupt
from lancens_cli.errors import InvalidInputError, TableAlreadyExistsError
from lancens_cli.models import Result
from lancens_cli.partition.predicate import FALSE
from lancens_cli.pipeline.read_plan import Piece, plan_pieces, planned_bytes, slice_groups
from lancens_cli.pipeline.row_values import arrow_rows
from lancens_cli.pipeline.scan import (
    ScanCount,
    ScanExplain,
    ScanRequest,
    ScanRows,
    ScanStream,
    ScanWritten,
    count_column,
    partition_total,
    planned_limit,
    request_condition,
    request_options,
    result_columns,
    result_schema,
    schema_subset,
    tables_read,
)
from lancens_cli.pipeline.slice_reader import spark_arrow_schema
from lancens_cli.pipeline.slices import read_slice
from lancens_cli.words import human_bytes

if TYPE_CHECKING:
    from lancens_cli.partition.spark_conditions import Condition

_READERS = max(2, os.cpu_count() or 1)  # a change feed's pieces read at once in this process
_GROUP_ROWS = 1 << 20  # rows of one Parquet row group `--to` writes, at most
_GROUP_BYTES = 64 << 20  # and the Arrow bytes gathered for one before it is written

LOCAL_ENGINE = "local"


@dataclass
class LocalRead:
    """A scan planned to be read in this process."""

    request: ScanRequest
    schema: Any  # the source's Arrow schema
    condition: Condition | None
    pieces: list[Piece]
    planned: int  # bytes of data files
    reason: str  # why this process reads it

    def run(self) -> Result:
        """What `lancens scan` prints: rows, a count, files written, or the plan."""
        request = self.request
        columns = result_columns(request.columns, result_schema(request, self.schema))
        if request.explain:
            return self.explain()
        if request.count:
            return ScanCount(sum(b.num_rows for b in self.batches([count_column(self.schema)])))
        if request.to:
            return write_parquet(self.batches(columns), self.target(columns), request.to)
        if request.stream and request.limit is None:
            return ScanStream(columns, self.rows(columns))
        return self.first_rows(columns, request.limit)

    def target(self, columns: list[str]) -> Any:
        """The Arrow schema of `columns`, in that order, as Spark's tasks hand them over."""
        held = spark_arrow_schema(schema_subset(self.schema, set(columns)))
        return pa.schema([held.field(name) for name in columns])

    def batches(self, columns: list[str]) -> Iterator[Any]:
        """The rows of `columns` (in that order), piece after piece in Spark's slice order; of
        a net change feed, its net rows (`change_reader.net_effect`)."""
        if self.request.net:
            from lancens_cli.pipeline.change_reader import net_effect
            from lancens_cli.service.history.changes import COMMIT_TIMESTAMP, COMMIT_VERSION

            whole = [n for n in self.schema.names if n not in (COMMIT_VERSION, COMMIT_TIMESTAMP)]
            for batch in net_effect(self._read(self.target(self.schema.names))):
                yield batch.select(columns) if columns != whole else batch
            return
        yield from self._read(self.target(columns))

    def _read(self, target: Any) -> Iterator[Any]:
        ns = request_options(self.request).namespace(as_of=False)  # the planned versions
        for group in slice_groups(self.pieces):
            for batch in read_slice(ns, group, target, _READERS):
                interrupt.checkpoint()
                yield batch

    def rows(self, columns: list[str]) -> Iterator[list[Any]]:
        for batch in self.batches(columns):
            yield from arrow_rows(batch)

    def first_rows(self, columns: list[str], limit: int | None) -> ScanRows:
        found: list[list[Any]] = []
        for row in self.rows(columns):
            if limit is not None and len(found) > limit:
                break
            found.append(row)
        if limit is None:
            return ScanRows(columns, found, False)
        return ScanRows(columns, found[:limit], len(found) > limit)

    def explain(self) -> ScanExplain:
        condition = self.condition
        return ScanExplain(
            tables=tables_read(self.pieces),
            slices=len(slice_groups(self.pieces)),
            pushed=[c.text for c in condition.conjuncts if c.node is not None] if condition else [],
            left_to_spark=None,
            plan=f"(no Spark: read in this process, {human_bytes(self.planned)} of data files)",
            partitions_total=partition_total(self.request),
            engine=LOCAL_ENGINE,
            engine_reason=self.reason,
        )


def plan_local(request: ScanRequest, max_bytes: int) -> LocalRead | str:
    """The read in this process, or why Spark reads it (words for stderr and `--explain`)."""
    schema, condition = request_condition(request)
    if condition is not None and condition.left:
        left = " AND ".join(c.text for c in condition.left)
        return f"Spark evaluates {left!r}"
    if request.to and request.fmt != "parquet":
        return f"--format {request.fmt} files are written by Spark"
    if request.to and "://" in request.to:
        return "files on object storage are written by Spark"
    from lancens_cli.service.history.incremental import FLAG_NAMES

    nodes = condition.understood if condition is not None else []
    pieces: list[Piece] = []
    if FALSE not in nodes:
        limit = planned_limit(request, condition)
        opts = request_options(request)
        pieces = plan_pieces(opts, schema, nodes, limit=limit, names=FLAG_NAMES)
    planned = planned_bytes(pieces)
    if planned is None:
        return "the manifests do not record the size of every data file"
    if planned > max_bytes:
        return (
            f"the read plans {human_bytes(planned)} of data files, more than "
            f"--local-max-bytes ({human_bytes(max_bytes)})"
        )
    reason = (
        f"nothing is left for Spark to evaluate and the read plans {human_bytes(planned)} "
        f"of data files (--local-max-bytes {human_bytes(max_bytes)})"
    )
    return LocalRead(request, schema, condition, pieces, planned, reason)


def row_groups(batches: Iterator[Any]) -> Iterator[list[Any]]:
    """The batches gathered into Parquet row groups of up to _GROUP_ROWS rows or _GROUP_BYTES:
    a change feed's pieces give batches of a few hundred rows, and a row group each made files
    that readers open slowly (Spark's own writer makes row groups of 128 MiB)."""
    group: list[Any] = []
    rows = size = 0
    for batch in batches:
        if group and (rows + batch.num_rows > _GROUP_ROWS or size >= _GROUP_BYTES):
            yield group
            group, rows, size = [], 0, 0
        group.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
    if group:
        yield group


def write_parquet(batches: Iterator[Any], schema: Any, target: str) -> ScanWritten:
    """The rows as a directory of Parquet files, as Spark lays one out (`part-*.parquet`, then
    `_SUCCESS`): the file appears whole (written under a hidden name, then renamed)."""
    import pyarrow.parquet as pq

    if os.path.exists(target):
        raise TableAlreadyExistsError(f"--to {target}: it already exists; remove it first")
    try:
        os.makedirs(target)
    except OSError as exc:
        raise InvalidInputError(f"--to {target}: {exc.strerror}") from None
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    hidden = os.path.join(target, f".{name}.tmp")
    try:
        with pq.ParquetWriter(hidden, schema, compression="snappy") as writer:
            for group in row_groups(batches):
                writer.write_table(pa.Table.from_batches(group, schema), _GROUP_ROWS)
    except BaseException:  # a failed or interrupted write leaves nothing a rerun trips on
        shutil.rmtree(target, ignore_errors=True)
        raise
    os.replace(hidden, os.path.join(target, name))
    open(os.path.join(target, "_SUCCESS"), "wb").close()
    return ScanWritten(target, "parquet", list(schema.names))
