"""The record's entries a prune run leaves for the next one (service/prune/record.py), made
as each table's result comes; on S3 the pruned tables are listed again, together when that
costs fewer requests.
"""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lancens_cli.parallel import completed_map
from lancens_cli.service.prune.protect import (
    dependents_digest,
    pins_digest,
)
from lancens_cli.service.prune.record import Entry, PruneRecord, Seen
from lancens_cli.service.prune.report import (
    UNCHANGED,
    TableResult,
)
from lancens_cli.service.prune.table import (
    UNREFERENCED_BATCH,
)
from lancens_cli.store.version_files import list_table, list_tables

if TYPE_CHECKING:
    from lancens_cli.service.prune.decide import Decisions
    from lancens_cli.service.prune.run import PruneRequest


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
