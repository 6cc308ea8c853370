"""The one decision of what every version of every table keeps, and why: `prune` carries
it out, `versions` shows it (decision 18). It reads `__manifest` (what each kept version
publishes), every table's versions, tags, branches and base paths (which tables are shallow
clones of which), and plans each table (service/prune/protect.py), or leaves a table `Deferred`
to be planned when its work starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lancens_cli.errors import LancensError, lance_message
from lancens_cli.models import KIND_TABLE, Identifier
from lancens_cli.parallel import completed_map
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.naming import partition_labels
from lancens_cli.service.prune.clones import clone_dependents, clone_needed_versions
from lancens_cli.service.prune.manifest_upkeep import manifest_pins
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import (
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
from lancens_cli.service.prune.record import PruneRecord
from lancens_cli.service.prune.report import (
    NOT_A_TABLE,
    UNCHANGED,
    TableResult,
)
from lancens_cli.service.prune.state_spill import SpilledStates
from lancens_cli.service.prune.table import (
    TableWork,
    record_failure,
)
from lancens_cli.store.containment import directory_location_problem, shown
from lancens_cli.store.lance_session import HeldDatasets
from lancens_cli.store.manifest import ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.version_files import UnorderedListing, list_tables


class Tally:
    """A count several threads add to."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._lock = threading.Lock()

    def add(self, more: int) -> None:
        with self._lock:
            self.count += more


@dataclass(frozen=True, slots=True)
class Deferred:
    """A table whose plan is made only when its turn to run comes (`decide(deferred=True)`):
    a run then holds the plans of the tables in flight, not of every table."""

    item: tuple[str, str | None]  # (location, object_id)


# a table as decided: its result (nothing to run), its work, or its work planned later
Planned = TableResult | TableWork | Deferred


@dataclass
class Decisions:
    """What a prune run decides before it changes anything: for each table in scope its plan
    (what stays and why, what goes) or its result when there is nothing to run. `lancens
    versions` shows exactly this; `prune` then carries it out."""

    scope: list[tuple[str, str | None]]
    planned: list[Planned | None]  # by scope; None once the run took it (service/prune/run.py)
    states: SpilledStates  # every table's state as read, then as planned (state_spill.py)
    manifest_plan: TablePlan | None
    pins: Pins
    refused: list[dict[str, str]]
    dependents: dict[str, list[str]] = field(default_factory=dict)  # source -> its clones
    now: datetime | None = None  # the moment ages were judged by
    # with `deferred`: what makes a `Deferred` table's plan (or its result), asked by the run
    plan_later: Callable[[tuple[str, str | None]], TableResult | TableWork] | None = None
    # object id -> which partition a partition table is (service/partitioned/label.py)
    labels: dict[str, Any] = field(default_factory=dict)
    # objects the tables' listings saw (what listing them again costs), counted on as tables
    # the record knew are read in full while planned
    objects_listed: Tally = field(default_factory=lambda: Tally(0))
    # the tables known only from their root directory (no catalog row), a few where any
    directory_only: set[str] = field(default_factory=set)


def decide(
    ns: Namespace,
    idents: list[Identifier],
    policy: PrunePolicy,
    now: datetime,
    parallel: int = 8,
    record: PruneRecord | None = None,
    deferred: bool = False,
    hold: bool = False,
) -> Decisions:
    """The one decision of what every version keeps or loses (prune and versions call it).

    With the last run's `record` (prune only), a table whose listing, pins and clones are as
    recorded and whose time has not come is decided without reading more than its listing:
    nothing to do (see service/prune/record.py). With `deferred` (a local prune), the other
    tables are left `Deferred`: each is planned by `plan_later` as its work starts. With
    `hold` (tables run in this process), a table's `TableWork` keeps the dataset opened to
    read it (store/lance_session.py)."""
    snapshot = ns.snapshot()
    tables, directory_only = _all_tables(ns, snapshot)
    every, refused = _accepted(ns, snapshot, tables)
    del tables
    named = _tables_in_scope(ns, snapshot, idents, every)
    scope = every if named is every else _accepted(ns, snapshot, named)[0]  # (every: accepted)
    manifest_plan, pins = manifest_pins(ns, snapshot, policy, now, parallel)
    labels = partition_labels(snapshot)  # which partition each partition table is (shown)
    del snapshot  # every row of the catalog: not held while the tables are read
    readers = reading_threads(ns, parallel)
    held = HeldDatasets(None if scope is every else {t for t, _ in scope}) if hold else None
    states, unreadable, objects = _read_states(ns, every, readers, record, now, policy, held)
    listed = Tally(objects)
    dependents, blind = _clone_map(ns, states, unreadable)

    def plan(item: tuple[str, str | None]) -> TableResult | TableWork:
        """The table's work, or its result when there is nothing to run (or it failed)."""
        location, object_id = item
        result = TableResult(object_id, location)
        try:
            if location not in states and location not in unreadable:
                result.notes.append(NOT_A_TABLE)
                return result
            state = states.get(location)
            if state is None:
                raise unreadable.get(location) or LancensError("the table cannot be read")
            if blind:
                return _kept_blind(result, state, blind)
            clones = dependents.get(location, [])
            if _as_recorded(state, pins, clones, states):
                result.notes.append(UNCHANGED)
                states[location] = state.planned()
                return result
            if state.partial:  # untouched, but its pins or clones moved: read it in full
                state = _read_in_full(ns, location, object_id, policy, now, listed)
            read_by_clones: set[str] = set()
            clone_versions = (
                clone_needed_versions(ns.storage, state, clones, read_by_clones) if clones else {}
            )
            table_plan = plan_table(state, pins, policy, clone_versions, now, bool(clones))
            states[location] = state.planned()
            published = pins.current.get(location)
            return TableWork(
                table_plan, frozenset(read_by_clones), published=published, handle=state.handle
            )
        except Exception as exc:  # one table's failure must not stop the others
            if (failed := states.get(location)) is not None:
                failed.handle = None
            record_failure(ns, result, exc)
        return result

    def alone(location: str) -> bool:
        """Neither a shallow clone nor read by one: its plan reads no other table, and no
        other table's plan reads it (those are all planned before any table's work starts)."""
        return not dependents.get(location) and not states.bases_of(location)

    planned = _plan_all(plan, scope, states.is_recorded, parallel, alone if deferred else None)
    # `__manifest`'s rows are not kept: over 100,000 tables they are a tenth of a run's memory
    return Decisions(
        scope, planned, states, manifest_plan, pins, refused, dependents, now,
        plan if deferred else None, labels, listed, directory_only,
    )  # fmt: skip


def _kept_blind(result: TableResult, state: TableState, blind: list[str]) -> TableResult:
    """A table of a run whose clone map is incomplete: every version stays."""
    state.handle = None  # nothing will be cleaned up
    result.notes.append(
        f"no version removed: {', '.join(blind)} does not load (or names a base path that "
        "cannot be placed) and may be a shallow clone reading this table"
    )
    result.kept = [
        {"version": v.version, "reasons": ["clone map incomplete"]} for v in state.versions
    ]
    return result


def reading_threads(ns: Namespace, parallel: int) -> int:
    """Threads that read (list) tables: one on local disk, where a listing is Python work
    that threads only take turns at (4,000 tables: 1.0 s in one thread, 2.0 s in eight, the
    rest spent handing the interpreter lock over); `parallel` on an object store, where each
    read waits on the network. (Planning up front keeps `parallel`: a shallow clone's plan
    opens tables with Lance.)"""
    return 1 if ns.storage.is_local else parallel


def _clone_map(
    ns: Namespace, states: SpilledStates, unreadable: dict[str, LancensError]
) -> tuple[dict[str, list[str]], list[str]]:
    """Which tables read which through base paths (source -> its clones), and the tables that
    do not load at all. A table that does not load may still read others: its base paths come
    from an older version; when none loads, or a table names a base path that cannot be
    placed (`UNPLACEABLE_BASE`), the run removes no version anywhere."""
    based = dict(states.with_bases())  # no state is read back: the few with base paths
    blind = [location for location, bases in based.items() if UNPLACEABLE_BASE in bases]
    placed = []  # tables that do not load but whose base paths an older version names
    for location in unreadable:
        bases = fallback_bases(ns.storage, location)
        if bases is None or UNPLACEABLE_BASE in bases:
            blind.append(location)
            continue
        placed.append(location)
        if bases:
            based[location] = tuple(bases)
    locations = {*states, *placed}
    return clone_dependents(locations, based.items()), blind


def _as_recorded(state: TableState, pins: Pins, clones: list[str], states: SpilledStates) -> bool:
    """Whether the record says a table needs nothing this run: its listing as recorded
    (`state.recorded`), and what `__manifest` publishes of it and its clones as recorded too."""
    recorded = state.recorded
    return (
        recorded is not None
        and recorded.pins == pins_digest(pins, state.location)
        and recorded.dependents == dependents_digest(clones, states)
    )


def _read_in_full(
    ns: Namespace,
    location: str,
    object_id: str | None,
    policy: PrunePolicy,
    now: datetime,
    listed: Tally,
) -> TableState:
    state = read_table_state(ns.storage, location, object_id, policy=policy, since=now)
    if state is None:
        raise LancensError("the table lost its versions during prune")
    listed.add(state.seen.objects if state.seen is not None else 0)
    return state


def _plan_all(
    plan: Callable[[tuple[str, str | None]], TableResult | TableWork],
    scope: list[tuple[str, str | None]],
    recorded: Callable[[str], bool],
    parallel: int,
    defer: Callable[[str], bool] | None,
) -> list[Planned | None]:
    """`plan` of every table in scope, in order: a table `defer` accepts left `Deferred`
    (a million results of tables the record skips are not held either), one the record may
    skip planned at once (it reads nothing: `recorded`), the rest in `parallel` threads."""
    planned: list[Planned | None] = [None] * len(scope)
    for index, (location, _) in enumerate(scope):
        if defer is not None and defer(location):
            planned[index] = Deferred(scope[index])
        elif recorded(location):
            planned[index] = plan(scope[index])
    rest = [i for i, item in enumerate(planned) if item is None]
    for position, result in completed_map(plan, [scope[i] for i in rest], parallel):
        planned[rest[position]] = result
    return planned


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


def _all_tables(
    ns: Namespace, snapshot: ManifestSnapshot
) -> tuple[list[tuple[str, str | None]], set[str]]:
    """Every table of the root that is registered or visible by directory listing, and the
    locations of those known only from their directory (a few, where any)."""
    found: dict[str, str | None] = {}
    for object_id, object_type, location in snapshot.columns(
        "object_id", "object_type", "location"
    ):
        if object_type == KIND_TABLE and location:
            found[location] = object_id
    directory_only = set()
    for name, location in ns.unregistered_dir_tables(snapshot).items():
        found.setdefault(location, name)
        directory_only.add(location)
    return sorted(found.items()), directory_only


def _read_states(
    ns: Namespace,
    tables,
    parallel: int,
    record: PruneRecord | None,
    now: datetime,
    policy: PrunePolicy,
    held: HeldDatasets | None,
) -> tuple[SpilledStates, dict[str, LancensError], int]:
    """Every table's state (and the tables that cannot be read), and how many objects their
    listings saw (what listing them again costs: record_entries.py)."""
    states = SpilledStates()  # a million states are not held in memory (state_spill.py)
    errors: dict[str, LancensError] = {}
    objects = 0
    known = record.entries if record is not None else {}

    def read(item):
        location, object_id, listing = item

        def unchanged(listing):
            return record.unchanged(location, listing.digest, now) if record else None

        # a table the record knows is listed whole, to compare with its entry; else, in a run
        # here, a table of its scope only as far as planning needs when it has a version to
        # expire (one read only for the clone map gets no entry from a later listing)
        quick = held is not None and held.covers(location) and location not in known
        try:
            state = read_table_state(
                ns.storage, location, object_id, listing, unchanged, policy, now, held, quick
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

    def read_all(listed) -> int:
        items = ((location, ids[location], listing) for location, listing in listed)
        listed_objects = 0
        for _, (location, state, error) in completed_map(read, items, parallel):
            if state is not None:
                states[location] = state
                listed_objects += state.seen.objects if state.seen is not None else 0
            elif error is not _NO_VERSIONS:
                errors[location] = error
        return listed_objects

    try:  # on S3 one listing of the root serves all
        objects = read_all(list_tables(ns.storage, list(ids)))
    except UnorderedListing:  # a store that does not list in name order: a listing each
        for location in ids:
            states.pop(location, None)
            errors.pop(location, None)
        objects = read_all((location, None) for location in ids)
    return states, errors, objects


_NO_VERSIONS = LancensError("no versions")
