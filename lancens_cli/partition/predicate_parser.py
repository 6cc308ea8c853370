"""Reading a WHERE predicate from text (Lance's filter SQL, through sqlglot) into the typed
tree of `predicate.py`, and saying in words what is wrong with text that is no predicate.

It stands apart from the tree because only the commands that read a predicate need it: anything
outside the small grammar is refused here, up front, with a one-line message. Spark SQL
conditions (`spark_conditions.py`) reuse its parser and error words.

sqlglot is imported inside the functions that parse: it is a tenth of a second of a command's
start, paid only once a predicate is read.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from lancens_cli.partition.literals import coerce, predicate_error
from lancens_cli.partition.predicate import (
    And,
    Atom,
    Between,
    Comparison,
    InList,
    IsNull,
    Node,
    Not,
    Or,
    flatten,
)

FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@functools.cache
def lance_dialect() -> Any:
    """Lance's filter SQL (DataFusion's, read as sqlglot's DuckDB dialect reads it), with
    backtick-quoted column names (built once: it is costly)."""
    from sqlglot.dialects.duckdb import DuckDB

    class _Lance(DuckDB):
        class Tokenizer(DuckDB.Tokenizer):
            IDENTIFIERS = ['"', "`"]

    return _Lance


def parse(text: str, schema: Any) -> Node:
    """The typed AST of a WHERE predicate over `schema`'s top-level columns."""
    if not text or not text.strip():
        raise predicate_error("the predicate is empty")
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(text, read=lance_dialect())
        return PredicateParser(schema).node(tree)
    except SqlglotError as exc:
        raise predicate_error(
            f"cannot parse {shortened(text)!r}: {parse_error_words(exc, text)}"
        ) from None
    except RecursionError:
        raise predicate_error("the predicate is nested too deeply") from None


def shortened(text: str) -> str:
    """A condition as an error message quotes it: at most 200 characters."""
    return text if len(text) <= 200 else text[:200] + "..."


_CLASS_REPR = re.compile(r"<class '(?:\w+\.)*(\w+)'>")
_MISSING = re.compile(r"Required keyword: '\w+' missing for")


def parse_error_words(exc: Exception, text: str) -> str:
    """What is wrong with `text` where sqlglot stopped, in words with the place (one line).

    sqlglot's ParseError lists line, column (of the token's last character) and the token; its
    message names expression classes, which are never shown.
    """
    errors = getattr(exc, "errors", None) or []
    if not errors:  # a TokenError: an unclosed quote or comment
        return _token_error_words(text)
    first = errors[0]
    token = str(first.get("highlight") or "").strip()
    description = str(first.get("description") or "")
    at_end = not str(first.get("end_context") or "").strip()
    if description.startswith("Expecting"):
        wanted = description.removeprefix("Expecting").strip()
        what = f"a closing {wanted} is missing" if at_end else f"expected {wanted} at {token}"
    elif _MISSING.match(description):
        if at_end:
            what = f"the condition ends after {token}" if token else "the condition ends early"
        else:
            what = f"unexpected {token}"
    elif description.startswith("Invalid expression") and token:
        what = f"unexpected {token}"
    else:
        what = _CLASS_REPR.sub(r"\1", description).strip() or "not a condition"
    line, col = first.get("line"), first.get("col")
    if isinstance(line, int) and isinstance(col, int):
        start = max(1, col - len(str(first.get("highlight") or "")) + 1)
        place = f"line {line}, character {start}" if line > 1 else f"character {start}"
        what += f" (at {place})"
    return what


def _token_error_words(text: str) -> str:
    """Which quote (or comment) of `text` is never closed, and where it opens."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            end = i + 1
            while end < n:
                if text[end] == "\\" and ch != "`":
                    end += 2
                    continue
                if text[end] == ch:
                    if end + 1 < n and text[end + 1] == ch:  # a doubled quote inside
                        end += 2
                        continue
                    break
                end += 1
            if end >= n:
                return f"the quote {ch} opened at character {i + 1} is never closed"
            i = end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return f"the comment opened at character {i + 1} is never closed"
            i = end + 2
        else:
            i += 1
    return "the text cannot be read as SQL"


class PredicateParser:
    def __init__(self, schema: Any) -> None:
        self.fields = {f.name: f for f in schema}

    def node(self, e: Any) -> Node:
        from sqlglot import exp

        if isinstance(e, exp.Paren):
            return self.node(e.this)
        if isinstance(e, exp.And | exp.Or):
            kind = And if isinstance(e, exp.And) else Or
            operands = _operands(e, type(e))
            return flatten(kind(tuple(self.node(x) for x in operands)))
        if isinstance(e, exp.Not):
            return self.negated(self.node(e.this))
        if isinstance(e, exp.In):
            return self.in_list(e)
        if isinstance(e, exp.Between):
            field = self.column(e.this, e)
            low, high = self.literal(e.args["low"], field), self.literal(e.args["high"], field)
            return Between(field.name, low, high)
        if isinstance(e, exp.Is):
            if not isinstance(e.expression, exp.Null):
                raise predicate_error(f"only IS [NOT] NULL is supported, got {snippet(e)!r}")
            return IsNull(self.column(e.this, e).name)
        op = _comparison_op(e)
        if op is not None:
            return self.comparison(e, op)
        if isinstance(e, exp.Column):
            raise predicate_error(
                f"a bare column is not a condition: {snippet(e)!r} (compare it to a value)"
            )
        raise predicate_error(f"unsupported {_describe(e)} {snippet(e)!r}")

    def negated(self, inner: Node) -> Node:
        """`x NOT IN`, `NOT BETWEEN`, `IS NOT NULL` keep their own form; the rest wraps."""
        if isinstance(inner, InList | Between | IsNull):
            return _with_negated(inner, not inner.negated)
        return Not(inner)

    def comparison(self, e: Any, op: str) -> Comparison:
        from sqlglot import exp

        left, right = e.this, e.expression
        if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
            left, right, op = right, left, FLIP[op]
        if isinstance(left, exp.Column) and isinstance(right, exp.Column):
            raise predicate_error(f"comparing two columns is not supported: {snippet(e)!r}")
        field = self.column(left, e)
        return Comparison(field.name, op, self.literal(right, field))

    def in_list(self, e: Any) -> InList:
        if e.args.get("query") is not None or e.args.get("unnest") is not None:
            raise predicate_error(f"IN takes a list of literals, not a query: {snippet(e)!r}")
        field = self.column(e.this, e)
        if not e.expressions:
            raise predicate_error(f"IN needs at least one value: {snippet(e)!r}")
        return InList(field.name, tuple(self.literal(v, field) for v in e.expressions))

    def column(self, e: Any, context: Any) -> Any:
        from sqlglot import exp

        if not isinstance(e, exp.Column):
            raise predicate_error(
                f"the left side of {snippet(context)!r} must be a column, got "
                f"{_describe(e)} {snippet(e)!r}"
            )
        if e.table:
            raise predicate_error(f"qualified column names are not supported: {snippet(e)!r}")
        return self.field(e.name)

    def field(self, name: str) -> Any:
        if name in self.fields:
            return self.fields[name]
        folded = [f for n, f in self.fields.items() if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        known = ", ".join(self.fields) or "none"
        raise predicate_error(f"unknown column {name!r} (columns: {known})")

    def literal(self, e: Any, field: Any) -> Any:
        kind, raw = literal_kind(e)
        return coerce(kind, raw, field)


def _operands(e: Any, kind: type[Any]) -> list[Any]:
    """`a OR b OR c` as [a, b, c], without recursing once per term (long lists are common)."""
    out: list[Any] = []
    stack: list[Any] = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            stack += [node.expression, node.this]
        else:
            out.append(node)
    return out


def _comparison_op(e: Any) -> str | None:
    from sqlglot import exp

    table = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
    return table.get(type(e))


def _describe(e: Any) -> str:
    from sqlglot import exp

    if isinstance(e, exp.Func):
        return "function call"
    if isinstance(e, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod | exp.IntDiv | exp.DPipe):
        return "arithmetic"
    if isinstance(e, exp.Column):
        return "column"
    if isinstance(e, exp.Like | exp.ILike):
        return "LIKE"
    return type(e).__name__


def snippet(e: Any) -> str:
    """A node's SQL as the user would write it (for error messages)."""
    try:
        return e.sql(dialect=lance_dialect())
    except Exception:  # noqa: BLE001 - only a message
        return type(e).__name__


def _with_negated(node: Atom, negated: bool) -> Atom:
    if isinstance(node, InList):
        return InList(node.column, node.literals, negated)
    if isinstance(node, Between):
        return Between(node.column, node.low, node.high, negated)
    assert isinstance(node, IsNull)
    return IsNull(node.column, negated)


_DATE_TYPES = ("DATE",)
_TIMESTAMP_TYPES = ("TIMESTAMP", "TIMESTAMPNTZ", "TIMESTAMPTZ", "DATETIME")


def literal_kind(e: Any) -> tuple[str, Any]:
    """(kind, raw text or bool) of a SQL literal; kind is number/string/bool/date/timestamp."""
    from sqlglot import exp

    if isinstance(e, exp.Literal):
        return ("string" if e.is_string else "number"), e.this
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        return "number", "-" + e.this.this
    if isinstance(e, exp.Boolean):
        return "bool", bool(e.this)
    if isinstance(e, exp.Null):
        raise predicate_error("NULL is not a comparable value (use IS NULL / IS NOT NULL)")
    if isinstance(e, exp.Cast) and isinstance(e.this, exp.Literal) and e.this.is_string:
        target = e.to.this.name if hasattr(e.to.this, "name") else str(e.to.this)
        if target in _DATE_TYPES:
            return "date", e.this.this
        if target in _TIMESTAMP_TYPES:
            return "timestamp", e.this.this
        if target in ("DECIMAL", "DECIMAL128", "DECIMAL256", "BIGINT"):
            return "number", e.this.this  # how decimals and INT64_MIN are rendered for Lance
    raise predicate_error(f"expected a literal value, got {_describe(e)} {snippet(e)!r}")
