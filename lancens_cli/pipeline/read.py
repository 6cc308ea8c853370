"""Reads through the `lancens` data source (PySpark's Python Data Source API).

`source_schema` answers `DataSource.schema()`: the namespace schema for `.load()` on a
partitioned root, the table's schema for `.load("ns.table")`. `LancensReader` plans the read
once (`partitions()`, see `read_plan.py`: `__manifest` read once, exact versions, partition
tables pruned by the `where` / `prune` options, one slice per fragment or group of small
fragments) and reads a slice in a task (`read()`), yielding Arrow batches in exactly the Arrow
schema Spark expects. Spark calls all of these in its Python workers, never in a process it
forks afterwards; Lance (through `store.tables` and `service.partitioned.layout`) is imported
inside them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import StructField, StructType

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.predicate import FALSE, to_sql
from lancens_cli.pipeline.read_plan import (
    Piece,
    arrow_schema,
    option_nodes,
    plan_pieces,
    slice_groups,
)
from lancens_cli.pipeline.source_options import SourceOptions
from lancens_cli.pipeline.task_failures import marked, marked_iter

if TYPE_CHECKING:
    from lancens_cli.service.namespace import Namespace


BATCH_ROWS = 64 * 1024


@marked
def source_schema(opts: SourceOptions) -> Any:
    """The Spark schema (StructType) of what `opts` names."""
    return spark_schema(arrow_schema(opts))


def spark_schema(schema: Any) -> Any:
    """A Spark StructType for an Arrow schema (field metadata dropped; zones become UTC)."""
    fields = []
    for f in schema:
        try:
            kind = from_arrow_type(f.type, prefer_timestamp_ntz=True)
        except Exception:  # noqa: BLE001 - pyspark's own words are a stack of types
            raise InvalidInputError(
                f"column {f.name!r} has type {f.type}, which Spark cannot read"
            ) from None
        fields.append(StructField(f.name, kind, nullable=f.nullable))
    return StructType(fields)


def _limit(opts: SourceOptions) -> int | None:
    text = opts.extra.get("limit")
    if text is None:
        return None
    if not text.strip().isdigit():
        raise InvalidInputError(f"option limit: {text!r} is not a number of rows")
    return int(text)


class LancensSlice(InputPartition):
    """What one Spark task reads: pieces of tables at exact versions (plain data: it pickles)."""

    def __init__(self, index: int, pieces: tuple[Piece, ...], pushed: tuple[str, ...]) -> None:
        self.index = index
        self.pieces = pieces
        self.pushed = pushed  # the Spark filters lancens applies, as SQL (for --explain)


class LancensReader(DataSourceReader):
    """Plans and reads one scan; plain data, since Spark pickles it to the tasks.

    It takes no filters from Spark (no `pushFilters`): Spark 4 keeps the read it planned with
    the DataFrame it was loaded as and reuses it for the DataFrame's later queries, whatever
    their filters, so a plan narrowed by one query's filters would answer the next one wrongly.
    The plan depends on the options alone; pruning comes from the `where` and `prune` options.
    """

    def __init__(self, opts: SourceOptions, schema: Any) -> None:
        self.opts = opts
        self.schema = schema  # the columns Spark wants (all, or a user's .schema(...))

    def _source(self) -> Any:
        arrow = arrow_schema(self.opts)
        unknown = [n for n in self.schema.fieldNames() if n not in arrow.names]
        if unknown:
            raise InvalidInputError(
                f"unknown column(s) {', '.join(unknown)}; the source has {', '.join(arrow.names)}"
            )
        return arrow

    @marked
    def partitions(self) -> list[InputPartition]:
        schema = self._source()
        nodes = option_nodes(self.opts, schema)
        if FALSE in nodes:
            return []
        pushed = tuple(to_sql(n) for n in nodes)
        pieces = plan_pieces(self.opts, schema, nodes, _limit(self.opts))
        return [LancensSlice(i, group, pushed) for i, group in enumerate(slice_groups(pieces))]

    @marked_iter
    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, LancensSlice):
            return  # no table matched: Spark still runs one empty partition

        target = to_arrow_schema(self.schema, timezone="UTC")
        ns = self.opts.namespace(as_of=False)  # the planned versions are exact: no __manifest
        for piece in partition.pieces:
            yield from _read_piece(ns, piece, target)


def _read_piece(ns: Namespace, piece: Piece, target: Any) -> Iterator[Any]:
    from lancens_cli.service.history.incremental import in_window
    from lancens_cli.store.tables import open_table

    on_main = piece.branch is None
    dataset = open_table(ns.storage, piece.location, version=piece.version if on_main else None)
    if piece.branch:
        dataset = dataset.checkout_version((piece.branch, piece.version))
    present = set(dataset.schema.names)
    sources = dict(piece.renamed)  # a table of an earlier schema generation
    held = {f.name: sources.get(f.name, f.name) for f in target}
    columns = [held[f.name] for f in target if held[f.name] in present]
    fragments = [dataset.get_fragment(i) for i in piece.fragments]
    scanner = dataset.scanner(
        columns=columns,
        filter=piece.filter,
        fragments=fragments,
        batch_size=BATCH_ROWS,
        with_row_id=not columns and piece.window is None,  # a column to count rows by
        with_row_address=piece.window is not None,
    )
    back = {held[f.name]: f.name for f in target if held[f.name] in present}
    for batch in scanner.to_batches():
        if piece.window is not None:  # `_rowaddr` goes with conform_batch (target columns)
            batch = in_window(batch, piece.fragments[0], *piece.window)
        if batch.num_rows:
            if sources:
                batch = batch.rename_columns([back.get(n, n) for n in batch.schema.names])
            yield conform_batch(batch, target)


def conform_batch(batch: Any, target: Any) -> Any:
    """`batch` in exactly Spark's Arrow schema: order, types, nullability; absent -> NULL."""
    names = batch.schema.names
    arrays = []
    for f in target:
        if f.name not in names:
            if not f.nullable:
                raise InvalidInputError(f"a table lacks the non-nullable column {f.name!r}")
            arrays.append(pa.nulls(batch.num_rows, f.type))
            continue
        column = batch.column(names.index(f.name))
        if column.type != f.type:
            column = exact_cast(
                column, f, advice="read it as its own type (or a wider one) and convert in Spark"
            )
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def exact_cast(column: Any, field: Any, context: str = "", advice: str = "") -> Any:
    """`column` as `field`'s type with every value kept exactly, or a one-line error naming the
    column (after `context`, e.g. the file) and, when given, what to do instead."""
    try:
        return column.cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        lost = " (nanoseconds would be lost)" if "would lose data" in str(exc) else ""
        raise InvalidInputError(
            f"{context}column {field.name!r} holds {column.type} values that {field.type} "
            f"cannot hold exactly{lost}" + (f"; {advice}" if advice else "")
        ) from None
