"""Which input columns a write casts into a namespace column of another type: one rule for every
writer (`write`, `merge`, `update` in this process; `ingest`, `merge` and the data source on
Spark), so one input gives one result whichever engine reads it (decision 30).

A column of the same kind (integers of another width, timestamps of another unit or zone) is
cast value by value, and a value the target cannot hold exactly is refused. Across kinds, only
the casts whose every value either converts exactly or fails: integers and floats into each
other, text parsed into numbers, booleans, dates and timestamps, numbers, booleans and dates
written as text, a date into a timestamp (its midnight). The rest are refused before a row is
read: a timestamp into a date or a number, a number into a boolean or a timestamp, a timestamp
into text (Spark hands a task microseconds where Parquet held milliseconds, so the text would
differ by engine). Nested and other types are left to pyarrow's cast, as they always were.
"""

from __future__ import annotations

from typing import Any

import pyarrow.types as t

_ACROSS = frozenset(
    {
        ("integer", "number"),
        ("number", "integer"),
        ("integer", "string"),
        ("number", "string"),
        ("boolean", "string"),
        ("date", "string"),
        ("binary", "string"),
        ("string", "integer"),
        ("string", "number"),
        ("string", "boolean"),
        ("string", "date"),
        ("string", "timestamp"),
        ("string", "binary"),
        ("date", "timestamp"),
    }
)


def scalar_kind(arrow_type: Any) -> str | None:
    """The kind of a scalar column's values (None: nested, dictionary, NULL, time, others)."""
    checks = (
        ("integer", t.is_integer),
        ("number", t.is_floating),
        ("number", t.is_decimal),
        ("string", lambda x: t.is_string(x) or t.is_large_string(x)),
        ("binary", lambda x: t.is_binary(x) or t.is_large_binary(x)),
        ("boolean", t.is_boolean),
        ("date", t.is_date),
        ("timestamp", t.is_timestamp),
    )
    for name, check in checks:
        if check(arrow_type):
            return name
    return None


def refused_cast(have: Any, want: Any) -> bool:
    """Whether a column of type `have` is refused for a target column of type `want` before
    any value is cast: two scalar kinds no exact cast joins."""
    given, wanted = scalar_kind(have), scalar_kind(want)
    if given is None or wanted is None or given == wanted:
        return False
    return (given, wanted) not in _ACROSS
