"""Partition tables named by their values, and found by them (`--partition K=V`).

A partition table's id is random (`v1.li6n...dataset`): what tells an operator which partition
it is are the values its `__manifest` row holds in the `partition_field_*` columns of its spec
version. Every command that shows a partition table shows them next to its id (text
`country=US, event_year=2024`; JSON `"partition": {"country": "US", "event_year": 2024}` with
`"spec_version"`), and `describe`, `versions` and `prune` find one by them.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from lancens_cli.errors import InvalidInputError, TableNotFoundError
from lancens_cli.models import KIND_TABLE, Identifier
from lancens_cli.partition.literals import coerce
from lancens_cli.partition.rows import partition_rows
from lancens_cli.partition.spec import PartitionSpec
from lancens_cli.service.partitioned.label import PartitionLabel
from lancens_cli.service.partitioned.layout import layout_of, readable_layout
from lancens_cli.store.manifest import ManifestSnapshot

SHOWN_CANDIDATES = 20  # candidates an ambiguous `--partition` names before it counts the rest


def partition_labels(snapshot: ManifestSnapshot) -> dict[str, PartitionLabel]:
    """object id -> label of every partition table row (none when the root is not partitioned,
    or its partition metadata cannot be read: `check` names that)."""
    layout = readable_layout(snapshot)
    if layout is None:
        return {}
    return {
        found.object_id: label_of(found.spec, found.row)
        for found in partition_rows(snapshot.rows, layout.specs, KIND_TABLE)
    }


def label_of(spec: PartitionSpec, row: dict[str, Any]) -> PartitionLabel:
    return PartitionLabel(spec.id, tuple((f.field_id, row.get(f.column)) for f in spec.fields))


def find_partition(
    snapshot: ManifestSnapshot, asked: list[str], spec_version: int | None = None
) -> Identifier:
    """The one partition table whose values are `asked` (`K=V` each) under the current spec
    version, or `spec_version`. A value is read as its field's result type. No match, or
    several: TableNotFoundError (exit 3) naming the candidates."""
    layout = layout_of(snapshot) if snapshot.exists else None
    if layout is None:
        raise InvalidInputError("--partition: the root is not a partitioned namespace")
    if spec_version is None:
        spec = layout.current
    else:
        chosen = next((s for s in layout.specs if s.id == spec_version), None)
        if chosen is None:
            known = ", ".join(str(s.id) for s in layout.specs)
            raise InvalidInputError(f"--spec-version {spec_version}: the spec versions are {known}")
        spec = chosen
    wanted = _parse_pairs(asked, spec)
    every = [
        (found.object_id, label_of(spec, found.row))
        for found in partition_rows(snapshot.rows, [spec], KIND_TABLE)
    ]
    candidates = [
        (object_id, label)
        for object_id, label in every
        if all(dict(label.values)[name] == value for name, value in wanted.items())
    ]
    if len(candidates) == 1:
        return Identifier.from_object_id(candidates[0][0])
    asked_text = ", ".join(asked)
    if not candidates:
        known = (
            f"; its partitions: {_listed(every)}"
            if every
            else f" (spec v{spec.id} has no partition tables)"
        )
        raise TableNotFoundError(
            f"--partition {asked_text}: no partition table of spec v{spec.id} has these values"
            + known
        )
    raise TableNotFoundError(
        f"--partition {asked_text}: {len(candidates)} partition tables of spec v{spec.id} match "
        f"({_listed(candidates)}): give every field of the spec"
    )


def _listed(labelled: list[tuple[str, PartitionLabel]]) -> str:
    """The first `SHOWN_CANDIDATES` labels, then how many more."""
    shown = "; ".join(label.text() for _, label in labelled[:SHOWN_CANDIDATES])
    more = len(labelled) - SHOWN_CANDIDATES
    return shown + (f"; and {more} more" if more > 0 else "")


def label_for(snapshot: ManifestSnapshot, object_id: str) -> PartitionLabel | None:
    """One partition table's label (None for any other row), without labelling every row."""
    layout = readable_layout(snapshot)
    row = snapshot.get(object_id) if layout is not None else None
    if layout is None or row is None or row.get("object_type") != KIND_TABLE:
        return None
    found = next(iter(partition_rows([row], layout.specs, KIND_TABLE)), None)
    return label_of(found.spec, row) if found is not None else None


def _parse_pairs(asked: list[str], spec: PartitionSpec) -> dict[str, Any]:
    fields = {f.field_id: f for f in spec.fields}
    wanted: dict[str, Any] = {}
    for text in asked:
        name, sep, raw = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidInputError(f"--partition {text!r}: write it as FIELD=VALUE")
        field = fields.get(name)
        if field is None:
            raise InvalidInputError(
                f"--partition {text!r}: spec v{spec.id} has no field {name!r} "
                f"(its fields: {', '.join(fields)})"
            )
        if name in wanted:
            raise InvalidInputError(f"--partition: {name} is given twice")
        wanted[name] = _typed(raw, name, field.result_type, text)
    return wanted


def _typed(raw: str, name: str, kind: Any, text: str) -> Any:
    """`raw` as a value of the field's result type (`null` for NULL; `"null"` for the text),
    read as a condition's literal is (`literals.coerce`): the same ranges, dates and zones."""
    if raw == "null":
        return None
    try:
        if pa.types.is_binary(kind):
            return bytes.fromhex(raw)
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return json.loads(raw) if raw.startswith('"') else raw
        if pa.types.is_boolean(kind):
            literal: tuple[str, Any] = ("bool", {"true": True, "false": False}[raw.lower()])
        elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
            literal = ("number", raw)
        else:
            literal = ("string", raw)
        return coerce(*literal, pa.field(name, kind))
    except (ValueError, KeyError, InvalidInputError):
        raise InvalidInputError(f"--partition {text!r}: {raw!r} is not a {kind} value") from None
