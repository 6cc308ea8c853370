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
import dataclasses
import functools
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import lance

from lancens_cli.errors import LancensError, lance_message
from lancens_cli.models import KIND_TABLE, MANIFEST_TABLE, Identifier
from lancens_cli.parallel import completed_map, ordered
from lancens_cli.service import check as check_module
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.service.partitioned.naming import partition_labels
from lancens_cli.service.prune.clones import clone_dependents, clone_needed_versions
from lancens_cli.service.prune.compact import Compaction, CompactionBudget, publish_compacted
from lancens_cli.service.prune.lease import acquire
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import (
    PIN_COLUMNS,
    UNPLACEABLE_BASE,
    Pins,
    TablePlan,
    TableState,
    dependents_digest,
    fallback_bases,
    pins_digest,
    plan_table,
    read_table_state,
    untouched_state,
)
from lancens_cli.service.prune.quiet import quiet_state, root_stamps
from lancens_cli.service.prune.record import Entry, PruneRecord, Seen, policy_key
from lancens_cli.service.prune.report import (
    NOT_A_TABLE,
    UNCHANGED,
    DebrisResult,
    PruneReport,
    TableResult,
)
from lancens_cli.service.prune.result_log import ResultLog
from lancens_cli.service.prune.table import (
    UNREFERENCED_BATCH,
    TableWork,
    execute_plan,
    record_failure,
    run_table,
)
from lancens_cli.store.containment import directory_location_problem, row_locations, shown
from lancens_cli.store.delete_pace import DeletePace
from lancens_cli.store.manifest import ManifestSnapshot
from lancens_cli.store.version_files import UnorderedListing, list_table, list_tables

MANIFEST_COMPACT_FRAGMENTS = 16  # compact __manifest when it has more fragments than this
DEBRIS_CODES = ("abandoned_table_write", "staged_manifest_file", "abandoned_job_log")

# (ns, works, policy, dry_run, parallel, advance) -> (result, compaction) per work, in order
TableRunner = Callable[
    [Namespace, list[TableWork], PrunePolicy, bool, int, Callable[[int], None]],
    Iterable[tuple[TableResult, Compaction | None]],
]


# --- the run ----------------------------------------------------------------------------------


def prune(
    ns: Namespace,
    idents: list[Identifier],
    policy: PrunePolicy,
    *,
    dry_run: bool = False,
    compact: bool = False,
    indexes: bool = False,
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
    `delete_rate_limit`, at most that many objects are deleted a second (store/delete_pace.py)."""
    policy.check()
    pace = None if delete_rate_limit is None else DeletePace(delete_rate_limit, max(1, parallel))
    ns.require_root()
    _require_targets(ns, idents)  # bad input is found before the lease changes the disk
    lease = None if dry_run else acquire(ns.storage)
    ns.storage.delete_pace = pace
    try:
        key = policy_key(policy, compact, indexes, ns.storage, delimiter)
        record = PruneRecord(key) if full else PruneRecord.load(ns.storage, key)
        request = PruneRequest(
            ns, idents, policy, dry_run, compact, indexes, max(1, parallel), delimiter, tasks
        )
        return _run(request, progress, record)
    finally:
        ns.storage.delete_pace = None
        if lease is not None:
            lease.release()


def _require_targets(ns: Namespace, idents: list[Identifier]) -> None:
    """Every named table or namespace exists (exit 3 otherwise), and none is refused. A root
    whose partition metadata cannot be read is refused too (CatalogDamagedError, exit 3): a
    run that deletes waits until an operator has seen the damage `check` names."""
    snapshot = ns.snapshot()
    if snapshot.exists:
        layout_of(snapshot)
    named = [i for i in idents if not i.is_root]
    if not named:
        return
    for ident in named:
        if ns.kind_of(ident, snapshot) == KIND_TABLE:
            ns.require_table(ident, snapshot)
        else:
            ns.require_namespace(ident, snapshot)


@dataclass
class Decisions:
    """What a prune run decides before it changes anything: for each table in scope its plan
    (what stays and why, what goes) or its result when there is nothing to run. `lancens
    versions` shows exactly this; `prune` then carries it out."""

    scope: list[tuple[str, str | None]]
    planned: list[TableResult | TableWork]
    states: dict[str, TableState]
    manifest_plan: TablePlan | None
    pins: Pins
    refused: list[dict[str, str]]
    dependents: dict[str, list[str]] = field(default_factory=dict)  # source -> its clones
    now: datetime | None = None  # the moment ages were judged by
    # with `deferred`: what makes a `Deferred` table's plan (or its result), asked by the run
    plan_later: Callable[[tuple[str, str | None]], TableResult | TableWork] | None = None
    # object id -> which partition a partition table is (service/partitioned/label.py)
    labels: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Deferred:
    """A table whose plan is made only when its turn to run comes (`decide(deferred=True)`):
    a run then holds the plans of the tables in flight, not of every table."""

    item: tuple[str, str | None]  # (location, object_id)


def decide(
    ns: Namespace,
    idents: list[Identifier],
    policy: PrunePolicy,
    now: datetime,
    parallel: int = 8,
    record: PruneRecord | None = None,
    deferred: bool = False,
) -> Decisions:
    """The one decision of what every version keeps or loses (prune and versions call it).

    With the last run's `record` (prune only), a table whose listing, pins and clones are as
    recorded and whose time has not come is decided without reading more than its listing:
    nothing to do (see service/prune/record.py). With `deferred` (a local prune), the other
    tables are left `Deferred`: each is planned by `plan_later` as its work starts."""
    snapshot = ns.snapshot()
    every, refused = _accepted(ns, snapshot, _all_tables(ns, snapshot))
    scope, _ = _accepted(ns, snapshot, _tables_in_scope(ns, snapshot, idents, every))
    manifest_plan, pins = _manifest_pins(ns, snapshot, policy, now, parallel)
    labels = partition_labels(snapshot)  # which partition each partition table is (shown)
    del snapshot  # every row of the catalog: not held while the tables are read
    states, unreadable = _read_states(ns, every, parallel, record, now, policy)
    dependents, blind = _clone_map(ns, states, unreadable)
    present = {*states, *unreadable}

    def plan(item: tuple[str, str | None]) -> TableResult | TableWork:
        """The table's work, or its result when there is nothing to run (or it failed)."""
        location, object_id = item
        result = TableResult(object_id, location)
        try:
            if location not in present:
                result.notes.append(NOT_A_TABLE)
                return result
            state = states.get(location)
            if state is None:
                raise unreadable.get(location) or LancensError("the table cannot be read")
            if blind:
                result.notes.append(
                    f"no version removed: {', '.join(blind)} does not load (or names a base "
                    "path that cannot be placed) and may be a shallow "
                    "clone reading this table"
                )
                result.kept = [
                    {"version": v.version, "reasons": ["clone map incomplete"]}
                    for v in state.versions
                ]
                return result
            clones = dependents.get(location, [])
            if _as_recorded(state, pins, clones, states):
                result.notes.append(UNCHANGED)
                states[location] = state.planned()
                return result
            if state.partial:  # untouched, but its pins or clones moved: read it in full
                state = _read_in_full(ns, location, object_id, policy, now)
            read_by_clones: set[str] = set()
            clone_versions = (
                clone_needed_versions(ns.storage, state, clones, read_by_clones) if clones else {}
            )
            table_plan = plan_table(state, pins, policy, clone_versions, now, bool(clones))
            states[location] = state.planned()
            published = pins.current.get(location)
            return TableWork(table_plan, frozenset(read_by_clones), published=published)
        except Exception as exc:  # one table's failure must not stop the others
            record_failure(ns, result, exc)
        return result

    def alone(location: str) -> bool:
        """Neither a shallow clone nor read by one: its plan reads no other table, and no
        other table's plan reads it (those are all planned before any table's work starts)."""
        state = states.get(location)
        return not dependents.get(location) and (state is None or not state.bases)

    planned = _plan_all(plan, scope, states, parallel, alone if deferred else None)
    # `__manifest`'s rows are not kept: over 100,000 tables they are a tenth of a run's memory
    return Decisions(
        scope, planned, states, manifest_plan, pins, refused, dependents, now,
        plan if deferred else None, labels,
    )  # fmt: skip


def _clone_map(
    ns: Namespace, states: dict[str, TableState], unreadable: dict[str, LancensError]
) -> tuple[dict[str, list[str]], list[str]]:
    """Which tables read which through base paths (source -> its clones), and the tables that
    do not load at all. A table that does not load may still read others: its base paths come
    from an older version; when none loads, or a table names a base path that cannot be
    placed (`UNPLACEABLE_BASE`), the run removes no version anywhere."""
    for_clones_only: list[TableState] = []
    blind = [loc for loc, state in states.items() if UNPLACEABLE_BASE in state.bases]
    for location in unreadable:
        bases = fallback_bases(ns.storage, location)
        if bases is None or UNPLACEABLE_BASE in bases:
            blind.append(location)
        else:
            for_clones_only.append(TableState(location, None, [], {}, {}, bases))
    return clone_dependents([*states.values(), *for_clones_only]), blind


def _as_recorded(
    state: TableState, pins: Pins, clones: list[str], states: dict[str, TableState]
) -> bool:
    """Whether the record says a table needs nothing this run: its listing as recorded
    (`state.recorded`), and what `__manifest` publishes of it and its clones as recorded too."""
    recorded = state.recorded
    return (
        recorded is not None
        and recorded.pins == pins_digest(pins, state.location)
        and recorded.dependents == dependents_digest(clones, states)
    )


def _read_in_full(
    ns: Namespace, location: str, object_id: str | None, policy: PrunePolicy, now: datetime
) -> TableState:
    state = read_table_state(ns.storage, location, object_id, policy=policy, since=now)
    if state is None:
        raise LancensError("the table lost its versions during prune")
    return state


def _plan_all(
    plan, scope, states: dict[str, TableState], parallel: int, defer: Callable[[str], bool] | None
) -> list:
    """`plan` of every table in scope, in order: a table the record may skip at once (it
    reads nothing), a table `defer` accepts left `Deferred`, the rest in `parallel` threads."""
    planned: list[Any] = [None] * len(scope)
    for index, (location, _) in enumerate(scope):
        if getattr(states.get(location), "recorded", None) is not None:
            planned[index] = plan(scope[index])
        elif defer is not None and defer(location):
            planned[index] = Deferred(scope[index])
    rest = [i for i, item in enumerate(planned) if item is None]
    for position, result in completed_map(plan, [scope[i] for i in rest], parallel):
        planned[rest[position]] = result
    return planned


@dataclass(frozen=True)
class PruneRequest:
    """One run's inputs, as `prune()` received them."""

    ns: Namespace
    idents: list[Identifier]
    policy: PrunePolicy
    dry_run: bool
    compact: bool
    indexes: bool
    parallel: int
    delimiter: str
    tasks: TableRunner | None

    @property
    def whole_root(self) -> bool:
        """No table or namespace named: the root's debris and `__manifest` are in scope."""
        return not any(not i.is_root for i in self.idents)


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
    skipped = set(record.entries)
    stamps = root_stamps(ns.storage, skipped) if recording_root else None
    # plans made as tables run, here; a Spark run ships them all, --compact budgets them first
    deferred = request.tasks is None and not request.compact
    decisions = decide(ns, request.idents, policy, now, request.parallel, record, deferred)
    report.refused = decisions.refused
    report.labels = decisions.labels
    advance = progress(len(decisions.scope)) if progress else (lambda freed: None)
    entries = None if dry_run else RecordEntries(request, decisions, record)
    _run_tables(request, decisions, advance, report, entries)
    if entries is not None:
        entries.finish()
    committed = set(decisions.states)  # the tables this run read versions of
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
        report.debris = _debris(ns, policy, dry_run, request.delimiter, committed)
    if decisions.manifest_plan is not None and request.whole_root:
        report.manifest = TableResult(None, MANIFEST_TABLE)
        try:
            execute_plan(ns, decisions.manifest_plan, policy, dry_run, report.manifest)
            if not dry_run:
                report.compacted += _maintain_manifest(ns, request.indexes)
        except Exception as exc:
            report.manifest.status = "failed"
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
            work.compact = request.compact and on_main and budget.take()
    for p in planned:
        if isinstance(p, TableResult):
            advance(p.bytes_freed)
    runner = request.tasks or functools.partial(
        run_locally, since=decisions.now, plan=decisions.plan_later
    )
    done = iter(
        runner(request.ns, works, request.policy, request.dry_run, request.parallel, advance)
    )
    report.tables = log = ResultLog()
    for index, item in enumerate(planned):
        planned[index] = None
        runs = not isinstance(item, TableResult)  # a TableWork or a Deferred: the runner's
        result, compaction = next(done, (None, None)) if runs else (item, None)
        if result is None:
            raise LancensError("prune's table runner returned fewer results than tables")
        if compaction is not None:
            budget.done.append(compaction)
        if entries is not None:
            entries.add(result, compacted=compaction is not None)
        log.append(result)
    if next(done, None) is not None:
        raise LancensError("prune's table runner returned more results than tables")
    if budget.done:
        version = None if request.dry_run else publish_compacted(request.ns, budget.done)
        report.compacted = [c.to_json() for c in budget.done]
        if version is not None:
            report.compacted_published_in = version


def run_locally(
    ns: Namespace,
    works: list[TableWork | Deferred],
    policy: PrunePolicy,
    dry_run: bool,
    parallel: int,
    advance: Callable[[int], None],
    since: datetime | None = None,
    plan: Callable[[tuple[str, str | None]], TableResult | TableWork] | None = None,
) -> Iterable[tuple[TableResult, Compaction | None]]:
    """The per-table work in this process, `parallel` tables at a time, in `works`' order
    (`since`: the moment the plans judged ages by, for the record; `plan`: what plans a
    `Deferred` table, in the same thread, just before its work)."""

    relist = ns.storage.scheme != "s3"  # on S3 `RecordEntries` may list them all at once

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
        result = done[0]
        if result.status == "pruned" and relist:  # listed again here, beside the other work
            with contextlib.suppress(Exception):  # unlisted: the record lists it later
                at = datetime.now(UTC)
                listing = list_table(ns.storage, result.location)
                result.listed_after = Seen.of(listing, policy, at, since)
        advance(result.bytes_freed)
        return done

    return ordered(one, works, parallel)


class RecordEntries:
    """The record's entries for the next run: one per table this run evaluated (a table out
    of scope keeps its old entry; a failed, compacted or half-swept one gets none), made as
    each table's result comes. On S3 a pruned table must be listed again: those wait for
    `finish`, which lists them together when that costs fewer requests."""

    def __init__(self, request: PruneRequest, decisions: Decisions, record: PruneRecord):
        self.request, self.decisions, self.record = request, decisions, record
        scoped = {location for location, _ in decisions.scope}
        # a whole-root run saw every table: an entry of a table gone or refused goes with it
        kept = {} if request.whole_root else record.entries
        record.next = {loc: e for loc, e in kept.items() if loc not in scoped}
        self.unlisted: list[TableResult] = []

    def add(self, result: TableResult, compacted: bool) -> None:
        if compacted:
            return
        if result.status == "pruned" and result.listed_after is None:
            self.unlisted.append(result)
            return
        self._keep(result)

    def finish(self) -> None:
        unlisted, self.unlisted = self.unlisted, []
        _list_pruned_at_once(self.request, self.decisions, unlisted)
        for _ in completed_map(self._keep, unlisted, self.request.parallel):
            pass  # a pruned table still unlisted is listed now: `parallel` at a time

    def _keep(self, result: TableResult) -> None:
        try:
            entry = _entry_after(self.request, self.decisions, result)
        except Exception:  # noqa: BLE001 - no entry: the table is evaluated in full next time
            return
        if entry is not None:
            self.record.next[result.location] = entry


def _list_pruned_at_once(
    request: PruneRequest, decisions: Decisions, results: list[TableResult]
) -> None:
    """On S3, the pruned tables' listings after the run from one listing of the root, when
    that costs fewer requests (one per 1,000 objects the run saw) than one per table; else
    (or when it fails) `_entry_after` lists each."""
    storage = request.ns.storage
    pending = {r.location: r for r in results if r.status == "pruned" and not r.listed_after}
    objects = sum(s.seen.objects for s in decisions.states.values() if s.seen is not None)
    if storage.scheme != "s3" or objects // 1000 + 1 >= len(pending):
        return
    at = datetime.now(UTC)
    with contextlib.suppress(Exception):  # not listed now: listed one by one
        for location, listing in list_tables(storage, sorted(pending)):
            if listing is not None:
                seen = Seen.of(listing, request.policy, at, decisions.now)
                pending[location].listed_after = seen


def _entry_after(request: PruneRequest, decisions: Decisions, result: TableResult):
    """The record entry of one table after this run, or None (then it is evaluated again)."""
    state = decisions.states.get(result.location)
    seen = state.seen if state is not None else None
    if state is not None and state.recorded is not None and UNCHANGED in result.notes:
        # skipped: as it was (its `checked` bounds how long), with the directories' times
        # once they have settled, so that the next run need not list it
        entry = state.recorded
        if entry.dirs is None and seen is not None and seen.at is not None:
            entry = dataclasses.replace(entry, dirs=seen.dirs)
        return entry
    if state is None or seen is None or seen.at is None:
        return None
    if result.status not in ("nothing to do", "pruned"):
        return None  # failed, gone
    if result.unreferenced_removed >= UNREFERENCED_BATCH:
        return None  # more unreferenced files may wait
    if result.status == "pruned":  # what it is now, after this run's deletions
        seen = result.listed_after
        if seen is None:
            at = datetime.now(UTC)
            listing = list_table(request.ns.storage, result.location)
            seen = Seen.of(listing, request.policy, at, decisions.now)
    if not seen.digest or state.partial:
        return None
    clones = decisions.dependents.get(result.location, [])
    return Entry(
        seen.digest,
        pins_digest(decisions.pins, result.location),
        dependents_digest(clones, decisions.states),
        state.bases,
        seen.due,
        seen.at,
        seen.dirs,
    )


def _tables_in_scope(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    idents: list[Identifier],
    every: list[tuple[str, str | None]],
) -> list[tuple[str, str | None]]:
    if not idents or any(i.is_root for i in idents):
        return every
    found: dict[str, str | None] = {}
    for ident in idents:
        kind = ns.kind_of(ident, snapshot)
        if kind == KIND_TABLE:
            ref = ns.require_table(ident, snapshot)
            found[ref.location] = ident.object_id
            continue
        ns.require_namespace(ident, snapshot)
        for row in snapshot.children(ident.object_id, recursive=True):
            if row["object_type"] == KIND_TABLE and row["location"]:
                found[row["location"]] = row["object_id"]
    return sorted(found.items())


def _accepted(
    ns: Namespace, snapshot: ManifestSnapshot, tables: list[tuple[str, str | None]]
) -> tuple[list[tuple[str, str | None]], list[dict[str, str]]]:
    """The tables whose location the trust boundary accepts, and the refused ones (skipped:
    never opened, expired or compacted; `check` reports them)."""
    verdicts = row_locations(ns.storage, snapshot)
    kept, refused = [], []
    for location, object_id in tables:
        if object_id is not None and object_id in snapshot:
            problem = verdicts.problem(object_id)
            reason = problem.reason if problem is not None else None
        else:
            reason = directory_location_problem(ns.storage, location)
        if reason is None:
            kept.append((location, object_id))
        else:
            refused.append({"table": shown(object_id or location), "reason": reason})
    return kept, refused


def _all_tables(ns: Namespace, snapshot: ManifestSnapshot) -> list[tuple[str, str | None]]:
    """Every table of the root that is registered or visible by directory listing."""
    found: dict[str, str | None] = {}
    for object_id, object_type, location in snapshot.columns(
        "object_id", "object_type", "location"
    ):
        if object_type == KIND_TABLE and location:
            found[location] = object_id
    for name, location in ns.visible_dir_tables(snapshot).items():
        found.setdefault(location, name)
    return sorted(found.items())


def _read_states(
    ns: Namespace,
    tables,
    parallel: int,
    record: PruneRecord | None,
    now: datetime,
    policy: PrunePolicy,
) -> tuple[dict[str, TableState], dict[str, LancensError]]:
    states: dict[str, TableState] = {}
    errors: dict[str, LancensError] = {}

    def read(item):
        location, object_id, listing = item

        def unchanged(listing):
            return record.unchanged(location, listing.digest, now) if record else None

        try:
            state = read_table_state(
                ns.storage, location, object_id, listing, unchanged, policy=policy, since=now
            )
            return location, state, None if state else _NO_VERSIONS
        except Exception as exc:
            return location, None, LancensError(f"cannot read {location}: {lance_message(exc)}")

    rest = []
    for location, object_id in tables:  # untouched by the record: one stat per directory
        entry = record.untouched(ns.storage, location, now) if record else None
        if entry is not None:
            states[location] = untouched_state(location, object_id, entry)
        else:
            rest.append((location, object_id))
    ids = dict(rest)

    def read_all(listed) -> None:
        items = ((location, ids[location], listing) for location, listing in listed)
        for _, (location, state, error) in completed_map(read, items, parallel):
            if state is not None:
                states[location] = state
            elif error is not _NO_VERSIONS:
                errors[location] = error

    try:
        read_all(list_tables(ns.storage, list(ids)))  # on S3 one listing of the root serves all
    except UnorderedListing:  # a store that does not list in name order: a listing each
        for location in ids:
            states.pop(location, None)
            errors.pop(location, None)
        read_all((location, None) for location in ids)
    return states, errors


_NO_VERSIONS = LancensError("no versions")


# --- __manifest -------------------------------------------------------------------------------


def _manifest_pins(ns: Namespace, snapshot: ManifestSnapshot, policy, now, parallel):
    """The plan for `__manifest` itself and what each of its kept versions publishes."""
    pins = Pins()
    if not snapshot.exists:
        return None, pins
    state = read_table_state(ns.storage, MANIFEST_TABLE, None)
    plan = plan_table(state, Pins(), policy, {}, now)
    kept = [v for v in plan.protected if v <= snapshot.version] or [snapshot.version]

    uri = ns.storage.uri(MANIFEST_TABLE)
    options = ns.storage.lance_options

    def read(version: int):
        ds = lance.dataset(uri, version=version, storage_options=options)
        columns = [c for c in PIN_COLUMNS if c in ds.schema.names]
        if not columns:
            return version, []
        where = " OR ".join(f"{c} IS NOT NULL" for c in columns)
        table = ds.to_table(columns=["location", *columns], filter=where)
        return version, table.to_pylist()

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        for version, rows in pool.map(read, kept):
            pins.add_rows(version, rows, current=version == snapshot.version)
    # Versions committed after our snapshot are younger than any window and stay anyway.
    return plan, pins


def _maintain_manifest(ns: Namespace, indexes: bool) -> list[dict[str, Any]]:
    """Compact `__manifest` when it has many fragments; rebuild its indexes on request.

    Compaction is a Lance `Rewrite` commit: a manifest writer racing it sees a conflict and
    re-plans on the new version (store/manifest.py), so no change is lost.
    """
    done = []
    ds = ns.manifest.open_dataset()
    if ds is None:
        return done
    fragments = len(ds.get_fragments())
    if fragments > MANIFEST_COMPACT_FRAGMENTS:
        metrics = ds.optimize.compact_files()
        done.append(
            {
                "table": MANIFEST_TABLE,
                "fragments_before": fragments,
                "fragments_removed": metrics.fragments_removed,
                "fragments_added": metrics.fragments_added,
            }
        )
    if indexes:
        built = ns.manifest.create_indexes()
        done.append({"table": MANIFEST_TABLE, "indexes_rebuilt": built})
    return done


# --- debris -----------------------------------------------------------------------------------


def _debris(ns: Namespace, policy: PrunePolicy, dry_run: bool, delimiter: str, committed: set[str]):
    """`check`'s findings about debris: deleted past the grace; orphan tables only reported.
    `committed`: the tables this run read versions of (no write of theirs is asked about)."""
    findings = check_module.CheckReport(ns.storage.root_uri, "")
    snapshot = ns.snapshot()
    check_module.check_orphans(ns, snapshot, findings, delimiter, policy.grace)
    check_module.check_uncommitted_root_tables(ns, snapshot, findings, policy.grace, committed)
    check_module.check_job_logs(ns, findings, policy.grace)
    if snapshot.exists:
        check_module.check_staged_files(ns, findings, policy.grace)
    results = []
    for finding in findings.findings:
        if finding.code in DEBRIS_CODES and finding.fixable:
            action = "would delete" if dry_run else "deleted"
            if not dry_run:
                if finding.code == "abandoned_table_write" or ns.storage.is_dir(finding.location):
                    ns.storage.delete_tree(finding.location)
                else:
                    ns.storage.delete_file(finding.location)
        elif finding.code in DEBRIS_CODES:
            action = "kept"
        else:
            action = "reported"
        results.append(
            DebrisResult(finding.code, finding.object, finding.location, action, finding.message)
        )
    return results
