"""A prune run with nothing to do, answered from the record without opening Lance.

A cron run over a root nobody changed since the last quiet run should cost what it takes to see
that nothing changed: a `stat` per directory. Opening Lance alone (importing it and pyarrow)
costs half a second and 45 MB; reading `__manifest` and every table's record entry more.

The last run leaves, next to its per-table entries (service/prune/record.py), the state of the
root outside its tables, but only when that run was whole-root, on local disk, and changed
nothing: no table pruned or compacted, no debris deleted, `__manifest` kept whole, nothing
failed. That state holds:

- `stamps`: the time of every directory of the root that is not a table's, taken before the
  run read anything: the root's own (a table, a namespace directory or anything else added or
  removed at the top), every directory of `__manifest` (any catalog change, a staged file),
  `.lancens-jobs/` and any directory no table owns (a dead write's debris, an orphan). The
  prune lease's own directory is left out: every run changes it;
- `scope` and `refused`: the tables the run covered, and those the trust boundary refused;
- `manifest` and `debris`: `__manifest`'s result and the debris findings (reported only);
- `due`: when anything of `__manifest` ages into the policy; `checked`: when it was taken.

The next run (same policy, whole root, not `--full`, not a dry run) answers from it when every
one of those directories and every table's directories (`PruneRecord.untouched`) still have
their times, nothing is due and the state is younger than `MAX_AGE`. Its report is the one a
full run with the record would print: every table `nothing to do`, skipped as unchanged.
Anything else, and the run is a full one. Like the per-table skip, this only ever omits work.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Container, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, overload

from lancens_cli.service.partitioned.label import PartitionLabel
from lancens_cli.service.prune.lease import acquire
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.record import (
    RECORD,
    SETTLE,
    PruneRecord,
    due_after,
    in_time,
    policy_key,
)
from lancens_cli.service.prune.report import (
    NOT_A_TABLE,
    UNCHANGED,
    DebrisResult,
    PruneReport,
    ResultTotals,
    TableResult,
    TableStatus,
)
from lancens_cli.service.prune.work import PruneWork
from lancens_cli.store.containment import LEASE_DIR
from lancens_cli.store.storage import Storage
from lancens_cli.store.version_files import TableListing, directories_unchanged


def may_answer(
    storage: Storage, work: PruneWork, *, dry_run: bool, full: bool, named: bool, spark: bool
) -> bool:
    """Whether the record may answer the run at all: a whole-root run (nothing `named`) on
    local disk, in this process (not on `spark`), that deletes (not a dry run), trusts the
    record (not `--full`) and does no index work (`--indexes` rebuilds `__manifest`'s;
    `--optimize-indexes` always looks: its record depends on the index definitions in
    `__manifest`), of a root a run left a record in. Nothing is opened but the record's name."""
    if dry_run or full or named or spark or not storage.is_local:
        return False
    if work.catalog_indexes or work.optimize_indexes:
        return False
    return storage.exists(RECORD)  # no record, no answer: and no lease taken for nothing


def answer(
    storage: Storage, policy: PrunePolicy, work: PruneWork, delimiter: str
) -> PruneReport | None:
    """The report of a run `may_answer` lets the record answer, with nothing to do, from the
    record alone; None when the run must look (anything changed, aged or unknown). Under the
    prune lease, like any run."""
    lease = acquire(storage)
    try:
        record = PruneRecord.load(storage, policy_key(policy, work, storage, delimiter))
        state, now = record.root, datetime.now(UTC)
        if not state or not _still(storage, record, state, now):
            return None
        return PruneReport(
            storage.root_uri,
            policy,
            False,
            tables=_Unchanged(state["scope"], set(state["absent"])),
            manifest=TableResult.from_json(state["manifest"]) if state["manifest"] else None,
            debris=[DebrisResult(**d) for d in state["debris"]],
            refused=state["refused"],
            labels={
                oid: PartitionLabel(label["spec_version"], tuple(label["partition"].items()))
                for oid, label in state.get("labels", {}).items()
            },
        )
    except (KeyError, TypeError, ValueError):  # a record of another shape: look
        return None
    finally:
        lease.release()


class _Unchanged(Sequence[TableResult]):
    """A quiet run's table results, each made as it is read from the scope the record keeps
    (a million results are not held: each is `nothing to do`, unchanged or not a table)."""

    def __init__(self, scope: list[list[str]], absent: set[str]) -> None:
        self._scope, self._absent = scope, absent
        self.totals = ResultTotals()  # (what the report sums: nothing, for every table)

    def __len__(self) -> int:
        return len(self._scope)

    @overload
    def __getitem__(self, index: int) -> TableResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[TableResult]: ...

    def __getitem__(self, index: int | slice) -> TableResult | list[TableResult]:
        if isinstance(index, slice):
            return [self._result(pair) for pair in self._scope[index]]
        return self._result(self._scope[index])

    def __iter__(self) -> Iterator[TableResult]:
        return (self._result(pair) for pair in self._scope)

    def _result(self, pair: list[str]) -> TableResult:
        location, object_id = pair
        return TableResult(
            object_id, location, notes=[NOT_A_TABLE if location in self._absent else UNCHANGED]
        )


def _still(storage: Storage, record: PruneRecord, state: dict[str, Any], now: datetime) -> bool:
    due = datetime.fromisoformat(state["due"]) if state["due"] else None
    if not in_time(datetime.fromisoformat(state["checked"]), due, now):
        return False
    stamps = [(str(rel), int(ns)) for rel, ns in state["stamps"]]
    if not directories_unchanged(storage.uri(), stamps):
        return False
    # a table with no versions (declared, empty) has no entry: its directory, if any, is
    # among the stamps (no entry, so not left out), and its coming into being changes one
    absent = set(state["absent"])
    return all(
        loc in absent or record.untouched(storage, loc, now) is not None
        for loc, _ in state["scope"]
    )


def root_stamps(storage: Storage, tables: Container[str]) -> list[tuple[str, int]] | None:
    """Every directory of a local root but the `tables`' and the lease's, with its time; None
    when one changed within `SETTLE` (a later change in the same clock tick would not show)."""
    if not storage.is_local:
        return None
    top = storage.uri()
    taken = datetime.now(UTC)
    found: list[tuple[str, int]] = []
    pending = [""]
    try:
        while pending:
            rel = pending.pop()
            path = os.path.join(top, rel) if rel else top
            found.append((rel, os.stat(path).st_mtime_ns))
            with os.scandir(path) as entries:
                for entry in entries:
                    child = f"{rel}/{entry.name}" if rel else entry.name
                    mine = child in tables or child == LEASE_DIR
                    if entry.is_dir(follow_symlinks=False) and not mine:
                        pending.append(child)
    except OSError:
        return None
    limit = (taken - SETTLE).timestamp() * 1e9
    return None if any(ns > limit for _rel, ns in found) else sorted(found)


def quiet_state(
    report: PruneReport,
    stamps: list[tuple[str, int]] | None,
    skipped: Collection[str],
    scope: list[tuple[str, str | None]],
    manifest_listing: Callable[[], TableListing],
    policy: PrunePolicy,
    since: datetime,
) -> dict[str, Any] | None:
    """The root's state for the next run, when this run changed nothing and its `stamps`
    (taken before it read anything, leaving out the `skipped` table directories) cover
    everything but the tables in `scope`; else None. `since`: the moment the run judged
    ages by (whatever ages after it was judged young, so it counts as due)."""
    absent = {t.location for t in report.tables if NOT_A_TABLE in t.notes}
    if stamps is None or any(location in skipped for location in absent):
        return None
    scoped = {location for location, _ in scope}
    if not all(location in scoped for location in skipped):
        return None
    if report.failed or report.compacted or any(d.action != "reported" for d in report.debris):
        return None
    if any(t.status != TableStatus.NOTHING_TO_DO for t in report.tables):
        return None
    manifest = report.manifest
    busy = manifest is not None and manifest.status != TableStatus.NOTHING_TO_DO
    if busy or (manifest is not None and manifest.files_removed):
        return None
    now = datetime.now(UTC)
    try:
        due = _manifest_due(manifest_listing() if manifest else None, policy, min(since, now))
    except Exception:  # noqa: BLE001 - unknown: no state, the next run looks
        return None
    return {
        "stamps": stamps,
        "scope": [[location, object_id] for location, object_id in scope],
        "absent": sorted(absent),
        "refused": report.refused,
        "manifest": manifest.to_json() if manifest else None,
        "debris": [d.__dict__ for d in report.debris],
        "labels": {oid: label.json_fields() for oid, label in report.labels.items()},
        "due": due,
        "checked": now.isoformat(),
    }


def _manifest_due(listing: TableListing | None, policy: PrunePolicy, now: datetime) -> str | None:
    """When anything of `__manifest` ages into the policy (or a reason its result gives, as
    "younger than the window", lapses)."""
    due = due_after(listing, policy, now, every_version=True) if listing is not None else None
    return due.isoformat() if due else None
