"""`add-partition-spec`: make the root a partitioned namespace (spec 004), or evolve its spec.

The namespace schema and every `partition_spec_v<N>` live in the `__manifest` table metadata;
the spec-version namespace `v<N>` and the `partition_field_*`, `read_version`, `read_branch`,
`read_tag` columns live in its rows. Our writer feature flag goes with the first spec, so that a
writer that does not know partition columns refuses to rewrite the catalog.

Lance commits rows and table metadata in separate operations, so a new spec takes two
`__manifest` commits: first the `partition_field_*` columns and the `v<N>` row, then the spec
(with the schema and the writer flag, for the first spec) in the table metadata
(`ManifestStore.mutate(metadata_last=True)`). Every `__manifest` version in between reads as
the namespace did before: no spec names a missing column. A rerun after a kill finishes the
change. The partitioned namespace is specified at https://lance.org/format/namespace/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import InvalidInputError, NamespaceAlreadyExistsError
from lancens_cli.models import KIND_NAMESPACE, Identifier, Result
from lancens_cli.partition.field_syntax import FieldRequest
from lancens_cli.partition.schema import (
    id_of,
    schema_to_text,
    top_level_ids,
    with_field_ids,
)
from lancens_cli.partition.spec import (
    SCHEMA_KEY,
    PartitionField,
    PartitionSpec,
    Transform,
    all_fields,
)
from lancens_cli.partition.transforms import check_expression, result_type
from lancens_cli.schema_json import schema_to_json, type_from_json, type_to_json
from lancens_cli.service.catalog.manifest_rows import partition_namespace_row
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of, manifest_columns
from lancens_cli.service.partitioned.placement import TABLE_NAME
from lancens_cli.store.manifest import (
    PARTITIONED_WRITER_FLAG,
    WRITER_FLAGS_KEY,
    ManifestEdit,
    ManifestSnapshot,
)


@dataclass
class SpecChange(Result):
    """The result of `add-partition-spec` (the same for --dry-run and for the real thing)."""

    action: str  # "create", "evolve" or "exists"
    spec: PartitionSpec
    schema: Any
    sources: dict[str, list[str]]  # field_id -> source column names
    reused: list[str] = field(default_factory=list)
    new_columns: list[tuple[str, str]] = field(default_factory=list)
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)  # see `coarser_time_warnings`

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "version": self.spec.id,
            "namespace": self.spec.namespace,
            "spec": self.spec.to_json(),
            "schema": schema_to_json(self.schema),
            "reused_field_ids": self.reused,
            "new_manifest_columns": [{"name": n, "type": t} for n, t in self.new_columns],
            "dry_run": self.dry_run,
            "warnings": self.warnings,
        }


# month / day / hour are a part of the date (`date_part`), not a period: without the coarser
# parts of the same column, different years (months, days) share a partition.
_COARSER = {"month": ("year",), "day": ("year", "month"), "hour": ("year", "month", "day")}
_PART = {
    "month": "the month of the year (1-12)",
    "day": "the day of the month (1-31)",
    "hour": "the hour of the day (0-23)",
}
_SHARED = {  # (transform, the finest coarser part missing) -> two times that share a partition
    ("month", "year"): "January 2024 and January 2025",
    ("day", "year"): "5 January 2024 and 5 January 2025",
    ("day", "month"): "5 January and 5 February",
    ("hour", "year"): "09:00 on 5 January 2024 and 09:00 on 5 January 2025",
    ("hour", "month"): "09:00 on 5 January and 09:00 on 5 February",
    ("hour", "day"): "09:00 on 5 January and 09:00 on 6 January",
}


def coarser_time_warnings(spec: PartitionSpec, sources: dict[str, list[str]]) -> list[str]:
    """A warning for each month / day / hour field whose column lacks a coarser time field in
    the spec (`month` without `year`, `day` without `year` and `month`, ...). An identity or
    expression field over the same column may tell the values apart already: no warning."""
    parts: dict[int, set[str]] = {}
    for f in spec.fields:
        kind = f.transform.type if f.transform is not None else "expression"
        for source in f.source_ids:
            parts.setdefault(source, set()).add(kind)
    warnings = []
    for f in spec.fields:
        if f.transform is None or f.transform.type not in _COARSER or not sources.get(f.field_id):
            continue
        have = parts[f.source_ids[0]]
        missing = [p for p in _COARSER[f.transform.type] if p not in have]
        if not missing or have & {"identity", "expression"}:
            continue
        column = sources[f.field_id][0]
        shared = _SHARED[(f.transform.type, missing[-1])]
        add = " ".join(f"--field '{p}({column})'" for p in missing)
        warnings.append(
            f"{f.transform.display([column])} is {_PART[f.transform.type]}: {shared} share a "
            f"partition; add {add} before it"
        )
    return warnings


def resolve_fields(
    requests: list[FieldRequest], schema: Any, known: dict[str, PartitionField]
) -> tuple[list[PartitionField], list[str]]:
    """Turn what the user wrote into spec fields, reusing field ids as the spec demands."""
    by_id = top_level_ids(schema)
    resolved: list[PartitionField] = []
    reused: list[str] = []
    for request in requests:
        source_ids = tuple(id_of(schema, c) for c in request.columns)
        source_types = [by_id[i].type for i in source_ids]
        declared = type_from_json({"type": request.result_type}) if request.result_type else None
        if request.transform is not None:
            transform = Transform(
                request.transform,
                num_buckets=request.parameter if "bucket" in request.transform else None,
                width=request.parameter if request.transform == "truncate" else None,
            )
            implied = _implied_type(transform, source_types, declared, f"--field {request.text!r}")
            candidate = PartitionField(request.field_id, source_ids, implied, transform=transform)
        else:
            assert request.expression is not None  # parse_field: a transform or an expression
            check_expression(request.expression, source_types, declared)
            candidate = PartitionField(
                request.field_id, source_ids, declared, expression=request.expression
            )
        resolved.append(_reuse_or_new(candidate, known, reused))
    ids = [f.field_id for f in resolved]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InvalidInputError(f"field id {duplicates[0]!r} is given twice in the new spec")
    return resolved, reused


def _implied_type(transform: Transform, source_types: list[Any], declared: Any, what: str) -> Any:
    """The result type a transform gives these sources; a different declared one is refused."""
    implied = result_type(transform, source_types)
    if declared is not None and declared != implied:
        raise InvalidInputError(
            f"{what}: {transform.type} gives {type_to_json(implied)['type']}, not "
            f"{type_to_json(declared)['type']}"
        )
    return implied


def _reuse_or_new(
    candidate: PartitionField, known: dict[str, PartitionField], reused: list[str]
) -> PartitionField:
    for existing in known.values():
        if existing.same_definition(candidate):
            reused.append(existing.field_id)
            return existing
    taken = known.get(candidate.field_id)
    if taken is not None:
        raise InvalidInputError(
            f"field id {candidate.field_id!r} already names another partition field; field "
            "ids are never reused: give this one another with `as <id>`"
        )
    return candidate


def fields_from_spec_json(document: Any, schema: Any, known: dict[str, PartitionField]):
    """Fields of a spec JSON file (its `id` is ignored: the next version number is used)."""
    if isinstance(document, dict) and "id" not in document:
        document = {**document, "id": 1}
    spec = PartitionSpec.from_json(document)
    by_id = top_level_ids(schema)
    reused: list[str] = []
    fields = []
    for f in spec.fields:
        missing = [i for i in f.source_ids if i not in by_id]
        if missing:
            raise InvalidInputError(
                f"field {f.field_id}: source id {missing[0]} is not in the schema"
            )
        types = [by_id[i].type for i in f.source_ids]
        if f.expression is not None:  # as strict as --field: refused now, not at a write
            check_expression(f.expression, types, f.result_type)
        elif f.transform is not None:  # always, when there is no expression
            _implied_type(f.transform, types, f.result_type, f"field {f.field_id}")
        fields.append(_reuse_or_new(f, known, reused))
    return fields, reused


NAME_BYTES_LOCAL = 255  # a directory name on local file systems (ext4, xfs, apfs, ntfs)
KEY_BYTES_OBJECT_STORE = 1024  # an object key on S3 and GCS


def partition_table_name_bytes(spec: PartitionSpec) -> int:
    """The length of a partition table's directory name: `<8 hex>_v<N>$<16>...$dataset`."""
    levels = len(spec.fields)
    return 8 + 1 + len(spec.namespace) + levels * (1 + 16) + 1 + len(TABLE_NAME)


def _require_layable(ns: Namespace, spec: PartitionSpec) -> None:
    """Refuse, before anything is written, a spec whose tables could not be created."""
    name = partition_table_name_bytes(spec)
    if ns.storage.is_local and name > NAME_BYTES_LOCAL:
        raise InvalidInputError(
            f"a spec of {len(spec.fields)} fields makes partition table directory names of "
            f"{name} bytes, over the {NAME_BYTES_LOCAL}-byte limit of local file systems; "
            "use fewer fields (or a multi-field transform such as multi_bucket)"
        )
    if not ns.storage.is_local:
        prefix = ns.storage.root_uri.split("://", 1)[-1].partition("/")[2]
        key = len(prefix.encode()) + 1 + name + len("/_versions/") + 64
        if key > KEY_BYTES_OBJECT_STORE:
            raise InvalidInputError(
                f"a spec of {len(spec.fields)} fields makes object keys of about {key} bytes "
                f"below this root, over the {KEY_BYTES_OBJECT_STORE}-byte limit of object stores"
            )


def add_partition_spec(
    ns: Namespace,
    *,
    requests: list[FieldRequest] | None = None,
    spec_document: Any = None,
    schema: Any = None,
    dry_run: bool = False,
) -> SpecChange:
    ns.require_manifest("a partitioned namespace")
    ns.require_root()
    if (requests is None) == (spec_document is None):
        raise InvalidInputError("give the fields with --field or a spec file with --spec")
    planned: list[SpecChange] = []  # the specs this call tried to commit, round by round

    def committed(snapshot: ManifestSnapshot) -> SpecChange | None:
        """Ours, if a metadata commit of an earlier round landed (the key holds our text)."""
        for change in planned:
            if snapshot.metadata.get(change.spec.key) == change.spec.to_text():
                return change
        return None

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> SpecChange:
        ours = committed(snapshot)
        if ours is not None:  # only the rows and columns are left to do
            layout = layout_of(snapshot)
            assert layout is not None  # our spec is committed: the root is partitioned
            edit.add_columns(manifest_columns(layout.fields))
            _add_version_namespace(snapshot, edit, ours.spec)
            return ours
        layout = layout_of(snapshot)
        specs = layout.specs if layout else []
        ns_schema = _namespace_schema(layout, schema)
        known = all_fields(specs)
        if requests is not None:
            fields, reused = resolve_fields(requests, ns_schema, known)
        else:
            fields, reused = fields_from_spec_json(spec_document, ns_schema, known)
        if not fields:
            raise InvalidInputError("a partition spec needs at least one field")
        by_id = top_level_ids(ns_schema)
        sources = {f.field_id: [by_id[i].name for i in f.source_ids if i in by_id] for f in fields}
        current = specs[-1] if specs else None
        if current is not None and list(current.fields) == fields:
            spec, action = current, "exists"
        else:
            spec = PartitionSpec((current.id if current else 0) + 1, tuple(fields))
            action = "evolve" if current else "create"
        if action != "exists":
            _require_layable(ns, spec)
        every = all_fields([*specs, spec]) if action != "exists" else known
        columns = manifest_columns(every)
        edit.add_columns(columns)
        new_columns = [(c.name, type_to_json(c.type)["type"]) for c in edit.new_columns]
        change = SpecChange(action, spec, ns_schema, sources, reused, new_columns, dry_run)
        change.warnings = coarser_time_warnings(spec, sources)
        if action != "exists":
            updates = {spec.key: spec.to_text()}
            if layout is None:
                updates[SCHEMA_KEY] = schema_to_text(ns_schema)
            updates[WRITER_FLAGS_KEY] = str(snapshot.writer_flags | PARTITIONED_WRITER_FLAG)
            edit.set_metadata(updates)
            planned.append(change)
            _add_version_namespace(snapshot, edit, spec)
        elif snapshot.get(spec.namespace) is None:  # the same spec again: nothing to do, but
            edit.add(partition_namespace_row(spec.namespace))  # a lost `v<N>` row comes back
        return change

    if dry_run:
        snapshot = ns.snapshot()
        return plan(snapshot, ManifestEdit(snapshot))
    # The columns and the `v<N>` row are committed in one round and the spec (metadata) in
    # the next: Lance cannot commit both at once, and in this order every `__manifest`
    # version in between reads as the namespace did before (no spec names a missing column).
    # The last round finds our spec in place and answers with the change it planned.
    return ns.manifest.mutate(plan, metadata_last=True)


def _namespace_schema(layout: Any, schema: Any) -> Any:
    """The namespace schema the spec is over: the root's, or `--schema` on a root not yet
    partitioned (a `--schema` that differs from the root's is refused)."""
    if layout is None:
        if schema is None:
            raise InvalidInputError(
                "the root is not partitioned yet: give the namespace schema with --schema"
            )
        return with_field_ids(schema)
    if schema is not None and not _same_columns(schema, layout.schema):
        raise InvalidInputError(
            "--schema differs from the namespace schema: add-partition-spec does not "
            "change the schema; run `lancens evolve-schema` first, then add the spec "
            "without --schema"
        )
    return layout.schema


def _add_version_namespace(
    snapshot: ManifestSnapshot, edit: ManifestEdit, spec: PartitionSpec
) -> None:
    """Add `v<N>`, unless it is there; refuse one that belongs to someone else.

    An existing `v<N>` with anything in it is the user's: its tables would pass for
    partitions. An empty one is taken: it is the `v<N>` this change commits before the spec
    itself (`metadata_last`), found again by a later round or by a rerun after a kill.
    """
    row = snapshot.get(spec.namespace)
    if row is None:
        edit.add(partition_namespace_row(spec.namespace))
    elif row["object_type"] != KIND_NAMESPACE or snapshot.children(spec.namespace):
        raise NamespaceAlreadyExistsError(
            f"{Identifier((spec.namespace,)).display()} already exists and is not a spec-version "
            "namespace of this partitioned namespace"
        )


def _same_columns(a: Any, b: Any) -> bool:
    return [(f.name, f.type) for f in a] == [(f.name, f.type) for f in b]
