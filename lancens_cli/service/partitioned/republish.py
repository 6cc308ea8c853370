"""Publishing another version of a partition table that is not a write: the same rows in a new
version of the table's own main line (compacted now; index optimisation and restore next).

A partitioned write publishes new rows (service/partitioned/write.py, `publish_touches`); this
publishes versions that move no row, so it carries no partition values and creates nothing
(restore, which publishes a past version's rows, shares its writer guard).
Each table is moved only while `__manifest` still publishes the version the new one was made
from, on main: a table whose row moved meanwhile (a writer's version, a branch or a tag) keeps
what it publishes, and the new version stays unpublished (it expires like any other). All the
tables go in ONE `__manifest` commit, planned anew on every retry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lancens_cli.service.namespace import Namespace
from lancens_cli.store.catalog_rows import PublishedRef
from lancens_cli.store.manifest import (
    PARTITIONED_WRITER_FLAG,
    WRITER_FLAGS_KEY,
    ManifestEdit,
    ManifestSnapshot,
)


@dataclass(frozen=True)
class Republish:
    """Move one partition table from its published `read_version` (`published`, on main) to
    `version`, a later version of its own holding the same rows."""

    table_id: str
    published: int
    version: int


@dataclass
class Republished:
    """What one `republish` did: the `__manifest` version that publishes the moves (None when
    none was left to publish), and the tables it moved."""

    manifest_version: int | None
    moved: set[str]


def mark_partitioned_writer(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
    """A namespace another tool laid out as the spec says gets our writer guard with our first
    commit that publishes partition tables (decision 21)."""
    if not snapshot.writer_flags & PARTITIONED_WRITER_FLAG:
        edit.set_metadata({WRITER_FLAGS_KEY: str(snapshot.writer_flags | PARTITIONED_WRITER_FLAG)})


def republish(
    ns: Namespace,
    moves: list[Republish],
    also: Callable[[ManifestSnapshot, ManifestEdit], None] | None = None,
) -> Republished:
    """Publish every move whose table still publishes what it was made from, in one commit.

    `also` adds to the same plan what belongs with the moves (`create index` stores its
    definition in the table metadata, which `mutate` lands just before the rows)."""
    if not moves and also is None:
        return Republished(None, set())
    moved: set[str] = set()

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> int | None:
        moved.clear()  # planned anew on every retry
        if also is not None:
            also(snapshot, edit)
        for move in moves:
            row = snapshot.get(move.table_id)
            if row is not None and PublishedRef.of(row) == PublishedRef(move.published):
                edit.replace(move.table_id, read_version=move.version)
                moved.add(move.table_id)
        if moved:
            mark_partitioned_writer(snapshot, edit)
        return snapshot.version + 1 if moved else None

    version = ns.manifest.mutate(plan)
    return Republished(version, set(moved))
