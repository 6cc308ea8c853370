"""`prune`: namespace-wide maintenance that never takes a version a reader can be sent to.

One run, under the root's lease (service/prune/lease.py):

1. read `__manifest`: its versions, which of them stay (the same retention as tables), and what
   every kept version publishes (`read_version` / `read_tag` / `read_branch`);
2. read every table's versions, tags, branches and base paths (in parallel), to know which
   tables are shallow clones of which;
3. per table (in parallel): decide what stays and why (service/prune/protect.py); then run each
   table's plan (service/prune/table.py: remove a dead write's unpublished versions of a
   partition table, expire the rest with Lance, sweep files no version references, compact),
   in this process's threads or, with `--master`, as Spark tasks (pipeline/prune_tasks.py).
   Locally a table is planned as its work starts, unless a clone is involved (see `decide`);
   its result then goes to the report's on-disk log and its entry to the record;
4. remove the debris `check` finds past the grace (never-committed table writes, staged
   `__manifest` files); report orphan directories that hold tables, never delete them;
5. expire `__manifest`'s own old versions, compact it when it has many fragments.

What Lance's `cleanup_old_versions` does, as measured on pylance 14.0.2:

- `versions=[...]` narrows the run to those versions: a version is removed only when it is in
  the list AND passes `older_than` / `retain_versions` AND is neither the latest nor tagged nor
  the start of a branch (Lance keeps what `referenced_branches` names). A listed version that
  is younger than `older_than` stays.
- Data, deletion and index files are removed only when no remaining version references them:
  after removing versions 2, 4, 5, 6 of 20, every other version reads exactly as before.
- A tagged version in `versions` raises with `error_if_tagged_old_versions=True` and is skipped
  silently with `False`; we pass `False` and never list a tagged version anyway.
- It knows nothing of `__manifest`: without `versions` it removes every old untagged version
  except the latest, a partition table's published `read_version` included; nor of shallow
  clones: a clone of an untagged version loses its files when the source's version goes.
  A clone's own cleanup never deletes its source's files.
- `delete_unverified=True` deletes unreferenced files of any age, an in-flight write's too; we
  never pass it to a cleanup. We ask `explain_cleanup_old_versions(delete_unverified=True)` over
  the latest version alone (no version removed) which files no version references, and delete
  those older than our grace ourselves; whole never-committed table directories go by `check`.

We therefore decide per version ourselves and hand Lance only versions no reader needs, with the
same `older_than` so Lance re-checks the age.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from lancens_cli.errors import LancensError, lance_message
from lancens_cli.models import KIND_TABLE, MANIFEST_TABLE, Identifier
from lancens_cli.parallel import ordered
from lancens_cli.service.indexes.definitions import (
    IndexDefinition,
    definitions_of,
    definitions_text,
)
from lancens_cli.service.indexes.optimize import pending
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.service.prune.compact import Compaction, CompactionBudget, publish_new_versions
from lancens_cli.service.prune.debris import remove_debris
from lancens_cli.service.prune.decide import Decisions, Deferred, decide
from lancens_cli.service.prune.lease import acquire
from lancens_cli.service.prune.manifest_upkeep import maintain_manifest
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.quiet import quiet_state, root_stamps
from lancens_cli.service.prune.record import PruneRecord, policy_key
from lancens_cli.service.prune.record_entries import RecordEntries
from lancens_cli.service.prune.report import PruneReport, TableResult, TableStatus
from lancens_cli.service.prune.request import PruneRequest, TableRunner
from lancens_cli.service.prune.result_log import ResultLog
from lancens_cli.service.prune.table import (
    TableWork,
    execute_plan,
    run_table,
)
from lancens_cli.service.prune.work import PruneWork
from lancens_cli.store.delete_pace import DeletePace
from lancens_cli.store.version_files import list_table

# --- the run ----------------------------------------------------------------------------------


def prune(
    ns: Namespace,
    idents: list[Identifier],
    policy: PrunePolicy,
    *,
    work: PruneWork | None = None,
    dry_run: bool = False,
    parallel: int = 8,
    delimiter: str = ".",
    progress: Callable[[int], Callable[[int], None]] | None = None,
    tasks: TableRunner | None = None,
    full: bool = False,
    delete_rate_limit: int | None = None,
) -> PruneReport:
    """One run over the root; `tasks` runs the per-table work elsewhere (Spark: pipeline/
    prune_tasks.py), by default this process's thread pool (`run_locally`). Tables the last
    run's record shows unchanged are skipped (service/prune/record.py) unless `full`. With
    `delete_rate_limit`, at most that many objects are deleted a second (store/delete_pace.py).
    `work` says what else the run does (service/prune/work.py; none by default); with its
    `optimize_indexes`, every table's indexes are brought current and partition tables get the
    namespace's index definitions (service/indexes/optimize.py)."""
    policy.check()
    work = work or PruneWork()
    pace = None if delete_rate_limit is None else DeletePace(delete_rate_limit, max(1, parallel))
    ns.require_root()
    definitions = _require_targets(ns, idents)  # bad input is found before the lease changes
    lease = None if dry_run else acquire(ns.storage)
    ns.storage.delete_pace = pace
    try:
        shown = definitions_text(definitions) if work.optimize_indexes else None
        key = policy_key(policy, work, ns.storage, delimiter, shown)
        record = PruneRecord(key) if full else PruneRecord.load(ns.storage, key, with_root=False)
        wanted = [d.to_json() for d in definitions] if work.optimize_indexes else []
        request = PruneRequest(
            ns, idents, policy, dry_run, work, max(1, parallel), delimiter, tasks, wanted
        )
        return _run(request, progress, record)
    finally:
        ns.storage.delete_pace = None
        if lease is not None:
            lease.release()


def _require_targets(ns: Namespace, idents: list[Identifier]) -> list[IndexDefinition]:
    """Every named table or namespace exists (exit 3 otherwise), and none is refused. A root
    whose partition metadata cannot be read is refused too (CatalogDamagedError, exit 3): a
    run that deletes waits until an operator has seen the damage `check` names. Returns the
    namespace's index definitions (service/indexes/definitions.py)."""
    snapshot = ns.snapshot()
    definitions = []
    if snapshot.exists and layout_of(snapshot) is not None:
        definitions = definitions_of(snapshot.metadata)
    for ident in (i for i in idents if not i.is_root):
        if ns.kind_of(ident, snapshot) == KIND_TABLE:
            ns.require_table(ident, snapshot)
        else:
            ns.require_namespace(ident, snapshot)
    return definitions


def _run(
    request: PruneRequest,
    progress: Callable[[int], Callable[[int], None]] | None,
    record: PruneRecord,
) -> PruneReport:
    ns, policy, dry_run = request.ns, request.policy, request.dry_run
    report = PruneReport(ns.storage.root_uri, policy, dry_run)
    now = datetime.now(UTC)
    # the root outside its tables, before anything is read (service/prune/quiet.py)
    # (the last record's tables are left out of the root's directories; without one, as
    # with --full, the root's state waits for the next run)
    recording_root = request.whole_root and not dry_run and bool(record.entries)
    skipped = record.entries  # (kept on disk: a million locations are not a set here)
    stamps = root_stamps(ns.storage, skipped) if recording_root else None
    # plans made as tables run, here; a Spark run ships them all, --compact budgets them first
    deferred = request.tasks is None and not request.work.compact
    deferred = deferred and not request.work.optimize_indexes
    # the datasets opened to read tables serve their cleanups here (not on Spark executors)
    hold = request.tasks is None
    decisions = decide(ns, request.idents, policy, now, request.parallel, record, deferred, hold)
    report.refused = decisions.refused
    report.labels = decisions.labels
    advance = progress(len(decisions.scope)) if progress else (lambda freed: None)
    entries = None if dry_run else RecordEntries(request, decisions, record)
    _run_tables(request, decisions, advance, report, entries)
    if entries is not None:
        entries.finish()
    # the directory-only tables this run read versions of (the debris check asks of none
    # other: a row's table is no debris)
    committed = {loc for loc in decisions.directory_only if loc in decisions.states}
    decisions.states.clear()  # done with: the root's work reads the catalog anew
    if entries is None:
        _root_work(request, decisions, report, committed)
        return report
    try:
        _root_work(request, decisions, report, committed)
        if recording_root:
            record.next_root = quiet_state(
                report,
                stamps,
                skipped,
                decisions.scope,
                lambda: list_table(ns.storage, MANIFEST_TABLE),
                policy,
                now,
            )
    finally:  # the tables' entries are kept even when the root's work failed
        with contextlib.suppress(Exception):  # a record not written costs the next run time only
            record.save(ns.storage)
    return report


def _root_work(
    request: PruneRequest, decisions: Decisions, report: PruneReport, committed: set[str]
) -> None:
    """A whole-root run's work outside the tables: the debris, then `__manifest` itself
    (`committed`: the tables the run read versions of)."""
    ns, policy, dry_run = request.ns, request.policy, request.dry_run
    if request.whole_root:
        plan = decisions.manifest_plan
        kept = set(plan.protected) if plan is not None else None
        report.debris = remove_debris(ns, policy, dry_run, request.delimiter, committed, kept)
    if decisions.manifest_plan is not None and request.whole_root:
        report.manifest = TableResult(None, MANIFEST_TABLE)
        try:
            execute_plan(ns, decisions.manifest_plan, policy, dry_run, report.manifest)
            if not dry_run:
                report.compacted += maintain_manifest(ns, request.work.catalog_indexes)
        except Exception as exc:
            report.manifest.status = TableStatus.FAILED
            report.manifest.error = getattr(exc, "message", None) or lance_message(exc)


def _run_tables(
    request: PruneRequest,
    decisions: Decisions,
    advance: Callable[[int], None],
    report: PruneReport,
    entries: RecordEntries | None,
) -> None:
    """Every table's work (here or as Spark tasks), then the compacted tables published.

    Each table's result, once done, gives the record its entry (`entries`) and goes to the
    report's `ResultLog` (on disk); a `Deferred` table's plan is made as its work starts: the
    run holds those only while the table runs."""
    planned, pins = decisions.planned, decisions.pins
    works = [p for p in planned if isinstance(p, (TableWork, Deferred))]
    budget = CompactionBudget()
    for work in works:
        if isinstance(work, TableWork):
            # readers of a table published on a tag or a branch never see main's compaction
            on_main = work.plan.location not in pins.off_main
            work.compact = request.work.compact and on_main and budget.take()
            _with_indexes(request, decisions, work, on_main)
    for p in planned:
        if isinstance(p, TableResult):
            advance(p.bytes_freed)
    done = iter(_results(request, decisions, works, advance))
    report.tables = log = ResultLog()
    indexed: list[dict[str, Any]] = []  # partition tables whose index work waits to publish
    result: TableResult | None
    compaction: Compaction | None
    for index, item in enumerate(planned):
        planned[index] = None
        if isinstance(item, TableResult):
            result, compaction = item, None
        else:  # a TableWork or a Deferred: the runner's
            result, compaction = next(done, (None, None))
        if result is None:
            raise LancensError("prune's table runner returned fewer results than tables")
        if compaction is not None:
            budget.done.append(compaction)
        if result.index_versions and result.object_id:
            indexed.append(_indexed(result))
        if entries is not None:  # a table whose indexes had work: looked at again next run
            entries.add(result, compacted=compaction is not None or pending(result.indexes))
        log.append(result)
    if next(done, None) is not None:
        raise LancensError("prune's table runner returned more results than tables")
    _publish(request, budget, indexed, report)


def _results(
    request: PruneRequest,
    decisions: Decisions,
    works: list[TableWork | Deferred],
    advance: Callable[[int], None],
) -> Iterable[tuple[TableResult, Compaction | None]]:
    """The tables' results in `works`' order: from the request's runner (Spark), else from
    this process's threads (`run_locally`, which plans a `Deferred` table as it starts)."""
    ns, policy, dry_run, parallel = request.ns, request.policy, request.dry_run, request.parallel
    if request.tasks is None:
        return run_locally(ns, works, policy, dry_run, parallel, advance, decisions.plan_later)
    ready = [work for work in works if isinstance(work, TableWork)]
    if len(ready) < len(works):  # a run with a runner of its own defers no table (`_run`)
        raise LancensError("a deferred table reached a runner that cannot plan it")
    return request.tasks(ns, ready, policy, dry_run, parallel, advance)


def _with_indexes(
    request: PruneRequest, decisions: Decisions, work: TableWork, on_main: bool
) -> None:
    """`--optimize-indexes` for one table: on main only (a tag's or a branch's readers never
    see main's index work); a partition table also gets the namespace's definitions."""
    if not request.work.optimize_indexes:
        return
    if not on_main:
        work.plan.notes.append("published by a tag or a branch: indexes left alone")
        return
    work.optimize_indexes = True
    if work.plan.object_id in decisions.labels:
        work.definitions = request.definitions


def _indexed(result: TableResult) -> dict[str, Any]:
    before, after = result.index_versions or (None, None)
    return {
        "object_id": result.object_id,
        "table": result.table,
        "location": result.location,
        "version_before": before,
        "version_after": after,
        "published": False,
    }


def _publish(
    request: PruneRequest,
    budget: CompactionBudget,
    indexed: list[dict[str, Any]],
    report: PruneReport,
) -> None:
    """The compacted and indexed partition tables, in the run's one `__manifest` commit (a
    table both compacted and indexed publishes its final version once)."""
    report.indexed = indexed
    if not budget.done and not indexed:
        return
    version = None
    if not request.dry_run:
        version = publish_new_versions(request.ns, budget.done, indexed)
    report.compacted = [c.to_json() for c in budget.done]
    if version is not None:
        report.compacted_published_in = version if budget.done else None
        report.indexes_published_in = version if indexed else None


def run_locally(
    ns: Namespace,
    works: Sequence[TableWork | Deferred],
    policy: PrunePolicy,
    dry_run: bool,
    parallel: int,
    advance: Callable[[int], None],
    plan: Callable[[tuple[str, str | None]], TableResult | TableWork] | None = None,
) -> Iterable[tuple[TableResult, Compaction | None]]:
    """The per-table work in this process, `parallel` tables at a time, in `works`' order
    (`plan`: what plans a `Deferred` table, in the same thread, just before its work)."""

    def one(work: TableWork | Deferred) -> tuple[TableResult, Compaction | None]:
        if isinstance(work, Deferred):
            if plan is None:
                raise LancensError("a deferred table reached a runner that cannot plan it")
            made = plan(work.item)
            if isinstance(made, TableResult):  # nothing to run (or its reading failed)
                advance(made.bytes_freed)
                return made, None
            work = made
        done = run_table(ns, work, policy, dry_run)
        advance(done[0].bytes_freed)
        return done

    return ordered(one, works, parallel)
