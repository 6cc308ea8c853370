"""Reads through the `lancens` data source (PySpark's Python Data Source API).

`source_schema` answers `DataSource.schema()`: the namespace schema for `.load()` on a
partitioned root, the table's schema for `.load("ns.table")`. `LancensReader` plans the read
once (`partitions()`, see `read_plan.py`: `__manifest` read once, exact versions, partition
tables pruned by the `where` / `prune` options, one slice per fragment or group of small
fragments) and reads a slice in a task (`read()`, with `slice_reader.py`, the reader `scan`'s
in-process engine runs too), yielding Arrow batches in exactly the Arrow schema Spark expects.
Spark calls all of these in its Python workers, never in a process it forks afterwards; Lance
(through `store.tables` and `service.partitioned.layout`) is imported inside them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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
from lancens_cli.pipeline.slices import read_slice
from lancens_cli.pipeline.source_options import SourceOptions
from lancens_cli.pipeline.task_failures import marked, marked_iter


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
        yield from read_slice(ns, partition.pieces, target)
