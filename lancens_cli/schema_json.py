"""JsonArrowSchema (the Lance namespace client spec's JSON form of an Arrow schema).

Reading accepts the spellings found in the wild (`utf8`/`string`, `float64`/`double`,
`timestamp:us`, `date32:day`, ...); writing uses one canonical spelling, the one the specs'
examples use (`int32`, `utf8`, `date32`).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.types as t

from lancens_cli.errors import InvalidInputError, describe_exception

_SIMPLE = {
    "null": "null",
    "bool": "bool_",
    "boolean": "bool_",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "float16": "float16",
    "halffloat": "float16",
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "utf8": "string",
    "string": "string",
    "large_utf8": "large_string",
    "large_string": "large_string",
    "binary": "binary",
    "large_binary": "large_binary",
    "date32": "date32",
    "date32:day": "date32",
    "date64": "date64",
    "date64:ms": "date64",
}
TIME_UNITS = ("s", "ms", "us", "ns")
# The type names `type_from_json` reads from a bare name (evolve-schema's `NAME TYPE`): the
# simple ones, then the forms with parameters.
TYPE_NAMES = (
    *_SIMPLE,
    "timestamp[:UNIT[:ZONE]]",
    "time32:UNIT",
    "time64:UNIT",
    "duration:UNIT",
    "decimal:P:S",
    "decimal256:P:S",
)


def _fail(message: str) -> InvalidInputError:
    return InvalidInputError(f"invalid JSON Arrow schema: {message}")


def type_from_json(value: Any) -> Any:
    """A pyarrow DataType from a JsonArrowDataType object."""
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _fail(f"a type must be an object with a string 'type', not {value!r}")
    raw_head, _, rest = value["type"].strip().partition(":")  # a time zone keeps its case
    head = raw_head.lower()
    name = f"{head}:{rest}" if rest else head
    if name.lower() in _SIMPLE:
        return getattr(pa, _SIMPLE[name.lower()])()
    if head in ("timestamp", "time32", "time64", "duration"):
        unit = value.get("unit") or rest.split(":")[0] or ("us" if head != "time32" else "ms")
        if unit not in TIME_UNITS:
            raise _fail(f"unknown time unit {unit!r}")
        if head == "timestamp":
            tz = value.get("timezone") or (rest.split(":", 1)[1] if rest.count(":") else None)
            return pa.timestamp(unit, tz=tz or None)
        try:
            return getattr(pa, head)(unit)
        except (ValueError, TypeError):
            raise _fail(f"{head} does not take unit {unit!r}") from None
    if head in ("decimal", "decimal128", "decimal256"):
        parts = rest.split(":") if rest else []
        if head == "decimal" and parts and parts[0] in ("128", "256"):
            head, parts = f"decimal{parts[0]}", parts[1:]
        precision = value.get("precision", parts[0] if parts else None)
        scale = value.get("scale", parts[1] if len(parts) > 1 else 0)
        if precision is None:
            raise _fail(f"bad decimal precision/scale in {value!r}")
        try:
            maker = pa.decimal256 if head == "decimal256" else pa.decimal128
            return maker(int(precision), int(scale))
        except (TypeError, ValueError):
            raise _fail(f"bad decimal precision/scale in {value!r}") from None
    if name == "fixed_size_binary":
        return pa.binary(_length(value))
    if name in ("list", "large_list", "fixed_size_list", "struct", "map"):
        fields = value.get("fields")
        if not isinstance(fields, list) or not fields:
            raise _fail(f"{name} needs 'fields'")
        children = [field_from_json(f) for f in fields]
        if name == "list":
            return pa.list_(children[0])
        if name == "large_list":
            return pa.large_list(children[0])
        if name == "fixed_size_list":
            return pa.list_(children[0], _length(value))
        if name == "struct":
            return pa.struct(children)
        entry = children[0].type
        if not pa.types.is_struct(entry) or entry.num_fields != 2:
            raise _fail("map needs one struct field with a key and a value")
        return pa.map_(entry.field(0), entry.field(1))
    raise _fail(f"unknown type {value['type']!r}")


def _length(value: dict[str, Any]) -> int:
    length = value.get("length")
    if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
        raise _fail(f"{value['type']} needs a positive integer 'length'")
    return length


def field_from_json(value: Any) -> Any:
    if not isinstance(value, dict):
        raise _fail(f"a field must be an object, not {value!r}")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(f"a field needs a non-empty string 'name' ({value!r})")
    if "\x00" in name:  # Lance's files keep names as C strings: the name would read back cut
        raise _fail(f"field name {name!r} contains a NUL character")
    if "type" not in value:
        raise _fail(f"field {name!r} has no 'type'")
    nullable = value.get("nullable", True)
    if not isinstance(nullable, bool):
        raise _fail(f"field {name!r}: 'nullable' must be true or false")
    metadata = value.get("metadata") or None
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        raise _fail(f"field {name!r}: 'metadata' must map strings to strings")
    return pa.field(name, type_from_json(value["type"]), nullable=nullable, metadata=metadata)


def schema_from_json(value: Any) -> Any:
    """A pyarrow Schema from a parsed JsonArrowSchema document."""
    try:
        return _schema_from_json(value)
    except InvalidInputError:
        raise
    except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
        # values pyarrow itself refuses (a 2**31 length, a numeric time zone, ...)

        raise _fail(describe_exception(exc)) from None


def _schema_from_json(value: Any) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get("fields"), list):
        raise _fail("the document must be an object with a 'fields' list")
    fields = [field_from_json(f) for f in value["fields"]]
    names = [f.name for f in fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _fail(f"duplicate field names {duplicates}")
    metadata = value.get("metadata") or None
    if metadata is not None and not isinstance(metadata, dict):
        raise _fail("'metadata' must be an object")
    return pa.schema(fields, metadata=metadata)


def read_json_file(path: str, what: str) -> Any:
    """A JSON document from a file, with one-line errors that say which file and why."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise InvalidInputError(f"{what} {path} does not exist") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{what} {path} is not valid JSON: {exc}") from None
    except OSError as exc:
        raise InvalidInputError(f"{what} {path} cannot be read: {exc.strerror}") from None


def load_schema_file(path: str) -> Any:
    return schema_from_json(read_json_file(path, "schema file"))


def type_to_json(arrow_type: Any) -> dict[str, Any]:
    """A JsonArrowDataType object for a pyarrow DataType (canonical spelling)."""
    simple = {
        pa.null(): "null",
        pa.bool_(): "bool",
        pa.string(): "utf8",
        pa.large_string(): "large_utf8",
        pa.binary(): "binary",
        pa.large_binary(): "large_binary",
        pa.date32(): "date32",
        pa.date64(): "date64",
        pa.float16(): "float16",
        pa.float32(): "float32",
        pa.float64(): "float64",
    }
    for candidate, name in simple.items():
        if arrow_type == candidate:
            return {"type": name}
    if t.is_integer(arrow_type):
        return {"type": str(arrow_type)}
    if t.is_timestamp(arrow_type):
        out: dict[str, Any] = {"type": f"timestamp:{arrow_type.unit}"}
        if arrow_type.tz:
            out["type"] += f":{arrow_type.tz}"
        return out
    if t.is_time32(arrow_type) or t.is_time64(arrow_type) or t.is_duration(arrow_type):
        return {"type": f"{str(arrow_type).split('[')[0]}:{arrow_type.unit}"}
    if t.is_decimal(arrow_type):
        width = 256 if t.is_decimal256(arrow_type) else 128
        return {"type": f"decimal:{width}:{arrow_type.precision}:{arrow_type.scale}"}
    if t.is_fixed_size_binary(arrow_type):
        return {"type": "fixed_size_binary", "length": arrow_type.byte_width}
    if t.is_fixed_size_list(arrow_type):
        return {
            "type": "fixed_size_list",
            "fields": [field_to_json(arrow_type.value_field)],
            "length": arrow_type.list_size,
        }
    if t.is_large_list(arrow_type):
        return {"type": "large_list", "fields": [field_to_json(arrow_type.value_field)]}
    if t.is_list(arrow_type):
        return {"type": "list", "fields": [field_to_json(arrow_type.value_field)]}
    if t.is_map(arrow_type):
        entries = pa.field(
            "entries", pa.struct([arrow_type.key_field, arrow_type.item_field]), nullable=False
        )
        return {"type": "map", "fields": [field_to_json(entries)]}
    if t.is_struct(arrow_type):
        return {"type": "struct", "fields": [field_to_json(f) for f in arrow_type]}
    raise InvalidInputError(f"type {arrow_type} has no JSON Arrow form")


def field_to_json(arrow_field: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": arrow_field.name,
        "nullable": arrow_field.nullable,
        "type": type_to_json(arrow_field.type),
    }
    if arrow_field.metadata:
        out["metadata"] = {k.decode(): v.decode() for k, v in arrow_field.metadata.items()}
    return out


def schema_to_json(schema: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"fields": [field_to_json(f) for f in schema]}
    if schema.metadata:
        out["metadata"] = {k.decode(): v.decode() for k, v in schema.metadata.items()}
    return out
