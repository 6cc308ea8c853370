"""`evolve-schema`: change the namespace schema and bring every partition table to it.

Order of work, so that a process killed anywhere leaves a state readers can read:

1. every partition table gets a new, unpublished version at the new schema (Lance
   `drop_columns` / `alter_columns` / `add_columns`, metadata-only except a widening cast),
   built on its published `read_version` (later unpublished versions are set aside with a
   `Restore` first, as `write` does);
2. through the `__manifest` compare-and-swap path: the new `schema` (and the old one appended
   to the schema history) in a metadata commit, then every table's new `read_version` in ONE
   row commit. The history lets a reader match a table not yet brought to its generation and
   read it through the new schema by field id (renamed columns by id, missing ones NULL).

A change already in place is a no-op, so a rerun after a kill (or `evolve-schema` with the same
arguments) finishes what is left: a table whose published version is at the current schema is
done, any other is brought again. A partition that a `write` published meanwhile is brought
again from its new version; a `write` that planned under the old schema is refused at its
publish (exit 4) instead of publishing rows in the old shape.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import lance
import pyarrow as pa

from lancens_cli.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    InvalidTableStateError,
    RefusedError,
    lance_message,
)
from lancens_cli.models import Identifier, Result
from lancens_cli.partition.rows import dotted, partition_table_rows
from lancens_cli.partition.schema import (
    GAP_PREFIX,
    field_ids_by_path,
    lance_ids_by_path,
    schema_to_text,
)
from lancens_cli.partition.schema_evolution import (
    HISTORY_KEY,
    Change,
    Evolution,
    TableSteps,
    evolve,
    generation_of,
    history_from_metadata,
    history_text,
    shape,
    table_steps,
)
from lancens_cli.partition.spec import SCHEMA_KEY
from lancens_cli.schema_json import schema_to_json
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import PartitionLayout, layout_of
from lancens_cli.store.catalog_rows import PublishedRef, open_published
from lancens_cli.store.commit import TABLE_COMMIT_ATTEMPTS, retry_on_conflict
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.storage import Storage

WOULD_APPLY = "would apply"  # a dry run's outcome for a change the real run applies
_WORKERS = 4  # partition tables altered at once (Lance commits spend their time in I/O)
_ROUNDS = 20  # publish rounds when partitions changed under us


@dataclass
class Brought:
    """One partition table's new version at the target schema (not published until step 2)."""

    table_id: str
    location: str
    base_version: int | None
    version: int | None = None


@dataclass
class SchemaEvolution(Result):
    """The result of `evolve-schema` (the same for --dry-run and for the real thing)."""

    changes: list[tuple[Change, str]]
    schema: Any
    tables: int = 0  # partition tables brought to the schema (to be, with --dry-run)
    up_to_date: int = 0  # partition tables already at it
    manifest_commits: int = 0
    manifest_version: int = 0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "changes": [{"change": c.text(), "outcome": o} for c, o in self.changes],
            "schema": schema_to_json(self.schema),
            "tables_brought": self.tables,
            "tables_up_to_date": self.up_to_date,
            "manifest_commits": self.manifest_commits,
            "manifest_version": self.manifest_version,
            "dry_run": self.dry_run,
        }


def partition_tables(snapshot: ManifestSnapshot, layout: PartitionLayout) -> list[dict[str, Any]]:
    """The `__manifest` rows of every partition table, of every spec version."""
    return partition_table_rows(snapshot.rows, layout.specs)


def _require_main(row: dict[str, Any]) -> None:
    if not PublishedRef.of(row).on_main:
        name = Identifier.from_object_id(row["object_id"]).display()
        raise RefusedError(
            f"partition table {name} is published by a tag or branch; evolve-schema brings "
            "only tables published by read_version"
        )


def _plan(snapshot: ManifestSnapshot, changes: list[Change]) -> tuple[PartitionLayout, Evolution]:
    layout = layout_of(snapshot)
    if layout is None:
        raise InvalidInputError(
            "the root is not a partitioned namespace: run `lancens add-partition-spec` first"
        )
    history = history_from_metadata(snapshot.metadata)
    return layout, evolve(layout.schema, history, changes, layout.current)


def evolve_schema(
    ns: Namespace, changes: list[Change], *, dry_run: bool = False
) -> SchemaEvolution:
    ns.require_manifest("a partitioned namespace")
    ns.require_root()
    snapshot = ns.snapshot()
    layout, evolution = _plan(snapshot, changes)
    ns.require_writable(snapshot)
    history = history_from_metadata(snapshot.metadata)
    if evolution.changed:
        history = [*history, layout.schema]
    rows = partition_tables(snapshot, layout)
    for row in rows:
        _require_main(row)
    outcomes = evolution.outcomes
    if dry_run:  # what would happen, in the words the real run reports it with
        outcomes = [(c, WOULD_APPLY if o == "applied" else o) for c, o in outcomes]
    result = SchemaEvolution(outcomes, evolution.schema, dry_run=dry_run)
    brought: dict[str, Brought] = {}
    pending = _behind(ns.storage, rows, evolution.schema, brought)
    result.up_to_date = len(rows) - len(pending)
    result.tables = len(pending)
    if dry_run:
        result.manifest_version = snapshot.version
        return result
    texts = (schema_to_text(layout.schema), schema_to_text(evolution.schema))
    for _ in range(_ROUNDS):
        _bring_all(ns.storage, pending, evolution.schema, history, brought)
        try:
            result.manifest_version = _publish(ns, texts, history, brought, result)
            return result
        except _Stale as stale:
            pending = stale.rows
    raise ConcurrentModificationError("partitions kept changing under evolve-schema; gave up")


class _Stale(Exception):
    """Partition tables written or added since they were brought; bring them again."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__(len(rows))
        self.rows = rows


def _behind(
    storage: Storage, rows: list[dict[str, Any]], schema: Any, brought: dict[str, Brought]
) -> list[dict[str, Any]]:
    """The rows whose published table is not at `schema` yet; the others go to `brought`
    as they are (their published version is their version at the schema)."""

    def at_target(row: dict[str, Any]) -> bool:
        return shape(open_published(storage, row).schema) == shape(schema)

    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        done = list(pool.map(at_target, rows))
    for row, ok in zip(rows, done, strict=True):
        if ok:
            version = row.get("read_version")
            brought[row["object_id"]] = Brought(row["object_id"], row["location"], version, version)
    return [row for row, ok in zip(rows, done, strict=True) if not ok]


def _bring_all(
    storage: Storage,
    rows: list[dict[str, Any]],
    schema: Any,
    history: list[Any],
    brought: dict[str, Brought],
) -> None:
    def one(row: dict[str, Any]) -> None:
        _require_main(row)
        job = Brought(row["object_id"], row["location"], row.get("read_version"))
        job.version = bring_table(storage, job, schema, history)
        brought[job.table_id] = job

    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        for _ in pool.map(one, rows):
            pass


def bring_table(storage: Storage, job: Brought, schema: Any, history: list[Any]) -> int:
    """A new version of the table at `schema`, built on its published version.

    Each step is a commit of its own; the steps must land as consecutive versions on top of
    the (restored) published version, else another writer slipped in and the table is
    brought again from the published version.
    """
    uri = storage.uri(job.location)
    options = storage.lance_options

    def attempt() -> int | None:
        dataset = lance.dataset(uri, storage_options=options)
        base = job.base_version if job.base_version is not None else dataset.version
        if dataset.version != base:  # unpublished versions after ours: set them aside
            dataset = lance.LanceDataset.commit(
                uri,
                lance.LanceOperation.Restore(base),
                read_version=dataset.version,
                max_retries=0,
                storage_options=options,
            )
        steps = table_steps(dataset.schema, schema, history)
        if steps.empty:
            return dataset.version
        start = dataset.version
        commits = _apply(dataset, steps, field_ids_by_path(schema))
        return dataset.version if dataset.version == start + commits else None

    return retry_on_conflict(
        attempt,
        also=("retry",),
        failed=lambda exc: InvalidTableStateError(
            f"cannot bring partition table {job.location!r} to the schema: {lance_message(exc)}"
        ),
        gave_up=f"partition table {job.location!r} kept changing; gave up after "
        f"{TABLE_COMMIT_ATTEMPTS} tries",
    )


def _apply(dataset: Any, steps: TableSteps, wanted_ids: dict[str, int]) -> int:
    """Run the steps as Lance commits on `dataset`; how many commits that took."""
    commits = 0
    if steps.drop:
        dataset.drop_columns(steps.drop)
        commits += 1
    if steps.rename:
        commits += _rename(dataset, steps.rename)
    if steps.add:  # before the casts: Lance numbers a rewritten column like a new one
        commits += _add_with_ids(dataset, steps.add, wanted_ids)
    if steps.cast:
        dataset.alter_columns(*({"path": n, "data_type": t} for n, t in steps.cast))
        commits += 1
    return commits


def _add_with_ids(dataset: Any, fields: list[Any], wanted: dict[str, int]) -> int:
    """Add columns with the field ids the namespace schema gives them; the commits it took.

    Lance numbers an added column one past the highest id the table has now, which is lower
    than the namespace's after the highest column was dropped (ids are never reused, spec
    004). Then the columns are added again behind NULL placeholders that take up the missing
    ids, and the placeholders dropped (all metadata-only commits)."""
    dataset.add_columns(fields)
    first = fields[0].name
    short = wanted.get(first, 0) - lance_ids_by_path(dataset.lance_schema)[first]
    if short <= 0:
        return 1
    dataset.drop_columns([f.name for f in fields])
    gaps = [pa.field(f"{GAP_PREFIX}{n}", pa.int8()) for n in range(short)]
    dataset.add_columns(gaps + list(fields))
    dataset.drop_columns([g.name for g in gaps])
    return 4


def _rename(dataset: Any, renames: list[tuple[str, str]]) -> int:
    """Renames in one commit; a swap (a=b, b=a) would collide, so it goes through temp names
    in the same alteration list only when names overlap (Lance applies them in order)."""
    sources = {old for old, _ in renames}
    if not any(new in sources for _, new in renames):
        dataset.alter_columns(*({"path": old, "name": new} for old, new in renames))
        return 1
    temps = [(old, f"__lancens_rename_{i}") for i, (old, _) in enumerate(renames)]
    dataset.alter_columns(*({"path": old, "name": tmp} for old, tmp in temps))
    dataset.alter_columns(
        *({"path": tmp, "name": new} for (_, tmp), (_, new) in zip(temps, renames, strict=True))
    )
    return 2


def _publish(
    ns: Namespace,
    texts: tuple[str, str],
    history: list[Any],
    brought: dict[str, Brought],
    result: SchemaEvolution,
) -> int:
    """The schema (metadata commit) and every brought table's read_version (one row commit).

    `texts` are the schema evolved from and the target; any other schema found means another
    evolution got in between (exit 4, rerun).
    """
    _, target_text = texts

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> int:
        layout = layout_of(snapshot)
        if layout is None:
            raise InvalidInputError("the root stopped being a partitioned namespace")
        current = schema_to_text(layout.schema)
        if current not in texts:
            raise ConcurrentModificationError(
                "the namespace schema was changed by someone else meanwhile; rerun"
            )
        stale = []
        for row in partition_tables(snapshot, layout):
            job = brought.get(row["object_id"])
            if job is None or job.location != row["location"]:
                stale.append(row)  # new since we looked, or moved: bring it
            elif (
                row.get("read_version") != job.base_version
                and row.get("read_version") != job.version
            ):
                stale.append(row)
        if stale:
            raise _Stale(stale)
        if current != target_text:
            edit.set_metadata({SCHEMA_KEY: target_text, HISTORY_KEY: history_text(history)})
            return snapshot.version + 1
        for job in brought.values():
            held = snapshot.get(job.table_id)
            if held is not None and held.get("read_version") != job.version:
                edit.replace(job.table_id, read_version=job.version)
        return snapshot.version + (0 if edit.is_empty else 1)

    before = ns.snapshot().version
    version = ns.manifest.mutate(plan)
    after = ns.snapshot().version
    result.manifest_commits += max(after - before, 0)
    return version


def _check_field_ids(
    row: dict[str, Any], ids: dict[str, int], ever: dict[int, str], widened: set[int], report: Any
) -> None:
    """Spec 004, Namespace Schema: field ids are never reused and the same in every partition
    table. Reported: a column whose Lance field id is one the namespace gave another column
    (now or in an earlier generation), so that a reader matching columns by field id reads
    that other column's data. Readers matching by name (lancens, pylance, lancedb) are right.

    A column `evolve-schema --widen` rewrote is left out: Lance's cast gives the rewritten
    column a new id, which its public API cannot choose (docs/partitioning.md)."""
    wanted = {path: fid for fid, path in ever.items() if path in ids}
    reused = sorted(
        path
        for path, fid in ids.items()
        if fid in ever and path in wanted and wanted[path] != fid and wanted[path] not in widened
    )
    if not reused:
        return
    shown = ", ".join(
        f"{p} has id {ids[p]}, which the namespace gave {ever[ids[p]]}" for p in reused[:5]
    )
    report.add(
        "partition_field_ids_differ",
        dotted(row["object_id"]),
        row["location"],
        f"field ids are reused ({shown}): a reader matching columns by field id reads the "
        "wrong column. Rewrite its rows: `lancens scan --to DIR` (a read without --where), "
        "then `add-partition-spec` and `write` them into a new root",
    )


def widened_ids(schema: Any, history: list[Any]) -> set[int]:
    """Field ids whose type differs in some earlier generation of the namespace schema."""
    now = field_types_by_id(schema)
    return {
        i
        for old in history
        for i, kind in field_types_by_id(old).items()
        if now.get(i, kind) != kind
    }


def field_types_by_id(schema: Any) -> dict[int, Any]:
    ids = field_ids_by_path(schema)
    return {ids[f.name]: f.type for f in schema if f.name in ids}


@dataclass(frozen=True)
class TableSchema:
    """A published partition table's Arrow schema and the field ids Lance gave it, by path."""

    row: dict[str, Any]
    schema: Any
    ids: dict[str, int]


# whether a row's published schema and Lance field ids are known already, and they (None: that
# version does not open): what one look at every table found (service/table_looks.py)
SchemaKnown = Callable[[dict[str, Any]], tuple[bool, tuple[Any, dict[str, int]] | None]]


def published_table_schemas(
    storage: Storage,
    snapshot: ManifestSnapshot,
    layout: PartitionLayout,
    known: SchemaKnown | None = None,
) -> list[TableSchema]:
    """Every published partition table's schema (`check` reads each table once for all its
    schema checks). A refused row is `bad_location`, reported from the row alone
    (store/containment.py); a table that cannot be read, by the table checks. `known(row)`:
    whether the schema and field ids of a row's published version are known already, and
    they (None: it does not open)."""
    verdicts = row_locations(storage, snapshot)
    rows = [r for r in partition_tables(snapshot, layout) if not verdicts.problem(r["object_id"])]

    def table_schema(row: dict[str, Any]) -> TableSchema | None:
        if known is not None:
            found, kept = known(row)
            if found:
                return None if kept is None else TableSchema(row, kept[0], kept[1])
        try:
            dataset = open_published(storage, row)
        except InvalidTableStateError:
            return None
        return TableSchema(row, dataset.schema, lance_ids_by_path(dataset.lance_schema))

    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        return [found for found in pool.map(table_schema, rows) if found is not None]


def check_table_schemas(
    snapshot: ManifestSnapshot,
    layout: PartitionLayout,
    tables: list[TableSchema],
    report: Any,
    *,
    compare_ids: bool = True,
) -> None:
    """`check`: a published partition table whose columns are not the namespace schema's.

    A table of an earlier generation (an evolution killed before its publish) is still read
    through the schema; one of no generation was changed by another tool. `compare_ids` off:
    the namespace schema itself is numbered unlike Lance (`field_numbering.py` says so once).
    """
    history = history_from_metadata(snapshot.metadata)
    ever: dict[int, str] = {}
    for generation in [*history, layout.schema]:  # the current names last: they win
        ever |= {fid: path for path, fid in field_ids_by_path(generation).items()}
    widened = widened_ids(layout.schema, history)
    for table in tables:
        row, schema = table.row, table.schema
        if shape(schema) == shape(layout.schema):
            if compare_ids:
                _check_field_ids(row, table.ids, ever, widened, report)
            continue
        known = generation_of(schema, layout.schema, history) is not None
        columns = ", ".join(f"{n} {t}" for n, t in shape(schema))
        report.add(
            "partition_schema_behind" if known else "partition_schema_differs",
            dotted(row["object_id"]),
            row["location"],
            f"partition table columns ({columns}) are not the namespace schema's; "
            + (
                "an earlier generation: `lancens evolve-schema` (no options) brings it"
                if known
                else "changed outside lancens: readers match its columns by name"
            ),
        )
