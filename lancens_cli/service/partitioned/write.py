"""Writing rows into a partitioned namespace (spec 004, Multi-Partition Transaction).

Each row's partition is computed under the current spec; each partition's rows go to its
`dataset` table (created, with its partition namespaces, when new); then every touched
partition's new `read_version` is recorded in ONE `__manifest` commit. Readers follow
`read_version`, so they see all of a write or none of it.

A partition table's versions after the recorded `read_version` were never visible (a writer died
before its manifest commit, or is still on its way there): a write starts from the recorded
version again (a `Restore` commit) before it appends, so nobody's unpublished rows become visible
through ours. If the manifest moved on meanwhile and a touched partition changed, the write is
rebased: that partition's table commit is redone from the new version, reusing the data files
already written, or the rows go to the partition a concurrent writer created first.

Here: the transaction, its table commits and its one `__manifest` commit. The input, conformed
and split by partition, is `input_rows.py`'s; where each partition goes in a snapshot is
`placement.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lance

from lancens_cli import interrupt
from lancens_cli.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    RefusedError,
)
from lancens_cli.models import KIND_TABLE, Result, json_value
from lancens_cli.partition.rows import partition_table_rows
from lancens_cli.partition.schema import padded_for_field_ids, schema_to_text
from lancens_cli.partition.schema_evolution import highest_id, history_from_metadata
from lancens_cli.partition.spec import PartitionSpec
from lancens_cli.service.catalog.manifest_rows import partition_namespace_row, partition_table_row
from lancens_cli.service.indexes.definitions import readable_definitions
from lancens_cli.service.indexes.steps import first_indexes
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned import branch as branches
from lancens_cli.service.partitioned.input_rows import (
    conform,
    lacking_columns,
    require_partition_sources,
    split_by_partition,
)
from lancens_cli.service.partitioned.layout import (
    PartitionLayout,
    layout_of,
    manifest_columns,
)
from lancens_cli.service.partitioned.placement import (
    LevelIndex,
    PartitionTouch,
    follow_row,
    locate_partitions,
    prepare,
)
from lancens_cli.store.catalog_rows import LATEST, READ_COLUMNS, PublishedRef
from lancens_cli.store.manifest import (
    PARTITIONED_WRITER_FLAG,
    WRITER_FLAGS_KEY,
    ManifestEdit,
    ManifestSnapshot,
)
from lancens_cli.store.partition_tables import (
    commit_new_table,
    commit_on_base,
    empty_like,
    start_on_branch,
)
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.sources import is_csv
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import (
    VERSIONS_DIR,
    v2_location_pattern,
    write_new_table,
)

_REBASES = 20
_WRITERS = 4  # partition tables written at once


@dataclass
class PartitionWrite(Result):
    spec_id: int
    rows: int
    partitions: list[PartitionTouch]
    fields: list[str]
    manifest_version: int = 0
    rebases: int = 0
    dry_run: bool = False
    filled_with_null: list[str] = field(default_factory=list)  # columns the input lacked

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "spec_version": self.spec_id,
            "rows": self.rows,
            "filled_with_null": self.filled_with_null,
            "manifest_version": self.manifest_version,
            "rebases": self.rebases,
            "partitions": [
                {  # a dry run names no table it would create: its name is chosen then
                    "table": None if self.dry_run and t.created else t.table_id,
                    "location": None if self.dry_run and t.created else t.location,
                    "values": {
                        f: json_value(v) for f, v in zip(self.fields, t.values, strict=True)
                    },
                    "rows": t.row_count,
                    "read_version": t.version,
                    "created": t.created,
                }
                for t in self.partitions
            ],
        }


class Rebase(Exception):
    """A touched partition changed under us; its table commit must be redone."""

    def __init__(self, touches: list[PartitionTouch], from_manifest: bool = False) -> None:
        super().__init__(len(touches))
        self.touches = touches
        self.from_manifest = from_manifest  # raised by the publish plan, with the stale ones


# --- table commits ----------------------------------------------------------------------------


def _write_table(
    storage: Storage, touch: PartitionTouch, published: Callable[[PartitionTouch], Any]
) -> None:
    if touch.created:
        if touch.written_to == touch.location and storage.exists(
            f"{touch.location}/{VERSIONS_DIR}"
        ):
            return  # written in an earlier round, still unpublished and still ours
        on_main = touch.branch is None  # else main gets an empty version 1, the branch the rows
        if touch.fragments is not None:  # written by Spark tasks: commit version 1 of them
            first = touch.fragments if on_main else []
            dataset = commit_new_table(
                storage, touch.location, first, touch.schema, touch.highest_field_id
            )
        else:
            rows = touch.rows if on_main else empty_like(touch.rows)
            padded, gaps = padded_for_field_ids(rows, touch.highest_field_id)
            dataset = write_new_table(storage, touch.location, padded, exclusive=True)
            if gaps:  # the namespace schema's field ids, never reused ones (spec 004)
                dataset.drop_columns(gaps)
        touch.version = dataset.version if on_main else start_on_branch(storage, touch)
        if on_main and touch.indexes:  # the namespace's indexes, published with its rows
            touch.version = first_indexes(dataset, touch.indexes)
        touch.written_to = touch.location
    else:
        touch.version = commit_on_base(storage, touch, lambda t: _confirm_base(t, published))


def _confirm_base(touch: PartitionTouch, published: Callable[[PartitionTouch], Any]) -> None:
    """A touch whose base is no longer what `__manifest` publishes is rebased."""
    if published(touch) != touch.base_ref:
        raise Rebase([touch])


def _write_tables(
    storage: Storage,
    touches: list[PartitionTouch],
    published: Callable[[PartitionTouch], Any],
    advance: Callable[[], None] | None = None,
) -> None:
    """Write the partitions side by side: each is its own table, and Lance's writers spend
    much of their time outside the GIL (encoding, I/O)."""
    if len(touches) < 2:
        for touch in touches:
            _write_table(storage, touch, published)
            if advance:
                advance()
        return
    with ThreadPoolExecutor(max_workers=min(_WRITERS, len(touches))) as pool:
        for _ in pool.map(lambda touch: _write_table(storage, touch, published), touches):
            if advance:
                advance()


def _published_version(ns: Namespace) -> Callable[[PartitionTouch], Any]:
    """A fresh read of what one partition table's row publishes (only the conflict path)."""

    def read(touch: PartitionTouch) -> Any:
        dataset = ns.manifest.open_dataset()
        escaped = touch.table_id.replace("'", "''")
        rows = dataset.to_table(
            columns=list(READ_COLUMNS), filter=f"object_id = '{escaped}'"
        ).to_pylist()
        return PublishedRef.of(rows[0] if rows else None)

    return read


# --- the write ------------------------------------------------------------------------------


def write_partitioned(
    ns: Namespace,
    data: Any,
    branch: str | None = None,
    progress: Callable[[int], Callable[[], None]] | None = None,
    dry_run: bool = False,
    allow_missing_columns: bool = False,
) -> PartitionWrite:
    """Write rows into the partitioned namespace at the root (one manifest commit); with
    `branch`, onto that branch of each partition table. With `dry_run`, what the write would
    do in the current snapshot (each partition's table, new or existing, and its rows), and
    nothing is written.

    Namespace columns the input lacks are filled with NULL and named in `filled_with_null`;
    one a field of the current spec takes its value from is refused (dry run too) unless
    `allow_missing_columns`.

    `progress(total)` is called with the number of partition tables to write (again after a
    rebase); what it returns, once per table written.
    """
    branches.check_ref_name(branch, "--branch")
    snapshot, layout = partitioned_target(ns)
    spec = layout.current
    lacking = lacking_columns(data, layout.schema)
    if not allow_missing_columns:
        require_partition_sources(lacking, spec, layout.schema)
    table = conform(data, layout.schema)
    touches = split_by_partition(table, spec, layout.schema)
    highest = highest_id(layout.schema, history_from_metadata(snapshot.metadata))
    for touch in touches:
        touch.branch = branch
        touch.highest_field_id = highest
    result = PartitionWrite(spec.id, table.num_rows, touches, [f.field_id for f in spec.fields])
    result.filled_with_null = lacking
    if dry_run:
        return _planned(ns, snapshot, spec, result)
    return commit_touches(ns, snapshot, layout, result, progress=progress)


def _planned(
    ns: Namespace, snapshot: ManifestSnapshot, spec: PartitionSpec, result: PartitionWrite
) -> PartitionWrite:
    """A dry run: where each touch would go in `snapshot`, as the write plans it; a new
    table's location is shown as its pattern (the hash is drawn when it is created)."""
    index = LevelIndex(snapshot, spec)
    fresh: dict[tuple[str, Any], str] = {}
    for touch in result.partitions:
        prepare(ns.storage, touch, spec, snapshot, index, fresh)
        if touch.created:
            touch.location = v2_location_pattern(touch.table_id)
        touch.version = None
    result.dry_run = True
    result.manifest_version = snapshot.version
    return result


def partitioned_target(ns: Namespace) -> tuple[ManifestSnapshot, PartitionLayout]:
    """The snapshot and layout of a partitioned root a write may go into (or why not)."""
    ns.require_manifest("a partitioned namespace")
    ns.require_root()
    snapshot = ns.snapshot()
    layout = layout_of(snapshot)
    if layout is None:
        raise InvalidInputError(
            "the root is not a partitioned namespace: run `lancens add-partition-spec` first"
        )
    ns.require_writable(snapshot)
    _require_intact(snapshot, layout)
    return snapshot, layout


def source_types(ns: Namespace, path: str, fmt: str | None) -> Any:
    """The namespace schema when the source is CSV, so that each column is parsed as its type
    wherever its values lie in the file (and text stays text: `02139`, not a number guessed
    from the values; `store/csv_rows.py`); None for formats that carry their own types."""
    return partitioned_target(ns)[1].schema if is_csv(path, fmt) else None


def commit_touches(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    layout: PartitionLayout,
    result: PartitionWrite,
    fresh: dict[tuple[str, Any], str] | None = None,
    progress: Callable[[int], Callable[[], None]] | None = None,
    guard: Callable[[ManifestSnapshot], None] | None = None,
) -> PartitionWrite:
    """The one commit path of partitioned writes (`write`, `delete` and the Spark data source).

    Each touch goes to its partition table (a compare-and-swap commit of its rows or of the
    fragments already written for it, or version 1 of a new table), then every new
    `read_version` is published in one `__manifest` commit; a touched partition that changed
    meanwhile is rebased. `fresh` names the new partition namespaces a caller chose already,
    by (parent object id, value key), so that pre-written new tables keep their directory.
    `guard` looks at the snapshot the commit goes on first, and raises when it cannot.
    """
    spec = layout.current
    touches = result.partitions
    if not touches:
        return result
    touched = {t.table_id for t in touches if not t.created}  # a row change's, in any spec
    if _pin_unversioned(ns, snapshot, spec, touched):
        snapshot = ns.snapshot()
    for touch in touches:
        touch.indexes = readable_definitions(snapshot.metadata)
    pending = touches
    abandoned: list[str] = []
    fresh = {} if fresh is None else fresh
    published = _published_version(ns)
    for _ in range(_REBASES):
        index = LevelIndex(snapshot, spec)
        for touch in pending:
            if touch.delete_filter is not None:  # rows of a table found by id, in any spec
                follow_row(ns.storage, touch, snapshot)
                continue
            before = touch.location if touch.created else None
            prepare(ns.storage, touch, spec, snapshot, index, fresh)
            if before and before != touch.location:
                abandoned.append(before)
        branches.resolve_bases(ns.storage, pending)
        try:
            _write_tables(
                ns.storage, pending, published, progress(len(pending)) if progress else None
            )
            _require_created_tables(ns.storage, touches)
            if not any(t.rows_deleted or not t.only_deletes for t in touches):
                if guard:
                    guard(ns.snapshot())
                result.manifest_version = snapshot.version  # a delete that found no row
                break
            plan = publish_touches(layout, spec, touches, guard)
            result.manifest_version = ns.manifest.mutate(plan)
            break
        except (interrupt.Interrupted, ConcurrentModificationError):  # unpublished: ours go
            _discard_created(ns.storage, touches)
            raise
        except Rebase as rebase:
            if any(t.rows_from_base for t in rebase.touches):
                _discard_created(ns.storage, touches)
                raise ConcurrentModificationError(
                    "a partition the change read was changed by another writer meanwhile; "
                    "nothing was published: run it again"
                ) from None
            result.rebases += 1
            pending = rebase.touches if rebase.from_manifest else list(touches)
            snapshot = ns.snapshot()
    else:
        raise ConcurrentModificationError("partitions kept changing under the write; gave up")
    for location in abandoned:
        ns.storage.delete_tree(location)  # new tables that lost to a concurrent writer's
    return result


def _discard_created(storage: Storage, touches: list[PartitionTouch]) -> None:
    """The new tables of a change that publishes nothing: nobody else can know them."""
    for touch in touches:
        if touch.created and touch.written_to:
            storage.delete_tree(touch.written_to)


def _require_intact(snapshot: ManifestSnapshot, layout: PartitionLayout) -> None:
    """A write into a catalog that lost its partition columns or guard would misplace rows."""
    names = set(snapshot.table.schema.names)
    missing = [c.name for c in manifest_columns(layout.fields) if c.name not in names]
    if missing:  # without our writer flag but with every column: another conformant writer's
        raise RefusedError(
            f"__manifest lost {', '.join(missing)} (rewritten by a writer that does not know "
            "partition columns?); run `lancens check --fix` before writing"
        )


def _pin_unversioned(
    ns: Namespace, snapshot: ManifestSnapshot, spec: PartitionSpec, touched: set[str]
) -> bool:
    """Give every partition table without a `read_version` its current version, in one commit:
    the current spec's, and any other a change touches (`touched`: a delete or an update finds
    tables in every spec version).

    A NULL `read_version` means "read the latest", under which an unpublished append would be
    visible at once; a write therefore first pins what is published now (only after a foreign
    rewrite or for tables another tool registered).
    """
    verdicts = row_locations(ns.storage, snapshot)
    current = {row["object_id"] for row in partition_table_rows(snapshot.rows, [spec])}
    loose = [
        row
        for row in snapshot.rows
        if (row["object_id"] in current or row["object_id"] in touched)
        and row["object_type"] == KIND_TABLE
        and PublishedRef.of(row) == LATEST
        and verdicts.problem(row["object_id"]) is None
    ]
    if not loose:
        return False
    versions = {}
    for row in loose:
        uri = ns.storage.uri(row["location"])
        versions[row["object_id"]] = lance.dataset(
            uri, storage_options=ns.storage.lance_options
        ).version

    def plan(current: ManifestSnapshot, edit: ManifestEdit) -> None:
        for object_id, version in versions.items():
            row = current.get(object_id)
            if row is not None and row.get("read_version") is None:
                edit.replace(object_id, read_version=version)

    ns.manifest.mutate(plan)
    return True


def _require_created_tables(storage: Storage, touches: list[PartitionTouch]) -> None:
    """The new tables must still be there when they are published (a `check --fix` with too
    short a grace may have taken them for a dead write's); rewrite any that is gone."""
    gone = [t for t in touches if t.created and not storage.exists(f"{t.location}/{VERSIONS_DIR}")]
    for touch in gone:
        touch.written_to = None
    if gone:
        raise Rebase(gone, from_manifest=True)


def publish_touches(
    layout: PartitionLayout,
    spec: PartitionSpec,
    touches: list[PartitionTouch],
    guard: Callable[[ManifestSnapshot], None] | None = None,
) -> Callable[[ManifestSnapshot, ManifestEdit], int]:
    """The manifest plan: every touched partition's read_version, in one commit."""

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> int:
        if guard:
            guard(snapshot)
        index = LevelIndex(snapshot, spec)
        now = layout_of(snapshot) or layout  # a spec added meanwhile brings its columns
        if schema_to_text(now.schema) != schema_to_text(layout.schema):
            raise ConcurrentModificationError(
                "the namespace schema changed during the write (evolve-schema); nothing was "
                "published: rerun the write"
            )
        edit.add_columns(manifest_columns(now.fields))
        if not snapshot.writer_flags & PARTITIONED_WRITER_FLAG:  # a namespace another tool
            # laid out as the spec says: our guard goes in with our first commit
            edit.set_metadata(
                {WRITER_FLAGS_KEY: str(snapshot.writer_flags | PARTITIONED_WRITER_FLAG)}
            )
        stale = []
        for touch in touches:
            row = snapshot.get(touch.table_id)
            if touch.created:
                found = locate_partitions(touch, spec, index)
                taken = any(
                    f is not None and f != mine for f, mine in zip(found, touch.path, strict=True)
                )
                if row is not None or taken:
                    stale.append(touch)
                continue
            if row is None or PublishedRef.of(row) != touch.base_ref:
                stale.append(touch)
        if stale:
            raise Rebase(stale, from_manifest=True)
        edit.rows_added = sum(touch.row_count for touch in touches)  # the commit's record
        if any(touch.delete_filter is not None for touch in touches):
            edit.rows_removed = sum(touch.rows_deleted for touch in touches)
        for touch in touches:
            if touch.created:
                _add_partition_rows(snapshot, edit, spec, touch)
            elif touch.only_deletes and not touch.rows_deleted:
                continue  # none of its rows matched: what it publishes stands
            else:
                edit.replace(
                    touch.table_id,
                    read_version=touch.version,
                    read_branch=touch.branch,
                    read_tag=None,  # the write moves the partition off any published tag
                )
        return snapshot.version + 1

    return plan


def _add_partition_rows(
    snapshot: ManifestSnapshot, edit: ManifestEdit, spec: PartitionSpec, touch: PartitionTouch
) -> None:
    values: dict[str, Any] = {}
    for level, object_id in enumerate(touch.path):
        values[spec.fields[level].column] = touch.values[level]
        if object_id not in snapshot and not edit.has(object_id):
            edit.add(partition_namespace_row(object_id, **values))
    row = partition_table_row(touch.table_id, touch.location, **values)
    row["read_version"] = touch.version
    row["read_branch"] = touch.branch
    edit.add(row)
