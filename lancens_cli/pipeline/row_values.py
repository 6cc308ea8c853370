"""The values `scan` prints, whichever engine read the rows: one form for Spark's rows and for
Arrow batches read in this process, so the two engines print the same answer.

A value becomes what JSON holds: instants as UTC wall times in ISO 8601 (what a UTC Spark session
shows; the column's type says it is an instant), dates and times in ISO 8601, decimals as text
(exact), bytes as hex, a struct as an object of its fields in their order (Spark's `Row` too), a
map as an object with its keys sorted (Spark does not keep a map's order), lists as lists;
numbers, booleans and strings as they are. Spark hands instants to Python
in the process's local zone, so the rows of a Spark read are taken in `utc_clock()`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow.types as t


def plain_value(value: Any) -> Any:
    """`value` as the module's docstring says, nested values too."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if hasattr(value, "asDict"):  # a Spark Row: a struct
        return {key: plain_value(inner) for key, inner in value.asDict().items()}
    if isinstance(value, dict):  # a map (Spark's structs are Rows)
        return sorted_map((plain_value(key), plain_value(inner)) for key, inner in value.items())
    if isinstance(value, list | tuple):
        return [plain_value(inner) for inner in value]
    return value


def plain_values(row: Any) -> list[Any]:
    """One row (a Spark Row, or a list of Python values) as plain values."""
    return [plain_value(value) for value in row]


def sorted_map(pairs: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
    """A map's entries as an object, keys in order (keys of one type; mixed ones by text)."""
    entries = list(pairs)
    try:
        entries.sort(key=lambda pair: pair[0])
    except TypeError:
        entries.sort(key=lambda pair: str(pair[0]))
    return dict(entries)


def arrow_rows(batch: Any) -> Iterator[list[Any]]:
    """The rows of an Arrow batch or table as plain values, as Spark's rows give them."""
    kinds = [field.type for field in batch.schema]
    columns = [column.to_pylist() for column in batch.columns]  # maps as lists of pairs
    for values in zip(*columns, strict=True):
        yield [arrow_value(value, kind) for value, kind in zip(values, kinds, strict=True)]


def arrow_value(value: Any, kind: Any) -> Any:
    """One Python value of an Arrow column of type `kind` as a plain value: the type tells a
    struct (fields in order) from a map (keys sorted)."""
    if value is None:
        return None
    if t.is_struct(kind):
        return {f.name: arrow_value(value[f.name], f.type) for f in kind}
    if t.is_map(kind):
        return sorted_map(
            (arrow_value(key, kind.key_type), arrow_value(item, kind.item_type))
            for key, item in value
        )
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return [arrow_value(item, kind.value_type) for item in value]
    return plain_value(value)


@contextlib.contextmanager
def utc_clock() -> Iterator[None]:
    """This process's local zone set to UTC while Spark's rows are taken (PySpark turns an
    instant into a wall time of the local zone), then as it was."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()
