"""Spark SQL conditions, split into what lancens can apply and what only Spark can.

`scan --where`, the data source's `where` and `prune` options and `partitions --where` take a
boolean SQL expression. Spark (or the caller) evaluates the whole of it; lancens uses the
top-level conjuncts that the predicate model (`predicate.py`) represents with exactly Spark's
meaning to prune partition tables and as the Lance scan filter. A conjunct is "understood" only
when that is certain: comparisons, IN, BETWEEN, IS NULL, NOT and ORs of those over a column and
literals typed exactly as the column is. Anything else (functions, arithmetic, LIKE, CASE, a
float column, a double literal, a timestamp whose zone is not known) is left to Spark, which
never makes the answer wrong, only the read larger.

Unknown columns, malformed conditions and literals that can be no value of their column's type
(`WrongLiteral`: `'abc'` for an int column, the date `'2025-02-30'`) are input errors found
here, before Spark starts, in any conjunct, understood or not.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.types as t
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.literals import WrongLiteral, coerce, literal_mistake, zone
from lancens_cli.partition.predicate import And, Node, columns_of, flatten
from lancens_cli.partition.predicate_parser import (
    PredicateParser,
    lance_dialect,
    literal_kind,
    parse_error_words,
    shortened,
    snippet,
)

# The SQL a condition is written in: "spark" (Spark SQL: `scan --where`, the data source's
# options) or "lance" (Lance's filter SQL, DataFusion's: `partitions --where`).
Dialect = Literal["spark", "lance"]


@dataclass(frozen=True)
class Conjunct:
    """One top-level AND term of a condition: its text, and its node when understood."""

    text: str
    node: Node | None
    reason: str | None = None  # why it is not understood


@dataclass(frozen=True)
class Condition:
    """A condition split into conjuncts (see the module docstring)."""

    text: str
    conjuncts: tuple[Conjunct, ...]
    columns: frozenset[str] = frozenset()  # the source columns it reads, as the schema names them

    @property
    def understood(self) -> list[Node]:
        return [c.node for c in self.conjuncts if c.node is not None]

    @property
    def left(self) -> list[Conjunct]:
        return [c for c in self.conjuncts if c.node is None]

    def pushed_node(self) -> Node | None:
        """The AND of the understood conjuncts (None when there is none)."""
        nodes = self.understood
        if not nodes:
            return None
        return nodes[0] if len(nodes) == 1 else flatten(And(tuple(nodes)))


def split_condition(
    text: str,
    schema: Any,
    dialect: Dialect = "spark",
    session_zone: str | None = "UTC",
    floats: bool = False,
    label: str = "predicate",
) -> Condition:
    """`text` over `schema` (pyarrow) split into conjuncts.

    `session_zone` is the Spark session time zone in which a timestamp literal without an
    offset names an instant (None: unknown, such literals are left to Spark). `floats`: take
    conjuncts on float columns too (the predicate model's float order is Lance's, where -0.0
    sorts below 0.0 and NaN is not equal to itself; Spark's is not). `label` begins every
    message (the CLI: the flag that gave the condition).
    """
    if not text or not text.strip():
        raise InvalidInputError(f"{label}: the condition is empty")
    try:
        tree = sqlglot.parse_one(text, read=_read_dialect(dialect))
    except SqlglotError as exc:
        words = parse_error_words(exc, text)
        raise InvalidInputError(f"{label}: cannot parse {shortened(text)!r}: {words}") from None
    except RecursionError:
        raise InvalidInputError(f"{label}: the condition is nested too deeply") from None
    if tree is None:
        raise InvalidInputError(f"{label}: the condition is empty")
    try:
        columns = _check_columns(tree, schema, dialect)
        _check_condition(tree)
        _check_literals(tree, schema, _spark_literal if dialect == "spark" else literal_kind)
    except InvalidInputError as exc:
        raise type(exc)(f"{label}: {exc.message.removeprefix('predicate: ')}") from None
    parser = _SparkParser(schema, session_zone) if dialect == "spark" else PredicateParser(schema)
    float_columns = {f.name for f in schema if _is_float(f.type)}
    parts = []
    for term in _terms(tree):
        sql = _sql(term, dialect)
        try:
            node = parser.node(term)
        except InvalidInputError as exc:
            parts.append(Conjunct(sql, None, exc.message.removeprefix("predicate: ")))
            continue
        except RecursionError:
            parts.append(Conjunct(sql, None, "nested too deeply"))
            continue
        if not floats and columns_of(node) & float_columns:
            parts.append(Conjunct(sql, None, "a float column (left to Spark's float order)"))
            continue
        parts.append(Conjunct(sql, node))
    return Condition(text, tuple(parts), columns)


@functools.cache
def _read_dialect(dialect: Dialect) -> Any:
    if dialect == "spark":
        return "spark"

    return lance_dialect()


def _sql(term: Any, dialect: Dialect) -> str:
    try:
        return term.sql(dialect=_read_dialect(dialect))
    except Exception:  # noqa: BLE001 - only for messages and --explain
        return snippet(term)


def _terms(tree: Any) -> list[Any]:
    """The top-level AND terms of `tree` (through parentheses), without deep recursion."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            stack += [node.expression, node.this]
        else:
            out.append(node)
    return out


def _check_columns(tree: Any, schema: Any, dialect: Dialect) -> frozenset[str]:
    """The columns the condition names, each one that exists (case-insensitively, as Spark
    resolves them)."""
    names = {f.name.lower(): f for f in schema}
    found = set()
    for column in tree.find_all(exp.Column):
        parts = [p.name for p in column.parts]
        head = parts[0]
        if head.lower() in names:
            found.add(names[head.lower()].name)
            continue
        if len(parts) > 1 and parts[-1].lower() in names:
            raise InvalidInputError(
                f"predicate: qualified column names are not supported: {column.sql()!r}"
            )
        hint = _quoting_hint(column, names, dialect)
        if hint is not None:
            raise InvalidInputError(
                f"predicate: unknown column {head!r} (quote strings with '...': {hint})"
            )
        known = ", ".join(f.name for f in schema) or "none"
        raise InvalidInputError(f"predicate: unknown column {head!r} (columns: {known})")
    return frozenset(found)


_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ)


def _quoting_hint(column: Any, names: dict[str, Any], dialect: Dialect) -> str | None:
    """`country = 'US'` for `country = US`: the comparison with the unknown names quoted, when
    an unknown name is compared with a known column (it reads as an unquoted string)."""
    parent = column.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if not isinstance(parent, (*_COMPARISONS, exp.In, exp.Between)):
        return None
    subject = parent.this if isinstance(parent, exp.In | exp.Between) else None
    operands = [subject] if subject is not None else [parent.this, parent.expression]
    if not any(
        isinstance(o, exp.Column) and len(o.parts) == 1 and o.name.lower() in names
        for o in operands
    ):
        return None
    fixed = parent.copy()
    for unknown in list(fixed.find_all(exp.Column)):
        if len(unknown.parts) == 1 and unknown.name.lower() not in names:
            unknown.replace(exp.Literal.string(unknown.name))
    return _sql(fixed, dialect)


def _check_literals(tree: Any, schema: Any, kind_of: Any) -> None:
    """Every literal compared with a column must be able to be a value of its type
    (`literals.literal_mistake`), wherever it stands in the condition."""
    names = {f.name.lower(): f for f in schema}

    def field_of(e: Any) -> Any:
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Column) and len(e.parts) == 1:
            return names.get(e.name.lower())
        return None

    def check(field: Any, e: Any) -> None:
        while isinstance(e, exp.Paren):
            e = e.this
        try:
            kind, raw = kind_of(e)
        except InvalidInputError:  # not a literal: the engine's to judge
            return
        mistake = literal_mistake(kind, raw, field)
        if mistake is not None:
            raise WrongLiteral(f"predicate: {mistake}")

    for node in tree.find_all(*_COMPARISONS, exp.In, exp.Between):
        if isinstance(node, exp.In | exp.Between):
            field = field_of(node.this)
            values = (
                node.expressions
                if isinstance(node, exp.In)
                else [node.args.get("low"), node.args.get("high")]
            )
            for value in values if field is not None else []:
                check(field, value)
            continue
        left, right = node.this, node.expression
        if field_of(left) is not None:
            check(field_of(left), right)
        elif field_of(right) is not None:
            check(field_of(right), left)


def _check_condition(tree: Any) -> None:
    """What is plainly not a condition (a bare literal or arithmetic) is refused here."""
    node = tree
    while isinstance(node, exp.Paren):
        node = node.this
    plain = (exp.Literal, exp.Null, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.DPipe)
    if isinstance(node, plain):
        raise InvalidInputError(
            f"predicate: {snippet(node)!r} is not a condition (it is not true or false)"
        )


def _is_float(kind: Any) -> bool:
    return bool(t.is_floating(kind))


class _SparkParser(PredicateParser):
    """The predicate model's parser, with literals read as Spark reads them."""

    def __init__(self, schema: Any, session_zone: str | None) -> None:
        super().__init__(schema)
        self.session_zone = session_zone

    def literal(self, e: Any, field: Any) -> Any:
        kind, raw = _spark_literal(e)
        if kind == "number" and any(ch in str(raw) for ch in "eE"):
            raise InvalidInputError(f"predicate: {raw} is a DOUBLE literal in Spark")
        if t.is_timestamp(field.type):
            return self._stamp(kind, raw, field)
        if t.is_date(field.type) and kind not in ("date", "string"):
            raise InvalidInputError(f"predicate: {snippet(e)!r} is not a date literal")
        return coerce(kind, raw, field)

    def _stamp(self, kind: str, raw: Any, field: Any) -> Any:
        """Spark casts the literal to the column's type in the session zone."""
        if kind not in ("timestamp", "timestamp_ntz", "string", "date"):
            raise InvalidInputError(f"predicate: column {field.name!r} takes a timestamp")
        text = str(raw)
        if field.type.tz is None:  # TIMESTAMP_NTZ: a wall time, never an instant
            if kind == "timestamp" or _has_offset(text):
                raise InvalidInputError(
                    f"predicate: an instant compared with the wall time {field.name!r}"
                )
            return coerce("date" if kind == "date" else "timestamp", text, field)
        if kind == "timestamp_ntz":
            raise InvalidInputError(
                f"predicate: a wall time compared with the instant {field.name!r}"
            )
        value = coerce("date" if kind == "date" else "timestamp", text, _naive(field))
        if _has_offset(text):
            stamp = dt.datetime.fromisoformat(text.replace(" ", "T", 1))
            return coerce("timestamp", stamp.astimezone(dt.UTC).isoformat(), field)
        if self.session_zone is None:
            raise InvalidInputError(
                f"predicate: the session time zone of {text!r} is not known; give an offset"
            )
        local = value.replace(tzinfo=zone(self.session_zone))
        instant = local.astimezone(dt.UTC)
        if instant.astimezone(local.tzinfo).replace(tzinfo=None) != value or local.utcoffset() != (
            local.replace(fold=1).utcoffset()
        ):
            raise InvalidInputError(f"predicate: {text!r} is ambiguous in {self.session_zone}")
        return coerce("timestamp", instant.isoformat(), field)


def _naive(field: Any) -> Any:
    return pa.field(field.name, pa.timestamp("us"))


def _has_offset(text: str) -> bool:
    tail = text[10:]
    return tail.endswith("Z") or "+" in tail or "-" in tail


def _spark_literal(e: Any) -> tuple[str, Any]:
    if isinstance(e, exp.Cast) and isinstance(e.this, exp.Literal) and e.this.is_string:
        target = e.to.this.name if hasattr(e.to.this, "name") else str(e.to.this)
        if target == "TIMESTAMPNTZ":
            return "timestamp_ntz", e.this.this
        if target in ("TIMESTAMPTZ", "TIMESTAMP", "TIMESTAMPLTZ"):
            return "timestamp", e.this.this
    return literal_kind(e)
