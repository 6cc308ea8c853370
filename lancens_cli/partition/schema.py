"""The namespace schema of spec 004: a JsonArrowSchema whose every field has `lance:field_id`.

Ids are assigned once, depth-first from 0 (the order Lance itself numbers a new table's fields),
and never reused: partition specs refer to source columns by these ids, not by name.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pyarrow as pa
import pyarrow.types as t
from lance.fragment import DataFile

from lancens_cli.errors import InvalidInputError
from lancens_cli.schema_json import schema_from_json, schema_to_json

FIELD_ID_KEY = "lance:field_id"


def _field_id(field: Any) -> int | None:
    raw = (field.metadata or {}).get(FIELD_ID_KEY.encode())
    if raw is None:
        return None
    try:
        value = int(raw.decode())
    except ValueError:
        raise InvalidInputError(
            f"schema: field {field.name!r} has {FIELD_ID_KEY} {raw.decode()!r}, not an integer"
        ) from None
    if value < 0:
        raise InvalidInputError(f"schema: field {field.name!r} has a negative {FIELD_ID_KEY}")
    return value


def _children(field: Any) -> list[Any]:
    kind = field.type
    if t.is_struct(kind):
        return list(kind)
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return [kind.value_field]
    if t.is_map(kind):
        return [kind.key_field, kind.item_field]
    return []


def _with_children(field: Any, children: list[Any]) -> Any:
    kind = field.type
    if t.is_struct(kind):
        return field.with_type(pa.struct(children))
    if t.is_large_list(kind):
        return field.with_type(pa.large_list(children[0]))
    if t.is_fixed_size_list(kind):
        return field.with_type(pa.list_(children[0], kind.list_size))
    if t.is_list(kind):
        return field.with_type(pa.list_(children[0]))
    if t.is_map(kind):
        return field.with_type(pa.map_(children[0], children[1]))
    return field


def nested_fields(fields: list[Any]) -> list[Any]:
    out = []
    for f in fields:
        out.append(f)
        out += nested_fields(_children(f))
    return out


def field_ids_by_path(schema: Any) -> dict[str, int]:
    """`lance:field_id` of every field of an Arrow schema, by dotted path (`s.x`)."""
    found: dict[str, int] = {}

    def visit(fields: list[Any], prefix: str) -> None:
        for f in fields:
            fid = _field_id(f)
            if fid is not None:
                found[prefix + f.name] = fid
            visit(_children(f), f"{prefix}{f.name}.")

    visit(list(schema), "")
    return found


def lance_ids_by_path(lance_schema: Any) -> dict[str, int]:
    """The field id Lance gave every field of a table, by dotted path."""
    found: dict[str, int] = {}

    def visit(fields: list[Any], prefix: str) -> None:
        for f in fields:
            found[prefix + f.name()] = f.id()
            visit(f.children(), f"{prefix}{f.name()}.")

    visit(lance_schema.fields(), "")
    return found


GAP_PREFIX = "_lancens_field_id_gap_"


def field_id_padding(schema: Any, highest: int = -1) -> tuple[Any, list[str]]:
    """The schema with a NULL placeholder column in each gap of its field ids (and up to
    `highest`, the highest id the namespace ever used, so that Lance gives a column added later
    the id the namespace does), and the placeholders' names.

    Lance numbers a new table's fields 0, 1, 2, ... in schema order; spec 004 wants every
    partition table to carry the namespace schema's ids, which have gaps after a drop. A table
    created with the padded schema gets exactly those ids once the placeholders are dropped
    (a metadata-only commit). Gaps are filled between top-level columns; a schema whose ids
    cannot be reached so (a gap inside a nested column, ids out of order) is returned as it
    is, and `check` reports a table that reuses an id (`partition_field_ids_differ`)."""
    padded: list[Any] = []
    gaps: list[str] = []
    next_id = 0

    def pad(upto: int) -> None:
        for gap in range(next_id, upto):
            gaps.append(f"{GAP_PREFIX}{gap}")
            padded.append(pa.field(gaps[-1], pa.int8()))

    for f in schema:
        ids = [_field_id(x) for x in nested_fields([f])]
        if None in ids or ids != list(range(ids[0], ids[0] + len(ids))) or ids[0] < next_id:
            return schema, []
        pad(ids[0])
        padded.append(f)
        next_id = ids[-1] + 1
    pad(highest + 1)
    if not gaps:
        return schema, []
    return pa.schema(padded, metadata=schema.metadata), gaps


def padded_for_field_ids(table: Any, highest: int = -1) -> tuple[Any, list[str]]:
    """The rows in `field_id_padding`'s schema (placeholders all NULL), and the placeholders."""
    schema, gaps = field_id_padding(table.schema, highest)
    if not gaps:
        return table, []
    columns = [
        pa.nulls(table.num_rows, f.type) if f.name in gaps else table.column(f.name) for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema), gaps


def renumbered_fragments(fragments: list[Any], schema: Any, padded: Any) -> list[Any] | None:
    """Fragments whose data files Lance numbered by `schema` (0, 1, 2, ... depth-first),
    renumbered for `padded` (the same columns with placeholders between them); None when a
    file names an id `schema` does not have."""

    def numbering(fields: list[Any]) -> dict[str, int]:
        paths: list[str] = []

        def visit(items: list[Any], prefix: str) -> None:
            for f in items:
                paths.append(prefix + f.name)
                visit(_children(f), f"{prefix}{f.name}.")

        visit(fields, "")
        return {path: n for n, path in enumerate(paths)}

    old = {n: path for path, n in numbering(list(schema)).items()}
    new = numbering(list(padded))
    renumbered = []
    for fragment in fragments:
        files = []
        for data_file in fragment.files:
            if any(i not in old for i in data_file.fields):
                return None
            files.append(
                DataFile(
                    data_file.path,
                    [new[old[i]] for i in data_file.fields],
                    data_file.column_indices,
                    data_file.file_major_version,
                    data_file.file_minor_version,
                    data_file.file_size_bytes,
                    data_file.base_id,
                )
            )
        renumbered.append(dataclasses.replace(fragment, files=files))
    return renumbered


def with_field_ids(schema: Any) -> Any:
    """The schema with a `lance:field_id` on every field; ids already there are kept."""
    used = [i for i in (_field_id(f) for f in nested_fields(list(schema))) if i is not None]
    if len(used) != len(set(used)):
        raise InvalidInputError(f"schema: {FIELD_ID_KEY} values must be unique")
    next_id = max(used, default=-1) + 1

    def number(field: Any) -> Any:
        nonlocal next_id
        metadata = dict(field.metadata or {})
        if FIELD_ID_KEY.encode() not in metadata:
            metadata[FIELD_ID_KEY.encode()] = str(next_id).encode()
            next_id += 1
        field = field.with_metadata(metadata)
        children = [number(c) for c in _children(field)]
        return _with_children(field, children) if children else field

    return pa.schema([number(f) for f in schema], metadata=schema.metadata)


def top_level_ids(schema: Any) -> dict[int, Any]:
    """Top-level fields by their id (partition sources are top-level columns)."""
    out = {}
    for f in schema:
        fid = _field_id(f)
        if fid is None:
            raise InvalidInputError(f"schema: field {f.name!r} has no {FIELD_ID_KEY}")
        out[fid] = f
    return out


def id_of(schema: Any, name: str) -> int:
    for fid, f in top_level_ids(schema).items():
        if f.name == name:
            return fid
    names = ", ".join(f.name for f in schema)
    raise InvalidInputError(f"column {name!r} is not in the namespace schema ({names})")


def schema_to_text(schema: Any) -> str:
    return json.dumps(schema_to_json(schema), separators=(",", ":"))


def schema_from_text(text: str) -> Any:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"the namespace schema is not valid JSON: {exc}") from None
    schema = schema_from_json(document)
    top_level_ids(schema)  # every field must carry its id
    return schema
