"""WHERE predicates over a partitioned namespace's source columns: parse, render, evaluate.

The grammar is deliberately small (comparisons, IN, BETWEEN, IS NULL, AND/OR/NOT against
literals) because every construct we accept must be turned into a partition filter that can
never drop a matching row; anything else is refused up front with a one-line message.
Literals are typed against the column's Arrow type so that pruning, the Python evaluator and
the Lance scan all compare the same values.

sqlglot is imported inside the functions that parse: this module's literal typing serves
commands that read no predicate (a prune lists partition labels), and sqlglot is a tenth of a
second of their start.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.types as t

from lancens_cli.errors import InvalidInputError

FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
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


def _fail(message: str) -> InvalidInputError:
    return InvalidInputError(f"predicate: {message}")


# --------------------------------------------------------------------------- parsing


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
        raise _fail("the predicate is empty")
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(text, read=lance_dialect())
        return PredicateParser(schema).node(tree)
    except SqlglotError as exc:
        raise _fail(f"cannot parse {shortened(text)!r}: {parse_error_words(exc, text)}") from None
    except RecursionError:
        raise _fail("the predicate is nested too deeply") from None


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
                raise _fail(f"only IS [NOT] NULL is supported, got {snippet(e)!r}")
            return IsNull(self.column(e.this, e).name)
        op = _comparison_op(e)
        if op is not None:
            return self.comparison(e, op)
        if isinstance(e, exp.Column):
            raise _fail(f"a bare column is not a condition: {snippet(e)!r} (compare it to a value)")
        raise _fail(f"unsupported {_describe(e)} {snippet(e)!r}")

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
            raise _fail(f"comparing two columns is not supported: {snippet(e)!r}")
        field = self.column(left, e)
        return Comparison(field.name, op, self.literal(right, field))

    def in_list(self, e: Any) -> InList:
        if e.args.get("query") is not None or e.args.get("unnest") is not None:
            raise _fail(f"IN takes a list of literals, not a query: {snippet(e)!r}")
        field = self.column(e.this, e)
        if not e.expressions:
            raise _fail(f"IN needs at least one value: {snippet(e)!r}")
        return InList(field.name, tuple(self.literal(v, field) for v in e.expressions))

    def column(self, e: Any, context: Any) -> Any:
        from sqlglot import exp

        if not isinstance(e, exp.Column):
            raise _fail(
                f"the left side of {snippet(context)!r} must be a column, got "
                f"{_describe(e)} {snippet(e)!r}"
            )
        if e.table:
            raise _fail(f"qualified column names are not supported: {snippet(e)!r}")
        return self.field(e.name)

    def field(self, name: str) -> Any:
        if name in self.fields:
            return self.fields[name]
        folded = [f for n, f in self.fields.items() if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        known = ", ".join(self.fields) or "none"
        raise _fail(f"unknown column {name!r} (columns: {known})")

    def literal(self, e: Any, field: Any) -> Any:
        kind, raw = literal_kind(e)
        return coerce(kind, raw, field)


def _operands(e: Any, kind: type) -> list[Any]:
    """`a OR b OR c` as [a, b, c], without recursing once per term (long lists are common)."""
    out, stack = [], [e]
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
        raise _fail("NULL is not a comparable value (use IS NULL / IS NOT NULL)")
    if isinstance(e, exp.Cast) and isinstance(e.this, exp.Literal) and e.this.is_string:
        target = e.to.this.name if hasattr(e.to.this, "name") else str(e.to.this)
        if target in _DATE_TYPES:
            return "date", e.this.this
        if target in _TIMESTAMP_TYPES:
            return "timestamp", e.this.this
        if target in ("DECIMAL", "DECIMAL128", "DECIMAL256", "BIGINT"):
            return "number", e.this.this  # how decimals and INT64_MIN are rendered for Lance
    raise _fail(f"expected a literal value, got {_describe(e)} {snippet(e)!r}")


# --------------------------------------------------------------------------- literal typing


def coerce(kind: str, raw: Any, field: Any) -> Any:
    """The Python value of a literal compared with `field` (a pyarrow Field), or a clear error."""
    kind_type = field.type
    where = f"column {field.name!r} ({kind_type})"
    if t.is_integer(kind_type):
        return _integer(kind, raw, kind_type, where)
    if t.is_floating(kind_type):
        return _floating(kind, raw, kind_type, where)
    if t.is_decimal(kind_type):
        return _decimal(kind, raw, where)
    if t.is_boolean(kind_type):
        if kind != "bool":
            raise _fail(f"{where} takes TRUE or FALSE, got {_show(kind, raw)}")
        return raw
    if t.is_string(kind_type) or t.is_large_string(kind_type):
        if kind != "string":
            raise _fail(f"{where} takes a quoted string, got {_show(kind, raw)}")
        return raw
    if t.is_date(kind_type):
        return _date(kind, raw, where)
    if t.is_timestamp(kind_type):
        return _timestamp(kind, raw, kind_type.tz, where)
    raise _fail(f"{where}: values of this type cannot be compared in a predicate")


def _show(kind: str, raw: Any) -> str:
    if kind == "bool":
        return "TRUE" if raw else "FALSE"
    if kind in ("string", "date", "timestamp"):
        prefix = "" if kind == "string" else kind.upper() + " "
        return prefix + "'" + str(raw).replace("'", "''") + "'"
    return str(raw)


def _number(kind: str, raw: Any, where: str) -> Decimal:
    if kind != "number":
        raise _fail(f"{where} takes a number, got {_show(kind, raw)}")
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise _fail(f"{where}: {raw!r} is not a number") from None
    if not value.is_finite():
        raise _fail(f"{where}: {raw!r} is not a finite number")
    return value


def _integer(kind: str, raw: Any, kind_type: Any, where: str) -> int:
    value = _number(kind, raw, where)
    if value != value.to_integral_value():
        raise _fail(f"{where} takes an integer, got {raw}")
    number = int(value)
    low, high = integer_range(kind_type)
    if not low <= number <= high:
        raise _fail(f"{where}: {raw} is out of range [{low}, {high}]")
    return number


def integer_range(kind_type: Any) -> tuple[int, int]:
    """The lowest and highest value of an Arrow integer type."""
    bits = kind_type.bit_width
    if pa.types.is_unsigned_integer(kind_type):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _floating(kind: str, raw: Any, kind_type: Any, where: str) -> float:
    value = float(_number(kind, raw, where))
    if kind_type.bit_width < 64:  # compare what the column stores, as the scan does
        value = pa.scalar(value, kind_type).as_py()
    if not math.isfinite(value):
        raise _fail(f"{where}: {raw} is out of range")
    return value


def _decimal(kind: str, raw: Any, where: str) -> Decimal:
    return _number(kind, raw, where)


_DATE_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP_TEXT = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}(:?\d{2})?)?$"
)


def _date(kind: str, raw: Any, where: str) -> dt.date:
    if kind == "timestamp":
        stamp = _parse_timestamp(raw, where)
        if stamp.tzinfo is not None or stamp.time() != dt.time():
            raise _fail(f"{where} holds dates; TIMESTAMP {raw!r} is not a whole date")
        return stamp.date()
    if kind not in ("date", "string"):
        raise _fail(f"{where} takes DATE 'YYYY-MM-DD', got {_show(kind, raw)}")
    if not _DATE_TEXT.match(raw):
        raise _fail(f"{where}: {raw!r} is not a date (YYYY-MM-DD)")
    try:
        return dt.date.fromisoformat(raw)
    except ValueError as exc:
        raise _fail(f"{where}: {raw!r} is not a date ({exc})") from None


def _parse_timestamp(raw: str, where: str) -> dt.datetime:
    if not _TIMESTAMP_TEXT.match(raw):
        raise _fail(f"{where}: {raw!r} is not a timestamp (YYYY-MM-DD HH:MM:SS[.ffffff])")
    try:
        return dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise _fail(f"{where}: {raw!r} is not a timestamp ({exc})") from None


def _timestamp(kind: str, raw: Any, tz: str | None, where: str) -> dt.datetime:
    if kind == "date":
        stamp = dt.datetime.combine(_date("date", raw, where), dt.time())
    elif kind in ("timestamp", "string"):
        stamp = _parse_timestamp(raw, where)
    else:
        raise _fail(f"{where} takes TIMESTAMP 'YYYY-MM-DD HH:MM:SS', got {_show(kind, raw)}")
    if tz is None:  # an offset is converted to UTC wall time, as Lance does
        if stamp.tzinfo is not None:
            stamp = stamp.astimezone(dt.UTC).replace(tzinfo=None)
        return stamp
    return _zoned(stamp, zone(tz), where)


def zone(tz: str) -> dt.tzinfo:
    """The tzinfo of an Arrow time zone name or fixed offset."""
    if tz.upper() in ("UTC", "Z", "ETC/UTC", "+00:00", "GMT"):
        return dt.UTC
    match = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", tz)
    if match:
        sign = -1 if match.group(1) == "-" else 1
        delta = dt.timedelta(hours=int(match.group(2)), minutes=int(match.group(3)))
        return dt.timezone(sign * delta)

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise _fail(f"unknown time zone {tz!r}") from None


def _zoned(stamp: dt.datetime, tzinfo: dt.tzinfo, where: str) -> dt.datetime:
    """A time-zone-aware literal; a naive one is wall time in the column's zone (as in Lance).

    The value is rendered back as wall time in that zone, so a wall time that the zone has
    twice (or never) is refused rather than guessed.
    """
    stamp = stamp.replace(tzinfo=tzinfo) if stamp.tzinfo is None else stamp.astimezone(tzinfo)
    if not unambiguous(stamp):
        raise _fail(f"{where}: {stamp.replace(tzinfo=None)} is ambiguous or skipped in {tzinfo}")
    return stamp


def unambiguous(stamp: dt.datetime) -> bool:
    """Whether an aware datetime's wall time names exactly one instant in its own zone."""
    utc = dt.UTC
    other = stamp.replace(fold=1 - stamp.fold)
    same_fold = stamp.astimezone(utc).astimezone(stamp.tzinfo).replace(fold=stamp.fold)
    if same_fold.replace(tzinfo=None) != stamp.replace(tzinfo=None):
        return False  # skipped (DST gap)
    return stamp.utcoffset() == other.utcoffset()


# --------------------------------------------------------------------------- literal mistakes


class WrongLiteral(InvalidInputError):
    """A literal that no value of its column's type can be (`'abc'` for an int64 column, the date
    `'2025-02-30'`, 300 for an int8 column): the operator's mistake, refused wherever a condition
    is read, never left to the engine nor dropped from pruning."""


_BOOLEAN_WORDS = frozenset(("true", "false", "t", "f", "yes", "no", "y", "n", "1", "0"))
_LOOSE_DATE = re.compile(r"([+-]?\d{4,7})(?:-(\d{1,2})(?:-(\d{1,2}))?)?(.*)", re.DOTALL)
_LOOSE_CLOCK = re.compile(r"(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.\d*)?)?(.*)", re.DOTALL)


def literal_mistake(kind: str, raw: Any, field: Any) -> str | None:
    """Why a literal (`literal_kind`'s kind and raw text) can be no value of `field`'s type, in
    words; None when it can be one, or when only the engine's casts can tell.

    Lenient on purpose, since a refusal is final: named are only text that is no number for a
    numeric column (no boolean for a boolean one), a number outside an integer column's range,
    an impossible calendar date or clock time, and a number or boolean for a date or timestamp.
    What one engine reads and another does not (`'2025-2-3'`, `'5'` for an int) is not named.
    """
    kind_type, name = field.type, field.name
    shown = f"TIMESTAMP_NTZ {_show('string', raw)}" if kind == "timestamp_ntz" else _show(kind, raw)
    timed = kind in ("date", "timestamp", "timestamp_ntz")
    if timed and _impossible_time(str(raw), stamp=kind != "date"):
        what = "date" if kind == "date" else "timestamp"
        return f"{shown} is not a valid {what} for column {name}"
    if t.is_date(kind_type) or t.is_timestamp(kind_type):
        what = "date" if t.is_date(kind_type) else "timestamp"
        if kind in ("number", "bool") or (
            kind == "string" and _impossible_time(raw, stamp=what == "timestamp")
        ):
            return f"{shown} is not a valid {what} for column {name}"
        return None
    numeric = t.is_integer(kind_type) or t.is_floating(kind_type) or t.is_decimal(kind_type)
    if numeric:
        value = _loose_number(raw) if kind in ("number", "string") else None
        finite = value is not None and value.is_finite()
        readable = finite or (value is not None and t.is_floating(kind_type))  # 'NaN', 'inf'
        if timed or (kind in ("number", "string") and not readable):
            return f"{shown} is not a {kind_type} value for column {name}"
        if finite and t.is_integer(kind_type):
            low, high = integer_range(kind_type)
            if not low <= value <= high:
                return f"{shown} is out of range for column {name} ({kind_type}: {low} to {high})"
        return None
    wrong = timed or (kind == "string" and str(raw).strip().lower() not in _BOOLEAN_WORDS)
    if t.is_boolean(kind_type) and wrong:
        return f"{shown} is not a boolean value for column {name}"
    return None


def _loose_number(raw: Any) -> Decimal | None:
    try:
        return Decimal(str(raw).strip())
    except InvalidOperation:
        return None


def _impossible_time(text: str, stamp: bool) -> bool:
    """Whether `text` can name no date (no timestamp, when `stamp`) in any engine's reading.

    Spark reads `yyyy`, `yyyy-[m]m`, `yyyy-[m]m-[d]d` followed by ' ' or 'T' and anything (a
    date) or a time of day and zone (a timestamp; a time of day alone is today's). A month,
    day, hour, minute or second that no calendar or clock has is impossible; so is text that
    does not begin with a year.
    """
    text = text.strip()
    if stamp:
        clock = _LOOSE_CLOCK.fullmatch(text.removeprefix("T"))
        if clock is not None:
            return _impossible_clock(clock)
    found = _LOOSE_DATE.fullmatch(text)
    if found is None:
        return True
    year, month, day, rest = found.groups()
    if month is not None and not 1 <= int(month) <= 12:
        return True
    if day is not None and not 1 <= int(day) <= _days_in(int(year), int(month)):
        return True
    if not rest:
        return False
    if day is None:
        return True
    if rest[0] in " T":
        clock = _LOOSE_CLOCK.fullmatch(rest[1:].strip()) if stamp else None
        return clock is not None and _impossible_clock(clock)
    return not (stamp and rest[0] in "Z+-[")


def _impossible_clock(clock: re.Match[str]) -> bool:
    hour, minute, second, _ = clock.groups()
    return int(hour) > 23 or int(minute) > 59 or (second is not None and int(second) > 59)


def _days_in(year: int, month: int) -> int:
    if month == 2:
        return 29 if calendar.isleap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


# --------------------------------------------------------------------------- rendering

_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")


@functools.cache
def _keywords() -> frozenset[str]:
    """sqlglot's keywords (imported when first asked: sqlglot is a tenth of a second's import
    that commands reading no predicate never pay)."""
    from sqlglot.tokens import Tokenizer

    return frozenset(Tokenizer.KEYWORDS)


def quote_column(name: str) -> str:
    """A column name as Lance filters read it (backticks when not a plain identifier)."""
    if _PLAIN.match(name) and name.upper() not in _keywords():
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
        values = ", ".join(sql_literal(v) for v in node.literals)
        return f"{column} {'NOT IN' if node.negated else 'IN'} ({values})"
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
