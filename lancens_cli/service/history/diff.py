"""`diff [ID] --from-version A [--to-version B]`: what changed between two versions.

Of a partitioned root (no ID): `__manifest` versions A and B are compared row by row. A
partition table whose row publishes the same (read_version, read_branch, read_tag) at both is
untouched and not listed; the others are added, removed or changed, each with its rows at A and
B (from Lance's manifests, `partitioned/sizes.py`) and the table versions in between as Lance's
transactions tell them (`transactions.py`). The spec versions and the schema changes between A
and B come from `__manifest`'s metadata at each (`partitioned/layout.py`).

Of a table (ID): every version after A up to B with its operation, rows and bytes.

Nothing is written: every read is a time-travel read of a version that already exists.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import InvalidInputError, LancensError, TableNotFoundError
from lancens_cli.models import KIND_TABLE, MANIFEST_TABLE, Identifier, Result
from lancens_cli.partition.rows import partition_rows
from lancens_cli.partition.schema import field_ids_by_path
from lancens_cli.schema_json import type_to_json
from lancens_cli.service.history.transactions import (
    VersionChange,
    operations,
    rows_at,
    version_stats,
)
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.label import PartitionLabel
from lancens_cli.service.partitioned.layout import PartitionLayout, layout_of, spec_fields
from lancens_cli.service.partitioned.naming import label_for, label_of
from lancens_cli.service.partitioned.sizes import version_size
from lancens_cli.store.catalog_rows import PublishedRef, branch_name
from lancens_cli.store.manifest import ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import open_table
from lancens_cli.store.version_pick import parse_version, pick_version, version_history
from lancens_cli.words import utc_iso

_WORKERS_LOCAL, _WORKERS_REMOTE = 4, 16
_READ_ERRORS = (LancensError, OSError, ValueError, RuntimeError)


@dataclass
class PublishedState:
    """What one `__manifest` row publishes, and what a reader finds there."""

    ref: PublishedRef
    version: int | None = None  # the table version readers get (a tag as it names one now)
    rows: int | None = None
    bytes: int | None = None
    line: str | None = field(default=None, repr=False)  # the branch of `version` (None: main)

    def to_json(self) -> dict[str, Any]:
        plain: dict[str, Any] = {"read_version": self.ref.version}
        if self.ref.tag is not None:
            plain["read_tag"] = self.ref.tag
        if self.ref.branch is not None:
            plain["read_branch"] = self.ref.branch
        plain.update(version=self.version, rows=self.rows, bytes=self.bytes)
        return plain


@dataclass
class PartitionChange:
    """One partition table that is added, removed or changed between A and B."""

    change: str  # "added", "removed" or "changed"
    table: str
    label: PartitionLabel
    location: str
    before: PublishedState | None  # at A (None: added)
    after: PublishedState | None  # at B (None: removed)
    operations: list[VersionChange] = field(default_factory=list)
    note: str | None = None

    @property
    def rows_delta(self) -> int | None:
        old = 0 if self.before is None else self.before.rows
        new = 0 if self.after is None else self.after.rows
        return None if old is None or new is None else new - old

    def to_json(self) -> dict[str, Any]:
        plain = {
            "table": self.table,
            **self.label.json_fields(),
            "location": self.location,
            "from": None if self.before is None else self.before.to_json(),
            "to": None if self.after is None else self.after.to_json(),
            "rows_delta": self.rows_delta,
            "operations": [change.to_json() for change in self.operations],
        }
        if self.note is not None:
            plain["note"] = self.note
        return plain


@dataclass
class SchemaChange:
    """One namespace schema field, by field id, that differs between A and B."""

    change: str  # "added", "removed", "renamed" or "type_changed"
    field_id: int
    name: str  # its name at B (at A when removed)
    type: str | None = None  # added, removed: its type
    before: str | None = None  # renamed: the old name; type_changed: the old type
    after: str | None = None

    def to_json(self) -> dict[str, Any]:
        plain: dict[str, Any] = {"change": self.change, "field_id": self.field_id}
        plain["name"] = self.name
        if self.type is not None:
            plain["type"] = self.type
        if self.before is not None or self.after is not None:
            plain.update({"from": self.before, "to": self.after})
        return plain


@dataclass
class PartitionDiff(Result):
    """`diff` of a partitioned root between two `__manifest` versions."""

    from_version: int
    to_version: int
    from_timestamp: str | None
    to_timestamp: str | None
    spec_versions_added: list[dict[str, Any]] = field(default_factory=list)
    schema_changes: list[SchemaChange] = field(default_factory=list)
    added: list[PartitionChange] = field(default_factory=list)
    removed: list[PartitionChange] = field(default_factory=list)
    changed: list[PartitionChange] = field(default_factory=list)
    untouched: int = 0

    @property
    def partitions(self) -> list[PartitionChange]:
        return [*self.added, *self.removed, *self.changed]

    def to_json(self) -> dict[str, Any]:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "from_timestamp": self.from_timestamp,
            "to_timestamp": self.to_timestamp,
            "spec_versions_added": self.spec_versions_added,
            "schema_changes": [c.to_json() for c in self.schema_changes],
            "added": [p.to_json() for p in self.added],
            "removed": [p.to_json() for p in self.removed],
            "changed": [p.to_json() for p in self.changed],
            "untouched": self.untouched,
        }


@dataclass
class TableDiff(Result):
    """`diff ID`: the versions of one table after A up to B."""

    table: str
    location: str
    from_version: int
    to_version: int
    from_timestamp: str | None
    to_timestamp: str | None
    from_rows: int | None
    to_rows: int | None
    versions: list[VersionChange] = field(default_factory=list)
    label: PartitionLabel | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            **(self.label.json_fields() if self.label is not None else {}),
            "location": self.location,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "from_timestamp": self.from_timestamp,
            "to_timestamp": self.to_timestamp,
            "from_rows": self.from_rows,
            "to_rows": self.to_rows,
            "versions": [v.to_json() for v in self.versions],
        }


def diff(
    ns: Namespace,
    ident: Identifier,
    *,
    from_version: str | None = None,
    to_version: str | None = None,
    from_timestamp: str | None = None,
    to_timestamp: str | None = None,
    delimiter: str = ".",
) -> PartitionDiff | TableDiff:
    """What changed between two versions of a partitioned root (`ident` the root) or of one
    table. Exit 2 for options that do not name one version each, 3 for a version not there."""
    for side, version, timestamp in (
        ("from", from_version, from_timestamp),
        ("to", to_version, to_timestamp),
    ):
        if version is not None and timestamp is not None:
            raise InvalidInputError(
                f"--{side}-version and --{side}-timestamp: give one of them, not both"
            )
        if version is None:
            continue
        try:
            parse_version(version)
        except InvalidInputError:
            raise InvalidInputError(f"--{side}-version {version!r} is not a whole number") from None
    if from_version is None and from_timestamp is None:
        raise InvalidInputError("give --from-version N or --from-timestamp TS")
    ns.require_root()
    if ident.is_root:
        return _root_diff(ns, from_version, to_version, from_timestamp, to_timestamp, delimiter)
    return _table_diff(ns, ident, from_version, to_version, from_timestamp, to_timestamp, delimiter)


def _later(a: int, b: int, what: str) -> None:
    if a > b:
        raise InvalidInputError(
            f"--from names {what} version {a}, later than --to (version {b}): give the earlier "
            "version first"
        )


# --- a partitioned root -----------------------------------------------------------------------


def _root_diff(
    ns: Namespace,
    from_version: str | None,
    to_version: str | None,
    from_timestamp: str | None,
    to_timestamp: str | None,
    delimiter: str,
) -> PartitionDiff:
    current = ns.snapshot()
    if not current.exists or layout_of(current) is None:
        raise InvalidInputError(
            "this root is not a partitioned namespace: name a table to diff "
            "(lancens diff ID --from-version N)"
        )
    a = ns.manifest.resolve_version(from_version, from_timestamp)
    given_to = to_version is not None or to_timestamp is not None
    b = ns.manifest.resolve_version(to_version, to_timestamp) if given_to else current.version
    _later(a, b, "__manifest")
    times = {n: utc_iso(when) for n, when in version_history(ns.manifest.open_dataset())}
    before = ns.manifest.pinned(a).read()
    after = current if b == current.version else ns.manifest.pinned(b).read()
    layout_a, layout_b = _layout(before), _layout(after)
    result = PartitionDiff(a, b, times.get(a), times.get(b))
    known = {spec.id for spec in layout_a.specs} if layout_a else set()
    if layout_b is not None:
        result.spec_versions_added = [
            {"spec_version": spec.id, "fields": spec_fields(spec, layout_b.schema)}
            for spec in layout_b.specs
            if spec.id not in known
        ]
    result.schema_changes = schema_changes(
        layout_a.schema if layout_a else None, layout_b.schema if layout_b else None
    )
    rows_a, rows_b = _partition_tables(before, layout_a), _partition_tables(after, layout_b)
    entries = []
    for object_id in sorted(rows_a.keys() | rows_b.keys()):
        old, new = rows_a.get(object_id), rows_b.get(object_id)
        if old is not None and new is not None and _same(old[0], new[0]):
            result.untouched += 1
            continue
        pair = new if new is not None else old
        assert pair is not None  # the object id came from one side or the other
        row, label = pair
        change = "added" if old is None else "removed" if new is None else "changed"
        table = Identifier.from_object_id(object_id).display(delimiter)
        entries.append(
            (PartitionChange(change, table, label, row["location"], None, None), old, new)
        )
    _fill(ns.storage, before, after, entries)
    for entry, _old, _new in sorted(
        entries, key=lambda e: (e[0].label.spec_version, e[0].label.text(), e[0].table)
    ):
        getattr(result, entry.change).append(entry)
    return result


def _layout(snapshot: ManifestSnapshot) -> PartitionLayout | None:
    return layout_of(snapshot) if snapshot.exists else None


def _partition_tables(
    snapshot: ManifestSnapshot, layout: PartitionLayout | None
) -> dict[str, tuple[dict[str, Any], PartitionLabel]]:
    """object id -> (row, label) of every partition table the snapshot holds."""
    if layout is None:
        return {}
    return {
        found.object_id: (found.row, label_of(found.spec, found.row))
        for found in partition_rows(snapshot.rows, layout.specs, KIND_TABLE)
    }


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    same_ref = PublishedRef.of(old) == PublishedRef.of(new)
    return same_ref and old.get("location") == new.get("location")


def _fill(
    storage: Storage,
    before: ManifestSnapshot,
    after: ManifestSnapshot,
    entries: list[tuple[PartitionChange, Any, Any]],
) -> None:
    """Each entry's published versions, rows and operations (one table a thread)."""
    verdicts_a, verdicts_b = row_locations(storage, before), row_locations(storage, after)

    def fill(item: tuple[PartitionChange, Any, Any]) -> None:
        entry, old, new = item
        if old is not None:
            entry.before = _published(storage, verdicts_a, old[0])
        if new is not None:
            entry.after = _published(storage, verdicts_b, new[0])
        if new is not None and verdicts_b.problem(new[0]["object_id"]) is None:
            entry.operations, entry.note = _between(storage, entry)

    workers = _WORKERS_LOCAL if storage.is_local else _WORKERS_REMOTE
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(fill, entries))


def _published(storage: Storage, verdicts: Any, row: dict[str, Any]) -> PublishedState:
    """What the row publishes; its version, rows and bytes when the table opens there (a row
    the trust boundary refuses is never opened: `check` says why)."""
    ref = PublishedRef.of(row)
    found = PublishedState(ref)
    if verdicts.problem(row["object_id"]) is not None:
        return found
    try:
        dataset = ref.open(storage, row["location"])
        size = version_size(dataset)
        found.version, found.line = int(dataset.version), ref.branch_in(dataset)
        found.rows, found.bytes = size.rows, size.bytes
    except _READ_ERRORS:
        pass
    return found


def _between(storage: Storage, entry: PartitionChange) -> tuple[list[VersionChange], str | None]:
    """The table versions after the one published at A up to the one published at B."""
    after, before = entry.after, entry.before
    assert after is not None
    if after.version is None:
        return [], "the version published at --to cannot be read"
    if before is None:
        start: tuple[str | None, int] = (None, 0)
    elif before.version is None:
        return [], "the version published at --from cannot be read"
    else:
        start = (before.line, before.version)
    end = (after.line, after.version)
    if start == end:
        return [], f"the same table version ({_line_text(end)}), published differently"
    try:
        dataset = open_table(storage, entry.location)
        if start[0] == end[0]:
            if end[1] < start[1]:
                return [], f"the published version went back from {start[1]} to {end[1]}"
            changes = operations(dataset, start[1], end[1], branch=end[0])
        else:
            fork = _fork(dataset, end[0])
            if fork is None or fork[0] != start[0] or start[1] > fork[1]:
                return [], (
                    f"published from {_line_text(start)} at --from and {_line_text(end)} at "
                    "--to: not one line of versions"
                )
            changes = operations(dataset, start[1], fork[1], branch=start[0])
            changes += operations(dataset, fork[1] - 1, end[1], branch=end[0])
    except _READ_ERRORS as exc:
        return [], f"its versions cannot be read: {getattr(exc, 'message', exc)}"
    _chain(changes, 0 if before is None else before.rows)
    return changes, None


def _fork(dataset: Any, branch: str | None) -> tuple[str | None, int] | None:
    """Where a branch starts: (its parent branch, None for main; the parent version)."""
    if branch is None:
        return None
    info = (dataset.branches.list() or {}).get(branch)
    if info is None or info.get("parent_version") is None:
        return None
    return branch_name(info.get("parent_branch")), int(info["parent_version"])


def _chain(changes: list[VersionChange], start: int | None) -> None:
    """Each version's row delta against the one before it in the walk (across a fork)."""
    previous = start
    for change in changes:
        rows = change.rows
        change.rows_delta = None if rows is None or previous is None else rows - previous
        previous = rows


def _line_text(line: tuple[str | None, int]) -> str:
    branch, version = line
    return f"version {version}" if branch is None else f"branch {branch} version {version}"


def schema_changes(before: Any, after: Any) -> list[SchemaChange]:
    """The fields of the namespace schema added, removed, renamed or retyped, by field id."""
    old = _schema_fields(before) if before is not None else {}
    new = _schema_fields(after) if after is not None else {}
    changes = []
    for fid in sorted(old.keys() | new.keys()):
        if fid not in old:
            changes.append(SchemaChange("added", fid, new[fid][0], type=new[fid][1]))
        elif fid not in new:
            changes.append(SchemaChange("removed", fid, old[fid][0], type=old[fid][1]))
        else:
            (old_name, old_type), (new_name, new_type) = old[fid], new[fid]
            if old_name != new_name:
                changes.append(SchemaChange("renamed", fid, new_name, None, old_name, new_name))
            if old_type != new_type:
                changes.append(
                    SchemaChange("type_changed", fid, new_name, None, old_type, new_type)
                )
    return changes


def _schema_fields(schema: Any) -> dict[int, tuple[str, str | None]]:
    """Field id -> (dotted path, type) of a namespace schema; a nested field's type is its
    top-level column's to compare (a change inside shows as that column's)."""
    top = {f.name: type_to_json(f.type)["type"] for f in schema}
    return {fid: (path, top.get(path)) for path, fid in field_ids_by_path(schema).items()}


# --- one table --------------------------------------------------------------------------------


def _table_diff(
    ns: Namespace,
    ident: Identifier,
    from_version: str | None,
    to_version: str | None,
    from_timestamp: str | None,
    to_timestamp: str | None,
    delimiter: str,
) -> TableDiff:
    snapshot = ns.snapshot()
    label = None
    if ident.parts == (MANIFEST_TABLE,):
        dataset = ns.manifest.open_dataset()
        if dataset is None:
            raise TableNotFoundError("__manifest does not exist yet")
        name, location = MANIFEST_TABLE, MANIFEST_TABLE
    else:
        ref = ns.require_table(ident, snapshot)
        dataset = open_table(ns.storage, ref.location)
        name, location = ident.display(delimiter), ref.location
        label = label_for(snapshot, ident.object_id) if snapshot.exists else None
    history = version_stats(dataset)
    times = [(number, stats.timestamp) for number, stats in sorted(history.items())]
    what = f"table {name}"
    a = pick_version(times, from_version, from_timestamp, what)
    given_to = to_version is not None or to_timestamp is not None
    b = pick_version(times, to_version, to_timestamp, what) if given_to else max(history)
    _later(a, b, what)
    return TableDiff(
        name,
        location,
        a,
        b,
        utc_iso(history[a].timestamp),
        utc_iso(history[b].timestamp),
        rows_at(dataset, history, a),
        rows_at(dataset, history, b),
        operations(dataset, a, b),
        label,
    )
