"""`lancens merge` on Spark: a source too large for one process upserted by tasks, one commit.

The source is read as `ingest` reads one (files, directories, globs, `s3://`, `gs://`; Parquet
and ORC by pyarrow in the tasks, CSV too, JSON by Spark's reader). Only its key columns come to
the driver: they are checked for a key given twice and matched against every partition table's
keys by the same plan the in-process merge makes (`service/partitioned/merge.py`), which also
finds the rows to delete. The tasks then write the source rows the merge keeps (`KeyChoice`:
matched ones to update, unmatched ones to insert), routed by the current spec, with the writer
of the `lancens` data source; the driver publishes their fragments and the deletes in one
`__manifest` commit (`update.Replacement`), so a table that loses and gains rows gets one Lance
`Update`. A failed job, or a failed commit, removes every file the tasks wrote.

pyspark, pyarrow and Lance are imported inside functions: `lancens --help` imports none of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lancens_cli import interrupt
from lancens_cli.errors import InvalidInputError
from lancens_cli.pipeline.spark_session import require_pyspark
from lancens_cli.pipeline.task_failures import spark_errors
from lancens_cli.store.commit_record import current_origin

if TYPE_CHECKING:
    import pyarrow as pa

    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.merge import MergePlan, PartitionMerge, Unmatched

FORMATS = {"parquet": "parquet", "csv": "csv", "jsonl": "json", "json": "json", "orc": "orc"}


@dataclass(frozen=True)
class KeyChoice:
    """Which source rows the merge writes, told apart in the tasks by their keys (pickled to
    them): the keys that matched, and whether matched and unmatched rows are written."""

    keys: list[str]
    key_schema: Any  # the keys' namespace types
    matched: Any  # the matched keys, a pyarrow Table in those types
    write_matched: bool
    write_unmatched: bool

    def rows(self, batches: Iterator[Any]) -> Iterator[Any]:
        """The batches, less the rows the merge leaves out."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from lancens_cli.service.partitioned.merge import matched_mask

        if not (self.write_matched or self.write_unmatched):
            return
        for batch in batches:
            if self.write_matched and self.write_unmatched:
                yield batch
                continue
            rows = key_table(pa.Table.from_batches([batch]), self.keys, self.key_schema)
            hit = matched_mask(rows, self.matched, self.keys)
            yield batch.filter(hit if self.write_matched else pc.invert(hit))


def key_table(table: pa.Table, keys: list[str], key_schema: Any) -> pa.Table:
    """The key columns of some rows in their namespace types."""
    from lancens_cli.service.partitioned.input_rows import conform

    return conform(table.select(keys), key_schema)


@dataclass(frozen=True)
class SparkMerge:
    """A merge's source and choices, checked before Spark starts."""

    sources: list[str]
    fmt: str | None
    on: list[str]
    when_matched: str = "update"
    when_not_matched: str = "insert"
    unmatched: Unmatched | None = None
    dry_run: bool = False
    debug: bool = False


def merge_on_spark(
    spark_factory: Callable[[], Any],
    ns: Namespace,
    asked: SparkMerge,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> PartitionMerge:
    """The merge with Spark reading and writing the source rows; everything that can be
    refused without Spark (keys, choices, the condition, sources, every file's columns) is
    refused before `spark_factory()` starts it, and the keys are matched against what the
    namespace publishes once it has started."""
    from lancens_cli.pipeline.ingest import arrow_native_struct, quiet_job, resolve_sources
    from lancens_cli.service.partitioned.merge import plan_merge, require_unique
    from lancens_cli.service.partitioned.write import partitioned_target

    _, layout = partitioned_target(ns)
    _choices(asked, layout.schema)
    storage = dict(ns.config.storage_options)
    sources = resolve_sources(asked.sources, _spark_format(asked.fmt), storage)
    require_pyspark()
    struct = arrow_native_struct(sources, storage)
    _require_columns(sources, storage, layout.schema, struct)
    spark = spark_factory()
    with spark_errors("the merge"), quiet_job(spark, asked.debug):
        snapshot, layout = partitioned_target(ns)  # a write landing while Spark started counts
        keys, gone = _choices(asked, layout.schema)
        rows = _SourceRows(spark, sources, storage, layout.schema, struct)
        source_keys = rows.keys(keys)
        require_unique(source_keys, keys)
        plan = plan_merge(ns, snapshot, layout, source_keys, asked.when_matched, gone)
        written = int(plan.chosen(source_keys, asked.when_not_matched).true_count)
        result = plan.result(written, asked.dry_run)
        choice = KeyChoice(
            keys,
            source_keys.schema,
            plan.matched.cast(source_keys.schema) if plan.matched.num_rows else source_keys[:0],
            asked.when_matched == "update",
            asked.when_not_matched == "insert",
        )
        tasks = rows if written else None  # no row to write: no job
        if asked.dry_run:
            result.partitions = _planned_entries(tasks, choice, plan, layout)
        elif written or plan.deletes:
            done = _write_and_commit(ns, tasks, choice, plan, layout, progress)
            result.manifest_version, result.partitions = done
    return result


def _choices(asked: SparkMerge, schema: Any) -> tuple[list[str], Any]:
    """The key columns and the condition on the rows the source lacks, checked (exit 2)."""
    from lancens_cli.service.partitioned.merge import merge_keys

    keys = merge_keys(asked.on, schema, asked.when_matched, asked.when_not_matched)
    gone = asked.unmatched.node(schema) if asked.unmatched is not None else False
    return keys, gone


def _require_columns(sources: Any, storage: dict[str, str], schema: Any, struct: Any) -> None:
    """Every source file must hold every namespace column (a matched row would lose its
    values), in types of the kind the namespace's are (the first file's, or Spark's columns
    once it reads them): one footer or header line a file. JSON lines are left to Spark (a key
    a line lacks is a NULL there, as in this process)."""
    from lancens_cli.pipeline.ingest import known_columns

    known = known_columns(sources, schema, struct, storage)
    if known is not None:
        _require_every_column(known, schema)
    for path in sources.paths:
        names = _file_columns(sources, storage, path)
        lacking = [f.name for f in schema if names is not None and f.name not in names]
        if lacking:
            raise InvalidInputError(
                f"merge: the input lacks {', '.join(lacking)} (in {path}): a matched row would "
                "lose its values (give every namespace column)"
            )


def _file_columns(sources: Any, storage: dict[str, str], path: str) -> list[str] | None:
    """The column names one source file holds (None: not told before Spark reads it)."""
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    from lancens_cli.pipeline.files_source import open_source
    from lancens_cli.pipeline.ingest import csv_header

    if sources.fmt == "json":
        return None
    try:
        if sources.fmt == "csv":  # the header `ingest`'s checks read (once a command)
            return csv_header(sources, storage, path) or None  # an empty file holds no rows
        with open_source(sources.base, storage, path) as handle:
            if sources.fmt == "parquet":
                return list(pq.read_schema(handle).names)
            return list(orc.ORCFile(handle).schema.names)
    except Exception:  # noqa: BLE001 - not readable as such: Spark's reader says so in its words
        return None


def _spark_format(fmt: str | None) -> str | None:
    """`--format` as Spark reads it (jsonl: json lines); Arrow and Lance sources are merged in
    this process only."""
    if fmt is None:
        return None
    if fmt not in FORMATS:
        raise InvalidInputError(
            f"--format {fmt!r}: a merge on Spark reads parquet, csv, jsonl or orc (an Arrow or "
            "Lance source is merged in this process: --engine local)"
        )
    return FORMATS[fmt]


def _require_every_column(columns: Any, schema: Any) -> None:
    """The source must hold every namespace column (a matched row would lose its values) and
    nothing the namespace lacks, in types of the same kind."""
    from lancens_cli.pipeline.write_commit import check_arrow_columns
    from lancens_cli.service.partitioned.input_rows import lacking_columns

    lacking = lacking_columns(columns.empty_table(), schema)
    if lacking:
        raise InvalidInputError(
            f"merge: the input lacks {', '.join(lacking)}: a matched row would lose its "
            "values (give every namespace column)"
        )
    check_arrow_columns(columns, schema)


class _SourceRows:
    """The source as the tasks read it: Parquet and ORC row groups read by pyarrow (no row
    through the JVM), anything else a DataFrame of Spark's readers."""

    def __init__(
        self, spark: Any, sources: Any, storage: dict[str, str], schema: Any, struct: Any
    ) -> None:
        from lancens_cli.pipeline.arrow_ingest import RowGroupFiles
        from lancens_cli.pipeline.ingest import source_frame
        from lancens_cli.pipeline.write_commit import arrow_schema

        self.spark, self.sources, self.storage, self.struct = spark, sources, storage, struct
        self.schema = schema
        self.files = self.frame = None
        if struct is not None:
            self.files = RowGroupFiles(
                sources.paths, sources.fmt, sources.base, storage, arrow_schema(struct)
            )
            self.units = self.files.units()
        else:
            self.frame = source_frame(spark, sources, schema, storage)
            self.struct = self.frame.schema
            _require_every_column(arrow_schema(self.struct), schema)

    def keys(self, keys: list[str]) -> pa.Table:
        """The source's key columns, in the namespace's types."""
        import pyarrow as pa

        if self.frame is not None:
            table = self.frame.select(*keys).toArrow()
        else:
            assert self.files is not None
            parts = [self._file_keys(path, keys) for path in self.sources.paths]
            table = pa.concat_tables(parts) if parts else self.files.target.empty_table()
        return key_table(table, keys, pa.schema([self.schema.field(k) for k in keys]))

    def _file_keys(self, path: str, keys: list[str]) -> pa.Table:
        import pyarrow as pa
        import pyarrow.orc as orc
        import pyarrow.parquet as pq

        from lancens_cli.pipeline.files_source import conform_batch, open_source

        assert self.files is not None
        with open_source(self.sources.base, self.storage, path) as handle:
            if self.sources.fmt == "parquet":
                read = pq.ParquetFile(handle).read(columns=keys)
            else:
                read = orc.ORCFile(handle).read(columns=keys)
        target = self.files.target
        wanted = pa.schema([target.field(k) for k in keys])
        return pa.Table.from_batches(
            [conform_batch(b, wanted, path) for b in read.to_batches()], wanted
        )

    def over(self, work: Callable[[Iterator[Any]], Any]) -> list[Any]:
        """`work` run by the tasks over their rows; their answers."""
        from lancens_cli.pipeline.arrow_ingest import over_frame, over_row_groups

        if self.frame is not None:
            return over_frame(self.frame, work)
        assert self.files is not None
        return over_row_groups(self.spark, work, self.files, self.units) if self.units else []


def _write_and_commit(
    ns: Namespace,
    rows: _SourceRows | None,
    choice: KeyChoice,
    plan: MergePlan,
    layout: Any,
    progress: Callable[[int], Callable[[], None]] | None,
) -> tuple[int, list[dict[str, Any]]]:
    """The tasks write the chosen rows (`rows`; None: none are chosen, only the plan's deletes
    are committed); the driver publishes them with the plan's deletes in one commit (or
    removes what the tasks wrote); the `__manifest` version, and each table written as `merge`
    reports it."""
    from lancens_cli.pipeline.source_options import SourceOptions
    from lancens_cli.pipeline.write_commit import WRITE_OPTIONS, LancensWriter, written_touches

    def publish(entries: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
        touches, fresh = written_touches(writer.plan, entries, plan.snapshot, layout)
        return _published(ns, plan, layout, touches, fresh, progress)

    if rows is None:
        return _published(ns, plan, layout, [], {}, progress)
    options = {"root": ns.config.root}
    options.update({f"storage.{k}": v for k, v in ns.config.storage_options.items()})
    origin = current_origin()
    if origin is not None:
        options["origin"] = json.dumps(origin.__dict__, default=str)
    writer = LancensWriter(SourceOptions.parse(options, WRITE_OPTIONS), rows.struct, False)
    messages: list[Any] = []
    try:
        messages = rows.over(lambda batches: writer.write(choice.rows(batches)))
        interrupt.checkpoint()  # a Ctrl-C once the tasks are done: publish nothing
    except BaseException:
        writer.abort(messages)
        raise
    return writer.publish(messages, publish)  # type: ignore[no-any-return]


def _published(
    ns: Namespace,
    plan: MergePlan,
    layout: Any,
    touches: list[Any],
    fresh: dict[tuple[str, Any], str],
    progress: Callable[[int], Callable[[], None]] | None,
) -> tuple[int, list[dict[str, Any]]]:
    """The written partitions (`touches`) and the plan's deletes in one commit; a partition
    table published anew or created since the keys were matched fails it first, in words."""
    from lancens_cli.service.partitioned.update import Replacement, written_entry

    plan.guard(ns)(ns.snapshot())
    replaced = Replacement(ns, plan.snapshot, layout, plan.deletes, touches, fresh)
    version = replaced.commit(plan.guard(ns), progress)
    return version, [written_entry(t, False, layout) for t in replaced.touches]


def _planned_entries(
    rows: _SourceRows | None, choice: KeyChoice, plan: MergePlan, layout: Any
) -> list[dict[str, Any]]:
    """A dry run: the rows each partition table would gain (counted by the tasks, routed as
    the write routes them) and lose; a partition without a table yet is named when it is
    created."""
    from lancens_cli.partition.rows import child_id
    from lancens_cli.pipeline.write_task import decode_value
    from lancens_cli.service.partitioned.placement import (
        TABLE_NAME,
        LevelIndex,
        PartitionTouch,
        locate_partitions,
    )
    from lancens_cli.service.partitioned.update import written_entry

    spec = layout.current
    counts: dict[str, int] = {}
    for answer in rows.over(_counter(choice, layout.schema, spec)) if rows is not None else []:
        for key, count in answer.items():
            counts[key] = counts.get(key, 0) + count
    index = LevelIndex(plan.snapshot, spec)
    entries, written = [], set()
    for key, count in sorted(counts.items()):
        values = tuple(decode_value(v) for v in json.loads(key))
        found = locate_partitions(PartitionTouch(values, None), spec, index)
        table_id = child_id(found[-1], TABLE_NAME) if found[-1] is not None else None
        row = plan.snapshot.get(table_id) if table_id is not None else None
        if row is None or table_id is None:  # named when it is created
            touch = PartitionTouch(values, None, created=True)
        else:
            written.add(table_id)
            touch = plan.deletes.get(table_id) or PartitionTouch(
                values, None, table_id=table_id, location=row["location"]
            )
        entries.append({**written_entry(touch, True, layout), "rows_written": count})
    entries += [written_entry(t, True, layout) for i, t in plan.deletes.items() if i not in written]
    return entries


def _counter(choice: KeyChoice, schema: Any, spec: Any) -> Callable[[Iterator[Any]], Any]:
    """What each task of a dry run runs: its chosen rows counted by partition."""

    def count(batches: Iterator[Any]) -> dict[str, int]:
        from lancens_cli.pipeline.task_failures import carried
        from lancens_cli.pipeline.write_task import partition_counts

        try:
            return partition_counts(choice.rows(batches), schema, spec)
        except Exception as exc:
            raise carried(exc) from None

    return count
