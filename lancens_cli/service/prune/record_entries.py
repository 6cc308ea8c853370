"""The record's entries a prune run leaves for the next one (service/prune/record.py), made
as each table's result comes; the pruned tables are listed again once the tables' work is
done (on S3 together, when that costs fewer requests).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime

from lancens_cli.parallel import completed_map
from lancens_cli.service.prune.decide import Decisions, reading_threads
from lancens_cli.service.prune.protect import (
    dependents_digest,
    pins_digest,
)
from lancens_cli.service.prune.record import Entry, PruneRecord, Seen
from lancens_cli.service.prune.report import (
    UNCHANGED,
    TableResult,
    TableStatus,
)
from lancens_cli.service.prune.request import PruneRequest
from lancens_cli.service.prune.table import (
    UNREFERENCED_BATCH,
)
from lancens_cli.spill import SpilledMap
from lancens_cli.store.version_files import list_table, list_tables


class RecordEntries:
    """The record's entries for the next run: one per table this run evaluated (a table out
    of scope keeps its old entry; a failed, compacted or half-swept one gets none), made as
    each table's result comes. A pruned table (or one listed only to plan, with nothing done)
    must be listed again; those wait for `finish`, which lists them once the tables' work is
    done: locally one after the other (Python work, which the runner's threads would only take
    turns at while Lance works: 4,000 listings took 2.5 s beside the cleanups, 0.4 s after
    them), on S3 together when that costs fewer requests. Only their locations wait, not
    their results."""

    def __init__(self, request: PruneRequest, decisions: Decisions, record: PruneRecord):
        self.request, self.decisions, self.record = request, decisions, record
        # a whole-root run saw every table: an entry of a table gone or refused goes with it
        record.next = SpilledMap()
        if not request.whole_root:
            scoped = {location for location, _ in decisions.scope}
            kept = (pair for pair in record.entries.pairs() if pair[0] not in scoped)
            record.next = SpilledMap(kept)
        self.pruned: list[str] = []  # the locations to list again in `finish`

    def add(self, result: TableResult, compacted: bool) -> None:
        if compacted:
            return
        if result.status == TableStatus.PRUNED or self._waits_for_listing(result):
            if result.unreferenced_removed < UNREFERENCED_BATCH:  # else more may wait
                self.pruned.append(result.location)
            return
        self._keep(result.location, lambda: _entry_after(self.decisions, result))

    def _waits_for_listing(self, result: TableResult) -> bool:
        """A table with nothing done that was listed only to plan (its listing has no digest,
        service/prune/protect.py): its entry needs the listing `finish` takes."""
        state = self.decisions.states.get(result.location)
        seen = state.seen if state is not None else None
        idle = result.status == TableStatus.NOTHING_TO_DO
        return idle and seen is not None and not seen.digest

    def finish(self) -> None:
        pruned, self.pruned = self.pruned, []
        listed = _list_pruned_at_once(self.request, self.decisions, pruned)
        request, decisions = self.request, self.decisions

        def keep(location: str) -> None:
            self._keep(location, lambda: _pruned_entry(request, decisions, location, listed))

        for _ in completed_map(keep, pruned, reading_threads(request.ns, request.parallel)):
            pass

    def _keep(self, location: str, make: Callable[[], Entry | None]) -> None:
        try:
            entry = make()
        except Exception:  # noqa: BLE001 - no entry: the table is evaluated in full next time
            return
        if entry is not None:
            self.record.keep(location, entry)


def _list_pruned_at_once(
    request: PruneRequest, decisions: Decisions, locations: list[str]
) -> dict[str, Seen]:
    """On S3, the pruned tables' listings after the run from one listing of the root, when
    that costs fewer requests (one per 1,000 objects the run saw) than one per table; else
    (or when it fails) none, and `_pruned_entry` lists each."""
    storage = request.ns.storage
    if storage.scheme != "s3" or decisions.objects_listed.count // 1000 + 1 >= len(locations):
        return {}
    at = datetime.now(UTC)
    found: dict[str, Seen] = {}
    with contextlib.suppress(Exception):  # not listed now: listed one by one
        for location, listing in list_tables(storage, sorted(locations)):
            if listing is not None:
                found[location] = Seen.of(listing, request.policy, at, decisions.now)
    return found


def _entry_after(decisions: Decisions, result: TableResult) -> Entry | None:
    """The record entry of a table this run did not prune, or None (then it is evaluated
    again)."""
    state = decisions.states.get(result.location)
    seen = state.seen if state is not None else None
    if state is not None and state.recorded is not None and UNCHANGED in result.notes:
        # skipped: as it was (its `checked` bounds how long), with the directories' times of
        # the listing that matched it, once they have settled, so that the next run need not
        # list it (a directory's time moves with no file changed: a file made and removed)
        entry = state.recorded
        if seen is not None and seen.at is not None:
            entry = dataclasses.replace(entry, dirs=seen.dirs)
        return entry
    if result.status != TableStatus.NOTHING_TO_DO:
        return None  # failed, gone
    if result.unreferenced_removed >= UNREFERENCED_BATCH:
        return None  # more unreferenced files may wait
    return _entry(decisions, result.location, seen)


def _pruned_entry(
    request: PruneRequest, decisions: Decisions, location: str, listed: dict[str, Seen]
) -> Entry | None:
    """The record entry of a table this run pruned: what it is now, after the deletions."""
    seen = listed.get(location)
    if seen is None:
        at = datetime.now(UTC)
        listing = list_table(request.ns.storage, location)
        seen = Seen.of(listing, request.policy, at, decisions.now)
    return _entry(decisions, location, seen)


def _entry(decisions: Decisions, location: str, seen: Seen | None) -> Entry | None:
    state = decisions.states.get(location)
    before = state.seen if state is not None else None
    if state is None or before is None or before.at is None:
        return None  # not read from a listing this run
    if seen is None or seen.at is None or not seen.digest or state.partial:
        return None
    clones = decisions.dependents.get(location, [])
    return Entry(
        seen.digest,
        pins_digest(decisions.pins, location),
        dependents_digest(clones, decisions.states),
        state.bases,
        seen.due,
        seen.at,
        seen.dirs,
    )
