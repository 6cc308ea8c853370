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


def field_id_of(field: Any) -> int | None:
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


def _arrow_children(kind: Any) -> list[Any]:
    """Every child field Arrow gives a nested type (a map's key and item, not its entries)."""
    if t.is_struct(kind):
        return list(kind)
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return [kind.value_field]
    if t.is_map(kind):
        return [kind.key_field, kind.item_field]
    return []


def _rebuilt(kind: Any, children: list[Any]) -> Any:
    """`kind` with `children` in place of `_arrow_children(kind)`."""
    if t.is_struct(kind):
        return pa.struct(children)
    if t.is_large_list(kind):
        return pa.large_list(children[0])
    if t.is_fixed_size_list(kind):
        return pa.list_(children[0], kind.list_size)
    if t.is_list(kind):
        return pa.list_(children[0])
    if t.is_map(kind):
        return pa.map_(children[0], children[1])
    return kind


def _numbers_children(kind: Any) -> bool:
    """Whether Lance gives a nested type's children field ids of their own: a fixed-size list
    of numbers (a vector) is one field to Lance; one of structs is not (lance-core's schema)."""
    if t.is_fixed_size_list(kind):
        return t.is_struct(kind.value_type)
    return bool(_arrow_children(kind))


def named_children(field: Any) -> list[Any]:
    """Every child of `field`, named as this module names them in paths: a list's element is
    `item` whatever its name, and a map's one child is its `entries` struct of `key` and
    `value`. pyarrow keeps no field for the entries, so their id is the one before the key's
    (Lance numbers the entries, then the key, then the value)."""
    kind = field.type
    if t.is_struct(kind):
        return list(kind)
    if t.is_map(kind):
        key = kind.key_field.with_name("key")
        value = kind.item_field.with_name("value")
        key_id = field_id_of(key)
        entries_id = {FIELD_ID_KEY: str(key_id - 1)} if key_id is not None else None
        return [pa.field("entries", pa.struct([key, value]), nullable=False, metadata=entries_id)]
    return [c.with_name("item") for c in _arrow_children(kind)]


def lance_children(field: Any) -> list[Any]:
    """The children of `field` that Lance numbers, in its order (`named_children`)."""
    return named_children(field) if _numbers_children(field.type) else []


def with_children(field: Any, children: list[Any]) -> Any:
    """`field` with `children` (as `named_children` gives them) in place of its own, under
    their own names: Lance appends only to a table whose list elements are named alike."""
    kind = field.type
    own = _arrow_children(kind)
    if t.is_map(kind):
        key, value = children[0].type
        return field.with_type(pa.map_(key.with_name(own[0].name), value.with_name(own[1].name)))
    if not t.is_struct(kind):
        children = [children[0].with_name(own[0].name)]
    return field.with_type(_rebuilt(kind, children))


def without_ids(kind: Any) -> Any:
    """`kind` with no field id on any child (what Lance does not number carries none)."""
    children = _arrow_children(kind)
    if not children:
        return kind
    bare = []
    for child in children:
        metadata = {k: v for k, v in (child.metadata or {}).items() if k != FIELD_ID_KEY.encode()}
        bare.append(child.with_type(without_ids(child.type)).with_metadata(metadata or None))
    return _rebuilt(kind, bare)


def canonical_type(kind: Any) -> Any:
    """`kind` as Lance keeps it, for comparing types by type: a list's element is `item` (its
    name is the writer's: Parquet says `element`), a vector's element `item` and nullable (Lance
    keeps it so), a map's children `key` and `value`; field metadata dropped."""
    children = [pa.field(c.name, canonical_type(c.type), c.nullable) for c in _arrow_children(kind)]
    if t.is_fixed_size_list(kind):
        children = [pa.field("item", children[0].type)]
    elif t.is_list(kind) or t.is_large_list(kind):
        children = [children[0].with_name("item")]
    elif t.is_map(kind):
        children = [children[0].with_name("key"), children[1].with_name("value")]
    return _rebuilt(kind, children) if children else kind


def type_text(kind: Any) -> str:
    """What a column's type is compared by (`canonical_type`), as text."""
    return str(canonical_type(kind))


def nested_fields(fields: list[Any]) -> list[Any]:
    out = []
    for f in fields:
        out.append(f)
        out += nested_fields(lance_children(f))
    return out


def field_ids_by_path(schema: Any) -> dict[str, int]:
    """`lance:field_id` of every field of an Arrow schema, by dotted path (`s.x`)."""
    found: dict[str, int] = {}

    def visit(fields: list[Any], prefix: str) -> None:
        for f in fields:
            fid = field_id_of(f)
            if fid is not None:
                found[prefix + f.name] = fid
            visit(lance_children(f), f"{prefix}{f.name}.")

    visit(list(schema), "")
    return found


def lance_ids_by_path(lance_schema: Any) -> dict[str, int]:
    """The field id Lance gave every field of a table, by dotted path, its children named as
    `lance_children` names them (a list's element is `item` whatever the writer called it)."""
    found: dict[str, int] = {}

    def visit(fields: list[Any], names: list[str], prefix: str) -> None:
        for f, name in zip(fields, names, strict=True):
            found[prefix + name] = f.id()
            children = f.children()
            if children:
                named = [c.name for c in lance_children(f.to_arrow())]
                visit(children, named, f"{prefix}{name}.")

    top = lance_schema.fields()
    visit(top, [f.name() for f in top], "")
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
        maybe_ids = [field_id_of(x) for x in nested_fields([f])]
        ids = [i for i in maybe_ids if i is not None]
        if len(ids) < len(maybe_ids):
            return schema, []
        if ids != list(range(ids[0], ids[0] + len(ids))) or ids[0] < next_id:
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
                visit(lance_children(f), f"{prefix}{f.name}.")

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
    used = [i for i in (field_id_of(f) for f in nested_fields(list(schema))) if i is not None]
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
        children = [number(c) for c in lance_children(field)]
        if not children:  # a vector's element is part of the vector's one field
            return field.with_type(without_ids(field.type))
        return with_children(field, children)

    return pa.schema([number(f) for f in schema], metadata=schema.metadata)


def top_level_ids(schema: Any) -> dict[int, Any]:
    """Top-level fields by their id (partition sources are top-level columns)."""
    out = {}
    for f in schema:
        fid = field_id_of(f)
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
