"""One table's prune work, the same whether a thread of the driver or a Spark task runs it.

The driver decides what stays of every table and why (`decide.py`, `protect.py`) and
hands each table over as a `TableWork`: its plan, the files shallow clones read, whether to
compact it. `run_table` then removes the dead write's unpublished versions, expires the plan's
versions with Lance, sweeps files no version references past the grace, compacts and brings
indexes current (service/indexes/optimize.py); it reads
no `__manifest` and needs nothing but the root's storage. `run_group` is that work for a list of
tables as plain data (dicts, lists, numbers, strings), which is what a Spark task receives and
returns (pipeline/prune_tasks.py); the local run calls `run_table` from its thread pool.

A Spark task imports this module (and Lance with it) in its Python worker, after Spark's daemon
forked that worker, so Lance never runs in a process that forks.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lancens_cli.config import NamespaceConfig
from lancens_cli.errors import LancensError, lance_message
from lancens_cli.service.indexes.definitions import IndexDefinition
from lancens_cli.service.indexes.optimize import optimize_for_prune
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.branches import BranchPlan, expire_branches
from lancens_cli.service.prune.compact import Compaction, compact_table
from lancens_cli.service.prune.expire import expire_listed
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import TablePlan, manifest_file
from lancens_cli.service.prune.report import TableResult, TableStatus, settle_status
from lancens_cli.store.delete_pace import DeletePace
from lancens_cli.store.lance_session import held_dataset, open_latest
from lancens_cli.store.storage import check_relative
from lancens_cli.store.tables import VERSIONS_DIR
from lancens_cli.store.version_files import version_times

UNREFERENCED_BATCH = 1000  # unreferenced files removed per table and run; the rest next run


@dataclass(slots=True)
class TableWork:
    """What the driver hands over for one table: everything `run_table` needs besides storage."""

    plan: TablePlan
    read_by_clones: frozenset[str] = frozenset()  # files no sweep may touch
    compact: bool = False
    published: int | None = None  # the current read_version of a partition table
    optimize_indexes: bool = False
    definitions: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # to build
    # the dataset the driver opened to read the table, when held for its cleanup (not sent)
    handle: Any = dataclasses.field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": dataclasses.asdict(self.plan),
            "read_by_clones": sorted(self.read_by_clones),
            "compact": self.compact,
            "published": self.published,
            "optimize_indexes": self.optimize_indexes,
            "definitions": self.definitions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableWork:
        plan = dict(data["plan"])
        plan["branches"] = [BranchPlan(**branch) for branch in plan.get("branches", [])]
        return cls(
            TablePlan(**plan),
            frozenset(data["read_by_clones"]),
            data["compact"],
            data["published"],
            bool(data.get("optimize_indexes")),
            list(data.get("definitions") or []),
        )


def run_table(
    ns: Namespace, work: TableWork, policy: PrunePolicy, dry_run: bool
) -> tuple[TableResult, Compaction | None]:
    """Prune one table as planned; a failure is the table's result, never an exception."""
    plan = work.plan
    result = TableResult(plan.object_id, plan.location)
    compaction = None
    handle, work.handle = work.handle, None  # held no longer than this table's work
    try:
        ds = execute_plan(ns, plan, policy, dry_run, result, handle)
        # the latest version as listed is still the latest unless a dead write's went
        own = None if plan.unpublished else plan.latest_own_files
        _sweep_unreferenced(
            ns, plan.location, policy, dry_run, result, work.read_by_clones, ds,
            (plan.data_files, own),
        )  # fmt: skip
        if work.optimize_indexes:
            result.indexes, result.index_versions = optimize_for_prune(
                ns,
                plan.location,
                work.published,
                [IndexDefinition.from_json(d) for d in work.definitions],
                dry_run,
                result.notes,
            )
        if work.compact:
            compaction = _compact(ns, work, result, dry_run)
        settle_status(result, compaction is not None, dry_run)
    except Exception as exc:  # one table's failure must not stop the others
        record_failure(ns, result, exc)
    return result, compaction


def _compact(
    ns: Namespace, work: TableWork, result: TableResult, dry_run: bool
) -> Compaction | None:
    """Compaction, after the index work: Lance merges only fragments its indexes cover alike,
    and remaps the indexes of what it merges. A partition table's compaction then starts from
    the version the index work made, and the run publishes the last version once."""
    plan, moved = work.plan, result.index_versions
    start = moved[1] if moved else work.published
    compaction = compact_table(ns, plan.location, plan.object_id, start, result.notes, dry_run)
    if compaction is not None and moved and compaction.after is not None:
        compaction.before = moved[0]  # what __manifest publishes
        result.index_versions = [moved[0], compaction.after]
    return compaction


def record_failure(ns: Namespace, result: TableResult, exc: Exception) -> None:
    """A table whose work raised: `gone` when a drop or rename took it meanwhile (not a failure
    of prune: nothing is left to do), else `failed` with the reason in words."""
    if _gone(ns, result.location):
        result.status = TableStatus.GONE
        result.notes.append("the table was dropped or moved during prune: nothing left to do")
    else:
        result.status = TableStatus.FAILED
        result.error = exc.message if isinstance(exc, LancensError) else lance_message(exc)


def _gone(ns: Namespace, location: str) -> bool:
    """Whether the table's directory lost its versions (a drop or a rename since the plan)."""
    try:
        return not ns.storage.exists(f"{location}/{VERSIONS_DIR}")
    except Exception:  # noqa: BLE001 - cannot tell: report the failure as it is
        return False


def job_settings(ns: Namespace, policy: PrunePolicy, dry_run: bool, parallel: int) -> dict:
    """What every group of a run shares, as plain data."""
    return {
        "config": dataclasses.asdict(ns.config),
        "policy": policy.to_json(),
        "dry_run": dry_run,
        "parallel": parallel,
        "delete_rate_limit": ns.storage.delete_pace and ns.storage.delete_pace.per_second,
    }


def run_group(job: dict[str, Any], group: list[tuple[int, dict[str, Any]]]) -> list[dict]:
    """A group of tables as plain data in and out: `(index, TableWork.to_json())` pairs in,
    `{"index", "result", "compaction"}` dicts out, the tables run `job["parallel"]` at a time."""
    ns = Namespace(NamespaceConfig(**job["config"]))
    if job.get("delete_rate_limit"):  # this task's part of the run's rate
        ns.storage.delete_pace = DeletePace(job["delete_rate_limit"], int(job["parallel"]))
    policy = PrunePolicy.from_json(job["policy"])

    def one(item: tuple[int, dict[str, Any]]) -> dict[str, Any]:
        index, work = item
        result, compaction = run_table(ns, TableWork.from_json(work), policy, job["dry_run"])
        return {
            "index": index,
            "result": result.to_json(),
            "compaction": dataclasses.asdict(compaction) if compaction else None,
        }

    with ThreadPoolExecutor(max_workers=max(1, int(job["parallel"]))) as pool:
        return list(pool.map(one, group))


def compaction_from_json(data: dict[str, Any] | None) -> Compaction | None:
    return Compaction(**data) if data else None


def execute_plan(
    ns: Namespace,
    plan: TablePlan,
    policy: PrunePolicy,
    dry_run: bool,
    result: TableResult,
    handle: Any = None,
) -> Any:
    """Remove the plan's unpublished and expired versions; the dataset handle used, if any.

    `handle`: the table opened when it was read (before its plan), or the latest manifest then
    read (`HeldManifest`), used instead of opening it again; Lance's cleanup keeps every
    version from the handle's on. Not after a dead write's versions are dropped: the handle's
    version may be one of them."""
    result.kept = [{"version": v, "reasons": r} for v, r in plan.protected.items()]
    result.kept += [
        {"version": v, "branch": branch.name, "reasons": r}
        for branch in plan.branches
        for v, r in branch.protected.items()
    ]
    result.notes = plan.notes
    if plan.unpublished:
        _drop_unpublished(ns, plan, dry_run, result)
        handle = None
    ds = None
    if any(branch.expire for branch in plan.branches):
        ds = held_dataset(handle, ns.storage, plan.location)
        done = expire_branches(
            ns.storage, plan.location, ds, plan.branches, policy, dry_run, plan.judged_at
        )
        for name, removed, stats in done:
            if removed:
                result.branch_versions_removed[name] = removed
            _count(result, stats)
    if not plan.expire:
        if result.unpublished_removed or result.branch_versions_removed:
            result.status = _pruned(dry_run)
        return ds or handle  # (for the sweep)
    if ds is None:
        ds = held_dataset(handle, ns.storage, plan.location)
    result.versions_removed, stats = expire_listed(
        ds,
        plan.expire,
        policy,
        dry_run,
        lambda: version_times(ns.storage, plan.location),
        ns.storage.delete_pace,
        plan.judged_at,
    )
    _count(result, stats)
    if result.versions_removed or result.unpublished_removed or result.branch_versions_removed:
        result.status = _pruned(dry_run)
    return ds


def _pruned(dry_run: bool) -> TableStatus:
    """The status of a table the run removed versions or files of."""
    return TableStatus.WOULD_PRUNE if dry_run else TableStatus.PRUNED


def _count(result: TableResult, stats: Any) -> None:
    """Add one Lance cleanup's files and bytes to the table's result."""
    result.files_removed += (
        stats.data_files_removed
        + stats.transaction_files_removed
        + stats.index_files_removed
        + stats.deletion_files_removed
        + stats.old_versions
    )
    result.bytes_freed += stats.bytes_removed
    if stats.failed_deletes:
        result.notes.append(f"{stats.failed_deletes} file(s) could not be deleted; rerun prune")


def _sweep_unreferenced(
    ns: Namespace,
    location: str,
    policy: PrunePolicy,
    dry_run: bool,
    result: TableResult,
    read_by_clones: frozenset[str],
    ds: Any = None,
    listed: tuple[int | None, int | None] = (None, None),
) -> None:
    """Delete files no version references (a killed write's), once older than the grace.

    Only when `data/` holds a file the latest version does not reference (else there is none
    to find; unreferenced deletion and index files then go by Lance's own 7-day rule).

    Lance finds them (`explain_cleanup_old_versions(delete_unverified=True)` over the latest
    version alone, which removes no version); we delete only those past our grace, one by one,
    below the table's directory. Lance's own `delete_unverified=True` would take them at any
    age, an in-flight write's too.
    """
    storage = ns.storage
    # The common case costs nothing more: `data/` held no more files, when the table was
    # listed, than the latest version has there (`listed`: those two counts, the second read
    # from the latest manifest as the table was listed, when known); else one more listing
    # of `data/` (the cleanup may just have removed the extra files).
    listed_data_files, latest_own_files = listed
    if (
        listed_data_files is not None
        and latest_own_files is not None
        and listed_data_files <= latest_own_files
    ):
        return
    ds = held_dataset(ds, storage, location)
    own = [
        f for fragment in ds.get_fragments() for f in fragment.metadata.files if f.base_id is None
    ]
    if listed_data_files is not None and listed_data_files <= len(own):
        return  # (counted: pylance makes a class each time a data file's `path` is read)
    latest = {f.path for f in own}
    if {name for name, _size in storage.walk_files(f"{location}/data")} <= latest:
        return
    explanation = ds.explain_cleanup_old_versions(
        older_than=policy.older_than,
        versions=[ds.latest_version],
        delete_unverified=True,
        error_if_tagged_old_versions=False,
        include_files=True,
        max_files=UNREFERENCED_BATCH,
    )
    base = (storage.uri(location) if storage.is_local else storage.fs_path(location)).strip("/")
    # Lance names an object by its key (no bucket) on object stores, a path on local disk
    bases = [base] if storage.is_local else [base, base.split("/", 1)[-1]]
    now = datetime.now(UTC)
    doomed = []
    for candidate in explanation.candidate_files:
        path = candidate.path.strip("/")
        within = next((b for b in bases if path.startswith(b + "/")), None)
        if not candidate.unverified or within is None:
            continue  # nothing outside the table's directory, nothing a version references
        inside = path[len(within) + 1 :]
        if inside in read_by_clones or "/".join(inside.split("/")[:2]) in read_by_clones:
            continue  # a shallow clone reads it (or its index) through its base path
        rel = f"{location}/{inside}"
        check_relative(rel)
        changed = storage.modified(rel)
        if changed is None or now - changed < policy.grace:
            continue
        doomed.append(rel)
        result.unreferenced_removed += 1
        result.files_removed += 1
        result.bytes_freed += candidate.size_bytes
    if not dry_run:
        storage.delete_files(doomed)
    if result.unreferenced_removed and result.status == TableStatus.NOTHING_TO_DO:
        result.status = _pruned(dry_run)


def _drop_unpublished(ns: Namespace, plan: TablePlan, dry_run: bool, result: TableResult) -> None:
    """Remove a dead write's versions after the published one, newest first.

    Just before each deletion the version must still be the table's newest: a write that
    committed meanwhile is alive, and the tail stays.
    """
    sizes = dict(ns.storage.walk_files(f"{plan.location}/{VERSIONS_DIR}"))
    for version in plan.unpublished:
        path = manifest_file(ns.storage, plan.location, version)
        if path is None:
            continue
        latest = open_latest(ns.storage, plan.location).latest_version
        expected = plan.unpublished[0] if dry_run else version
        if latest != expected:
            result.notes.append(
                f"version {latest} appeared during prune: unpublished versions left alone"
            )
            return
        size = sizes.get(path.rsplit("/", 1)[1], 0)
        if not dry_run:
            ns.storage.delete_file(path)
        result.unpublished_removed.append(version)
        result.files_removed += 1
        result.bytes_freed += size
    if result.unpublished_removed:
        result.notes.append(
            f"unpublished version(s) {result.unpublished_removed} of a write that never "
            "published them" + (" would be removed" if dry_run else " removed")
        )
