"""Partition values: the well-known transforms and DataFusion expressions of spec 004.

`apply_field` turns the source columns of one batch into the partition value of each row, typed
as the field's `result_type`. A source that is None is a field id no longer in the schema; the
spec says it reads as NULL.

Semantics chosen where the spec leaves room:

* year / month / day / hour are `date_part` exactly as DataFusion evaluates the derived
  expression (month 1-12, day 1-31, hour 0-23): a timestamp with a time zone is read as wall
  time in that zone, a naive one as it reads;
* truncate of an integer is `v - (v mod W)` with FLOOR modulo, so negatives go down
  (-1 -> -10 for W = 10) as in Iceberg; a result outside the source type is an error; strings
  keep their first W code points, binaries their first W bytes;
* bucket / multi_bucket hash as `murmur.py` documents.

`datafusion` is imported where used: it costs 0.6 s and only `expression` fields need it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import threading
import zoneinfo
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition import murmur
from lancens_cli.partition.hash_functions import bind_hash_calls
from lancens_cli.partition.spec import TIME_TRANSFORMS, PartitionField, Transform

Source: TypeAlias = pa.Array | pa.ChunkedArray | None

_TIME_PARTS: dict[str, Callable[[pa.Array], pa.Array]] = {
    "year": pc.year,
    "month": pc.month,
    "day": pc.day,
    "hour": pc.hour,
}
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)
_VOLATILE = re.compile(
    r"\b(now|random|uuid|current_date|current_time|current_timestamp|localtime|"
    r"localtimestamp|today|nextval|setseed)\b|\bover\s*\(|\bselect\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"'(?:[^']|'')*'")
# Tried in turn for a missing source when an untyped NULL does not type-check.
_NULL_FALLBACK_TYPES = (
    pa.null(),
    pa.string(),
    pa.int64(),
    pa.float64(),
    pa.timestamp("us"),
    pa.date32(),
    pa.bool_(),
)
_TABLE = "partition_source"


def _cannot(transform: Transform, kind: pa.DataType, needs: str) -> InvalidInputError:
    return InvalidInputError(f"{transform.type} cannot take a {kind} column (it needs {needs})")


def _is_truncatable(kind: pa.DataType) -> bool:
    return (
        pt.is_integer(kind)
        or pt.is_string(kind)
        or pt.is_large_string(kind)
        or pt.is_binary(kind)
        or pt.is_large_binary(kind)
    )


def result_type(transform: Transform, source_types: list[pa.DataType]) -> pa.DataType:
    """The Arrow type `transform` gives over `source_types`; refuses types it cannot take."""
    if transform.type == "multi_bucket":
        if not source_types:
            raise InvalidInputError("multi_bucket needs at least one source column")
        for kind in source_types:
            murmur.check_hashable(kind)
        return pa.int32()
    if len(source_types) != 1:
        raise InvalidInputError(
            f"{transform.type} takes one source column, got {len(source_types)}"
        )
    kind = source_types[0]
    if transform.type == "identity":
        _refuse_float_partition(kind, "identity")
        return kind
    if transform.type == "hour":
        if not pt.is_timestamp(kind):
            raise _cannot(transform, kind, "a timestamp")
        return pa.int32()
    if transform.type in TIME_TRANSFORMS:
        if not (pt.is_timestamp(kind) or pt.is_date(kind)):
            raise _cannot(transform, kind, "a date or timestamp")
        return pa.int32()
    if transform.type == "bucket":
        murmur.check_hashable(kind)
        return pa.int32()
    if not _is_truncatable(kind):
        raise _cannot(transform, kind, "an integer, string or binary")
    return kind


def _refuse_float_partition(kind: pa.DataType, what: str) -> None:
    """Floats make poor partition values: NaN never equals itself and 0.0 / -0.0 are one
    value to SQL but two to Arrow, so partitions would split or collide."""
    if pt.is_floating(kind):
        raise InvalidInputError(
            f"{what} of a {kind} column cannot be a partition value (NaN and -0.0 have no "
            "single partition); bucket or truncate a column of another type, or cast it in "
            "an expression"
        )


def _plain(source: Source) -> pa.Array | None:
    """A contiguous array, or None for a missing (or NULL-typed) source."""
    if source is None:
        return None
    if isinstance(source, pa.ChunkedArray):
        source = source.combine_chunks() if source.num_chunks != 1 else source.chunk(0)
    return None if pt.is_null(source.type) else source


def _time_part(part: str, array: pa.Array) -> pa.Array:
    """`date_part` as DataFusion evaluates it: a zoned timestamp in its own zone (03:00Z in
    America/New_York is hour 23), a naive one as it reads, a date as a date."""
    found = _TIME_PARTS[part](array).cast(pa.int32())
    if pt.is_timestamp(array.type) and array.type.tz and _has_rules(array.type.tz):
        found = _past_listed_transitions(part, array, found)
    return found


# Zone files list a zone's transitions one by one up to 2037 only, then give the rule that
# follows (daylight saving time every year, say); Arrow's time zone library reads the list
# but not the rule, so from 2038 on it keeps the last listed offset (standard time all summer
# in New York). DataFusion's time zone database lists transitions up to 2099 and keeps the
# last offset after that. The derived expression is what DataFusion says (decision 20), so the
# instants between the two ends are converted by the zone's rules (Python's zoneinfo), and
# from 2100 on both libraries keep the same last offset.
_LISTED_UNTIL = dt.datetime(2038, 1, 1, tzinfo=dt.UTC)
_DATAFUSION_LISTS_UNTIL = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)
_UNIT_SCALE = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


@lru_cache(maxsize=64)
def _zone(name: str) -> Any:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def _has_rules(name: str) -> bool:
    """A named zone that may change its offset (not `UTC`, not a fixed `+05:30`)."""
    return name[:1] not in "+-" and name.upper() not in ("UTC", "Z", "GMT", "ETC/UTC")


def _past_listed_transitions(part: str, array: pa.Array, found: pa.Array) -> pa.Array:
    """`found` with the values from 2038 to 2099 recomputed in the zone's own rules (rare:
    most data is older; each such value is converted on its own)."""
    zone = _zone(array.type.tz)
    if zone is None:
        return found
    stamp = pa.timestamp("us", tz="UTC")
    start = pa.scalar(_LISTED_UNTIL, type=stamp).cast(array.type)
    end = pa.scalar(_DATAFUSION_LISTS_UNTIL, type=stamp).cast(array.type)
    late = pc.and_(pc.greater_equal(array, start), pc.less(array, end))
    late = pc.fill_null(late, False)
    if not pc.any(late).as_py():
        return found
    scale = _UNIT_SCALE[array.type.unit]
    values = array.cast(pa.int64()).to_numpy(zero_copy_only=False)
    parts = found.to_numpy(zero_copy_only=False).astype(np.int32, copy=True)
    for index in np.flatnonzero(late.to_numpy(zero_copy_only=False)):
        wall = dt.datetime.fromtimestamp(int(values[index]) // scale, zone)
        parts[index] = getattr(wall, part)
    return pa.array(parts, type=pa.int32(), mask=array.is_null().to_numpy(zero_copy_only=False))


def _truncate_toward_zero(values: np.ndarray, width: int) -> np.ndarray:
    """The spec's `col0 - (col0 % W)`, `%` being SQL's (truncated) remainder: -1 -> 0.

    Iceberg floors instead (-1 -> -10); spec 004 writes the DataFusion formula, and an engine
    that evaluates the derived expression must find the same partition as we do.
    """
    if width > np.iinfo(values.dtype).max:
        return np.zeros_like(values)
    return values - np.fmod(values, values.dtype.type(width))


def _truncate_integers(array: pa.Array, width: int) -> pa.Array:
    kind = array.type
    signed = pt.is_signed_integer(kind)
    wide = pa.int64() if signed else pa.uint64()
    values = array.cast(wide).fill_null(0).to_numpy(zero_copy_only=False)
    mask = array.is_null().to_numpy(zero_copy_only=False) if array.null_count else None
    try:
        truncated = _truncate_toward_zero(values, width)
        return pa.array(truncated, type=wide, mask=mask).cast(kind, safe=True)
    except (OverflowError, *_ARROW_ERRORS):
        raise InvalidInputError(
            f"truncate({width}) of a {kind} value falls outside {kind}"
        ) from None


def _truncate(array: pa.Array, width: int) -> pa.Array:
    stop = min(width, 2**62)
    if pt.is_integer(array.type):
        return _truncate_integers(array, width)
    if pt.is_string(array.type) or pt.is_large_string(array.type):
        return pc.utf8_slice_codeunits(array, 0, stop)
    return pc.binary_slice(array, 0, stop)


def _missing_type(transform: Transform) -> pa.DataType:
    """The type of an all-NULL result when the source is missing (apply_field casts it)."""
    return pa.int32() if transform.type in (*TIME_TRANSFORMS, "bucket") else pa.null()


def _check_lengths(sources: list[pa.Array | None], length: int) -> None:
    for source in sources:
        if source is not None and len(source) != length:
            raise ValueError(f"a source column has {len(source)} rows, expected {length}")


def apply_transform(transform: Transform, sources: list[Source], length: int) -> pa.Array:
    """The partition value of each row under a well-known transform.

    A missing single source gives all NULL (int32 for year/month/day/hour/bucket, NULL-typed
    for identity/truncate, whose type is the field's); multi_bucket skips missing sources and
    is all NULL only when every source is missing.
    """
    arrays = [_plain(s) for s in sources]
    _check_lengths(arrays, length)
    if transform.type == "multi_bucket":
        present = [a for a in arrays if a is not None]
        if not present:
            return pa.nulls(length, pa.int32())
        result_type(transform, [a.type for a in present])
        assert transform.num_buckets is not None  # Transform requires it of multi_bucket
        return murmur.bucket_of(murmur.hash_multi(arrays), transform.num_buckets)
    if len(arrays) != 1:
        raise InvalidInputError(f"{transform.type} takes one source column, got {len(arrays)}")
    array = arrays[0]
    if array is None:
        return pa.nulls(length, _missing_type(transform))
    result_type(transform, [array.type])
    if transform.type == "identity":
        return array
    if transform.type in TIME_TRANSFORMS:
        return _time_part(transform.type, array)
    if transform.type == "bucket":
        assert transform.num_buckets is not None  # Transform requires it of bucket
        return murmur.bucket_of(murmur.hash_array(array), transform.num_buckets)
    assert transform.width is not None  # the one transform left is truncate, which has one
    return _truncate(array, transform.width)


def _one_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of a (DataFusion) error, without its prefix and our table's name."""
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    text = text.removeprefix("DataFusion error: ").replace(f"{_TABLE}.", "").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


@lru_cache(maxsize=256)
def _check_stateless(expression: str) -> None:
    """Refuse the volatile functions, window functions and subqueries we can spot by name."""
    found = _VOLATILE.search(_QUOTED.sub("''", expression))
    if found:
        word = found.group(0).lower()
        what = {"over": "a window function", "select": "a subquery"}.get(word[:6].strip(" ("))
        raise InvalidInputError(
            f"expression {expression!r} is not deterministic and stateless "
            f"({what or word + '()'} is not allowed)"
        )


_CONTEXT: Any = None
_LOCK = threading.Lock()
_HASH_UDFS: set[str] = set()  # murmur3 UDFs registered in _CONTEXT, by typed name


def _context() -> Any:
    """One DataFusion session per process, single-partition so that row order is kept."""
    global _CONTEXT
    if _CONTEXT is None:
        from datafusion import SessionConfig, SessionContext

        _CONTEXT = SessionContext(SessionConfig().with_target_partitions(1))
    return _CONTEXT


def _run(expression: str, batch: pa.RecordBatch) -> pa.Array:
    with _LOCK:
        ctx = _context()
        expression = bind_hash_calls(ctx, _HASH_UDFS, expression, batch.schema)
        try:
            frame = ctx.from_arrow(batch, name=_TABLE)
            try:
                batches = frame.select_exprs(expression).collect()
            finally:
                ctx.deregister_table(_TABLE)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # DataFusion panics surface as BaseException
            raise InvalidInputError(f"expression {expression!r}: {_one_line(exc)}") from None
    if not batches:
        return pa.array([], type=pa.null())
    return pa.concat_arrays([b.column(0) for b in batches])


def _family(kind: pa.DataType) -> str:
    """Types whose values may convert into each other without changing meaning."""
    if pt.is_integer(kind) or pt.is_floating(kind) or pt.is_decimal(kind):
        return "number"
    if pt.is_string(kind) or pt.is_large_string(kind) or pt.is_string_view(kind):
        return "string"
    if pt.is_binary(kind) or pt.is_large_binary(kind) or pt.is_binary_view(kind):
        return "binary"
    if pt.is_date(kind):
        return "date"
    if pt.is_timestamp(kind):
        return f"timestamp {kind.tz}"
    if pt.is_time(kind):
        return "time"
    return str(kind)


def _conform(values: pa.Array, declared: pa.DataType, what: str) -> pa.Array:
    """`values` as `declared`, refusing a cast that fails or changes a value."""
    if values.type == declared:
        return values
    if pt.is_null(values.type):
        return pa.nulls(len(values), declared)
    wrong = InvalidInputError(f"{what} returns {values.type}, declared {declared}")
    if _family(values.type) != _family(declared):
        raise wrong
    try:
        cast = values.cast(declared, safe=True)
        back = cast.cast(values.type, safe=True)
    except _ARROW_ERRORS:
        raise wrong from None
    if not back.equals(values):
        raise wrong
    return cast


def _batch(arrays: list[pa.Array]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(arrays, names=[f"col{i}" for i in range(len(arrays))])


def _run_with_missing(expression: str, arrays: list[pa.Array | None], length: int) -> pa.Array:
    """Evaluate with each missing source as NULL, trying typed NULLs if untyped ones fail."""
    if all(a is not None for a in arrays):
        return _run(expression, _batch(arrays))
    first_error: InvalidInputError | None = None
    for kind in _NULL_FALLBACK_TYPES:
        columns = [pa.nulls(length, kind) if a is None else a for a in arrays]
        try:
            return _run(expression, _batch(columns))
        except InvalidInputError as exc:
            first_error = first_error or exc
    assert first_error is not None  # _NULL_FALLBACK_TYPES is not empty
    raise first_error


def evaluate_expression(
    expression: str, sources: list[Source], result_type: pa.DataType, length: int
) -> pa.Array:
    """A DataFusion SQL expression over `col0, col1, ...`, one value per row, as `result_type`.

    A missing source is a NULL column: untyped first, then (if the expression does not accept
    an untyped NULL) typed as each of a few common types in turn.
    """
    _check_stateless(expression)
    if not sources:
        raise InvalidInputError(f"expression {expression!r} has no source columns")
    arrays = [_plain(s) for s in sources]
    _check_lengths(arrays, length)
    values = _run_with_missing(expression, arrays, length)
    if len(values) != length:
        raise InvalidInputError(
            f"expression {expression!r} gives {len(values)} values for {length} rows"
        )
    return _conform(values, result_type, f"expression {expression!r}")


def _sample(kind: pa.DataType) -> Any:
    """An ordinary non-NULL value of `kind` (None when we have none to offer)."""
    if pt.is_integer(kind):
        return 1
    if pt.is_floating(kind):
        return 1.5
    if pt.is_decimal(kind):
        return decimal.Decimal(0)
    if pt.is_string(kind) or pt.is_large_string(kind) or pt.is_string_view(kind):
        return "a"
    if pt.is_fixed_size_binary(kind):
        return b"a" * kind.byte_width
    if pt.is_binary(kind) or pt.is_large_binary(kind) or pt.is_binary_view(kind):
        return b"a"
    if pt.is_boolean(kind):
        return True
    if pt.is_date(kind):
        return dt.date(2025, 1, 2)
    if pt.is_timestamp(kind):
        return dt.datetime(2025, 1, 2, 3, 4, 5)
    if pt.is_time(kind):
        return dt.time(3, 4, 5)
    return None


def check_expression(
    expression: str, source_types: list[pa.DataType], result_type: pa.DataType
) -> None:
    """Validate an expression when a spec is created: it parses, types and is repeatable.

    It is evaluated on an all-NULL row and twice on two equal sample rows; differing results
    betray a volatile function our name list missed.
    """
    _check_stateless(expression)
    _refuse_float_partition(result_type, f"expression {expression!r} returning")
    evaluate_expression(expression, [pa.nulls(1, t) for t in source_types], result_type, 1)
    sample = [pa.array([_sample(t)] * 2, type=t) for t in source_types]
    first = evaluate_expression(expression, sample, result_type, 2)
    again = evaluate_expression(expression, sample, result_type, 2)
    if not first.equals(again) or not first[0].equals(first[1]):
        raise InvalidInputError(f"expression {expression!r} is not deterministic")


def apply_field(field: PartitionField, sources: list[Source], length: int) -> pa.Array:
    """The partition value of each row for `field`, typed exactly as its result_type."""
    if field.transform is not None:
        values = apply_transform(field.transform, sources, length)
        return _conform(values, field.result_type, f"{field.field_id} ({field.transform.type})")
    assert field.expression is not None  # PartitionField has a transform or an expression
    return evaluate_expression(field.expression, sources, field.result_type, length)


def value_of(
    field: PartitionField, literals: list[object], literal_types: list[pa.DataType]
) -> Any:
    """The partition value of one row of Python literals (partition pruning), or None."""
    if len(literals) != len(field.source_ids) or len(literal_types) != len(literals):
        raise InvalidInputError(
            f"{field.field_id} takes {len(field.source_ids)} values, got {len(literals)}"
        )
    try:
        sources = [pa.array([v], type=t) for v, t in zip(literals, literal_types, strict=True)]
    except (*_ARROW_ERRORS, OverflowError) as exc:
        raise InvalidInputError(f"{field.field_id}: {_one_line(exc)}") from None
    return apply_field(field, sources, 1)[0].as_py()
