"""The values `scan` prints, whichever engine read the rows: one form for Spark's rows and for
Arrow batches read in this process, so the two engines print the same answer.

A value becomes what JSON holds: instants as UTC wall times in ISO 8601 (what a UTC Spark session
shows; the column's type says it is an instant), dates and times in ISO 8601, decimals as text
(exact), bytes as hex, a struct as an object of its fields (Spark's `Row` too), a map as an
object, lists as lists; numbers, booleans and strings as they are. Spark hands instants to Python
in the process's local zone, so the rows of a Spark read are taken in `utc_clock()`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any


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
    if isinstance(value, dict):
        return {key: plain_value(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [plain_value(inner) for inner in value]
    return value


def plain_row(row: Any) -> list[Any]:
    """One row (a Spark Row, or a list of Python values) as plain values."""
    return [plain_value(value) for value in row]


def arrow_rows(batch: Any) -> Iterator[list[Any]]:
    """The rows of an Arrow batch or table as plain values (maps as objects, as Spark's)."""
    columns = [column.to_pylist(maps_as_pydicts="lossy") for column in batch.columns]
    for values in zip(*columns, strict=True):
        yield plain_row(values)


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
