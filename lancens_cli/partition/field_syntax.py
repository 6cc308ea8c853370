"""The readable form of a partition field that `add-partition-spec --field` takes.

    event_date                              identity, field id `event_date`
    year(event_date) as event_year          year / month / day / hour
    bucket(16, customer_id)                 field id `customer_id_bucket`
    multi_bucket(8, a, b) as ab             field id given, or `a_b_bucket`
    truncate(4, name)                       field id `name_trunc`
    expr(date_part('year', col0), event_date) -> int32 as y

`bucket(customer_id, 16)` (the argument order of spec Appendix F) is accepted too. A result
type after `->` is required for `expr(...)`; for a transform it may be given and must then agree
with the one the transform implies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.spec import (
    TIME_TRANSFORMS,
    TRANSFORM_TYPES,
    PartitionField,
    validate_field_id,
)
from lancens_cli.schema_json import type_to_json

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TAIL = re.compile(
    r"^(?P<body>.*?)(?:\s*->\s*(?P<type>[A-Za-z0-9_:]+))?(?:\s+as\s+(?P<id>\S+))?$",
    re.IGNORECASE | re.DOTALL,
)
_CALL = re.compile(rf"^(?P<fn>{_NAME})\s*\((?P<args>.*)\)$", re.DOTALL)
_COLUMN = re.compile(rf"^{_NAME}$")
_DEFAULT_SUFFIX = {"bucket": "bucket", "multi_bucket": "bucket", "truncate": "trunc"}


@dataclass(frozen=True)
class FieldRequest:
    """A field as the user wrote it: columns by name; ids are resolved against the schema."""

    text: str
    columns: tuple[str, ...]
    transform: str | None  # a TRANSFORM_TYPES name, or None for an expression
    parameter: int | None  # num_buckets or width
    expression: str | None
    result_type: str | None  # a JsonArrowDataType name, e.g. int32
    field_id: str


def _fail(text: str, why: str) -> InvalidInputError:
    return InvalidInputError(f"--field {text!r}: {why}")


def split_arguments(text: str) -> list[str]:
    """Split on commas outside parentheses and quotes."""
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, None
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return parts


def _column(text: str, value: str) -> str:
    if not _COLUMN.match(value):
        raise _fail(text, f"{value!r} is not a column name")
    return value


def parse_field(text: str) -> FieldRequest:
    tail = _TAIL.match(text.strip())
    assert tail is not None  # the pattern matches any string
    body, result_type, field_id = tail["body"].strip(), tail["type"], tail["id"]
    if not body:
        raise _fail(text, "empty")
    call = _CALL.match(body)
    if call is None:
        column = _column(text, body)
        return _request(text, (column,), "identity", None, None, result_type, field_id or column)
    function, args = call["fn"].lower(), split_arguments(call["args"])
    if function == "expr":
        if len(args) < 2 or not args[0]:
            raise _fail(text, "write expr(<SQL over col0, col1, ...>, <column>, ...)")
        columns = tuple(_column(text, a) for a in args[1:])
        if result_type is None:
            raise _fail(text, "an expression needs its result type: expr(...) -> int32")
        if field_id is None:
            raise _fail(text, "an expression needs a field id: expr(...) -> int32 as <id>")
        return _request(text, columns, None, None, args[0], result_type, field_id)
    if function not in TRANSFORM_TYPES or function == "identity" and len(args) != 1:
        known = ", ".join((*TRANSFORM_TYPES, "expr"))
        raise _fail(text, f"unknown transform {call['fn']!r} (known: {known})")
    if function == "identity" or function in TIME_TRANSFORMS:
        if len(args) != 1:
            raise _fail(text, f"{function} takes one column")
        column = _column(text, args[0])
        default = column if function == "identity" else f"{column}_{function}"
        return _request(text, (column,), function, None, None, result_type, field_id or default)
    numbers = [a for a in args if re.fullmatch(r"-?\d+", a)]
    names = [a for a in args if not re.fullmatch(r"-?\d+", a)]
    what = "width" if function == "truncate" else "bucket count"
    if len(numbers) != 1:
        raise _fail(text, f"{function} needs one {what}, e.g. {function}(16, column)")
    if function != "multi_bucket" and len(names) != 1:
        raise _fail(text, f"{function} takes one column")
    if not names:
        raise _fail(text, f"{function} needs its columns")
    columns = tuple(_column(text, a) for a in names)
    default = "_".join(columns) + "_" + _DEFAULT_SUFFIX[function]
    return _request(
        text, columns, function, int(numbers[0]), None, result_type, field_id or default
    )


def _request(
    text: str,
    columns: tuple[str, ...],
    transform: str | None,
    parameter: int | None,
    expression: str | None,
    result_type: str | None,
    field_id: str,
) -> FieldRequest:
    try:
        validate_field_id(field_id)
    except InvalidInputError as exc:
        raise _fail(text, exc.message.removeprefix("partition spec: ")) from None
    if parameter is not None and parameter < 1:
        raise _fail(text, "the bucket count or width must be at least 1")
    return FieldRequest(text, columns, transform, parameter, expression, result_type, field_id)


def field_text(field: PartitionField, sources: list[str]) -> str:
    """A spec field as the user writes it for `add-partition-spec --field` (the inverse of
    `parse_field`): `bucket(8, user_id)`, `month(event_date) as m`; `as <id>` only where the
    id is not the one the form gives by itself."""
    transform = field.transform
    if transform is None:
        kind = type_to_json(field.result_type)["type"]
        return f"expr({field.expression}, {', '.join(sources)}) -> {kind} as {field.field_id}"
    how = transform.display(sources)
    if transform.type == "identity":
        default = sources[0]
    elif transform.type in TIME_TRANSFORMS:
        default = f"{sources[0]}_{transform.type}"
    else:
        default = "_".join(sources) + "_" + _DEFAULT_SUFFIX.get(transform.type, transform.type)
    return how if field.field_id == default else f"{how} as {field.field_id}"
