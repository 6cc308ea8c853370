"""Spark's pushed filters as the predicate model that `partitions --where` uses.

A filter becomes a node of `partition/predicate.py` only when its literal is typed exactly as
the column's Arrow type, so that pruning, the Lance scan filter and Spark compare the same
values. Such a filter is applied in full by lancens (partition pruning plus the Lance filter)
and is not returned to Spark; every other filter is returned. Float columns are never taken:
Lance orders -0.0 below 0.0 and Spark does not, so a pushed `x = 0.0` could drop rows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Comparison,
    Const,
    InList,
    IsNull,
    Node,
    Not,
    Or,
    flatten,
    negation_normal_form,
    parse,
    to_sql,
    unambiguous,
    zone,
)

_OPS = {
    "EqualTo": "=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
}


class _Untyped(Exception):
    """A literal that is not exactly a value of the column's type."""


@dataclass(frozen=True)
class Translated:
    """What one Spark filter means in the predicate model."""

    node: Node
    exact: bool  # True: lancens applies it in full, Spark need not check it again


def translate(spark_filter: Any, schema: Any) -> Translated | None:
    """The node of one Spark filter over `schema` (pyarrow), or None when it is not usable."""
    fields = {f.name: f for f in schema}
    try:
        translated = _translate(spark_filter, fields)
    except _Untyped:
        return None
    if translated is None:
        return None
    try:  # what we push must read back as itself: the same text `partitions --where` takes
        if parse(to_sql(translated.node), schema) is None:
            return None
    except Exception:  # noqa: BLE001 - e.g. a wall time its zone has twice: leave it to Spark
        return None
    return translated


def _translate(f: Any, fields: dict[str, Any]) -> Translated | None:
    kind = type(f).__name__
    if kind == "Not":
        return _negated(f.child, fields)
    column = _column(f, fields)
    if column is None:
        return None
    if kind in _OPS:
        return Translated(Comparison(column.name, _OPS[kind], _typed(f.value, column)), True)
    if kind == "EqualNullSafe":
        if f.value is None:
            return Translated(IsNull(column.name), True)
        return Translated(Comparison(column.name, "=", _typed(f.value, column)), True)
    if kind == "In":
        values = [_typed(v, column) for v in f.value if v is not None]
        if not values:
            return Translated(FALSE, True)  # x IN (NULL) is never TRUE
        return Translated(InList(column.name, tuple(values)), True)
    if kind in ("IsNull", "IsNotNull"):
        return Translated(IsNull(column.name, negated=kind == "IsNotNull"), True)
    if kind == "StringStartsWith":
        return _prefix(column, f.value)
    return None


def _negated(child: Any, fields: dict[str, Any]) -> Translated | None:
    """`NOT f`; `NOT (x <=> v)` is TRUE for a NULL x, unlike `NOT (x = v)`."""
    kind = type(child).__name__
    if kind == "EqualNullSafe":
        column = _column(child, fields)
        if column is None:
            return None
        if child.value is None:
            return Translated(IsNull(column.name, negated=True), True)
        value = _typed(child.value, column)
        node = Or((IsNull(column.name), Comparison(column.name, "!=", value)))
        return Translated(node, True)
    inner = _translate(child, fields)
    if inner is None or not inner.exact:
        return None  # NOT of a weaker condition is not implied by anything
    return Translated(Not(inner.node), True)


def _column(f: Any, fields: dict[str, Any]) -> Any:
    path = getattr(f, "attribute", None)
    if not path or len(path) != 1 or path[0] not in fields:
        return None  # nested fields are Spark's to check
    return fields[path[0]]


def _prefix(column: Any, prefix: str) -> Translated | None:
    """`x LIKE 'ab%'` implies 'ab' <= x < 'ac' (byte order is code point order in UTF-8)."""
    import pyarrow.types as t

    if not (t.is_string(column.type) or t.is_large_string(column.type)) or not prefix:
        return None
    low = Comparison(column.name, ">=", prefix)
    last = ord(prefix[-1])
    if last >= 0x10FFFF or 0xD7FF <= last < 0xE000:
        return Translated(low, False)
    high = Comparison(column.name, "<", prefix[:-1] + chr(last + 1))
    return Translated(And((low, high)), False)


def _typed(value: Any, column: Any) -> Any:
    """`value` as a literal of the column's Arrow type, exactly, or _Untyped."""
    import pyarrow.types as t

    kind = column.type
    if value is None or isinstance(value, float):
        raise _Untyped
    if t.is_boolean(kind) and isinstance(value, bool):
        return value
    if isinstance(value, bool):
        raise _Untyped
    if t.is_integer(kind) and isinstance(value, int):
        return _in_range(value, kind)
    if t.is_decimal(kind) and isinstance(value, int | Decimal):
        return Decimal(value)
    if (t.is_string(kind) or t.is_large_string(kind)) and isinstance(value, str):
        return value
    if t.is_date(kind) and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if t.is_timestamp(kind) and isinstance(value, dt.datetime):
        return _stamp(value, kind)
    raise _Untyped


def _in_range(value: int, kind: Any) -> int:
    import pyarrow.types as t

    bits = kind.bit_width
    if t.is_unsigned_integer(kind):
        low, high = 0, 2**bits - 1
    else:
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if not low <= value <= high:
        raise _Untyped
    return value


def _stamp(value: dt.datetime, kind: Any) -> dt.datetime:
    """Spark sends TIMESTAMP as an aware UTC datetime and TIMESTAMP_NTZ as a naive one."""
    if kind.tz is None:
        if value.tzinfo is not None:
            raise _Untyped
        return value
    if value.tzinfo is None:
        raise _Untyped
    local = value.astimezone(zone(kind.tz))
    if not unambiguous(local):
        raise _Untyped
    return local


# --------------------------------------------------------------------------- missing columns


def without_columns(node: Node, missing: set[str]) -> Node:
    """`node` for rows whose `missing` columns are all NULL (an old table lacks them).

    In negation normal form the predicate is monotone in its atoms, so an atom that is
    UNKNOWN may be taken as FALSE without changing which rows are TRUE.
    """
    return _fold(negation_normal_form(node), missing)


def _fold(node: Node, missing: set[str]) -> Node:
    if isinstance(node, Const):
        return node
    if isinstance(node, And | Or):
        items = [_fold(item, missing) for item in node.items]
        stop, skip = (FALSE, TRUE) if isinstance(node, And) else (TRUE, FALSE)
        if stop in items:
            return stop
        kept = tuple(i for i in items if i != skip)
        return flatten(type(node)(kept)) if kept else skip
    if isinstance(node, Not):  # NNF leaves none; an UNKNOWN inside stays UNKNOWN outside
        return node if _fold(node.item, missing) is node.item else FALSE
    if node.column not in missing:
        return node
    if isinstance(node, IsNull):
        return FALSE if node.negated else TRUE
    return FALSE
