"""Reading planned pieces into Arrow batches: the reader code of the `lancens` data source's tasks
and of `scan`'s in-process engine (`local_read.py`), one code for both, free of pyspark.

`spark_arrow_schema` gives the Arrow schema Spark's tasks hand over for a source schema (what
PySpark's `to_arrow_schema(from_arrow_type(...))` makes of it: microsecond UTC instants, plain
lists, strings and binaries), so the rows read here are the rows a Spark task reads.
Lance (`store.tables`) and the incremental windows (`service.history.incremental`) are imported
inside `read_piece`: a Spark worker imports this module before it forks its task workers, and
Lance is not fork-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as t

from lancens_cli.errors import InvalidInputError

if TYPE_CHECKING:
    from lancens_cli.pipeline.pieces import Piece
    from lancens_cli.service.namespace import Namespace

BATCH_ROWS = 64 * 1024


def read_piece(ns: Namespace, piece: Piece, target: Any) -> Iterator[Any]:
    """The rows of one planned piece, as batches in exactly `target`'s schema."""
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


# --------------------------------------------------------------------------- Spark's Arrow types


class _NoSparkType(Exception):
    """An Arrow type Spark has no type for."""


def spark_arrow_schema(schema: Any) -> Any:
    """The Arrow schema a Spark task's batches have for `schema` (field metadata dropped), or a
    one-line error naming the first column Spark cannot read."""
    fields = []
    for f in schema:
        try:
            fields.append(pa.field(f.name, spark_arrow_type(f.type), nullable=f.nullable))
        except _NoSparkType:
            raise InvalidInputError(
                f"column {f.name!r} has type {f.type}, which Spark cannot read"
            ) from None
    return pa.schema(fields)


def spark_arrow_type(kind: Any) -> Any:
    """`kind` as Spark holds it, back in Arrow (see the module's docstring)."""
    if t.is_dictionary(kind):
        return spark_arrow_type(kind.value_type)
    if t.is_boolean(kind) or t.is_null(kind) or t.is_date32(kind) or t.is_float32(kind):
        return kind
    if t.is_signed_integer(kind) or t.is_float64(kind):
        return kind
    if t.is_string(kind) or t.is_large_string(kind):
        return pa.string()
    if t.is_binary(kind) or t.is_large_binary(kind) or t.is_fixed_size_binary(kind):
        return pa.binary()
    if t.is_decimal(kind) and kind.precision <= 38:
        return pa.decimal128(kind.precision, kind.scale)
    if t.is_timestamp(kind):
        return pa.timestamp("us", tz="UTC" if kind.tz is not None else None)
    if t.is_time64(kind):
        return pa.time64("ns")
    if t.is_duration(kind):
        return pa.duration("us")
    return _nested_type(kind)


def _nested_type(kind: Any) -> Any:
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        item = kind.value_field
        return pa.list_(pa.field("element", spark_arrow_type(item.type), item.nullable))
    if t.is_struct(kind):
        return pa.struct([pa.field(f.name, spark_arrow_type(f.type), f.nullable) for f in kind])
    if t.is_map(kind):
        item = kind.item_field
        return pa.map_(
            spark_arrow_type(kind.key_type),
            pa.field("value", spark_arrow_type(item.type), item.nullable),
        )
    raise _NoSparkType(str(kind))
