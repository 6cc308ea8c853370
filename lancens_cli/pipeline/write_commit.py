"""Writes through the `lancens` data source: `df.write.format("lancens")...save()`.

`save()` with no identifier writes into the partitioned namespace at the root; `save("ns.t")`
writes a plain table (created when missing, else appended to or overwritten). The writer is
made on the driver from one `__manifest` snapshot, its tasks write fragments
(`write_task.py`), and `commit()` on the driver commits them through the same path
`lancens write` takes (`service.partitioned.write.commit_touches`): each partition table's
commit, then one `__manifest` commit. `mode("overwrite")` replaces the contents of the
partitions the job touches only. A failed or aborted job publishes nothing and removes the
files its tasks wrote; a killed driver publishes nothing (`check --fix` removes its debris).

Options beyond the data source's own: `report` (a local path: `commit()` writes what it
committed there as JSON, for `lancens ingest`), `branch` (partitioned writes only: the rows
go to that branch of each partition table, `service.partitioned.branch`),
`allowMissingColumns` (a DataFrame lacking a column the current spec partitions by is refused
unless it is `true`, as `write` refuses such input).

Lance and the service and store modules that load it are imported inside the driver's functions
(planning, commit, abort): a task unpickles the writer in its Python worker and loads Lance only in
`write_task.py`, after the worker forked.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.types as t
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_schema

from lancens_cli.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    InvalidTableStateError,
    TableAlreadyExistsError,
    TableNotFoundError,
    lance_message,
)
from lancens_cli.partition.casts import refused_cast, scalar_kind
from lancens_cli.partition.rows import partition_table_rows
from lancens_cli.pipeline.source_options import SourceOptions
from lancens_cli.pipeline.task_failures import carried
from lancens_cli.pipeline.write_task import (
    JOBS_DIR,
    WritePlan,
    aborted_marker,
    data_root,
    decode_value,
    delete_written,
    forget_job_log,
    job_log_dir,
    job_logged_entries,
    run_task,
)
from lancens_cli.store.commit_record import CommitOrigin, committing_as
from lancens_cli.store.row_verdicts import row_locations

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from lancens_cli.models import Identifier
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.store.manifest import ManifestSnapshot
    from lancens_cli.store.storage import Storage

# `origin`: the command a write belongs to (`ingest`), for the record its commit leaves
WRITE_OPTIONS = frozenset(("report", "branch", "origin", "allowmissingcolumns"))


@dataclass
class LancensCommitMessage(WriterCommitMessage):
    """One task's written fragments, as JSON text (it must pickle)."""

    payload: str


class LancensWriter(DataSourceArrowWriter):
    """Tasks write fragments, the driver commits them in one `__manifest` commit."""

    def __init__(self, opts: SourceOptions, schema: Any, overwrite: bool) -> None:
        self.opts = opts
        self.overwrite = overwrite
        try:
            self.plan = _plan(opts, schema, overwrite)
        except Exception as exc:
            raise carried(exc) from None

    def write(self, iterator: Any) -> LancensCommitMessage:
        return LancensCommitMessage(run_task(self.plan, iterator))

    def commit(self, messages: list[Any]) -> None:
        def publish(entries: list[dict[str, Any]]) -> dict[str, Any]:
            if self.plan.spec is None:
                return _commit_plain(self.opts, self.plan, entries)
            return _commit_partitioned(self.opts, self.plan, entries)

        report = self.publish(messages, publish)
        path = self.opts.extra.get("report")
        if path:
            try:
                with open(path, "w", encoding="utf-8") as handle:
                    json.dump(report, handle)
            except OSError:
                pass  # committed all the same; only the summary is lost

    def publish(self, messages: list[Any], publish: Callable[[list[dict[str, Any]]], Any]) -> Any:
        """What the tasks wrote, committed by `publish(entries)` (the data source's commit, or
        a merge's); when that fails, every file the job wrote is removed. What it returns."""
        entries = _entries(messages)
        try:
            with committing_as(self._origin()):
                report = publish(entries)
        except BaseException as exc:
            _clean_up(self.plan, entries)
            raise carried(exc) from None
        _forget_job(self.plan)
        return report

    def _origin(self) -> CommitOrigin:
        """What the commit records: the command that started the job (Spark commits in a
        process of its own, so the command hands itself over as an option), or a Spark job's
        own write."""
        given = self.opts.extra.get("origin")
        if given:
            document = json.loads(given)
            return CommitOrigin(document["operation"], document.get("options", {}))
        mode = "overwrite" if self.plan.overwrite else "append"
        return CommitOrigin("spark write", {"mode": mode})

    def abort(self, messages: list[Any]) -> None:
        from lancens_cli.service.namespace import Namespace

        storage = Namespace.from_properties(self.plan.root_properties).storage
        storage.write_text(aborted_marker(self.plan.job_id), "aborted")
        _clean_up(self.plan, _entries(messages))
        _sweep_stragglers(self.plan)


def _entries(messages: list[Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for message in messages or []:
        if isinstance(message, LancensCommitMessage):
            found += json.loads(message.payload)
    return found


# --- planning (driver, when the writer is made) ----------------------------------------------


def _plan(opts: SourceOptions, spark_schema: StructType, overwrite: bool) -> WritePlan:

    from lancens_cli.service.partitioned.branch import check_ref_name

    ns = opts.namespace()
    job_id = secrets.token_hex(16)
    ident = opts.ident()
    branch = check_ref_name(opts.extra.get("branch"), "the branch option")
    if ident is None:
        from lancens_cli.service.partitioned.placement import LevelIndex
        from lancens_cli.service.partitioned.write import partitioned_target

        snapshot, layout = partitioned_target(ns)
        check_columns(spark_schema, layout.schema)
        spec = layout.current
        _require_partition_sources(opts, spark_schema, layout.schema, spec)
        verdicts = row_locations(ns.storage, snapshot)
        tables = {}
        for row in partition_table_rows(snapshot.rows, [spec]):
            # a refused location is never handed to a task: its rows go to a new directory of
            # the job, and the commit then refuses the partition (nothing written outside)
            if verdicts.problem(row["object_id"]) is None:
                tables[row["object_id"]] = row["location"]
        children = LevelIndex(snapshot, spec).children
        return WritePlan(
            opts.properties(),
            job_id,
            layout.schema,
            spec,
            children,
            tables,
            None,
            overwrite,
            branch=branch,
        )
    if branch is not None:
        raise InvalidInputError("a branch write goes into the partitioned root, not a table")
    return _plan_plain(opts, ns, ident, spark_schema, job_id, overwrite)


def _require_partition_sources(
    opts: SourceOptions, spark_schema: StructType, schema: Any, spec: Any
) -> None:
    """A DataFrame lacking a column the current spec partitions by is refused, as `write` and
    `ingest` refuse such input, unless the `allowMissingColumns` option says to fill it with
    NULL (every row would land in the partition of NULL)."""
    from lancens_cli.service.partitioned.input_rows import require_partition_sources

    if opts.flag("allowmissingcolumns", "allowMissingColumns"):
        return
    given = set(spark_schema.fieldNames())
    lacking = [f.name for f in schema if f.name not in given]
    require_partition_sources(lacking, spec, schema, ".option('allowMissingColumns', 'true')")


def _plan_plain(
    opts: SourceOptions,
    ns: Namespace,
    ident: Identifier,
    spark_schema: StructType,
    job_id: str,
    overwrite: bool,
) -> WritePlan:
    from lancens_cli.service.catalog.create import new_table_location
    from lancens_cli.store.tables import is_v2_location, open_table

    ns.require_root()
    snapshot = ns.snapshot()
    refuse_partition_table(snapshot, ident)
    ref = ns.find_table(ident, snapshot)
    if ref is not None:
        dataset = open_table(ns.storage, ref.location)
        check_columns(spark_schema, dataset.schema)
        return WritePlan(
            opts.properties(), job_id, dataset.schema, location=ref.location, overwrite=overwrite
        )
    if ident.is_root:
        raise InvalidInputError("a table needs a name")
    ns.require_namespace(ident.parent, snapshot)
    if len(ident.parts) > 1:
        ns.require_manifest("a table in a child namespace")
    ns.require_writable(snapshot)
    location = new_table_location(ns, ident, snapshot)
    if is_v2_location(location):
        location = f"{job_id[:8]}_{ident.object_id}"
    return WritePlan(
        opts.properties(), job_id, arrow_schema(spark_schema), location=location, create=True
    )


def refuse_partition_table(snapshot: ManifestSnapshot, ident: Identifier) -> None:
    """A table below a spec-version namespace is a partition: its rows go in through the
    partitioned write (`save()` with no identifier), which keeps them in their partition."""
    from lancens_cli.service.partitioned.layout import layout_of

    layout = layout_of(snapshot) if snapshot.exists else None
    if layout is None or ident.is_root:
        return
    if ident.parts[0] in {spec.namespace for spec in layout.specs}:
        raise InvalidInputError(
            f"{ident.display()} is inside the partitioned namespace's {ident.parts[0]}: write "
            "into the root (no identifier), and the rows go to their partitions"
        )


def arrow_schema(spark_schema: StructType) -> Any:
    """The Arrow schema Spark hands the writer for rows of this Spark schema."""
    return to_arrow_schema(spark_schema, timezone="UTC")


def check_columns(spark_schema: StructType, target: Any) -> None:
    """Refuse, before any task runs, input the target cannot take (unknown or missing
    non-nullable columns, types of another kind)."""
    check_arrow_columns(arrow_schema(spark_schema), target)


def check_arrow_columns(columns: Any, target: Any) -> None:
    """`check_columns` of input columns given as an Arrow schema: `ingest` checks the columns
    it knows before Spark starts (footers, CSV headers)."""
    names = set(target.names)
    given = {f.name: f for f in columns}
    unknown = [n for n in given if n not in names]
    if unknown:
        raise InvalidInputError(f"the input has columns the target schema has not: {unknown}")
    for f in target:
        if f.name not in given:
            if not f.nullable:
                raise InvalidInputError(f"the input lacks the non-nullable column {f.name!r}")
            continue
        have = given[f.name].type
        if _kind(have) != _kind(f.type) and not _casts(have, f.type):
            raise InvalidInputError(f"column {f.name!r} is {have}, the target has {f.type}")


def _casts(have: Any, want: Any) -> bool:
    """A scalar column of another kind that the write's cast takes value by value, as a write in
    this process takes it (`conform`, by the one rule of `partition/casts.py`): integers into a
    double, dates written as text. A value the cast cannot keep exactly fails its task in one
    line, and nothing is published."""
    return (
        scalar_kind(have) is not None
        and scalar_kind(want) is not None
        and not refused_cast(have, want)
    )


def _kind(arrow_type: Any) -> str:
    """What a column's values are, as far as the write tells types apart: an input column goes
    into a target column of the same kind, cast by `conform`. Lists of every layout are one
    kind (Spark has only `array`; a fixed-size list, a vector, arrives as one), compared by
    their values' kind; structs by their fields."""
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return f"list<{_kind(arrow_type.value_type)}>"
    if t.is_struct(arrow_type):
        return f"struct<{', '.join(f'{f.name}: {_kind(f.type)}' for f in arrow_type)}>"
    return scalar_kind(arrow_type) or str(arrow_type)


# --- commits (driver) --------------------------------------------------------------------------


def _commit_partitioned(
    opts: SourceOptions, plan: WritePlan, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    from lancens_cli.service.partitioned.write import (
        PartitionWrite,
        commit_touches,
        partitioned_target,
    )

    ns = opts.namespace()
    snapshot, layout = partitioned_target(ns)
    touches, fresh = written_touches(plan, entries, snapshot, layout)
    spec = layout.current
    rows = sum(t.num_rows for t in touches)
    result = PartitionWrite(spec.id, rows, touches, [f.field_id for f in spec.fields])
    commit_touches(ns, snapshot, layout, result, fresh)
    return {
        "target": "partitioned",
        "mode": "overwrite" if plan.overwrite else "append",
        **result.to_json(),
    }


def written_touches(
    plan: WritePlan, entries: list[dict[str, Any]], snapshot: ManifestSnapshot, layout: Any
) -> tuple[list[Any], dict[tuple[str, Any], str]]:
    """The partitions the tasks wrote (`entries`), one touch each holding its fragments, and
    the new partition namespaces they chose (by parent and value key); refused when a spec
    was added since the rows were split."""
    from lance.fragment import FragmentMetadata

    from lancens_cli.partition.schema_evolution import highest_id, history_from_metadata
    from lancens_cli.service.partitioned.placement import PartitionTouch, value_key

    spec = layout.current
    if spec.id != plan.spec.id:
        raise ConcurrentModificationError(
            f"partition spec v{spec.id} was added during the job (its rows were split by "
            f"v{plan.spec.id}); nothing was published: run the job again"
        )
    merged: dict[str, dict[str, Any]] = {}
    for entry in entries:
        found = merged.setdefault(entry["table_id"], {**entry, "fragments": [], "rows": 0})
        found["fragments"] += entry["fragments"]
        found["rows"] += entry["rows"]
    highest = highest_id(layout.schema, history_from_metadata(snapshot.metadata))
    touches = []
    fresh: dict[tuple[str, Any], str] = {}
    for entry in merged.values():
        values = tuple(decode_value(v) for v in entry["values"])
        touch = PartitionTouch(
            values,
            None,
            path=list(entry["path"]),
            table_id=entry["table_id"],
            location=entry["location"],
            created=entry["created"],
            fragments=[FragmentMetadata.from_json(json.dumps(f)) for f in entry["fragments"]],
            num_rows=entry["rows"],
            overwrite=plan.overwrite,
            schema=layout.schema,
            branch=plan.branch,
            highest_field_id=highest,
        )
        if touch.created:
            parent = spec.namespace
            for value, object_id in zip(values, touch.path, strict=True):
                if object_id not in snapshot:
                    fresh[(parent, value_key(value))] = object_id
                parent = object_id
        touches.append(touch)
    return touches, fresh


def _commit_plain(
    opts: SourceOptions, plan: WritePlan, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    import lance
    from lance.fragment import FragmentMetadata

    from lancens_cli.service.catalog.create import register_new_table
    from lancens_cli.store.partition_tables import commit_new_table

    ns = opts.namespace()
    ident = opts.ident()
    fragments = [FragmentMetadata.from_json(json.dumps(f)) for e in entries for f in e["fragments"]]
    rows = sum(e["rows"] for e in entries)
    snapshot = ns.snapshot()
    ref = ns.find_table(ident, snapshot)
    report: dict[str, Any] = {
        "target": "table",
        "table": ident.display(opts.delimiter),
        "location": plan.location,
        "rows": rows,
    }
    if plan.create:
        from lancens_cli.store.tables import VERSIONS_DIR, v1_location

        if ref is not None and ns.storage.exists(f"{ref.location}/{VERSIONS_DIR}"):
            raise TableAlreadyExistsError(f"table {ident.display()} was created during the job")
        dataset = commit_new_table(ns.storage, plan.location, fragments, plan.schema)
        shared = plan.location == v1_location(ident.name)
        register_new_table(ns, ident, plan.location, exclusive=not shared, written=dataset)
        report.update(mode="create", version=dataset.version, created=True)
        return report
    if ref is None or ref.location != plan.location:
        raise TableNotFoundError(f"table {ident.display()} was dropped or moved during the job")
    uri = ns.storage.uri(plan.location)
    operation = (
        lance.LanceOperation.Overwrite(plan.schema, fragments)
        if plan.overwrite
        else lance.LanceOperation.Append(fragments)
    )
    try:
        latest = lance.dataset(uri, storage_options=ns.storage.lance_options).version
        dataset = lance.LanceDataset.commit(
            uri, operation, read_version=latest, storage_options=ns.storage.lance_options
        )
    except (ValueError, OSError, RuntimeError) as exc:
        raise InvalidTableStateError(
            f"cannot commit to table {ident.display()}: {lance_message(exc)}"
        ) from None
    report.update(
        mode="overwrite" if plan.overwrite else "append", version=dataset.version, created=False
    )
    return report


def _clean_up(plan: WritePlan, entries: list[dict[str, Any]]) -> None:
    """Remove what the job's tasks wrote: their data files, and the job's new table
    directories that nothing published."""
    from lancens_cli.service.namespace import Namespace

    ns = Namespace.from_properties(plan.root_properties)
    storage = ns.storage
    try:
        published = set(ns.snapshot().locations()) if ns.config.manifest_enabled else set()
    except Exception:
        published = None  # cannot tell what is published: leave the directories be
    # what the tasks that reported wrote, and what the job's log names (tasks that did not)
    delete_written(
        storage, _unreferenced(storage, entries + job_logged_entries(storage, plan.job_id))
    )
    forget_job_log(storage, plan.job_id)
    if published is None:
        return
    keep = published
    shared = plan.create and plan.location and plan.location not in keep
    if shared and not any(True for _ in storage.walk_files(plan.location)):
        storage.delete_tree(plan.location)  # the `<name>.lance` our tasks started, now empty
    for entry in storage.list_dir():
        if entry.is_dir and entry.name.startswith(plan.prefix + "_") and entry.name not in keep:
            storage.delete_tree(entry.name)


STRAGGLER_QUIET_SECONDS = 3.0  # no new file of the job for this long: its tasks are gone
STRAGGLER_MAX_SECONDS = 60.0


def _sweep_stragglers(plan: WritePlan) -> None:
    """Spark calls `abort()` without waiting for the tasks it cancels; a task still writing
    sees the aborted marker after its next file and removes it, and this sweeps again until
    nothing of the job has appeared for a while. Then the marker goes too."""

    from lancens_cli.service.namespace import Namespace

    storage = Namespace.from_properties(plan.root_properties).storage

    def traces() -> set[str]:
        found = {e.name for e in storage.list_dir(job_log_dir(plan.job_id))}
        found |= {e.name for e in storage.list_dir() if e.name.startswith(plan.prefix + "_")}
        return found

    started = quiet_since = time.monotonic()
    seen = traces()
    while time.monotonic() - quiet_since < STRAGGLER_QUIET_SECONDS:
        if time.monotonic() - started > STRAGGLER_MAX_SECONDS:
            break
        time.sleep(0.25)
        now = traces()
        if now != seen:
            _clean_up(plan, [])
            seen, quiet_since = traces(), time.monotonic()
    if seen:
        _clean_up(plan, [])
    storage.delete_file(aborted_marker(plan.job_id))
    storage.remove_empty_dir(JOBS_DIR)


def _forget_job(plan: WritePlan) -> None:
    """After the commit: the files of task attempts that did not report (retried, killed)
    are in no version; remove them (what the commit references is tracked, so kept), then
    the job's log."""
    from lancens_cli.service.namespace import Namespace

    storage = Namespace.from_properties(plan.root_properties).storage
    try:
        delete_written(storage, _unreferenced(storage, job_logged_entries(storage, plan.job_id)))
        forget_job_log(storage, plan.job_id)
    except Exception:  # noqa: BLE001 - committed all the same; `check --fix` finds the rest
        return


def _unreferenced(storage: Storage, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries' fragments that no version of their table references.

    A commit that failed half-way (Spark then also calls `abort()`) may have committed some
    partition tables already: those versions are unpublished, and the next write sets them
    aside, but their files stay, so that every version of the table remains readable.
    """
    from lancens_cli.store.tables import VERSIONS_DIR, open_table

    tracked: dict[str, set[str]] = {}
    kept = []
    for entry in entries:
        location, branch = entry["location"], entry.get("branch")
        key = data_root(entry)
        if key not in tracked:
            tracked[key] = set()
            if storage.exists(f"{location}/{VERSIONS_DIR}"):
                try:
                    dataset = open_table(storage, location)
                    if branch is not None and branch in dataset.branches.list():
                        dataset = dataset.checkout_version((branch, None))
                    elif branch is not None:
                        dataset = None  # no branch yet: nothing references its files
                    if dataset is not None:
                        files = dataset.tracked_files().read_all()
                        tracked[key] = set(files.column("path").to_pylist())
                except Exception:
                    tracked[key] = {"*"}  # unreadable: delete nothing of it
        if "*" in tracked[key]:
            continue
        fragments = [
            f
            for f in entry.get("fragments", [])
            if not any(f"data/{d['path']}" in tracked[key] for d in f.get("files", []))
        ]
        kept.append({**entry, "fragments": fragments})
    return kept
