"""What a prune run did, table by table: the report `prune --json` prints.

Kept apart from the run itself (no Lance here) so that a run the record answers without
opening any table (service/prune/quiet.py) builds the same report as a full one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lancens_cli.models import Identifier, Result, Streamed
from lancens_cli.service.indexes import actions
from lancens_cli.service.prune.policy import PrunePolicy

UNCHANGED = "unchanged since the last prune, with nothing aging into the policy: skipped"
NOT_A_TABLE = "not a Lance table with versions (declared, empty or gone)"


class TableStatus(StrEnum):
    """What a table's `status` says, one true word for what the run did to it, the first that
    holds: versions or files removed (service/prune/table.py); compacted; indexes built or
    brought current (--optimize-indexes); nothing at all. `failed` and `gone` (dropped or
    moved meanwhile) replace them. Its text is the JSON's and the table's."""

    PRUNED = "pruned"
    WOULD_PRUNE = "would prune"
    COMPACTED = "compacted"
    WOULD_COMPACT = "would compact"
    INDEXES_OPTIMIZED = "indexes optimized"
    WOULD_OPTIMIZE_INDEXES = "would optimize indexes"
    NOTHING_TO_DO = "nothing to do"
    FAILED = "failed"
    GONE = "gone"


@dataclass(slots=True)
class TableResult:
    object_id: str | None
    location: str
    status: TableStatus = TableStatus.NOTHING_TO_DO
    versions_removed: list[int] = field(default_factory=list)
    branch_versions_removed: dict[str, list[int]] = field(default_factory=dict)
    unpublished_removed: list[int] = field(default_factory=list)
    unreferenced_removed: int = 0  # files of writes that never committed, past the grace
    files_removed: int = 0
    bytes_freed: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    # --optimize-indexes: each index (service/indexes/optimize.py), and for a partition table
    # [published version, the version holding the work] while that waits to be published
    indexes: list[dict[str, Any]] = field(default_factory=list)
    index_versions: list[int] | None = None

    @property
    def table(self) -> str | None:
        """The id as every command takes it (`--delimiter`), not `__manifest`'s `$` form."""
        return Identifier.from_object_id(self.object_id).display() if self.object_id else None

    def to_json(self) -> dict[str, Any]:
        return {
            "object_id": self.object_id,
            "table": self.table,
            "location": self.location,
            "status": self.status,
            "versions_removed": self.versions_removed,
            "branch_versions_removed": self.branch_versions_removed,
            "unpublished_removed": self.unpublished_removed,
            "unreferenced_removed": self.unreferenced_removed,
            "files_removed": self.files_removed,
            "bytes_freed": self.bytes_freed,
            "protected": self.kept,
            "notes": self.notes,
            "error": self.error,
            "indexes": self.indexes,
            "index_versions": self.index_versions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableResult:
        """Back from `to_json` (a Spark task returns its results as plain dicts)."""
        return cls(
            data["object_id"],
            data["location"],
            TableStatus(data["status"]),
            list(data["versions_removed"]),
            {name: list(v) for name, v in data["branch_versions_removed"].items()},
            list(data["unpublished_removed"]),
            data["unreferenced_removed"],
            data["files_removed"],
            data["bytes_freed"],
            list(data["protected"]),
            list(data["notes"]),
            data["error"],
            list(data.get("indexes") or []),
            data.get("index_versions"),
        )


def settle_status(result: TableResult, compacted: bool, dry_run: bool) -> None:
    """A table the run removed nothing from says what else it did: compacted, or its indexes
    built or brought current; `nothing to do` stays only when nothing at all was done."""
    if result.status != TableStatus.NOTHING_TO_DO:
        return
    done = {i.get("action") for i in result.indexes}
    if compacted:
        result.status = TableStatus.WOULD_COMPACT if dry_run else TableStatus.COMPACTED
    elif done & (actions.PLANNED if dry_run else actions.DONE):
        optimized = TableStatus.WOULD_OPTIMIZE_INDEXES, TableStatus.INDEXES_OPTIMIZED
        result.status = optimized[0] if dry_run else optimized[1]


class ResultTotals:
    """What the report's totals sum over table results, and the failed ones, kept as each
    result is added."""

    FIELDS = (
        "versions_removed",
        "branch_versions_removed",
        "unpublished_removed",
        "unreferenced_removed",
        "files_removed",
        "bytes_freed",
        "versions_protected",
        "rows_indexed",
    )

    def __init__(self) -> None:
        self.counts = dict.fromkeys(self.FIELDS, 0)
        self.failed: list[TableResult] = []

    def add(self, t: TableResult) -> None:
        counts = self.counts
        counts["versions_removed"] += len(t.versions_removed)
        counts["branch_versions_removed"] += sum(len(v) for v in t.branch_versions_removed.values())
        counts["unpublished_removed"] += len(t.unpublished_removed)
        counts["unreferenced_removed"] += t.unreferenced_removed
        counts["files_removed"] += t.files_removed
        counts["bytes_freed"] += t.bytes_freed
        counts["versions_protected"] += len(t.kept)
        counts["rows_indexed"] += sum(i.get("rows_indexed") or 0 for i in t.indexes)
        if t.status == TableStatus.FAILED:
            self.failed.append(t)

    def merge(self, other: ResultTotals) -> None:
        for name, value in other.counts.items():
            self.counts[name] += value
        self.failed += other.failed


@dataclass
class DebrisResult:
    code: str
    object: str | None
    location: str | None
    action: str  # deleted, would delete, kept (younger than the grace), reported
    message: str


@dataclass
class PruneReport(Result):
    root: str
    policy: PrunePolicy
    dry_run: bool
    # in order; a run's are a `ResultLog` (service/prune/result_log.py), kept on disk
    tables: Sequence[TableResult] = field(default_factory=list)
    manifest: TableResult | None = None
    debris: list[DebrisResult] = field(default_factory=list)
    compacted: list[dict[str, Any]] = field(default_factory=list)
    compacted_published_in: int | None = None  # the __manifest version publishing them
    refused: list[dict[str, str]] = field(default_factory=list)  # rows skipped (containment)
    # --optimize-indexes: partition tables whose indexes moved to a new version, and whether
    # the run's one __manifest commit (`indexes_published_in`) publishes it
    indexed: list[dict[str, Any]] = field(default_factory=list)
    indexes_published_in: int | None = None
    # object id -> which partition a partition table is (service/partitioned/label.py)
    labels: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def failed(self) -> list[TableResult]:
        failed, manifest = self._table_totals().failed, self.manifest
        if manifest is not None and manifest.status == TableStatus.FAILED:
            return [*failed, manifest]
        return list(failed)

    def totals(self) -> dict[str, int]:
        summed = ResultTotals()
        summed.merge(self._table_totals())
        if self.manifest is not None:
            summed.add(self.manifest)
        return {
            "tables": len(self.tables),
            "tables_failed": len(summed.failed),
            **summed.counts,
            "debris_removed": sum(1 for d in self.debris if d.action == "deleted"),
        }

    def _table_totals(self) -> ResultTotals:
        """The tables' sums: kept as they came when the tables are a `ResultLog` (read back
        from disk only to be printed), else summed here."""
        kept = getattr(self.tables, "totals", None)
        if isinstance(kept, ResultTotals):
            return kept
        summed = ResultTotals()
        for table in self.tables:
            summed.add(table)
        return summed

    def _table_json(self, table: TableResult) -> dict[str, Any]:
        plain = table.to_json()
        label = self.labels.get(table.object_id) if table.object_id else None
        return {**plain, **label.json_fields()} if label is not None else plain

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "dry_run": self.dry_run,
            "policy": self.policy.to_json(),
            "totals": self.totals(),
            "manifest": self.manifest.to_json() if self.manifest else None,
            "tables": Streamed(self.tables, self._table_json),
            "debris": [d.__dict__ for d in self.debris],
            "compacted": self.compacted,
            "compacted_published_in": self.compacted_published_in,
            "refused": self.refused,
            "indexed": self.indexed,
            "indexes_published_in": self.indexes_published_in,
        }
