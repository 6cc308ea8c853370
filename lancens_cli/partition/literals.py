"""Literals typed against a column's Arrow type: the Python value a predicate's literal is
compared as, and the literals no value of the column's type can be, in words.

Pruning, the Python evaluator and the Lance scan all compare the same typed values. This
stands apart from parsing because it serves commands that read no predicate (a partition value
given as `--partition K=V`, a prune listing partition labels), which never import sqlglot.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.types as t

from lancens_cli.errors import InvalidInputError


def predicate_error(message: str) -> InvalidInputError:
    """The error of a predicate (or a literal in one) that cannot be read."""
    return InvalidInputError(f"predicate: {message}")


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
            raise predicate_error(f"{where} takes TRUE or FALSE, got {_show(kind, raw)}")
        return raw
    if t.is_string(kind_type) or t.is_large_string(kind_type):
        if kind != "string":
            raise predicate_error(f"{where} takes a quoted string, got {_show(kind, raw)}")
        return raw
    if t.is_date(kind_type):
        return _date(kind, raw, where)
    if t.is_timestamp(kind_type):
        return _timestamp(kind, raw, kind_type.tz, where)
    raise predicate_error(f"{where}: values of this type cannot be compared in a predicate")


def _show(kind: str, raw: Any) -> str:
    if kind == "bool":
        return "TRUE" if raw else "FALSE"
    if kind in ("string", "date", "timestamp"):
        prefix = "" if kind == "string" else kind.upper() + " "
        return prefix + "'" + str(raw).replace("'", "''") + "'"
    return str(raw)


def _number(kind: str, raw: Any, where: str) -> Decimal:
    if kind != "number":
        raise predicate_error(f"{where} takes a number, got {_show(kind, raw)}")
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise predicate_error(f"{where}: {raw!r} is not a number") from None
    if not value.is_finite():
        raise predicate_error(f"{where}: {raw!r} is not a finite number")
    return value


def _integer(kind: str, raw: Any, kind_type: Any, where: str) -> int:
    value = _number(kind, raw, where)
    if value != value.to_integral_value():
        raise predicate_error(f"{where} takes an integer, got {raw}")
    number = int(value)
    low, high = integer_range(kind_type)
    if not low <= number <= high:
        raise predicate_error(f"{where}: {raw} is out of range [{low}, {high}]")
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
        raise predicate_error(f"{where}: {raw} is out of range")
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
            raise predicate_error(f"{where} holds dates; TIMESTAMP {raw!r} is not a whole date")
        return stamp.date()
    if kind not in ("date", "string"):
        raise predicate_error(f"{where} takes DATE 'YYYY-MM-DD', got {_show(kind, raw)}")
    if not _DATE_TEXT.match(raw):
        raise predicate_error(f"{where}: {raw!r} is not a date (YYYY-MM-DD)")
    try:
        return dt.date.fromisoformat(raw)
    except ValueError as exc:
        raise predicate_error(f"{where}: {raw!r} is not a date ({exc})") from None


def _parse_timestamp(raw: str, where: str) -> dt.datetime:
    if not _TIMESTAMP_TEXT.match(raw):
        raise predicate_error(f"{where}: {raw!r} is not a timestamp (YYYY-MM-DD HH:MM:SS[.ffffff])")
    try:
        return dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise predicate_error(f"{where}: {raw!r} is not a timestamp ({exc})") from None


def _timestamp(kind: str, raw: Any, tz: str | None, where: str) -> dt.datetime:
    if kind == "date":
        stamp = dt.datetime.combine(_date("date", raw, where), dt.time())
    elif kind in ("timestamp", "string"):
        stamp = _parse_timestamp(raw, where)
    else:
        raise predicate_error(
            f"{where} takes TIMESTAMP 'YYYY-MM-DD HH:MM:SS', got {_show(kind, raw)}"
        )
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
        raise predicate_error(f"unknown time zone {tz!r}") from None


def _zoned(stamp: dt.datetime, tzinfo: dt.tzinfo, where: str) -> dt.datetime:
    """A time-zone-aware literal; a naive one is wall time in the column's zone (as in Lance).

    The value is rendered back as wall time in that zone, so a wall time that the zone has
    twice (or never) is refused rather than guessed.
    """
    stamp = stamp.replace(tzinfo=tzinfo) if stamp.tzinfo is None else stamp.astimezone(tzinfo)
    if not unambiguous(stamp):
        raise predicate_error(
            f"{where}: {stamp.replace(tzinfo=None)} is ambiguous or skipped in {tzinfo}"
        )
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
        if finite and value is not None and t.is_integer(kind_type):
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
