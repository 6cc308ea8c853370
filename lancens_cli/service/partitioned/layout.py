"""The partition layout of a namespace root, as its `__manifest` records it (spec 004).

The read model every partitioned service starts from: the namespace schema and the specs
from the table metadata, the `__manifest` columns they need, and what `ls` / `describe` show.
Changing the layout is `service/partitioned/spec_change.py`'s job (`add-partition-spec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import CatalogDamagedError
from lancens_cli.models import KIND_TABLE, OBJECT_ID_DELIMITER, json_value
from lancens_cli.partition.field_syntax import field_text
from lancens_cli.partition.rows import split_id
from lancens_cli.partition.schema import schema_from_text, top_level_ids
from lancens_cli.partition.spec import (
    SCHEMA_KEY,
    PartitionField,
    PartitionSpec,
    all_fields,
    damage_of,
    specs_from_metadata,
)
from lancens_cli.schema_json import schema_to_json
from lancens_cli.store.catalog_rows import READ_BRANCH, READ_TAG, READ_VERSION
from lancens_cli.store.manifest import ManifestSnapshot


@dataclass
class PartitionLayout:
    """What a snapshot says about partitioning: schema and specs (empty when not partitioned)."""

    schema: Any
    specs: list[PartitionSpec]

    @property
    def current(self) -> PartitionSpec:
        return self.specs[-1]

    @property
    def fields(self) -> dict[str, PartitionField]:
        return all_fields(self.specs)


def layout_of(snapshot: ManifestSnapshot) -> PartitionLayout | None:
    """The partition layout of the root, or None when it is not a partitioned namespace.
    Read once per snapshot: `ls`, `describe` and a prune's labels ask it several times."""
    if snapshot._layout is None:
        try:
            snapshot._layout = (layout_from_metadata(snapshot.metadata), None)
        except CatalogDamagedError as exc:
            snapshot._layout = (None, exc.message)
    layout, damage = snapshot._layout
    if damage is not None:
        raise CatalogDamagedError(damage)
    return layout


def readable_layout(snapshot: ManifestSnapshot) -> PartitionLayout | None:
    """The layout for what only shows it (labels, runtime properties): None when the root
    is not partitioned, or its partition metadata cannot be read (`check` names that)."""
    if not snapshot.exists:
        return None
    try:
        return layout_of(snapshot)
    except CatalogDamagedError:
        return None


def layout_from_metadata(metadata: dict[str, str]) -> PartitionLayout | None:
    specs = specs_from_metadata(metadata)
    if not specs:
        return None
    text = metadata.get(SCHEMA_KEY)
    if text is None:
        raise CatalogDamagedError("__manifest has partition specs but no namespace schema")
    with damage_of(f"the namespace schema (__manifest metadata {SCHEMA_KEY})"):
        schema = schema_from_text(text)
    with damage_of("__manifest's partition specs"):
        all_fields(specs)  # one meaning per field id across versions
    return PartitionLayout(schema, specs)


def manifest_columns(fields: dict[str, PartitionField]) -> list[Any]:
    """The `__manifest` columns a partitioned namespace needs (spec: Manifest Table Schema)."""
    columns = [
        pa.field(READ_VERSION, pa.uint64()),
        pa.field(READ_BRANCH, pa.string()),
        pa.field(READ_TAG, pa.string()),
    ]
    return columns + [pa.field(f.column, f.result_type) for f in fields.values()]


def partition_summary(snapshot: ManifestSnapshot) -> dict[str, Any] | None:
    """What `ls` and `describe` of the root show of a partitioned namespace; metadata that
    cannot be read is named (`unreadable`), and the rest of the listing stands."""
    try:
        layout = layout_of(snapshot)
    except CatalogDamagedError as exc:
        return {"unreadable": exc.message}
    if layout is None:
        return None
    by_spec = partition_counts(snapshot, layout)
    return {
        "current_spec": layout.current.id,
        "spec_versions": [spec.id for spec in layout.specs],
        "specs": [spec.to_json() for spec in layout.specs],
        # each spec as the user writes it (`add-partition-spec --field`), by version
        "spec_fields": {str(spec.id): spec_fields(spec, layout.schema) for spec in layout.specs},
        "partitions": sum(by_spec.values()),
        "partitions_by_spec": {str(v): n for v, n in by_spec.items()},
        "schema": schema_to_json(layout.schema),
    }


def partition_counts(snapshot: ManifestSnapshot, layout: PartitionLayout) -> dict[int, int]:
    """Spec version -> how many partition tables it has (the table rows below its `v<N>`),
    counted in Arrow: a page of `ls` of a root of a million partitions makes no row a dict."""
    ids = snapshot.table.column("object_id")
    tables = pc.equal(snapshot.table.column("object_type"), KIND_TABLE)
    return {
        spec.id: int(
            pc.sum(
                pc.and_(tables, pc.starts_with(ids, spec.namespace + OBJECT_ID_DELIMITER))
            ).as_py()
            or 0
        )
        for spec in layout.specs
    }


def spec_fields(spec: PartitionSpec, schema: Any) -> list[str]:
    """The spec's fields as the user writes them: `bucket(8, user_id)`, `month(event_date)`."""
    by_id = top_level_ids(schema)
    return [
        field_text(f, [by_id[i].name if i in by_id else f"#{i}" for i in f.source_ids])
        for f in spec.fields
    ]


def runtime_properties(snapshot: ManifestSnapshot, object_id: str) -> dict[str, str]:
    """Spec 004 Appendix E: `partition_spec` of `v<N>`, `partition.<field_id>` of a level
    (none where the metadata cannot be read: `check` names that)."""
    layout = readable_layout(snapshot)
    if layout is None:
        return {}
    parts = split_id(object_id)
    spec = next((s for s in layout.specs if s.namespace == parts[0]), None)
    if spec is None:
        return {}
    if len(parts) == 1:
        return {"partition_spec": spec.to_text()}
    level = len(parts) - 2
    row = snapshot.get(object_id)
    if row is None or level >= len(spec.fields):
        return {}
    level_field = spec.fields[level]
    value = row.get(level_field.column)
    if value is None:
        return {f"partition.{level_field.field_id}": "null"}
    text = str(json_value(value))
    return {f"partition.{level_field.field_id}": text}
