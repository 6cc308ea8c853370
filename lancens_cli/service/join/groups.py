"""`join-plan`: loading each side's partition tables and grouping them on the related fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import InvalidInputError, LancensError
from lancens_cli.models import KIND_TABLE, json_value
from lancens_cli.partition.rows import split_id
from lancens_cli.partition.schema import top_level_ids
from lancens_cli.partition.spec import PartitionSpec
from lancens_cli.service.join.relations import SpecPairAnalysis
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import PartitionLayout, layout_of
from lancens_cli.store.catalog_rows import PublishedRef

TABLE_NAME = "dataset"

# --- partitions and groups --------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionTable:
    """A partition's `dataset` table as the `__manifest` records it."""

    object_id: str
    location: str
    uri: str
    published: PublishedRef
    spec_id: int
    values: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "table": self.object_id,
            "location": self.location,
            "uri": self.uri,
            "read_version": self.published.version,
            "spec_version": self.spec_id,
            "values": {k: json_value(v) for k, v in self.values.items()},
        }
        if self.published.branch is not None:
            out["read_branch"] = self.published.branch
        if self.published.tag is not None:
            out["read_tag"] = self.published.tag
        return out


@dataclass
class Side:
    """One namespace of the join: its layout and its partition tables by spec version."""

    label: str
    root: str
    layout: PartitionLayout
    tables: dict[int, list[PartitionTable]]

    @property
    def names(self) -> dict[int, str]:
        return {i: f.name for i, f in top_level_ids(self.layout.schema).items()}

    def spec(self, spec_id: int) -> PartitionSpec:
        return next(s for s in self.layout.specs if s.id == spec_id)


def load_side(label: str, ns: Namespace) -> Side:
    """Read one root; errors name the side. Not partitioned: invalid input (as for `write`)."""
    try:
        ns.require_manifest(f"join-plan ({label} root)")
        ns.require_root()
        snapshot = ns.snapshot()
        layout = layout_of(snapshot)
    except LancensError as exc:
        raise type(exc)(f"{label}: {exc.message}") from None
    if layout is None:
        raise InvalidInputError(
            f"{label} root {ns.storage.root_uri} is not a partitioned namespace (its __manifest "
            "has no partition spec): run `lancens add-partition-spec` there first"
        )
    tables: dict[int, list[PartitionTable]] = {s.id: [] for s in layout.specs}
    for row in snapshot.rows:
        found = _partition_table(row, layout.specs, ns)
        if found is not None:
            tables[found.spec_id].append(found)
    return Side(label, ns.storage.root_uri, layout, tables)


def _partition_table(row: dict, specs: list[PartitionSpec], ns: Namespace) -> PartitionTable | None:
    """`v<N>$<level>...$dataset` with one level per field of spec N, else None."""
    if row["object_type"] != KIND_TABLE:
        return None
    parts = split_id(row["object_id"])
    spec = next((s for s in specs if s.namespace == parts[0]), None)
    if spec is None or parts[-1] != TABLE_NAME or len(parts) != len(spec.fields) + 2:
        return None
    location = row["location"] or ""
    return PartitionTable(
        row["object_id"],
        location,
        ns.storage.uri(location),
        PublishedRef.of(row),
        spec.id,
        {f.field_id: row.get(f.column) for f in spec.fields},
    )


@dataclass
class Group:
    """Partitions joined together: every matching row pair lies within one group."""

    left_spec: int
    right_spec: int
    key: dict[str, Any]
    left: list[PartitionTable] = field(default_factory=list)
    right: list[PartitionTable] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "specs": {"left": self.left_spec, "right": self.right_spec},
            "key": {k: json_value(v) for k, v in self.key.items()},
            "left": [t.to_json() for t in self.left],
            "right": [t.to_json() for t in self.right],
        }


def _sort_key(values: tuple[Any, ...]) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in values)


def group_partitions(
    analysis: SpecPairAnalysis, left: list[PartitionTable], right: list[PartitionTable]
) -> list[Group]:
    """Partitions of both sides by their group value (empty when no relation)."""
    if not analysis.compatible:
        return []
    relations = analysis.relations
    labels = [r.label for r in relations]
    groups: dict[tuple[Any, ...], Group] = {}

    def group(values: tuple[Any, ...]) -> Group:
        if values not in groups:
            key = dict(zip(labels, values, strict=True))
            groups[values] = Group(analysis.left_spec.id, analysis.right_spec.id, key)
        return groups[values]

    for t in left:
        group(tuple(r.left_value(t.values) for r in relations)).left.append(t)
    for t in right:
        group(tuple(r.right_value(t.values) for r in relations)).right.append(t)
    for g in groups.values():
        g.left.sort(key=lambda t: t.object_id)
        g.right.sort(key=lambda t: t.object_id)
    return [groups[k] for k in sorted(groups, key=_sort_key)]
