"""WHERE predicates over a partitioned namespace's source columns: the typed tree, rendered
as Lance SQL, evaluated on a row, and brought to normal forms.

The grammar is deliberately small (comparisons, IN, BETWEEN, IS NULL, AND/OR/NOT against
literals) because every construct we accept must be turned into a partition filter that can
never drop a matching row. Reading a predicate from text is `predicate_parser.py`; typing its
literals against a column is `literals.py`.

sqlglot's keyword list is imported inside the function that asks for it: commands that parse
no predicate render column names too (`create-index` quotes them), and sqlglot is a tenth of a
second of their start.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class Comparison:
    column: str
    op: str
    literal: Any


@dataclass(frozen=True)
class InList:
    column: str
    literals: tuple[Any, ...]
    negated: bool = False


@dataclass(frozen=True)
class Between:
    column: str
    low: Any
    high: Any
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    item: Node


@dataclass(frozen=True)
class Const:
    """TRUE / FALSE: what a partition filter simplifies to."""

    value: bool


TRUE = Const(True)
FALSE = Const(False)

Atom = Comparison | InList | Between | IsNull
Node = Comparison | InList | Between | IsNull | And | Or | Not | Const


# --------------------------------------------------------------------------- rendering

_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")


@functools.cache
def sql_keywords() -> frozenset[str]:
    """sqlglot's keywords that are plain words, from the list kept beside this module: sqlglot
    is a tenth of a second's import that a command rendering a filter but reading no
    condition (`merge`) need not pay."""
    text = (Path(__file__).parent / "sql_keywords.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def quote_column(name: str) -> str:
    """A column name as Lance filters read it (backticks when not a plain identifier)."""
    if _PLAIN.match(name) and name.upper() not in sql_keywords():
        return name
    return "`" + name.replace("`", "``") + "`"


def sql_literal(value: Any) -> str:
    """A literal as Lance / DataFusion SQL (DATE '..', TIMESTAMP '..', quoted strings)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if value < -(2**63) + 1:  # DataFusion reads -9223372036854775808 as a Float64
            return f"CAST('{value}' AS BIGINT)"
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no SQL literal")
        return repr(value)
    if isinstance(value, Decimal):
        return _decimal_sql(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.replace(tzinfo=None).isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    raise ValueError(f"{value!r} ({type(value).__name__}) has no SQL literal")


def _sql_list(values: tuple[Any, ...]) -> str:
    """The literals of an IN list; plain integers (a merge's keys: thousands a table) are
    written without a type test each."""
    if all(type(v) is int for v in values) and (not values or min(values) > -(2**63) + 1):
        return ", ".join(map(str, values))
    return ", ".join(sql_literal(v) for v in values)


def _decimal_sql(value: Decimal) -> str:
    """Lance reads a bare 1.5 as Float64 and refuses it against a decimal column."""
    if not value.is_finite():
        raise ValueError(f"{value} has no SQL literal")
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    precision = max(len(digits) + max(0, exponent), scale + 1)
    if precision > 38:
        raise ValueError(f"{value} does not fit a decimal literal")
    return f"CAST('{value:f}' AS DECIMAL({precision}, {scale}))"


def to_sql(node: Node) -> str:
    """Canonical SQL of a node (the residual a scan applies, and what --explain shows)."""
    if isinstance(node, Const):
        return "true" if node.value else "false"
    if isinstance(node, And | Or):
        word = " AND " if isinstance(node, And) else " OR "
        return word.join(_grouped(item) for item in node.items)
    if isinstance(node, Not):
        return f"NOT ({to_sql(node.item)})"
    column = quote_column(node.column)
    if isinstance(node, Comparison):
        op = "<>" if node.op == "!=" else node.op
        return f"{column} {op} {sql_literal(node.literal)}"
    if isinstance(node, InList):
        return f"{column} {'NOT IN' if node.negated else 'IN'} ({_sql_list(node.literals)})"
    if isinstance(node, Between):
        word = "NOT BETWEEN" if node.negated else "BETWEEN"
        return f"{column} {word} {sql_literal(node.low)} AND {sql_literal(node.high)}"
    return f"{column} IS {'NOT NULL' if node.negated else 'NULL'}"


def _grouped(node: Node) -> str:
    return f"({to_sql(node)})" if isinstance(node, And | Or) else to_sql(node)


# --------------------------------------------------------------------------- evaluation


def evaluate(node: Node, row: dict[str, Any]) -> bool | None:
    """SQL three-valued truth of `node` for one row of Python values (None is NULL)."""
    if isinstance(node, Const):
        return node.value
    if isinstance(node, And):
        return _and(evaluate(item, row) for item in node.items)
    if isinstance(node, Or):
        return _or(evaluate(item, row) for item in node.items)
    if isinstance(node, Not):
        inner = evaluate(node.item, row)
        return None if inner is None else not inner
    value = row.get(node.column)
    if isinstance(node, IsNull):
        return (value is not None) if node.negated else (value is None)
    if value is None:
        return None
    if isinstance(node, Comparison):
        return compare(value, node.op, node.literal)
    if isinstance(node, InList):
        found = any(compare(value, "=", v) for v in node.literals)
        return found != node.negated
    inside = compare(value, ">=", node.low) and compare(value, "<=", node.high)
    return inside != node.negated


def compare(left: Any, op: str, right: Any) -> bool:
    if op == "=":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == "<":
        return bool(left < right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left >= right)


def _kleene(values: Any, absorbing: bool) -> bool | None:
    """SQL's three-valued AND (absorbing False) or OR (absorbing True): NULL is unknown."""
    result: bool | None = not absorbing
    for value in values:
        if value is absorbing:
            return absorbing
        if value is None:
            result = None
    return result


def _and(values: Any) -> bool | None:
    return _kleene(values, False)


def _or(values: Any) -> bool | None:
    return _kleene(values, True)


# --------------------------------------------------------------------------- normal forms


def negation_normal_form(node: Node) -> Node:
    """The same predicate with NOT pushed onto atoms (exact under three-valued logic).

    NOT IN becomes a conjunction of `<>`, NOT BETWEEN a disjunction of `<` / `>`; only
    `IS NOT NULL` keeps a negation. Nested ANDs / ORs are flattened.
    """
    return _nnf(node, False)


def _nnf(node: Node, negate: bool) -> Node:
    if isinstance(node, Not):
        return _nnf(node.item, not negate)
    if isinstance(node, Const):
        return Const(node.value != negate)
    if isinstance(node, And | Or):
        items = tuple(_nnf(item, negate) for item in node.items)
        flip = isinstance(node, And) == negate  # De Morgan
        return flatten(Or(items) if flip else And(items))
    if isinstance(node, Comparison):
        return Comparison(node.column, NEGATE[node.op], node.literal) if negate else node
    if isinstance(node, IsNull):
        return IsNull(node.column, node.negated != negate)
    if isinstance(node, InList):
        if node.negated != negate:
            return flatten(And(tuple(Comparison(node.column, "!=", v) for v in node.literals)))
        return InList(node.column, node.literals)
    low, high = Comparison(node.column, ">=", node.low), Comparison(node.column, "<=", node.high)
    if node.negated != negate:
        return Or((_nnf(low, True), _nnf(high, True)))
    return Between(node.column, node.low, node.high)


def flatten(node: Node) -> Node:
    """Merge nested ANDs (ORs) into their parent; a one-item group is its item."""
    if not isinstance(node, And | Or):
        return node
    kind = type(node)
    items: list[Node] = []
    for item in node.items:
        item = flatten(item)
        items.extend(item.items if isinstance(item, kind) else (item,))
    return items[0] if len(items) == 1 else kind(tuple(items))


def conjuncts(node: Node | None) -> list[Node]:
    """The top-level AND parts of a predicate."""
    if node is None:
        return []
    node = flatten(node)
    return list(node.items) if isinstance(node, And) else [node]


def columns_of(node: Node) -> set[str]:
    if isinstance(node, And | Or):
        return set().union(*(columns_of(item) for item in node.items))
    if isinstance(node, Not):
        return columns_of(node.item)
    if isinstance(node, Const):
        return set()
    return {node.column}
