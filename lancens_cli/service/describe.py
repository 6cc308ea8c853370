"""`describe`: the root, a namespace or a table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import InvalidTableStateError
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    OBJECT_ID_DELIMITER,
    STATE_DECLARED,
    STATE_OK,
    Identifier,
    NamespaceDescription,
    RootDescription,
    TableDescription,
)
from lancens_cli.partition.rows import partition_table_rows
from lancens_cli.partition.schema_evolution import history_from_metadata
from lancens_cli.service.indexes.optimize import namespace_indexes, unindexed_rows
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of, partition_summary, runtime_properties
from lancens_cli.service.partitioned.naming import label_for
from lancens_cli.service.partitioned.sizes import published_sizes
from lancens_cli.store.catalog_rows import PublishedRef, open_published
from lancens_cli.store.inspect import describe_dataset, list_versions
from lancens_cli.store.manifest import (
    READER_FLAGS_KEY,
    WRITER_FLAGS_KEY,
    decode_properties,
    properties_problem,
)
from lancens_cli.store.tables import open_table, table_state


def describe(ns: Namespace, ident: Identifier, *, versions: bool = False, delimiter: str = "."):
    """Describe whatever `ident` names: the root, a namespace or a table."""
    ns.require_root()
    snapshot = ns.snapshot()
    if ident.is_root:
        return describe_root(ns, snapshot)
    if len(ident.parts) > 1:
        ns.require_namespace(ident.parent, snapshot)
    row = snapshot.get(ident.object_id)
    if row is not None and row["object_type"] == KIND_NAMESPACE:
        children = snapshot.children(ident.object_id)
        return NamespaceDescription(
            id=ident.display(delimiter),
            properties={
                **decode_properties(row["metadata"]),
                **runtime_properties(snapshot, ident.object_id),
            },
            namespaces=sum(1 for c in children if c["object_type"] == KIND_NAMESPACE),
            tables=sum(1 for c in children if c["object_type"] == KIND_TABLE),
            damaged=properties_problem(row),
        )
    return describe_table(ns, ident, snapshot, versions=versions, delimiter=delimiter)


def describe_root(ns: Namespace, snapshot) -> RootDescription:
    """The root. `namespaces` and `tables` count what users made: a partitioned namespace's
    spec-version namespaces, the namespaces between them and their partition tables, and
    those tables are counted (with their rows and bytes) under `partitioning` instead."""
    rows = snapshot.child_table("", recursive=True)  # counted in Arrow: no dict per row
    summary = partition_summary(snapshot) if snapshot.exists else None
    trees = {f"v{v}" for v in (summary or {}).get("spec_versions", [])}
    ids, kinds = rows.column("object_id"), rows.column("object_type")
    in_trees = pc.is_in(ids, value_set=pa.array(sorted(trees), pa.string()))
    for tree in trees:
        in_trees = pc.or_(in_trees, pc.starts_with(ids, tree + OBJECT_ID_DELIMITER))
    own = pc.invert(in_trees)
    namespaces = pc.sum(pc.and_(own, pc.equal(kinds, KIND_NAMESPACE))).as_py() or 0
    is_table = pc.equal(kinds, KIND_TABLE)
    found = ns.visible_dir_table_columns(snapshot)
    known = pc.is_in(found.locations, value_set=rows.column("location").filter(is_table))
    # deduplicated by location and by name, as the listing is
    dir_only = (pc.sum(pc.invert(pc.or_(known, found.named))).as_py() or 0) + len(found.odd)
    manifest_info = None
    if snapshot.exists:
        manifest_info = {
            "version": snapshot.version,
            "rows": rows.num_rows,
            "indexes": ns.manifest.describe_indexes(),
            "reader_feature_flags": snapshot.reader_flags,
            "writer_feature_flags": snapshot.writer_flags,
            "metadata": {
                k: v
                for k, v in sorted(snapshot.metadata.items())
                if k not in (READER_FLAGS_KEY, WRITER_FLAGS_KEY)
            },
            "extra_columns": [
                name
                for name in snapshot.table.schema.names
                if name not in ("object_id", "object_type", "location", "metadata", "base_objects")
            ],
            "data_storage_version": snapshot.data_storage_version,
        }

        if summary is not None:
            manifest_info["partitioning"] = summary
            if "unreadable" not in summary:
                _partition_totals(ns, snapshot, summary)
    own_locations = rows.column("location").filter(pc.and_(own, is_table))
    user_tables = pc.count_distinct(own_locations, mode="all").as_py()
    return RootDescription(
        root=ns.storage.root_uri,
        mode=ns.config.mode,
        config=ns.config.to_properties(redacted=True),
        namespaces=namespaces,
        tables=user_tables + dir_only,
        manifest=manifest_info,
    )


def _partition_totals(ns: Namespace, snapshot: Any, summary: dict[str, Any]) -> None:
    """Rows and bytes over every partition table's published version (from manifests), and
    how many earlier namespace schemas evolve-schema has kept."""
    layout = layout_of(snapshot)
    if layout is None:  # a summary without `unreadable` is made for a partitioned root only
        return
    sizes = published_sizes(ns.storage, snapshot, partition_table_rows(snapshot.rows, layout.specs))
    known = [size for size in sizes.values() if size is not None]
    summary["rows"] = sum(size.rows for size in known)
    summary["bytes"] = (
        None if any(size.bytes is None for size in known) else sum(s.bytes for s in known)
    )
    summary["unreadable_partition_tables"] = len(sizes) - len(known)
    summary["earlier_schemas"] = len(history_from_metadata(snapshot.metadata))
    summary["indexes"] = namespace_indexes(ns, snapshot, layout)


def describe_table(
    ns: Namespace, ident: Identifier, snapshot, *, versions: bool, delimiter: str
) -> TableDescription:
    ref = ns.require_table(ident, snapshot)
    state = table_state(ns.storage, ref.location)
    description = TableDescription(
        id=ident.display(delimiter),
        location=ref.location,
        uri=ns.table_uri(ref.location),
        source=ref.source,
        state=state,
        properties=decode_properties(ref.row["metadata"]) if ref.row else {},
        label=label_for(snapshot, ident.object_id) if ref.row else None,
    )
    if state == STATE_DECLARED:
        return description  # reserved, no data yet: nothing more to show
    if state != STATE_OK:
        # Spec 001: it exists, but loading it must fail with a clear error.
        open_table(ns.storage, ref.location)
        raise InvalidTableStateError(f"{ref.location!r} is not a Lance table")
    # A partition table is read at the version `__manifest` publishes (spec 004, Read
    # Behavior: read_tag, read_branch + read_version, read_version); later versions of it
    # are a write that has not published (yet).
    row = {**(ref.row or {}), "location": ref.location}
    ds = open_published(ns.storage, row)
    description.details = describe_dataset(ds, ns.storage, ref.location)
    for index in description.details["indices"]:  # rows written since it was built
        index["unindexed_rows"] = unindexed_rows(ds, index["name"])
    published = PublishedRef.of(row).as_json()
    description.details.update({k: v for k, v in published.items() if v is not None})
    if versions:
        description.versions = list_versions(ds)
    return description
