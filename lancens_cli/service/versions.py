"""`versions [ID]`: every version a table keeps and why, and what tonight's `prune` removes.

The answer comes from the decision `prune` itself makes (`service.prune.decide.decide`) under
the same policy (`--older-than`, `--retain`, `--grace`, `--force`, the profile's settings):
what this command says expires is exactly what `prune` then removes. Nothing is changed here.

A version's time is Lance's commit time (`store/version_pick.commit_time`), the time
`restore --to-timestamp`, `diff --from-timestamp` and `--timestamp-as-of` compare with: the time
shown for a version names that version when given back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import lance

from lancens_cli.errors import TableNotFoundError
from lancens_cli.models import MANIFEST_TABLE, Identifier, Result, Streamed
from lancens_cli.service.history.transactions import (
    READ_ERRORS,
    VersionStats,
    operation_word,
    version_stats,
)
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.decide import Decisions, Deferred, decide
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import expiry_reasons
from lancens_cli.service.prune.table import TableResult, TableWork
from lancens_cli.spill import SpilledList
from lancens_cli.store.commit_record import record_of
from lancens_cli.words import utc_iso


@dataclass
class VersionLine:
    """One version of one table."""

    version: int
    timestamp: str | None
    rows: int | None
    bytes: int | None
    tags: list[str]
    branches: list[str]  # branches that start at this version
    fate: str  # "kept" or "expires"
    reasons: list[str]
    message: str | None = None  # the commit's message: what a version that is no write did
    # what made the version: the command a `__manifest` commit recorded (store/commit_record.py)
    # or, unrecorded, Lance's operation in words; its recorded changes and options
    operation: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class TableVersions(Result):
    """`versions ID`: a table's versions under the policy."""

    table: str
    location: str
    policy: PrunePolicy
    versions: list[VersionLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    label: Any = field(default=None, repr=False)  # a partition table: which partition it is

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            **(self.label.json_fields() if self.label is not None else {}),
            "location": self.location,
            "policy": self.policy.to_json(),
            "versions": [self._line_json(v) for v in self.versions],
            "expiring": [v.version for v in self.versions if v.fate == "expires"],
            "notes": self.notes,
        }

    def _line_json(self, line: VersionLine) -> dict[str, Any]:
        """A version's JSON; `__manifest`'s rows are catalog rows, and named so."""
        document = line.to_json()
        if self.table == MANIFEST_TABLE:
            document["catalog_rows"] = document.pop("rows")
        return document


@dataclass
class TableSummary:
    table: str
    location: str
    versions: int
    expiring: int
    kept_by: dict[str, int]
    bytes_reclaimable: int | None
    note: str | None = None
    label: Any = field(default=None, repr=False)  # a partition table: which partition it is

    def to_json(self) -> dict[str, Any]:
        plain = {k: v for k, v in vars(self).items() if k != "label"}
        return {**plain, **(self.label.json_fields() if self.label is not None else {})}


@dataclass
class NamespaceVersions(Result):
    """`versions` of a namespace: one line per table (a `SpilledList` for a whole root)."""

    policy: PrunePolicy
    tables: Sequence[TableSummary] = field(default_factory=list)
    expiring: int = 0  # versions expiring over all tables

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy.to_json(),
            "tables": Streamed(self.tables, TableSummary.to_json),
            "expiring": self.expiring,
        }


_KINDS = (
    ("published", "published"),
    ("tag ", "tag"),
    ("branch ", "branch"),
    ("shallow clone", "clone"),
    ("latest", "latest"),
    ("newest", "newest"),
    ("younger", "younger"),
)


def reason_kind(reason: str) -> str:
    """The kind of a keep reason ("tag v1" -> "tag"), for the per-table summary."""
    for prefix, kind in _KINDS:
        if reason.startswith(prefix):
            return kind
    return reason.split()[0] if reason else reason


def table_versions(
    ns: Namespace, ident: Identifier, policy: PrunePolicy, delimiter: str = "."
) -> TableVersions:
    """Every version of one table (or of `__manifest`), kept or expiring, with every reason."""
    ns.require_root()
    now = datetime.now(UTC)
    if ident.parts and ident.parts[-1] == MANIFEST_TABLE:
        decisions = decide(ns, [Identifier.parse(None)], policy, now)
        plan = decisions.manifest_plan
        if plan is None:
            raise TableNotFoundError("__manifest does not exist yet")
        report = TableVersions(MANIFEST_TABLE, MANIFEST_TABLE, policy)
        report.versions = _lines(ns, MANIFEST_TABLE, plan.protected, plan.expire, {}, {})
        _with_records(ns, report.versions)
        _expiring_because(report, policy)
        _publishing(decisions, report)
        return report
    decisions = decide(ns, [ident], policy, now)
    if not decisions.scope:
        raise TableNotFoundError(f"table {ident.display(delimiter)} has no versions to show")
    (location, _), planned = decisions.scope[0], decisions.planned[0]
    report = TableVersions(ident.display(delimiter), location, policy)
    report.label = decisions.labels.get(ident.object_id)
    state = decisions.states.get(location)
    if isinstance(planned, TableWork):
        plan = planned.plan
        tags = _by_version(state.tags if state else {})
        branches = _by_version(state.branches if state else {})
        report.versions = _lines(ns, location, plan.protected, plan.expire, tags, branches)
        _expiring_because(report, policy)
        report.notes = list(plan.notes)
        for branch in plan.branches:
            report.notes.append(
                f"branch {branch.name}: {len(branch.expire)} of its own versions expire"
            )
    else:
        assert isinstance(planned, TableResult)
        kept = {k["version"]: list(k["reasons"]) for k in planned.kept}
        report.versions = _lines(ns, location, kept, [], {}, {})
        report.notes = list(planned.notes) + ([planned.error] if planned.error else [])
    return report


def namespace_versions(
    ns: Namespace, ident: Identifier, policy: PrunePolicy, delimiter: str = "."
) -> NamespaceVersions:
    """One line per table of the namespace (or the root): what prune keeps and removes.

    Each table is planned as its line is made and its plan dropped (`decide(deferred=True)`),
    and the lines wait in a temporary file (spill.py): a million tables are never held."""
    ns.require_root()
    decisions = decide(ns, [ident], policy, datetime.now(UTC), deferred=True)
    lines: SpilledList[TableSummary] = SpilledList()
    report = NamespaceVersions(policy, lines)
    labels = decisions.labels
    for index, (location, object_id) in enumerate(decisions.scope):
        planned = decisions.planned[index]
        decisions.planned[index] = None  # (held by the list until then)
        if isinstance(planned, Deferred):
            assert decisions.plan_later is not None
            planned = decisions.plan_later(planned.item)
        summary = _summary(ns, location, object_id, planned, delimiter)
        summary.label = labels.get(object_id) if object_id else None
        report.expiring += summary.expiring
        lines.append(summary)
    return report


def _summary(
    ns: Namespace, location: str, object_id: str | None, planned: Any, delimiter: str
) -> TableSummary:
    """A table's line: how many versions, how many expire, what keeps the rest."""
    name = Identifier.from_object_id(object_id).display(delimiter) if object_id else location
    if isinstance(planned, TableWork):
        plan = planned.plan
        kinds: dict[str, int] = {}
        for reasons in plan.protected.values():
            for kind in {reason_kind(r) for r in reasons}:
                kinds[kind] = kinds.get(kind, 0) + 1
        reclaim = _reclaimable(ns, location, plan.expire, list(plan.protected))
        versions = len(plan.protected) + len(plan.expire)
        return TableSummary(name, location, versions, len(plan.expire), kinds, reclaim)
    assert isinstance(planned, TableResult)  # decided at once: none left Deferred
    note = planned.error or planned.status
    return TableSummary(name, location, len(planned.kept), 0, {}, None, note)


RECLAIM_VERSIONS = 200  # past this many versions, bytes reclaimable are not worked out


def _reclaimable(ns: Namespace, location: str, expire: list[int], kept: list[int]) -> int | None:
    """Bytes of the data files only expiring versions reference (None: not cheap to tell)."""
    if not expire:
        return 0
    if len(expire) + len(kept) > RECLAIM_VERSIONS:
        return None
    try:
        ds = lance.dataset(ns.storage.uri(location), storage_options=ns.storage.lance_options)

        def files(version: int) -> dict[str, int]:
            found = {}
            for fragment in ds.checkout_version(version).get_fragments():
                for data_file in fragment.metadata.files:
                    found[data_file.path] = int(data_file.file_size_bytes or 0)
            return found

        keep = set().union(*(files(v) for v in kept)) if kept else set()
        going: dict[str, int] = {}
        for version in expire:
            going.update(files(version))
        return sum(size for path, size in going.items() if path not in keep)
    except Exception:  # noqa: BLE001 - a courtesy figure: unknown rather than wrong
        return None


def _by_version(refs: dict[str, int]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for name, version in refs.items():
        found.setdefault(int(version), []).append(name)
    return found


def _stats(ns: Namespace, location: str) -> dict[int, VersionStats]:
    """version -> its commit time, rows and bytes, from one `versions()` read (each manifest's
    own statistics; no data file). The time is not the `_versions/` file's modification time:
    that one can fall before the commit and names the version before."""
    try:
        ds = lance.dataset(ns.storage.uri(location), storage_options=ns.storage.lance_options)
        return version_stats(ds)
    except Exception:  # noqa: BLE001 - a courtesy: a table that does not load shows none
        return {}


def _lines(
    ns: Namespace,
    location: str,
    protected: dict[int, list[str]],
    expire: list[int],
    tags: dict[int, list[str]],
    branches: dict[int, list[str]],
) -> list[VersionLine]:
    stats = _stats(ns, location)
    lines = []
    for version in sorted({*protected, *expire}):
        known = stats.get(version)
        lines.append(
            VersionLine(
                version,
                utc_iso(known.timestamp) if known else None,
                known.rows if known else None,
                known.bytes if known else None,
                sorted(tags.get(version, [])),
                sorted(branches.get(version, [])),
                "kept" if version in protected else "expires",
                list(protected.get(version, [])),
            )
        )
    return lines


def _with_records(ns: Namespace, lines: list[VersionLine]) -> None:
    """What made each `__manifest` version, as `DESCRIBE HISTORY` says it: the command its
    commit recorded, with its options and changes; Lance's operation where none is recorded
    (another writer, an older lancens)."""
    dataset = ns.manifest.open_dataset()
    if dataset is None:
        return
    for line in lines:
        try:
            transaction = dataset.read_transaction(line.version)
        except READ_ERRORS:
            continue  # a version whose transaction file is gone has nothing more to show
        if transaction is None:
            continue
        record = record_of(getattr(transaction, "transaction_properties", None))
        line.message = record.message
        line.operation = record.operation or (
            f"{operation_word(type(transaction.operation).__name__)} (not recorded)"
        )
        line.changes, line.options = record.changes, record.options


def _expiring_because(report: TableVersions, policy: PrunePolicy) -> None:
    """An expiring version's reasons: the rules of prune's decision it met (protect.py)."""
    because = expiry_reasons(policy)
    for line in report.versions:
        if line.fate == "expires":
            line.reasons = list(because)


def _publishing(decisions: Decisions, report: TableVersions) -> None:
    """For `__manifest`: how many tables each kept version publishes."""
    counts: dict[int, int] = {}
    for per_version in decisions.pins.versions.values():
        for manifest_versions in per_version.values():
            for manifest_version in manifest_versions:
                counts[manifest_version] = counts.get(manifest_version, 0) + 1
    for line in report.versions:
        if line.version in counts:
            line.reasons.append(f"publishes {counts[line.version]} table version(s)")
