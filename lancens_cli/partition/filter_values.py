"""The values of partition selection: those a predicate pins a column to (`binding`, the
bounds of a range), fitted to a partition column's type (`fit`), and written into a partition
filter with TRUE and FALSE folded (`one_of`, `all_of`, `any_of`).

These know no spec and no transform; `selection.py` uses them to turn a predicate into one
spec version's filter, and a value that cannot be used raises `NoSelection`, which there
means "no usable filter" (TRUE), never a guess.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow.types as t

from lancens_cli.partition.literals import integer_range, unambiguous, zone
from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Between,
    Comparison,
    InList,
    IsNull,
    Node,
    Or,
    conjuncts,
    flatten,
    to_sql,
)


class NoSelection(Exception):
    """This atom / field pair gives no usable filter (the result is TRUE)."""


# --------------------------------------------------------------------------- simplification


def all_of(items: list[Node]) -> Node:
    """AND with TRUE / FALSE folded; a repeated part is dropped (a weaker AND is still safe)."""
    out: list[Node] = []
    for item in items:
        for part in conjuncts(item):
            if part == FALSE:
                return FALSE
            if part != TRUE and part not in out:
                out.append(part)
    return flatten(And(tuple(out))) if out else TRUE


def any_of(items: list[Node]) -> Node:
    out: list[Node] = []
    for item in items:
        item = flatten(item)
        for part in item.items if isinstance(item, Or) else (item,):
            if part == TRUE:
                return TRUE
            if part != FALSE:
                out.append(part)
    return flatten(Or(tuple(out))) if out else FALSE


def _distinct(values: list[Any]) -> list[Any]:
    """Distinct values; 0.0 and -0.0 (or 1 and True) stay apart, since a hash tells them apart."""
    seen, out = set(), []
    for value in values:
        key = (type(value).__name__, repr(value))
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def one_of(column: str, values: list[Any]) -> Node:
    """`column` equals one of `values` (None meaning NULL)."""
    values = _distinct(values)
    present = [v for v in values if v is not None]
    parts: list[Node] = []
    if len(present) == 1:
        parts.append(Comparison(column, "=", present[0]))
    elif present:
        parts.append(InList(column, tuple(present)))
    if len(present) != len(values):
        parts.append(IsNull(column))
    return any_of(parts)


# --------------------------------------------------------------------------- value checks


def fit(value: Any, kind: Any) -> Any:
    """`value` as a literal of partition column type `kind`, or NoSelection.

    Lance refuses a literal that does not convert to the column's type (an int64 literal
    against an int32 column, say), so only values that fit go into the filter.
    """
    value = _plain(value)
    if value is None:
        raise NoSelection
    if t.is_boolean(kind) and isinstance(value, bool):
        return value
    if t.is_integer(kind) and isinstance(value, int) and not isinstance(value, bool):
        return _fit_int(value, kind)
    if t.is_floating(kind) and isinstance(value, float) and value == value:
        return value
    if t.is_decimal(kind) and isinstance(value, Decimal):
        return _fit_decimal(value, kind)
    if (t.is_string(kind) or t.is_large_string(kind)) and isinstance(value, str):
        return value
    if t.is_timestamp(kind) and isinstance(value, dt.datetime):
        return _fit_timestamp(value, kind)
    if t.is_date(kind) and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    raise NoSelection


def _plain(value: Any) -> Any:
    """A Python value from whatever a transform returned (Arrow or NumPy scalars too)."""
    if hasattr(value, "as_py"):
        return value.as_py()
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def _fit_int(value: int, kind: Any) -> int:
    low, high = integer_range(kind)
    if not low <= value <= high:
        raise NoSelection
    return value


def _fit_decimal(value: Decimal, kind: Any) -> Decimal:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent > kind.scale:
        raise NoSelection
    if abs(value) >= Decimal(10) ** (kind.precision - kind.scale):
        raise NoSelection
    return value


def _fit_timestamp(value: dt.datetime, kind: Any) -> dt.datetime:
    """Rendered as wall time, so it must be in the column's own zone, unambiguously."""
    if kind.tz is None:
        if value.tzinfo is not None:
            raise NoSelection
        return value
    if value.tzinfo is None:
        raise NoSelection
    local = value.astimezone(zone(kind.tz))
    if not unambiguous(local):
        raise NoSelection
    return local


def renderable(node: Node) -> Node:
    """Refuse a filter Lance could not read (checked once, where it is built)."""
    try:
        to_sql(node)
    except ValueError:
        raise NoSelection from None
    return node


# --------------------------------------------------------------------------- bindings and bounds


def binding(node: Node, column: str) -> list[Any] | None:
    """The values `column` can hold when `node` is TRUE, if `=` / IN pin them down."""
    if isinstance(node, Comparison):
        return [node.literal] if node.column == column and node.op == "=" else None
    if isinstance(node, InList):
        matches = node.column == column and not node.negated
        return _distinct(list(node.literals)) if matches else None
    if isinstance(node, And):
        found = [b for b in (binding(i, column) for i in node.items) if b is not None]
        return intersect(found) if found else None
    if isinstance(node, Or):
        values: list[Any] = []
        for item in node.items:
            bound = binding(item, column)
            if bound is None:
                return None
            values += bound
        return _distinct(values)
    return None


def intersect(bindings: list[list[Any]]) -> list[Any]:
    """Values of the first binding the others allow (a matching row equals one of them)."""
    first, rest = bindings[0], bindings[1:]
    return [v for v in first if all(any(v == w for w in b) for b in rest)]


def lower_bounds(node: Node, column: str) -> list[Any]:
    if isinstance(node, Comparison) and node.column == column and node.op in (">", ">="):
        return [node.literal]
    if isinstance(node, Between) and node.column == column and not node.negated:
        return [node.low]
    return []


def upper_bounds(node: Node, column: str) -> list[Any]:
    if isinstance(node, Comparison) and node.column == column and node.op in ("<", "<="):
        return [node.literal]
    if isinstance(node, Between) and node.column == column and not node.negated:
        return [node.high]
    return []
