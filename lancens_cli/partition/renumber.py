"""A namespace schema numbered unlike Lance, found and renumbered (spec 004, Namespace Schema).

Field ids must be "consistent across partition tables", and Lance numbers a table's fields
itself: a vector (a fixed-size list of numbers) is one field, a map has an `entries` field.
An older lancens gave a vector's element an id and a map's entries none, so every column after
one had an id one off from every partition table's. Renumbering takes the ids the partition
tables agree on (or Lance's own numbering of the schema when there is no table) and carries
them through every earlier generation of the schema and every spec's `source_ids`: a column
is the same column in every generation by its old id, so reading through history still works.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.schema import (
    FIELD_ID_KEY,
    field_id_of,
    lance_children,
    named_children,
    with_children,
    without_ids,
)
from lancens_cli.partition.spec import PartitionSpec


def structure(field: Any, path: str = "") -> list[tuple[str, Any]]:
    """The fields Lance numbers in `field`, depth-first, with their paths below it (`""` for
    the field itself, `.entries.key` for a map's key)."""
    out = [(path, field)]
    for child in lance_children(field):
        out += structure(child, f"{path}.{child.name}")
    return out


def lance_paths(schema: Any) -> list[str]:
    """Every path Lance gives a field id in a table of `schema`, in its order."""
    return [f.name + rel for f in schema for rel, _ in structure(f)]


def numbering_faults(schema: Any) -> list[str]:
    """How the schema's field ids depart from Lance's numbering, in words (empty: none)."""
    faults = []
    seen: dict[int, str] = {}
    for top in schema:
        numbered = {rel for rel, _ in structure(top)}
        for rel, f in structure(top):
            fid = field_id_of(f)
            path = top.name + rel
            if fid is None:
                faults.append(f"{path} has no id (Lance numbers it)")
            elif fid in seen:
                faults.append(f"{path} has id {fid}, as {seen[fid]} has")
            else:
                seen[fid] = path
        faults += [
            f"{top.name}{rel} has id {field_id_of(f)} (Lance gives a vector's elements none)"
            for rel, f in _all_fields(top)
            if rel not in numbered and field_id_of(f) is not None
        ]
    return faults


def _all_fields(field: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every field Arrow has below `field`, numbered by Lance or not (paths as `structure`)."""
    out = [(path, field)]
    for child in named_children(field):
        out += _all_fields(child, f"{path}.{child.name}")
    return out


@dataclass(frozen=True)
class Renumbering:
    """The namespace schema, its history and its specs numbered as Lance numbers tables."""

    schema: Any
    history: list[Any]
    specs: list[PartitionSpec]
    moved: dict[str, tuple[int | None, int]]  # path in the current schema: (old id, new id)


def renumbered(
    schema: Any, history: list[Any], specs: list[PartitionSpec], table_ids: dict[str, int] | None
) -> Renumbering:
    """`table_ids`: the ids the partition tables agree on, by path (None: no table; Lance's own
    numbering of the schema, from 0). A column keeps its identity across generations by its
    old top-level id; an id only an earlier generation has is moved above every new one."""
    paths = lance_paths(schema)
    target = dict(table_ids) if table_ids is not None else {p: i for i, p in enumerate(paths)}
    lacking = [p for p in paths if p not in target]
    if lacking:
        raise InvalidInputError(f"the partition tables have no field {', '.join(lacking)}")
    new_ids = [target[p] for p in paths]
    if len(set(new_ids)) != len(new_ids):
        raise InvalidInputError("the partition tables' field ids are not unique")
    ids: dict[tuple[int, str], int] = {}
    moved: dict[str, tuple[int | None, int]] = {}
    for top in schema:
        for rel, f in structure(top):
            ids[(_top_id(top), rel)] = target[top.name + rel]
            if field_id_of(f) != target[top.name + rel]:
                moved[top.name + rel] = (field_id_of(f), target[top.name + rel])
    fresh = iter(range(max(new_ids, default=-1) + 1, 1 << 31))

    def id_of(key: tuple[int, str]) -> int:
        if key not in ids:
            ids[key] = next(fresh)
        return ids[key]

    def column(top: Any) -> Any:
        old = _top_id(top)
        return _numbered(top, lambda rel: id_of((old, rel)))

    def renumber(generation: Any) -> Any:
        return pa.schema([column(top) for top in generation], metadata=generation.metadata)

    new_schema = renumber(schema)
    new_history = [renumber(generation) for generation in history]
    new_specs = [
        dataclasses.replace(
            spec,
            fields=tuple(
                dataclasses.replace(f, source_ids=tuple(id_of((s, "")) for s in f.source_ids))
                for f in spec.fields
            ),
        )
        for spec in specs
    ]
    return Renumbering(new_schema, new_history, new_specs, moved)


def _top_id(field: Any) -> int:
    fid = field_id_of(field)
    if fid is None:
        raise InvalidInputError(f"schema: field {field.name!r} has no {FIELD_ID_KEY}")
    return fid


def _numbered(field: Any, id_at: Callable[[str], int], rel: str = "") -> Any:
    """`field` with `id_at(path)` as the id of itself and of each field Lance numbers in it."""
    metadata = {**(field.metadata or {}), FIELD_ID_KEY.encode(): str(id_at(rel)).encode()}
    field = field.with_metadata(metadata)
    children = [_numbered(c, id_at, f"{rel}.{c.name}") for c in lance_children(field)]
    if not children:
        return field.with_type(without_ids(field.type))
    return with_children(field, children)
