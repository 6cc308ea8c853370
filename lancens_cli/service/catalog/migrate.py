"""`migrate-v1`: register every V1 table directory of the root in `__manifest` (spec 000).

All registrations go into one manifest commit (chunks of `CHUNK_ROWS` for very large roots), so
a process killed before the commit registered nothing and one killed after registered all; a
rerun registers exactly what is missing. Directories are never moved.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import (
    KIND_TABLE,
    MANIFEST_TABLE,
    STATE_MISSING,
    STATE_NOT_LANCE,
    STATE_OK,
    STATE_UNCOMMITTED,
    Result,
    to_plain,
    validate_name,
)
from lancens_cli.parallel import ordered
from lancens_cli.service.catalog.manifest_rows import table_row
from lancens_cli.service.namespace import Namespace
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.tables import (
    V1_SUFFIX,
    is_deregistered,
    is_v2_location,
    table_state,
)

CHUNK_ROWS = 100_000

MIGRATED = "migrated"
ALREADY = "already registered"
SKIPPED = "skipped"
PENDING = "to migrate"
# Deliberately deregistered (`.lance-deregistered`): not a table left behind.
IGNORED = "deregistered"
# The state of a directory the trust boundary refuses: never opened, so never classified.
REFUSED = "refused"


@dataclass
class MigrationItem:
    name: str
    location: str
    status: str
    state: str
    reason: str | None = None


@dataclass
class MigrationReport(Result):
    root: str
    dry_run: bool
    check: bool
    tables: list[MigrationItem] = field(default_factory=list)
    manifest_version: int | None = None
    commits: int = 0

    def count(self, status: str) -> int:
        return sum(1 for t in self.tables if t.status == status)

    @property
    def migrated(self) -> int:
        return self.count(MIGRATED)

    @property
    def pending(self) -> int:
        return self.count(PENDING)

    @property
    def already_registered(self) -> int:
        return self.count(ALREADY)

    @property
    def skipped(self) -> int:
        return self.count(SKIPPED)

    @property
    def complete(self) -> bool:
        """Every V1 directory is in the manifest: dir listing may be turned off."""
        return self.pending == 0 and self.skipped == 0

    def to_json(self) -> dict[str, object]:
        return {
            "root": self.root,
            "dry_run": self.dry_run,
            "check": self.check,
            **self.counts(),
            "tables": [to_plain(t) for t in self.tables],
        }

    def counts(self) -> dict[str, object]:
        return {
            "migrated": self.migrated,
            "to_migrate": self.pending,
            "already_registered": self.already_registered,
            "skipped": self.skipped,
            "deregistered": self.count(IGNORED),
            "complete": self.complete,
            "manifest_version": self.manifest_version,
            "commits": self.commits,
        }


def _candidates(ns: Namespace, legacy: bool) -> list[tuple[str, str]]:
    """(name, location) of every directory that V1 (or, with `legacy`, spec 001) calls a table."""
    found = []
    for entry in ns.storage.list_dir():
        if not entry.is_dir or entry.name == MANIFEST_TABLE:
            continue
        if entry.name.endswith(V1_SUFFIX) and len(entry.name) > len(V1_SUFFIX):
            found.append((entry.name[: -len(V1_SUFFIX)], entry.name))
        elif legacy and not entry.name.startswith((".", "_")):
            found.append((entry.name, entry.name))
    return sorted(found)


def _untouchable(
    ns: Namespace, snapshot: ManifestSnapshot, candidates: list[tuple[str, str]]
) -> dict[str, str]:
    """The directories the trust boundary (store/containment.py) will not let us open, each
    with the reason: a link out of the root, or one that would give two rows one directory.

    Each directory is judged as if it were registered beside the catalog's rows. Directories
    that are links are judged last, so that of `real.lance` and `alias.lance -> real.lance`,
    the real one is migrated and the link skipped."""
    verdicts = row_locations(ns.storage, snapshot)
    by_location = snapshot.locations()
    refused: dict[str, str] = {}

    def is_link(location: str) -> bool:
        return ns.storage.is_local and os.path.islink(ns.storage.uri(location))

    for name, location in sorted(candidates, key=lambda c: (is_link(c[1]), c)):
        registered = by_location.get(location)
        if registered is not None:
            found = verdicts.problem(registered)
            if found is not None:
                refused[location] = found.reason
            continue
        problem = verdicts.admit(name, location)
        if problem is not None:
            refused[location] = problem
    return refused


def _classify(ns: Namespace, locations: list[str], progress) -> dict[str, str]:
    """Table state of each directory (remote stores asked in parallel)."""

    def state(location: str) -> str:
        if is_deregistered(ns.storage, location):
            return IGNORED
        return table_state(ns.storage, location)

    states = {}
    workers = 1 if ns.storage.is_local else 16
    for location, result in zip(locations, ordered(state, locations, workers), strict=True):
        states[location] = result
        if progress:
            progress()
    return states


def plan_migration(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    candidates: list[tuple[str, str]],
    states: dict[str, str],
    legacy: bool,
    refused: dict[str, str] | None = None,
) -> list[MigrationItem]:
    """Decide, per directory, whether it is registered now, already, or skipped (and why).

    With `legacy`, `R/t` and `R/t.lance` may both claim the name `t`. Spec 000 names a root
    table's directory `<name>.lance`, and directory listing (ours and the reference's) already
    resolves `t` to `R/t.lance` (unless it is deregistered); so that one keeps the name, whatever
    state it is in, and the legacy directory is skipped with the reason: registering it would
    change what `t` reads.

    `refused`: directories never opened (`_untouchable`), skipped with the reason.
    """
    refused = refused or {}
    registered = snapshot.locations()
    claimed = {
        name: location
        for name, location in candidates
        if location.endswith(V1_SUFFIX) and states.get(location, REFUSED) not in (IGNORED, REFUSED)
    }
    items = []
    for name, location in candidates:
        legacy_dir = not location.endswith(V1_SUFFIX)
        if location in refused:
            if not (legacy_dir and is_v2_location(location)):
                items.append(MigrationItem(name, location, SKIPPED, REFUSED, refused[location]))
            continue
        state = states[location]
        if legacy_dir and is_v2_location(location):
            continue  # a V2 directory, tracked or orphaned: `check` looks after those
        if location in registered:
            items.append(MigrationItem(name, location, ALREADY, state))
            continue
        if legacy_dir and state != STATE_OK:
            continue  # spec 001 layout: only directories that hold a Lance table
        if state == IGNORED:
            items.append(MigrationItem(name, location, IGNORED, state, "has .lance-deregistered"))
            continue
        reason = None
        try:
            validate_name(name)
        except InvalidInputError as exc:
            reason = exc.message
        if reason is None and state == STATE_MISSING:
            reason = "directory vanished during the scan"
        if reason is None and state == STATE_UNCOMMITTED:
            reason = (
                "holds only the data files of a table write that never committed (a killed "
                "create, or a copy in progress); `lancens check --fix` deletes it once older "
                "than the grace period"
            )
        if reason is None and legacy_dir and claimed.get(name, location) != location:
            reason = f"name taken by {claimed[name]!r}, the <name>.lance directory spec 000 uses"
        existing = snapshot.get(name) if reason is None else None
        if existing is not None:
            if existing["object_type"] == KIND_TABLE:
                reason = f"name taken by a table at {existing['location']!r}"
            else:
                reason = "name taken by a namespace"
        if reason:
            items.append(MigrationItem(name, location, SKIPPED, state, reason))
        else:
            note = (
                "not a Lance table; registered as spec 001 counts it a table"
                if (state == STATE_NOT_LANCE)
                else None
            )
            items.append(MigrationItem(name, location, PENDING, state, note))
    return items


def migrate_v1(
    ns: Namespace,
    *,
    dry_run: bool = False,
    check: bool = False,
    legacy: bool = False,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> MigrationReport:
    """Register the root's V1 tables; with `dry_run` or `check` change nothing."""
    ns.require_manifest("migrate-v1")
    ns.require_root()
    candidates = _candidates(ns, legacy)
    snapshot = ns.snapshot()
    refused = _untouchable(ns, snapshot, candidates)
    opened = [loc for _, loc in candidates if loc not in refused]
    tick = progress(len(opened)) if progress and opened else None
    states = _classify(ns, opened, tick)
    report = MigrationReport(ns.storage.root_uri, dry_run, check)
    report.tables = plan_migration(ns, snapshot, candidates, states, legacy, refused)
    report.manifest_version = snapshot.version or None
    if dry_run or check or report.pending == 0:
        return report

    pending = [t for t in report.tables if t.status == PENDING]
    for start in range(0, len(pending), CHUNK_ROWS):
        chunk = pending[start : start + CHUNK_ROWS]

        def register(snapshot: ManifestSnapshot, edit: ManifestEdit, chunk=chunk) -> int:
            taken = snapshot.locations()
            for item in chunk:
                if item.location in taken:
                    item.status = ALREADY  # registered meanwhile (e.g. a concurrent migrate)
                elif edit.has(item.name):
                    item.status, item.reason = SKIPPED, "name taken meanwhile"
                else:
                    item.status = MIGRATED
                    edit.add(table_row(item.name, item.location, None))
            return snapshot.version

        ns.manifest.mutate(register)
        report.commits += 1
    report.manifest_version = ns.manifest.open_dataset().version
    return report
