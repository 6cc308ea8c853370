"""`prune --compact`: merge small fragments, and publish compacted partition tables at once.

A table readers reach through "latest" is compacted in place (Lance's `compact_files`, a
`Rewrite` commit that concurrent appends rebase over). A partition table is read at the
`read_version` `__manifest` publishes, so its compacted version means nothing until published:
it is compacted only when its latest version is the published one (no write in flight), and
every compacted partition table of the run is published in ONE `__manifest` commit
(service/partitioned/republish.py), which re-checks that each table's `read_version` has not
moved. A table whose `read_version` moved meanwhile keeps the
writer's version; our compacted version stays unpublished and expires later like any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lance
from lance.optimize import Compaction as LanceCompaction

from lancens_cli.service.indexes.steps import borrowed_indexes
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.republish import Republish, republish
from lancens_cli.store.commit import COMMIT_ERRORS, is_conflict

MAX_TABLES_PER_RUN = 1000  # compaction rewrites data: bounded per run, the rest next time


@dataclass
class Compaction:
    location: str
    object_id: str | None
    before: int
    after: int | None = None
    fragments_removed: int = 0
    fragments_added: int = 0
    published: bool | None = None  # partition tables: whether __manifest now reads it

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.object_id or self.location,
            "location": self.location,
            "version_before": self.before,
            "version_after": self.after,
            "fragments_removed": self.fragments_removed,
            "fragments_added": self.fragments_added,
            "published": self.published,
        }


@dataclass
class CompactionBudget:
    left: int = MAX_TABLES_PER_RUN
    done: list[Compaction] = field(default_factory=list)

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


# what `compact_files` itself commits (the rewrite, and the fragment ids it reserves first)
_COMPACTION_OPERATIONS = frozenset({"Rewrite", "ReserveFragments", "BaseOperation"})


def _interleaved(after: Any, before: int) -> bool:
    """Whether a version other than the compaction's own landed after `before` (a writer's
    append that Lance rebased the compaction over), or that cannot be told."""
    try:
        transactions = after.get_transactions(after.version - before)
    except Exception:  # noqa: BLE001 - unknown history: assume the worst
        return True
    kinds = {type(t.operation).__name__ for t in transactions if t is not None}
    return len(transactions) != after.version - before or not kinds <= _COMPACTION_OPERATIONS


NOT_COMPACTED = (
    "not compacted: its index(es) {names} are read from its clone source, and compacting "
    "would leave them unreadable (run `optimize.optimize_indices` on a deep copy instead)"
)


def before_compaction(location: str) -> None:
    """A seam for tests that interleave a writer with a compaction (does nothing)."""


def _rewrite(ns: Namespace, location: str, ds: Any, notes: list[str]) -> Any:
    """Lance's compaction, planned, executed and committed in steps so that a commit Lance
    refuses leaves no file behind; its metrics, or None when a writer won.

    A compaction rebases over concurrent appends, but not over every commit (a partitioned
    write restoring the published version first): then the writer wins, the files the
    compaction wrote are removed at once (no sweep would know them from a write in flight)
    and the next run compacts."""
    plan = LanceCompaction.plan(ds, {})
    results = [task.execute(ds) for task in plan.tasks]
    if not results:
        return None
    try:
        return LanceCompaction.commit(ds, results)
    except COMMIT_ERRORS as exc:
        written = [
            f"{location}/data/{data_file.path}"
            for result in results
            for fragment in result.new_fragments
            for data_file in fragment.files
        ]
        ns.storage.delete_files(written)
        if not is_conflict(exc, "incompatible"):
            raise
        notes.append("not compacted: a writer committed to it meanwhile; the next run will")
        return None


def compact_table(
    ns: Namespace,
    location: str,
    object_id: str | None,
    published: int | None,
    notes: list[str],
    dry_run: bool = False,
) -> Compaction | None:
    """Compact one table; None when there was nothing to merge or it must not be touched
    (then `notes` says why, where a reader would wonder).

    `published` is the `read_version` the current `__manifest` gives a partition table (None
    for any other table)."""
    ds = lance.dataset(ns.storage.uri(location), storage_options=ns.storage.lance_options)
    if published is not None and ds.version != published:
        return None  # a write is in flight (or died): compacting its version would publish it
    if len(ds.get_fragments()) < 2:
        return None
    borrowed = borrowed_indexes(ds)
    if borrowed:
        notes.append(NOT_COMPACTED.format(names=", ".join(borrowed)))
        return None
    if dry_run:
        return Compaction(location, object_id, ds.version)
    before, rows = ds.version, ds.count_rows()
    before_compaction(location)
    metrics = _rewrite(ns, location, ds, notes)
    if metrics is None:
        return None
    if not metrics.fragments_removed:
        return None
    after = lance.dataset(ns.storage.uri(location), storage_options=ns.storage.lance_options)
    if published is not None and (_interleaved(after, before) or after.count_rows() != rows):
        # a writer committed to the table between our look and our commit: Lance rebased the
        # compaction over its unpublished version, so ours holds rows __manifest has not
        # published. It is never published; it expires like any unpublished version.
        return None
    result = Compaction(
        location,
        object_id,
        before,
        after.version,
        metrics.fragments_removed,
        metrics.fragments_added,
    )
    if published is not None:
        result.published = False
    return result


def publish_new_versions(
    ns: Namespace, compactions: list[Compaction], indexed: list[dict[str, Any]]
) -> int | None:
    """Publish the compacted partition tables and those whose indexes moved to a new version
    (`indexed`: `{"object_id", "version_before", "version_after", "published"}`) in one
    `__manifest` commit; its version. A table both compacted and indexed moves to its final
    (indexed) version. A table whose `read_version` moved meanwhile keeps the writer's version."""
    pending = [c for c in compactions if c.published is False and c.object_id]
    moves = {
        c.object_id: Republish(c.object_id, c.before, c.after)
        for c in pending
        if c.object_id is not None and c.after is not None
    }
    for entry in indexed:
        moves[entry["object_id"]] = Republish(
            entry["object_id"], entry["version_before"], entry["version_after"]
        )
    done = republish(ns, list(moves.values()))
    for c in pending:
        c.published = c.object_id in done.moved
    for entry in indexed:
        entry["published"] = entry["object_id"] in done.moved
    return done.manifest_version
