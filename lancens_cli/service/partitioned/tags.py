"""`tag-partitions NAME`: a named snapshot of a partitioned namespace (spec 004, `read_tag`).

Every partition table is tagged at the version `__manifest` publishes for it (on `main` or on
its published branch), so the snapshot is exactly what readers see now. `--publish` then sets
`read_tag=NAME` (and clears `read_version` / `read_branch`: spec 004 lists "read_tag only") on
every partition row in one `__manifest` commit, so readers stay on the snapshot. A later write
moves the partitions it touches off the tag (it publishes their new `read_version`); the
others stay on it.

All tables are examined before any tag is made: a name already taken at another version is
refused (exit 5) unless `--force` moves it, and then nothing changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lance

from lancens_cli.errors import (
    ConcurrentModificationError,
    InvalidTableStateError,
    RefusedError,
    lance_message,
)
from lancens_cli.models import Identifier, Result
from lancens_cli.partition.rows import partition_table_rows
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.branch import check_ref_name
from lancens_cli.service.partitioned.write import partitioned_target
from lancens_cli.store.catalog_rows import PublishedRef, branch_name, open_published
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot
from lancens_cli.words import plural


@dataclass
class TaggedTable:
    table_id: str
    location: str
    branch: str | None
    version: int
    action: str  # "create", "exists" or "move"
    ref: PublishedRef  # what the row published when it was tagged


@dataclass
class TagResult(Result):
    name: str
    tables: list[TaggedTable]
    publish: bool
    dry_run: bool
    manifest_version: int | None = None
    refused: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.name,
            "published": self.publish and not self.dry_run,
            "dry_run": self.dry_run,
            "manifest_version": self.manifest_version,
            "tables": [
                {
                    "table": Identifier.from_object_id(t.table_id).display(),
                    "location": t.location,
                    "branch": t.branch,
                    "version": t.version,
                    "action": t.action,
                }
                for t in self.tables
            ],
        }


def tag_partitions(
    ns: Namespace, name: str, *, publish: bool = False, force: bool = False, dry_run: bool = False
) -> TagResult:
    check_ref_name(name, "tag")
    snapshot, layout = partitioned_target(ns)
    rows = partition_table_rows(snapshot.rows, layout.specs)
    planned = [_plan_table(ns, row, name) for row in sorted(rows, key=lambda r: r["object_id"])]
    taken = [t for t in planned if t.action == "move"]
    if taken and not force:
        first = Identifier.from_object_id(taken[0].table_id).display()
        raise RefusedError(
            f"tag {name!r} already names another version of "
            f"{plural(len(taken), 'partition table')} "
            f"(first: {first}); nothing was changed: use --force to move it, or another name"
        )
    result = TagResult(name, planned, publish, dry_run)
    if dry_run:
        return result
    for table in planned:
        _apply(ns, table, name)
    if publish:
        result.manifest_version = ns.manifest.mutate(_publish(planned, name))
    return result


def _plan_table(ns: Namespace, row: dict[str, Any], name: str) -> TaggedTable:
    """Where the row's published version is, and what the tag of that name is now."""
    dataset = open_published(ns.storage, row)
    tags = dataset.tags.list() or {}
    branch = PublishedRef.of(row).branch_in(dataset)
    version = int(dataset.version)
    existing = tags.get(name)
    if existing is None:
        action = "create"
    else:
        there = branch_name(existing.get("branch"))
        action = "exists" if (there, existing.get("version")) == (branch, version) else "move"
    ref = PublishedRef.of(row)
    return TaggedTable(row["object_id"], row["location"], branch, version, action, ref)


def _apply(ns: Namespace, table: TaggedTable, name: str) -> None:
    if table.action == "exists":
        return
    dataset = lance.dataset(
        ns.storage.uri(table.location), storage_options=ns.storage.lance_options
    )
    reference = (table.branch, table.version)
    try:
        if table.action == "move":
            dataset.tags.update(name, reference)
        else:
            dataset.tags.create(name, reference)
    except (OSError, RuntimeError, ValueError) as exc:
        now = (dataset.tags.list() or {}).get(name)
        if now is not None and (branch_name(now.get("branch")), now.get("version")) == reference:
            return  # a concurrent tag-partitions of the same name made the same tag
        raise InvalidTableStateError(
            f"cannot tag {table.location!r} {name!r}: {lance_message(exc)}"
        ) from None


def _moved(row: dict[str, Any] | None, tagged: PublishedRef) -> bool:
    """Whether a tagged row is gone, or publishes another version than the one tagged."""
    return row is None or PublishedRef.of(row) != tagged


def _publish(planned: list[TaggedTable], name: str):
    """The manifest plan: `read_tag` on every tagged row that still publishes what was tagged."""

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> int:
        moved = [t.table_id for t in planned if _moved(snapshot.get(t.table_id), t.ref)]
        if moved:
            shown = Identifier.from_object_id(moved[0]).display()
            raise ConcurrentModificationError(
                f"{plural(len(moved), 'partition')} changed while tagging (first: {shown}); "
                "the tags are "
                f"made but read_tag is not published: rerun with --force --publish"
            )
        for table in planned:
            edit.publish(table.table_id, PublishedRef(tag=name))
        return snapshot.version + 1

    return plan
