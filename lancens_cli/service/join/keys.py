"""`join-plan --on`: the join-key syntax (`l.a = r.b`) and which columns each key pairs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow.types as t

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.schema import id_of, top_level_ids

_ON = re.compile(r"^\s*([lr])\.(.+?)\s*=\s*([lr])\.(.+?)\s*$", re.IGNORECASE | re.DOTALL)

# --- the join keys ----------------------------------------------------------------------------


def parse_on(text: str) -> tuple[str, str]:
    """`l.a = r.b` (or `r.b = l.a`) -> ("a", "b")."""
    match = _ON.match(text)
    sides = (match.group(1).lower(), match.group(3).lower()) if match else None
    if match is None or sides not in (("l", "r"), ("r", "l")):
        raise InvalidInputError(f"--on {text!r}: expected 'l.<left column> = r.<right column>'")
    first, second = _unquote(match.group(2)), _unquote(match.group(4))
    return (first, second) if sides == ("l", "r") else (second, first)


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in '"`':
        name = name[1:-1]
    if not name:
        raise InvalidInputError("--on: a column name is empty")
    return name


@dataclass(frozen=True)
class JoinKey:
    """One `l.a = r.b` equality, resolved to the field ids partition specs refer to."""

    left: str
    right: str
    left_id: int
    right_id: int
    left_type: Any
    right_type: Any

    @property
    def text(self) -> str:
        return f"l.{self.left} = r.{self.right}"


def key_family(kind: Any) -> str:
    """Types whose values (and hashes, spec: type-promotion resistant) compare equal."""
    if t.is_integer(kind):
        return "integer"
    if t.is_string(kind) or t.is_large_string(kind) or t.is_string_view(kind):
        return "string"
    if t.is_binary(kind) or t.is_large_binary(kind) or t.is_binary_view(kind):
        return "binary"
    if t.is_fixed_size_binary(kind):
        return "binary"
    if t.is_decimal(kind):
        return f"decimal with scale {kind.scale}"  # hashes use the unscaled value
    for name, test in (("date", t.is_date), ("timestamp", t.is_timestamp), ("time", t.is_time)):
        if test(kind):
            return name
    return str(kind)


def resolve_keys(on: list[tuple[str, str]], left_schema: Any, right_schema: Any) -> list[JoinKey]:
    """Column names -> JoinKeys; an unknown column or a repeated pair is invalid input."""
    if not on:
        raise InvalidInputError("give at least one join key with --on 'l.<col> = r.<col>'")
    keys: list[JoinKey] = []
    for left, right in on:
        text = f"l.{left} = r.{right}"
        left_id = _column_id(left_schema, left, "left", text)
        right_id = _column_id(right_schema, right, "right", text)
        key = JoinKey(
            left,
            right,
            left_id,
            right_id,
            top_level_ids(left_schema)[left_id].type,
            top_level_ids(right_schema)[right_id].type,
        )
        if any((k.left_id, k.right_id) == (left_id, right_id) for k in keys):
            raise InvalidInputError(f"--on {text!r} is given twice")
        keys.append(key)
    return keys


def _column_id(schema: Any, name: str, side: str, text: str) -> int:
    try:
        return id_of(schema, name)
    except InvalidInputError as exc:
        raise InvalidInputError(f"--on {text!r}: {side} {exc.message}") from None
