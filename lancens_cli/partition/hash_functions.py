"""`murmur3` and `murmur3_multi` inside DataFusion partition expressions (spec 004).

The spec names them as Lance extensions to DataFusion, so that an `expression` field can say
`abs(murmur3(col0)) % 16` and get exactly what the `bucket` transform gives. DataFusion's Python
UDFs have fixed argument types, while the hash must take any hashable type with the promotion-safe
encoding of `murmur.py`; so each call is bound, per expression and batch, to a UDF registered for
the exact Arrow types of its column arguments. Arguments must be column references (`col0`, ...):
the source columns are what the spec hashes, and their types are known before evaluation.

`datafusion` is imported where used: it costs 0.6 s and only `expression` fields need it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pyarrow as pa
import pyarrow.types as pt

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition import murmur

_CALL = re.compile(r"\bmurmur3(_multi)?\s*\(([^()]*)\)", re.IGNORECASE)
_COLUMN = re.compile(r"col\d+")
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_MENTION = re.compile(r"\bmurmur3(_multi)?\b", re.IGNORECASE)


def _murmur3(array: pa.Array) -> pa.Array:
    if pt.is_null(array.type):  # a source column no longer in the schema reads as NULL
        return pa.nulls(len(array), pa.int32())
    return murmur.hash_array(array)


def _murmur3_multi(*arrays: pa.Array) -> pa.Array:
    present = [None if pt.is_null(a.type) else a for a in arrays]
    if all(a is None for a in present):
        return pa.nulls(len(arrays[0]), pa.int32())
    return murmur.hash_multi(present)


def _udf_name(multi: bool, kinds: list[pa.DataType]) -> str:
    digest = hashlib.sha1("|".join(map(str, kinds)).encode()).hexdigest()[:12]
    return f"lancens_murmur3{'_multi' if multi else ''}_{digest}"


def _register(ctx: Any, registered: set[str], multi: bool, kinds: list[pa.DataType]) -> str:
    from datafusion import udf

    name = _udf_name(multi, kinds)
    if name not in registered:
        for kind in kinds:
            if not pt.is_null(kind):
                murmur.check_hashable(kind)
        func = _murmur3_multi if multi else _murmur3
        ctx.register_udf(udf(func, list(kinds), pa.int32(), "immutable", name))
        registered.add(name)
    return name


def bind_hash_calls(ctx: Any, registered: set[str], expression: str, schema: pa.Schema) -> str:
    """`expression` with each murmur3 / murmur3_multi call bound to a typed UDF in `ctx`."""
    masked = _QUOTED.sub(lambda m: "'" + "_" * (len(m.group(0)) - 2) + "'", expression)
    if not _MENTION.search(masked):
        return expression
    pieces, last = [], 0
    for call in _CALL.finditer(masked):
        multi = call.group(1) is not None
        args = [a.strip() for a in expression[call.start(2) : call.end(2)].split(",")]
        what = "murmur3_multi" if multi else "murmur3"
        if not all(_COLUMN.fullmatch(a) for a in args) or (not multi and len(args) != 1):
            raise InvalidInputError(
                f"expression {expression!r}: {what} takes "
                f"{'column references' if multi else 'one column reference'} (col0, col1, ...)"
            )
        missing = [a for a in args if a not in schema.names]
        if missing:
            raise InvalidInputError(f"expression {expression!r}: no source column {missing[0]}")
        name = _register(ctx, registered, multi, [schema.field(a).type for a in args])
        pieces += [expression[last : call.start()], f"{name}({', '.join(args)})"]
        last = call.end()
    pieces.append(expression[last:])
    bound = "".join(pieces)
    if _MENTION.search(_QUOTED.sub("''", bound).replace("lancens_murmur3", "")):
        raise InvalidInputError(
            f"expression {expression!r}: murmur3 / murmur3_multi must be called on columns"
        )
    return bound
