"""A parsed condition as plain JSON data, so that it crosses to the data source unparsed.

`scan --where` parses its condition once (partition/spark_conditions.py). What the data source
needs of it (the conjuncts it understood, as predicate nodes) goes to the source as the
`pruneCondition` option in this form, not as SQL text to be parsed again. Every literal keeps
its exact type: integers of any width, floats by their shortest round-trip text, decimals as
text, dates, and timestamps with their offset (an instant) or without (a wall time).

The option is a string anybody can set, so `decode` checks it against the schema as strictly
as the parser checks SQL: a column that is not there or a literal of the wrong type is an
input error, never a wrong answer.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow.types as t

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.literals import integer_range, zone
from lancens_cli.partition.predicate import (
    And,
    Between,
    Comparison,
    Const,
    InList,
    IsNull,
    Node,
    Not,
    Or,
)
from lancens_cli.words import short

FORMAT = 1
_OPS = frozenset(("=", "!=", "<", "<=", ">", ">="))


def encode(nodes: list[Node]) -> str:
    """The JSON text of `nodes` (the conjuncts of one condition)."""
    return json.dumps({"format": FORMAT, "conjuncts": [_node(n) for n in nodes]})


def decode(text: str, schema: Any, label: str = "option pruneCondition") -> list[Node]:
    """The nodes `encode` wrote, checked against `schema` (a pyarrow schema)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise InvalidInputError(f"{label}: not a condition lancens wrote (not JSON)") from None
    except RecursionError:
        raise InvalidInputError(f"{label}: the condition is nested too deeply") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidInputError(f"{label}: not a condition of format {FORMAT}")
    conjuncts = data.get("conjuncts")
    if not isinstance(conjuncts, list):
        raise InvalidInputError(f"{label}: it has no list of conjuncts")
    reader = _Reader({f.name: f for f in schema}, label)
    try:
        return [reader.node(item) for item in conjuncts]
    except RecursionError:
        raise InvalidInputError(f"{label}: the condition is nested too deeply") from None


def _node(node: Node) -> dict[str, Any]:
    if isinstance(node, Const):
        return {"const": node.value}
    if isinstance(node, And | Or):
        return {"and" if isinstance(node, And) else "or": [_node(i) for i in node.items]}
    if isinstance(node, Not):
        return {"not": _node(node.item)}
    if isinstance(node, Comparison):
        return {"column": node.column, "op": node.op, "value": _literal(node.literal)}
    if isinstance(node, InList):
        values = [_literal(v) for v in node.literals]
        return {"column": node.column, "in": values, "negated": node.negated}
    if isinstance(node, Between):
        bounds = [_literal(node.low), _literal(node.high)]
        return {"column": node.column, "between": bounds, "negated": node.negated}
    return {"column": node.column, "is_null": True, "negated": node.negated}


def _literal(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, dt.datetime):
        return {"timestamp": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    raise ValueError(f"{value!r} ({type(value).__name__}) is not a predicate literal")


class _Reader:
    """Turns the data back into nodes, refusing anything the parser would not have made."""

    def __init__(self, fields: dict[str, Any], label: str) -> None:
        self.fields = fields
        self.label = label

    def fail(self, words: str) -> InvalidInputError:
        return InvalidInputError(f"{self.label}: {words}")

    def node(self, data: Any) -> Node:
        if not isinstance(data, dict):
            raise self.fail(f"{_quoted(data)} is not a condition")
        if "const" in data and isinstance(data["const"], bool):
            return Const(data["const"])
        for word, kind in (("and", And), ("or", Or)):
            if word in data:
                items = data[word]
                if not isinstance(items, list) or len(items) < 2:
                    raise self.fail(f"{word!r} takes a list of two or more conditions")
                return kind(tuple(self.node(i) for i in items))
        if "not" in data:
            return Not(self.node(data["not"]))
        field = self.field(data.get("column"))
        negated = data.get("negated", False)
        if not isinstance(negated, bool):
            raise self.fail(f"'negated' of column {field.name!r} is not true or false")
        if "op" in data:
            if data["op"] not in _OPS:
                raise self.fail(f"{_quoted(data['op'])} is not a comparison")
            return Comparison(field.name, data["op"], self.literal(data.get("value"), field))
        if "in" in data:
            values = data["in"]
            if not isinstance(values, list) or not values:
                raise self.fail(f"'in' of column {field.name!r} is not a list of values")
            return InList(field.name, tuple(self.literal(v, field) for v in values), negated)
        if "between" in data:
            bounds = data["between"]
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise self.fail(f"'between' of column {field.name!r} is not two values")
            low, high = (self.literal(b, field) for b in bounds)
            return Between(field.name, low, high, negated)
        if data.get("is_null") is True:
            return IsNull(field.name, negated)
        raise self.fail(f"{_quoted(data)} is not a condition")

    def field(self, name: Any) -> Any:
        if not isinstance(name, str) or name not in self.fields:
            raise self.fail(f"column {_quoted(name)} is not in the schema")
        return self.fields[name]

    def literal(self, data: Any, field: Any) -> Any:
        """The value, only if it has the Python type the parser gives `field`'s literals."""
        if not isinstance(data, dict) or len(data) != 1:
            raise self.fail(f"{_quoted(data)} is not a literal")
        ((tag, raw),) = data.items()
        fits, read = _LITERALS.get(tag, (None, None))
        if fits is None or read is None or not fits(field.type):
            raise self.fail(f"column {field.name!r} ({field.type}) cannot hold {_quoted(data)}")
        try:
            return read(raw, field.type)
        except (ValueError, TypeError, InvalidOperation):
            raise self.fail(
                f"column {field.name!r} ({field.type}) cannot hold {_quoted(data)}"
            ) from None


def _checked(ok: bool, value: Any) -> Any:
    if not ok:
        raise ValueError("out of range")
    return value


def _integer(raw: Any, kind: Any) -> int:
    low, high = integer_range(kind)
    number = int(_text(raw))
    return _checked(low <= number <= high, number)


def _float(raw: Any, kind: Any) -> float:
    number = float(_text(raw))
    return _checked(math.isfinite(number), number)


def _decimal(raw: Any, kind: Any) -> Decimal:
    value = Decimal(_text(raw))
    return _checked(value.is_finite(), value)


def _boolean(raw: Any, kind: Any) -> bool:
    return _checked(isinstance(raw, bool), raw)


def _date(raw: Any, kind: Any) -> dt.date:
    return dt.date.fromisoformat(_text(raw))


def _timestamp(raw: Any, kind: Any) -> dt.datetime:
    return _stamp(dt.datetime.fromisoformat(_text(raw)), kind.tz)


def _text(raw: Any) -> str:
    if not isinstance(raw, str):
        raise TypeError("not text")
    return raw


# tag -> (the Arrow types whose literals it holds, its reader)
_LITERALS: dict[str, tuple[Any, Any]] = {
    "bool": (t.is_boolean, _boolean),
    "int": (t.is_integer, _integer),
    "float": (t.is_floating, _float),
    "decimal": (t.is_decimal, _decimal),
    "string": (lambda k: t.is_string(k) or t.is_large_string(k), lambda raw, _: _text(raw)),
    "date": (t.is_date, _date),
    "timestamp": (t.is_timestamp, _timestamp),
}


def _stamp(stamp: dt.datetime, tz: str | None) -> dt.datetime:
    """A wall time for a column without a zone; an instant, in the column's zone, for one with."""
    if tz is None:
        if stamp.tzinfo is not None:
            raise ValueError("an instant for a wall-time column")
        return stamp
    if stamp.tzinfo is None:
        raise ValueError("a wall time for an instant column")
    return stamp.astimezone(zone(tz))


def _quoted(value: Any) -> str:
    """A value of the condition's data as an error message quotes it."""
    return short(json.dumps(value) if not isinstance(value, str) else repr(value), 80)
