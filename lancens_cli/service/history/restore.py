"""`restore`: put a past version back as the newest, keeping the history in between.

A partitioned root is restored to what `__manifest` version N published: one new `__manifest`
commit after which the partition rows are exactly N's (every partition table N published, at
the same `read_version` / `read_tag` / `read_branch`, with the same partition values; the
partitions N did not have are no longer published, and their tables stay on disk). Specs and
the namespace schema stay as they are now, as Iceberg's rollback keeps the schema: a table
published by N is read through field ids, as the partitioning spec reads every generation.
The versions between N and now stay readable by time travel until prune's policy lets them go,
so a restore forward (to one of them) brings them back.

A table is restored with Lance's Restore operation: version N again as its newest version.
Partition tables are refused (restoring one alone would tear a multi-partition write apart).

Everything is checked before anything is written: N must still be readable, and so must every
table version N published (prune may have removed one). The commit is compare-and-swap: a write
that lands between the plan and the commit is restored over, and the result names its
versions; a write that lands after the restore lands on the restored state.

The namespace's index definitions stay as they are now too, but a restored table is N's
version again, with the indexes N's version had: one built since is missing. The restore does
not build it (a vector index trains for minutes on a large table, and a restore is what an
operator runs in a hurry); the result names each restored table that lacks one and the command
that builds it, `prune --optimize-indexes`, which publishes what it builds in one commit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import lance

from lancens_cli.errors import (
    InvalidInputError,
    InvalidTableStateError,
    LancensError,
    RefusedError,
    TableVersionNotFoundError,
    lance_message,
)
from lancens_cli.models import KIND_TABLE, MANIFEST_TABLE, Identifier, Result
from lancens_cli.partition.rows import partition_rows
from lancens_cli.partition.schema_evolution import history_from_metadata, shape
from lancens_cli.service.history.transactions import operation_of
from lancens_cli.service.indexes.build import too_few_vectors
from lancens_cli.service.indexes.definitions import IndexDefinition, readable_definitions
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.evolve_schema import Brought, bring_table
from lancens_cli.service.partitioned.label import PartitionLabel
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.service.partitioned.naming import label_of
from lancens_cli.service.partitioned.republish import mark_partitioned_writer
from lancens_cli.service.partitioned.sizes import TableSize, version_size
from lancens_cli.store.catalog_rows import PublishedRef
from lancens_cli.store.commit import retry_on_conflict
from lancens_cli.store.inspect import index_summaries
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot
from lancens_cli.store.tables import open_table, write_unpublished_marker
from lancens_cli.store.version_pick import pick_version, version_history
from lancens_cli.words import noun, plural, utc_iso

SCHEMA_NOTE = (
    "specs and the namespace schema stay as they are now; the restored partition tables are "
    "read through field ids, as every older generation is"
)

# The words of a partition's change, in the order a result lists them.
REPUBLISHED, MOVED, UNPUBLISHED = "republished", "moved", "unpublished"
# What `RestoreResult.status` says: a restore committed, would commit (a dry run, or the plan a
# real run follows), or has nothing to do (N is the newest, or what is read now already holds
# N's rows: a rerun)
RESTORED, WOULD_RESTORE, NOTHING_TO_RESTORE = "restored", "would restore", "nothing to restore"

# What builds the index definitions a restored partition table lacks (and publishes them)
INDEX_REMEDY = "lancens prune --optimize-indexes --yes"
SHOWN_LABELS = 5  # partitions a note names before it counts the rest


@dataclass(frozen=True)
class LackedIndex:
    """A namespace index definition the version a restore publishes lacks, and why prune
    would not build it yet (too few vectors to train it), if so."""

    name: str
    too_few: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "too_few_rows": self.too_few}


@dataclass
class RestoredPartition:
    """One partition row the restore changes: what readers see of it before and after."""

    action: str  # REPUBLISHED (N had it, now gone), MOVED (another version), UNPUBLISHED
    object_id: str
    location: str
    label: PartitionLabel | None
    before: PublishedRef | None  # what is published now (None: no table row)
    after: PublishedRef | None  # what N published
    rows_before: int | None = None
    rows_after: int | None = None
    # N's version is of an earlier schema generation: a new version at the current schema,
    # built on it, is published instead (writers append at the current schema)
    behind: bool = False
    brought_from: int | None = None  # N's read_version, when a version built on it is published
    # where `before` is read: the row published now (`location` is N's, or now's when N lacks it)
    location_before: str | None = None
    # the plan gives the table a version of its own built on N's (`brought_from`): a later
    # version came after N's, or N's is of an earlier schema generation. Before it is made its
    # number is unknown, so a dry run's `after` says `read_version: None`
    will_make_version: bool = False
    # the namespace's index definitions the published version lacks (tables on main)
    lacking_indexes: list[LackedIndex] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "table": Identifier.from_object_id(self.object_id).display(),  # as outputs name it
            "object_id": self.object_id,
            **(self.label.json_fields() if self.label is not None else {}),
            "location": self.location,
            "before": None if self.before is None else self.before.as_json(),
            "after": None if self.after is None else self.after.as_json(),
            "rows_before": self.rows_before,
            "rows_after": self.rows_after,
            "to_current_schema": self.behind,
            "brought_from": self.brought_from,
            "will_make_version": self.will_make_version,
            "lacking_indexes": [i.to_json() for i in self.lacking_indexes],
        }


@dataclass
class RestorePlan:
    """What a restore would change, checked whole before anything is written; the run that
    follows it (`restore_namespace`, `restore_table`) returns the outcome, a `RestoreResult`."""

    target: str  # "__manifest" for a partitioned root, else the table
    restored_to: int
    restored_to_time: str | None
    planned_on: int  # the newest version when the restore was planned
    nothing_to_restore: bool = False  # N is the newest, or what is read now holds its rows
    changes: list[RestoredPartition] = field(default_factory=list)
    rows_before: int | None = None  # as in RestoreResult
    rows_after: int | None = None
    notes: list[str] = field(default_factory=list)
    index_remedy: str | None = None

    def answer(self, dry_run: bool) -> RestoreResult:
        """The plan as a command's answer: a dry run's, or a run's with nothing to restore."""
        result = self.outcome(dry_run=dry_run)
        result.status = NOTHING_TO_RESTORE if self.nothing_to_restore else WOULD_RESTORE
        result.changes = self.changes
        result.rows_before, result.rows_after = self.rows_before, self.rows_after
        result.index_remedy = self.index_remedy
        return result

    def outcome(self, dry_run: bool = False) -> RestoreResult:
        """A result for this plan's restore, its words carried over, the rest to fill in."""
        return RestoreResult(
            self.target,
            self.restored_to,
            self.restored_to_time,
            self.planned_on,
            dry_run=dry_run,
            notes=list(self.notes),
        )


@dataclass
class RestoreResult(Result):
    """What a restore did (or, with `dry_run`, would do): the outcome of a `RestorePlan`."""

    target: str  # "__manifest" for a partitioned root, else the table
    restored_to: int
    restored_to_time: str | None
    planned_on: int  # the newest version when the restore was planned
    dry_run: bool
    status: str = WOULD_RESTORE  # RESTORED, WOULD_RESTORE or NOTHING_TO_RESTORE
    new_version: int | None = None  # the version the restore committed (None: not committed)
    restored_over: list[int] = field(default_factory=list)  # versions that landed meanwhile
    changes: list[RestoredPartition] = field(default_factory=list)
    # a table: its rows now, and at the restored version; a partitioned root: the rows of the
    # partitions that change, summed (None: one of them could not be counted)
    rows_before: int | None = None
    rows_after: int | None = None
    notes: list[str] = field(default_factory=list)
    # the command that builds the index definitions restored tables lack (None: none lack one
    # it could build now)
    index_remedy: str | None = None

    @property
    def unindexed(self) -> list[RestoredPartition]:
        """The restored partition tables that lack one of the namespace's indexes."""
        return [c for c in self.changes if c.lacking_indexes]

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "restored_to": self.restored_to,
            "restored_to_time": self.restored_to_time,
            "planned_on": self.planned_on,
            "dry_run": self.dry_run,
            "status": self.status,
            "new_version": self.new_version,
            "restored_over": self.restored_over,
            "changes": [c.to_json() for c in self.changes],
            "rows_before": self.rows_before,
            "rows_after": self.rows_after,
            "notes": self.notes,
            "index_remedy": self.index_remedy,
        }


# --------------------------------------------------------------------------- a partitioned root


def plan_namespace_restore(
    ns: Namespace, version: str | int | None, timestamp: str | None
) -> RestorePlan:
    """What restoring the partitioned root to a `__manifest` version changes, checked whole:
    what the real run will publish (a table that gets a version of its own names the version
    it is built on), or that there is nothing to restore."""
    ns.require_root()
    now = ns.snapshot()
    if layout_of(now) is None:
        raise InvalidInputError(
            "the root is not a partitioned namespace: name a table to restore "
            "(lancens restore TABLE --to-version N)"
        )
    ns.require_writable(now)
    target = ns.manifest.resolve_version(version, timestamp)
    past = ns.as_of(version=target).snapshot()
    layout = layout_of(now)
    assert layout is not None
    equivalent = _already_restored(ns, now, past)
    every = _changes(now, past, equivalent)
    changes = _tables(every)
    _require_readable(ns, changes, target, layout.schema, readable_definitions(now.metadata))
    for change in changes:
        _plan_own_version(change)
    result = RestorePlan(MANIFEST_TABLE, target, _manifest_time(ns, target), now.version)
    result.nothing_to_restore = not every
    result.changes = changes
    result.rows_before, result.rows_after = _totals(changes)
    result.notes.append(SCHEMA_NOTE)
    note = _index_note(changes)
    if note is not None:
        result.notes.append(note)
        buildable = any(not i.too_few for c in changes for i in c.lacking_indexes)
        result.index_remedy = INDEX_REMEDY if buildable else None
    behind = [c for c in changes if c.behind]
    if behind:
        result.notes.append(
            f"{len(behind)} restored partition table(s) are of an earlier schema generation: "
            "each gets a new version at the current schema built on the restored one (the "
            "same rows, as readers read them), and that version is published"
        )
    if target == now.version:
        result.notes.append(f"version {target} is already the newest: nothing to restore")
    elif not every:
        result.notes.append(
            f"__manifest version {now.version} already publishes what version {target} "
            "published (a restore to it already ran): nothing to restore"
        )
    return result


def _plan_own_version(change: RestoredPartition) -> None:
    """What the real run publishes for a table that gets a version of its own: built on N's
    version (`brought_from`), at a number only its commit gives (`after.read_version` None)."""
    if change.will_make_version and change.after is not None:
        change.brought_from = change.after.version
        change.after = dataclasses.replace(change.after, version=None)


def _planned_base(change: RestoredPartition) -> int | None:
    """The version N published for the table: the one its own version is built on."""
    if change.will_make_version:
        return change.brought_from
    return change.after.version if change.after is not None else None


def _totals(changes: list[RestoredPartition]) -> tuple[int | None, int | None]:
    """The rows of the partitions that change, before and after (a side a partition is not
    published on counts 0; None when a published table could not be counted)."""
    before = [c.rows_before for c in changes if c.before is not None]
    after = [c.rows_after for c in changes if c.after is not None]
    return (
        None if None in before else sum(n or 0 for n in before),
        None if None in after else sum(n or 0 for n in after),
    )


def restore_namespace(ns: Namespace, planned: RestorePlan) -> RestoreResult:
    """Commit the restore `planned` describes: the restored tables of an earlier schema
    generation are brought to the current schema first (unpublished versions of their own),
    then one `__manifest` commit, planned anew (from version N's rows) on every retry."""
    target = planned.restored_to
    past = ns.as_of(version=target).snapshot()
    brought = _already_restored(ns, ns.snapshot(), past)
    brought |= _bring(ns, [c for c in planned.changes if c.after is not None])

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> list[RestoredPartition]:
        changes = _changes(snapshot, past, brought)
        rows = {row["object_id"]: _published_row(row, brought) for row in past.rows}
        for change in changes:
            if change.action == UNPUBLISHED:
                edit.remove(change.object_id)
            elif change.action == REPUBLISHED:
                edit.add(rows[change.object_id])
            else:
                edit.replace(
                    change.object_id,
                    **_fields(snapshot.get(change.object_id), rows[change.object_id]),
                )
        if not edit.is_empty:
            mark_partitioned_writer(snapshot, edit)
        return changes

    landed = ns.manifest.commit(plan, message=f"lancens restore to version {target}")
    committed = landed.rows_version
    if committed is not None:
        _mark_unpublished(ns, landed.result, target, committed)
    result = planned.outcome()
    result.new_version = committed
    result.status = RESTORED if committed is not None else NOTHING_TO_RESTORE
    result.changes = _with_sizes(planned.changes, _tables(landed.result))
    behind = {c.object_id for c in planned.changes if c.behind}
    for change in result.changes:
        base, published = brought.get(change.object_id, (None, None))
        if base is not None and published != base:
            change.brought_from = base
            change.behind = change.behind or change.object_id in behind
    result.rows_before, result.rows_after = _totals(result.changes)
    # what landed between the plan and the commit, but for the guard this run set itself
    meanwhile = range(planned.planned_on + 1, landed.planned_on + 1)
    result.restored_over = [v for v in meanwhile if v not in landed.metadata_only]
    result.index_remedy = planned.index_remedy
    if result.restored_over:
        result.notes.append(
            f"__manifest version(s) {_span(result.restored_over)} landed while the restore "
            "was planned and are restored over too; they stay readable by time travel"
        )
    return result


def _mark_unpublished(
    ns: Namespace, changes: list[RestoredPartition], target: int, committed: int
) -> None:
    """A marker in each partition table the restore stopped publishing: once the versions
    that still publish it expire, `check` and `prune` say a restore unpublished it (not a dead
    write). Words only: a marker that could not be written changes nothing else."""
    now = utc_iso(datetime.now(UTC))
    record = {"restored_to": target, "manifest_version": committed, "at": now}
    for change in changes:
        if change.action == UNPUBLISHED and change.location:
            with contextlib.suppress(OSError):
                write_unpublished_marker(ns.storage, change.location, record)


def _bring(ns: Namespace, restored: list[RestoredPartition]) -> dict[str, tuple[int, int]]:
    """object id -> (N's read_version, the version published instead) of each table restored on
    main: a version of its own at N's rows, made as evolve-schema brings a table (a `Restore`
    of N's version when later versions came after it, then the steps to today's schema when it
    is of an earlier generation). Its latest version is then the published one, as after any
    write, so compaction and index upkeep take it up again. The new versions stay unpublished
    until the restore's commit (a killed restore leaves them to expire like any other)."""
    if not restored:
        return {}
    snapshot = ns.snapshot()
    layout = layout_of(snapshot)
    assert layout is not None
    history = history_from_metadata(snapshot.metadata)
    brought = {}
    for change in restored:
        assert change.after is not None
        base = _planned_base(change)
        if base is None or change.after.is_tag:
            continue  # a tag (or the latest) is read as it is: no write of ours goes there
        if change.after.is_branch:
            continue  # a branch's versions are its writer's: it is published as N left it
        job = Brought(change.object_id, change.location, base)
        brought[change.object_id] = (base, bring_table(ns.storage, job, layout.schema, history))
    return brought


def _already_restored(
    ns: Namespace, now: ManifestSnapshot, past: ManifestSnapshot
) -> dict[str, tuple[int, int]]:
    """object id -> (N's read_version, the version published now) of each table a restore to
    N already published a version of its own for: a rerun changes nothing readers see."""
    found = {}
    for row in past.rows:
        current = now.get(row["object_id"])
        if current is None or row["object_type"] != KIND_TABLE:
            continue
        base, version = PublishedRef.of(row).main_version, PublishedRef.of(current).main_version
        if base is None or version is None or version == base:
            continue  # a tag, a branch or the latest is read as it is
        if current.get("location") != row.get("location"):
            continue
        if _made_from(ns, current, int(version), int(base)):
            found[row["object_id"]] = (int(base), int(version))
    return found


_ROW_CHANGES = frozenset(("Append", "Delete", "Update", "Overwrite", "Rewrite"))


def _made_from(ns: Namespace, row: dict[str, Any], version: int, base: int) -> bool:
    """Whether the published table version `version` already holds version `base`'s rows
    (the rule `holds_rows_of` states), today's schema steps after them allowed."""
    try:
        dataset = open_table(ns.storage, row["location"])
    except (LancensError, OSError, ValueError, RuntimeError):
        return False
    return holds_rows_of(dataset, version, base, schema_steps=True)


def holds_rows_of(dataset: Any, version: int, base: int, *, schema_steps: bool) -> bool:
    """The one rule of a rerun, for a table and a partitioned root alike: table version
    `version` already holds version `base`'s data, so restoring `base` again would only add a
    version. It does when it is `base`, when it is what a `Restore` of `base` makes (its
    fragments, schema and indexes), or, with `schema_steps`, when it is a `Restore` of `base`
    followed only by steps that change no row (the steps to today's schema a namespace restore
    takes). An index built since `base` is a difference: the restore gives N's indexes back,
    as the README's "Undo a bad write" says."""
    if version == base:
        return True
    try:
        if _same_data(dataset.checkout_version(version), dataset.checkout_version(base)):
            return True
        if not schema_steps:
            return False
        for number in range(version, max(base, version - 8), -1):
            operation = operation_of(dataset, number)
            name = type(operation).__name__ if operation is not None else ""
            if name == "Restore":
                return int(operation.version) == base
            if not name or name in _ROW_CHANGES:
                return False
    except (LancensError, OSError, ValueError, RuntimeError):
        return False
    return False


def _same_data(one: Any, other: Any) -> bool:
    """Whether two versions of a table are alike as a `Restore` copies one: the same fragments
    (ids, data and deletion files), schema and indexes. Two manifests read."""
    fragments = [f.metadata.to_json() for f in one.get_fragments()]
    if fragments != [f.metadata.to_json() for f in other.get_fragments()]:
        return False
    if not one.schema.equals(other.schema, check_metadata=True):
        return False
    return _index_ids(one) == _index_ids(other)


def _index_ids(dataset: Any) -> list[tuple[str, str]]:
    """Each index segment of a version by name and uuid (a `Restore` keeps both)."""
    with warnings.catch_warnings():  # list_indices names each segment's uuid
        warnings.simplefilter("ignore", DeprecationWarning)
        return sorted((str(i["name"]), str(i["uuid"])) for i in dataset.list_indices())


def _published_row(row: dict[str, Any], brought: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Version N's row, sending readers to the version brought to the current schema."""
    if row["object_id"] in brought:
        return {**row, "read_version": brought[row["object_id"]][1]}
    return row


def _changes(
    now: ManifestSnapshot,
    past: ManifestSnapshot,
    brought: dict[str, tuple[int, int]] | None = None,
) -> list[RestoredPartition]:
    """Every partition row (namespace or table) whose published state differs between the
    newest snapshot and the past one (with `brought` versions published instead of N's)."""
    layout = layout_of(now)
    assert layout is not None
    specs = layout.specs
    current = {p.object_id: p for p in partition_rows(now.rows, specs)}
    rows = [_published_row(row, brought or {}) for row in past.rows]
    wanted = {p.object_id: p for p in partition_rows(rows, specs)}
    changes = []
    for object_id in sorted(current.keys() | wanted.keys()):
        mine, theirs = current.get(object_id), wanted.get(object_id)
        if theirs is None:
            action = UNPUBLISHED
        elif mine is None:
            action = REPUBLISHED
        elif _differs(mine.row, theirs.row):
            action = MOVED
        else:
            continue
        shown = theirs or mine
        assert shown is not None
        is_table = shown.row["object_type"] == KIND_TABLE
        changes.append(
            RestoredPartition(
                action,
                object_id,
                shown.row.get("location") or "",
                label_of(shown.spec, shown.row) if is_table else None,
                _ref(mine.row) if mine is not None else None,
                _ref(theirs.row) if theirs is not None else None,
                location_before=mine.row.get("location") if mine is not None else None,
            )
        )
    return changes


def _fields(now: dict[str, Any] | None, past: dict[str, Any]) -> dict[str, Any]:
    """Every column of the row as the past version held it (NULL where it had no column)."""
    wanted = dict.fromkeys(now or {}) | past
    wanted.pop("object_id")
    return wanted


def _differs(now: dict[str, Any], past: dict[str, Any]) -> bool:
    return any(now.get(key) != past.get(key) for key in now.keys() | past.keys())


def _ref(row: dict[str, Any]) -> PublishedRef | None:
    return PublishedRef.of(row) if row["object_type"] == KIND_TABLE else None


def _require_readable(
    ns: Namespace,
    changes: list[RestoredPartition],
    target: int,
    schema: Any,
    definitions: list[IndexDefinition],
) -> None:
    """Every table version the restore publishes opens (and has its rows counted, and the
    index `definitions` it lacks found); so does every one it moves away from, for the rows
    before."""
    for change in changes:
        if change.after is not None:
            try:
                dataset = change.after.open(ns.storage, change.location)
                change.rows_after = version_size(dataset).rows
                change.behind = shape(dataset.schema) != shape(schema)
                if change.after.on_main:
                    change.lacking_indexes = _lacking(dataset, definitions)
                    change.will_make_version = _makes_version(dataset, change)
            except RefusedError as exc:  # a location leading outside the root: never "pruned"
                raise RefusedError(
                    f"__manifest version {target} cannot be restored: it publishes "
                    f"{_named(change)} at a refused location ({exc.message})"
                ) from None
            except LancensError as exc:
                raise TableVersionNotFoundError(
                    f"__manifest version {target} publishes {_named(change)} at "
                    f"{change.after.words()}, which can no longer be read ({exc.message}); "
                    "restore a later version"
                ) from None
        if change.before is not None:
            change.rows_before = _rows(ns, change.before, change.location_before)


def _makes_version(dataset: Any, change: RestoredPartition) -> bool:
    """Whether `_bring` gives the table on main a version of its own: a later version came
    after the one N published (Lance's `Restore` of it first), or that one is of an earlier
    schema generation (the steps to today's schema)."""
    assert change.after is not None
    if change.after.version is None:
        return False  # N published "the latest": read as it is
    return change.behind or dataset.latest_version != change.after.version


def _lacking(dataset: Any, definitions: list[IndexDefinition]) -> list[LackedIndex]:
    """The `definitions` a table version lacks (so does the version a restore makes of it: a
    `Restore` carries its indexes), each with why prune would not build it yet, if so. Tables
    on a tag or a branch are left out: `create index` and prune leave them alone too."""
    if not definitions:
        return []
    try:
        have = {i["name"] for i in index_summaries(dataset)}
    except Exception:  # noqa: BLE001 - indexes Lance cannot list: nothing said, nothing refused
        return []
    return [
        LackedIndex(d.name, too_few_vectors(dataset, d)) for d in definitions if d.name not in have
    ]


def _index_note(changes: list[RestoredPartition]) -> str | None:
    """The words for the index definitions restored tables lack, and what builds them."""
    lacking = [c for c in changes if c.lacking_indexes]
    if not lacking:
        return None
    names = sorted({i.name for c in lacking for i in c.lacking_indexes})
    one = len(names) == 1
    text = (
        f"the namespace's {noun(len(names), 'index', 'indexes')} {', '.join(names)} "
        f"{'is' if one else 'are'} missing on {plural(len(lacking), 'restored partition table')}"
        f" (the versions restored do not have {'it' if one else 'them'}): {INDEX_REMEDY} "
        f"builds and publishes {'it' if one else 'them'}"
    )
    short = [(c, i) for c in lacking for i in c.lacking_indexes if i.too_few]
    if short:
        shown = "; ".join(f"{_label(c)}: {i.name}, {i.too_few}" for c, i in short[:SHOWN_LABELS])
        more = f"; {len(short) - SHOWN_LABELS} more" if len(short) > SHOWN_LABELS else ""
        text += f"; a table with too few rows gets it once it has enough ({shown}{more})"
    return text


def _label(change: RestoredPartition) -> str:
    return change.label.text() if change.label is not None else change.object_id


def _rows(ns: Namespace, ref: PublishedRef, location: str | None) -> int | None:
    if location is None:
        return None
    try:
        size: TableSize = version_size(ref.open(ns.storage, location))
    except LancensError:
        return None  # the rows before are a courtesy; `check` says why a table does not load
    return size.rows


def _with_sizes(
    planned: list[RestoredPartition], done: list[RestoredPartition]
) -> list[RestoredPartition]:
    """The changes committed, with the row counts the plan found for the same tables."""
    known = {(c.object_id, str(c.before)): c for c in planned}
    for change in done:
        seen = known.get((change.object_id, str(change.before)))
        if seen is not None:
            change.rows_before, change.rows_after = seen.rows_before, seen.rows_after
            change.lacking_indexes = seen.lacking_indexes
            change.will_make_version = seen.will_make_version
    return done


def _tables(changes: list[RestoredPartition]) -> list[RestoredPartition]:
    """The changes a user reads: partition tables (their namespaces follow them)."""
    return [c for c in changes if c.label is not None]


def _named(change: RestoredPartition) -> str:
    if change.label is not None:
        return f"partition {change.label.text()} (spec v{change.label.spec_version})"
    return change.object_id


def _manifest_time(ns: Namespace, version: int) -> str | None:
    dataset = ns.manifest.pinned(version).open_dataset()
    return _version_time(dataset, version)


def _version_time(dataset: Any, version: int) -> str | None:
    return next(
        (utc_iso(when) for number, when in version_history(dataset) if number == version), None
    )


def _span(versions: list[int]) -> str:
    if len(versions) == 1:
        return str(versions[0])
    if versions[-1] - versions[0] == len(versions) - 1:
        return f"{versions[0]} to {versions[-1]}"
    return ", ".join(map(str, versions))  # our writer guard's commit left out of the middle


# --------------------------------------------------------------------------- one table


def plan_table_restore(
    ns: Namespace,
    ident: Identifier,
    version: str | int | None,
    timestamp: str | None,
    delimiter: str = ".",
) -> RestorePlan:
    """What restoring one table to a version of its own changes, checked whole, or that there
    is nothing to restore (`holds_rows_of`: the newest version already holds its data)."""
    ns.require_root()
    snapshot = ns.snapshot()
    ref = ns.require_table(ident, snapshot)
    layout = layout_of(snapshot) if snapshot.exists else None
    if layout is not None and any(
        p.object_id == ident.object_id for p in partition_rows([ref.row or {}], layout.specs)
    ):
        raise InvalidInputError(
            f"{ident.display(delimiter)} is a partition table: restore its namespace instead "
            "(lancens restore --to-version N), which restores every partition together"
        )
    dataset = open_table(ns.storage, ref.location)
    target = pick_version(version_history(dataset), version, timestamp, ident.display(delimiter))
    result = RestorePlan(
        ident.display(delimiter), target, _version_time(dataset, target), dataset.version
    )
    result.rows_before = version_size(dataset).rows
    result.rows_after = version_size(dataset.checkout_version(target)).rows
    if target == dataset.version:
        result.nothing_to_restore = True
        result.notes.append(f"version {target} is already the newest: nothing to restore")
    elif holds_rows_of(dataset, dataset.version, target, schema_steps=False):
        result.nothing_to_restore = True
        result.notes.append(
            f"version {dataset.version}, the newest, already holds version {target}'s data "
            "(a restore of it): nothing to restore"
        )
    else:
        result.notes.append("the versions after it stay readable by time travel")
    return result


def restore_table(ns: Namespace, ident: Identifier, planned: RestorePlan) -> RestoreResult:
    """Lance's Restore of the planned version, compare-and-swap on the newest version."""
    ref = ns.require_table(ident, ns.snapshot())
    uri = ns.storage.uri(ref.location)
    if planned.nothing_to_restore:
        return planned.answer(dry_run=False)
    result = planned.outcome()
    result.rows_before, result.rows_after = planned.rows_before, planned.rows_after
    result.status = RESTORED
    seen: dict[str, int] = {}

    def attempt() -> int | None:
        latest = open_table(ns.storage, ref.location).version
        seen["base"] = latest
        done = lance.LanceDataset.commit(
            uri,
            lance.LanceOperation.Restore(planned.restored_to),
            read_version=latest,
            max_retries=0,
            storage_options=ns.storage.lance_options,
            commit_message=f"lancens restore to version {planned.restored_to}",
        )
        return done.version if done.version == latest + 1 else None

    result.new_version = retry_on_conflict(
        attempt,
        failed=lambda exc: InvalidTableStateError(
            f"cannot restore {planned.target}: {lance_message(exc)}"
        ),
        gave_up=f"{planned.target} kept changing; the restore gave up",
    )
    result.restored_over = list(range(planned.planned_on + 1, seen["base"] + 1))
    if result.restored_over:
        result.notes.append(
            f"version(s) {_span(result.restored_over)} landed while the restore was planned "
            "and are restored over too; they stay readable by time travel"
        )
    return result
