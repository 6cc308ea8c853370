"""`lancens ingest`: files into a partitioned namespace (or one table) through Spark.

Sources are files, directories or globs. Local ones are read with Spark's own readers; `s3://`
and `gs://` ones are listed on the driver and read by the tasks with pyarrow
(`files_source.py`), because Spark's Hadoop connectors are not part of a pip install. The
DataFrame is then written through the `lancens` data source: tasks write fragments, the driver
publishes them in one `__manifest` commit. What can be refused before the job (missing sources,
unknown columns, types of another kind, missing non-nullable columns, a missing column a
partition field takes its value from: `check_input`, the rule `write` follows) is refused before
it starts, and before Spark starts wherever the columns are known without it (Parquet and ORC
footers, CSV headers); what only the rows show (NULLs in a non-nullable column, unparseable
values) fails the job, which then publishes nothing and removes the files its tasks wrote.

pyspark, pyarrow and our modules that load them or Lance are imported inside functions, so that
`lancens_cli.pipeline.ingest` imports without Spark for the CLI; `_partition_counter`'s function,
pickled by value to the tasks, imports what it runs itself.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import Result
from lancens_cli.pipeline import register
from lancens_cli.pipeline.spark_session import is_connect, require_pyspark, scheduler_only
from lancens_cli.pipeline.task_failures import spark_errors
from lancens_cli.store.commit_record import current_origin

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lancens_cli.models import Identifier
    from lancens_cli.service.namespace import Namespace

FORMATS = ("parquet", "csv", "json", "orc")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".orc": "orc",
}
_REMOTE = ("s3://", "gs://")


@dataclass
class Sources:
    """The input files: local paths for Spark's readers, or one bucket's object paths."""

    fmt: str
    paths: list[str]
    base: str | None = None  # `s3://bucket` for remote sources
    # each CSV file's header, read once a command (on an object store each read is a request)
    headers: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class IngestTarget:
    """What the rows go into: the partitioned root ("partitioned") or a table, its Arrow schema
    (None: a table the job creates) and, on a partitioned root, the current partition spec."""

    name: str
    schema: Any
    spec: Any = None


@dataclass
class IngestResult(Result):
    sources: list[str]
    fmt: str
    target: str
    mode: str
    rows: int = 0
    partitions: list[dict[str, Any]] = field(default_factory=list)
    manifest_version: int | None = None
    table_version: int | None = None
    seconds: float = 0.0
    spark_start_seconds: float = 0.0
    dry_run: bool = False
    filled_with_null: list[str] = field(default_factory=list)  # columns the input lacked

    @property
    def created(self) -> int:
        return sum(1 for p in self.partitions if p.get("created"))

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": self.sources,
            "format": self.fmt,
            "target": self.target,
            "mode": self.mode,
            "rows": self.rows,
            "partitions_touched": len(self.partitions),
            "partitions_created": self.created,
            "manifest_version": self.manifest_version,
            "table_version": self.table_version,
            "seconds": round(self.seconds, 3),
            "spark_start_seconds": round(self.spark_start_seconds, 3),
            "dry_run": self.dry_run,
            "filled_with_null": self.filled_with_null,
            "partitions": self.partitions,
        }


# --- sources -----------------------------------------------------------------------------------


def format_of(path: str) -> str | None:
    return _EXTENSIONS.get(os.path.splitext(path)[1].lower())


def _visible(name: str) -> bool:
    base = os.path.basename(name.rstrip("/"))
    return not base.startswith((".", "_"))


def resolve_sources(
    sources: list[str], fmt: str | None, storage: dict[str, str] | None = None
) -> Sources:
    """The files behind the arguments (globs expanded, directories walked), and their format."""
    if not sources:
        raise InvalidInputError("give at least one SOURCE file, directory or glob")
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInputError(f"unknown --format {fmt!r} (use {', '.join(FORMATS)})")
    remote = [s for s in sources if s.startswith(_REMOTE)]
    if remote and len(remote) != len(sources):
        raise InvalidInputError("sources must all be local or all on one object store")
    if remote:
        return _remote_sources(sources, fmt, storage or {})
    files: list[str] = []
    for source in sources:
        if source.startswith("file://"):
            source = source[len("file://") :]
        if glob.has_magic(source):
            found = sorted(p for p in glob.glob(source) if os.path.isfile(p))
            if not found:
                raise InvalidInputError(f"no file matches {source}")
            files += found
        elif os.path.isdir(source):
            found = sorted(
                os.path.join(d, n)
                for d, _, names in os.walk(source)
                for n in names
                if _visible(n) and (fmt is not None or format_of(n))
            )
            if not found:
                raise InvalidInputError(f"directory {source} holds no input file")
            files += found
        elif os.path.isfile(source):
            files.append(source)
        else:
            raise InvalidInputError(f"source {source} does not exist")
    return Sources(_format(files, fmt), [os.path.abspath(f) for f in files])


def _format(files: list[str], fmt: str | None) -> str:
    if fmt is not None:
        return fmt
    kinds = {format_of(f) for f in files}
    if None in kinds:
        raise InvalidInputError(
            f"cannot tell the format of the sources from their names; use --format "
            f"({', '.join(FORMATS)})"
        )
    if len(kinds) > 1:
        raise InvalidInputError(f"the sources mix formats ({', '.join(sorted(kinds))})")
    return kinds.pop()


def _remote_sources(sources: list[str], fmt: str | None, storage: dict[str, str]) -> Sources:
    from lancens_cli.pipeline.files_source import remote_fs

    scheme, _, rest = sources[0].partition("://")
    bucket = rest.split("/", 1)[0]
    base = f"{scheme}://{bucket}"
    if any(not s.startswith(base + "/") and s != base for s in sources):
        raise InvalidInputError("remote sources must all be in one bucket")
    fs = remote_fs(base, storage)
    files: list[str] = []
    for source in sources:
        path = source.split("://", 1)[1]
        if glob.has_magic(path):
            found = sorted(p for p in fs.glob(path) if fs.isfile(p))
        elif fs.isdir(path):
            found = sorted(p for p in fs.find(path) if _visible(p))
            found = [p for p in found if fmt is not None or format_of(p)]
        elif fs.exists(path):
            found = [path]
        else:
            raise InvalidInputError(f"source {source} does not exist")
        if not found:
            raise InvalidInputError(f"no file matches {source}")
        files += found
    return Sources(_format(files, fmt), files, base)


# --- the DataFrame -----------------------------------------------------------------------------


def source_frame(
    spark: SparkSession, sources: Sources, target: Any, storage: dict[str, str]
) -> Any:
    """A DataFrame over the sources; CSV and JSON columns typed as the target's.

    CSV columns are matched by their header's names, file by file (as DuckDB does), never by
    position; a 0-byte file holds no rows and is skipped. CSV into a target is read by the
    tasks with pyarrow, as `write` and `merge` read it in one process (`store/csv_rows.py`): one
    parser, so one file gives one set of rows whichever engine the input's size picks. Parquet
    files with nanosecond timestamps (pandas writes them; Spark's reader refuses them) are read
    with pyarrow by the tasks too, each value converted to microseconds exactly or refused
    naming its column and file.
    """
    if sources.base is not None:
        return _remote_frame(spark, sources, target, storage)
    if sources.fmt == "csv" and target is None:
        return _csv_frame(spark, sources, storage)  # a new table: Spark infers the types
    if sources.fmt == "csv":
        return _pyarrow_frame(spark, sources, target, storage)
    if sources.fmt == "parquet" and _nanosecond_files(sources.paths):
        return _pyarrow_frame(spark, sources, target, storage)
    reader = spark.read.format(sources.fmt)
    if sources.fmt == "json" and target is not None:
        names = spark.read.json(sources.paths).columns  # inference pass: the keys present
        reader = reader.option("mode", "FAILFAST").schema(_struct(names, target))
    return reader.load(sources.paths)


def _csv_frame(spark: SparkSession, sources: Sources, storage: dict[str, str]) -> Any:
    """Local files for a table the job creates, grouped by header, each group read by Spark
    with its types inferred, then united by name."""
    frames = []
    for files in _csv_groups(sources, storage, None).values():
        reader = spark.read.format("csv").option("header", "true").option("mode", "FAILFAST")
        reader = reader.option("escape", '"')  # RFC 4180: a quote in a quoted value is doubled
        frames.append(reader.option("inferSchema", "true").load(files))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other, allowMissingColumns=True)
    return frame


def _csv_groups(
    sources: Sources, storage: dict[str, str], target: Any
) -> dict[tuple[str, ...], list[str]]:
    """The files by header (0-byte ones left out); a header naming a column twice, or lacking a
    non-nullable column of the target, is refused naming the file."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for path in sources.paths:
        header = csv_header(sources, storage, path)
        if not header:
            continue  # 0 bytes (or no header line): no rows
        if len(set(header)) != len(header):
            twice = sorted({n for n in header if header.count(n) > 1})
            raise InvalidInputError(f"{path}: the CSV header names {', '.join(twice)} twice")
        groups.setdefault(tuple(header), []).append(path)
    if not groups:
        raise InvalidInputError("every CSV source is empty (no header line)")
    if target is not None:
        for header, files in groups.items():
            _require_columns(header, target, files[0])
    return groups


def _require_columns(header: tuple[str, ...], target: Any, path: str) -> None:
    """A file lacking a non-nullable column is refused by name before the job."""
    for f in target:
        if not f.nullable and f.name not in header:
            raise InvalidInputError(
                f"{path}: the CSV header lacks the non-nullable column {f.name!r}"
            )


def csv_header(sources: Sources, storage: dict[str, str], path: str) -> list[str]:
    """A CSV file's column names: its first line (a UTF-8 byte order mark left out)."""
    from lancens_cli.pipeline.files_source import open_source

    if path in sources.headers:
        return sources.headers[path]
    try:
        with open_source(sources.base, storage, path) as handle:
            text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
            header = next(csv.reader(text), [])
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInputError(f"{path}: the CSV header cannot be read: {exc}") from None
    sources.headers[path] = header
    return header


def _csv_columns(sources: Sources, storage: dict[str, str], target: Any) -> tuple[Sources, Any]:
    """The CSV files that hold rows, and the columns of all their headers (first seen first),
    typed as the target's (strings where it has none: refused by name before the job)."""
    groups = _csv_groups(sources, storage, target)
    names = list(dict.fromkeys(name for header in groups for name in header))
    held = {path for files in groups.values() for path in files}
    return replace(sources, paths=[p for p in sources.paths if p in held]), _named(names, target)


def _nanosecond_files(paths: list[str]) -> bool:
    """Whether a Parquet source holds nanosecond timestamps (footers only)."""
    import pyarrow.parquet as pq
    import pyarrow.types as t

    for path in paths:
        try:
            schema = pq.read_schema(path)
        except Exception:  # noqa: BLE001 - not Parquet: Spark's reader says so in its words
            return False
        if any(t.is_timestamp(f.type) and f.type.unit == "ns" for f in schema):
            return True
    return False


def _struct(names: list[str], target: Any) -> Any:
    """Spark columns for `names`: the target's types, strings for columns it has not (those
    are refused by name before the job)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    types = {f.name: f.type for f in target}
    return StructType(
        [StructField(n, from_arrow_type(types.get(n, pa.string())), True) for n in names]
    )


def _remote_frame(
    spark: SparkSession, sources: Sources, target: Any, storage: dict[str, str]
) -> Any:
    return _pyarrow_frame(spark, sources, target, storage)


def _pyarrow_frame(
    spark: SparkSession, sources: Sources, target: Any, storage: dict[str, str]
) -> Any:
    """The sources read by the tasks with pyarrow (`files_source.py`): object stores, CSV
    into a target, and local Parquet that Spark's reader cannot read exactly."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lancens_cli.pipeline.files_source import FilesDataSource

    if sources.fmt == "csv":
        sources, _ = _csv_columns(sources, storage, target)  # 0-byte files hold no rows
    schema = _pyarrow_schema(sources, target, storage)
    spark.dataSource.register(FilesDataSource)
    reader = spark.read.format("lancens_files").schema(from_arrow_schema(schema))
    reader = reader.option("files", json.dumps(sources.paths)).option("format", sources.fmt)
    reader = reader.option("base", sources.base or "")
    for key, value in storage.items():
        reader = reader.option(f"storage.{key}", value)
    return reader.load()


def _pyarrow_schema(sources: Sources, target: Any, storage: dict[str, str]) -> Any:
    """The columns of the first source as pyarrow reads them (CSV and JSON typed as the
    target's), timestamps in microseconds as Spark holds them. A CSV's are every file's header
    (a column the first file lacks typed as text when there is no target)."""
    import pyarrow as pa

    if sources.fmt == "csv" and target is not None:
        schema = _csv_columns(sources, storage, target)[1]
    else:
        schema = _first_file_columns(sources, target, storage)
    return pa.schema([pa.field(f.name, _microseconds(f.type), True) for f in schema])


def _first_file_columns(sources: Sources, target: Any, storage: dict[str, str]) -> Any:
    """The first source's columns as pyarrow reads them (JSON typed as the target's; a CSV's
    with the other files' columns as text)."""
    import pyarrow as pa
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    from lancens_cli.pipeline.files_source import open_source, read_batches

    with open_source(sources.base, storage, sources.paths[0]) as handle:
        if sources.fmt == "parquet":
            schema = pq.ParquetFile(handle).schema_arrow
        elif sources.fmt == "orc":
            schema = orc.ORCFile(handle).schema
        else:
            first = next(read_batches(handle, sources.fmt, None, sources.paths[0]), None)
            schema = first.schema if first is not None else pa.schema([])
    if target is not None and sources.fmt == "json":
        types = {f.name: f.type for f in target}
        schema = pa.schema([pa.field(f.name, types.get(f.name, f.type)) for f in schema])
    if sources.fmt == "csv":  # the first file's types, the other files' columns as text
        found = {f.name: f.type for f in schema}
        every = _csv_columns(sources, storage, None)[1]
        schema = pa.schema([pa.field(f.name, found.get(f.name, f.type)) for f in every])
    return schema


def _microseconds(kind: Any) -> Any:
    """Spark holds timestamps in microseconds: a nanosecond column is read as one."""
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_timestamp(kind) and kind.unit == "ns":
        return pa.timestamp("us", tz=kind.tz)
    return kind


# --- the job -----------------------------------------------------------------------------------


def target_schema(ns: Namespace, into: Identifier | None) -> IngestTarget:
    """What the rows go into: the partitioned root (its namespace schema and current spec) or
    a table (its schema, None for a table the job creates)."""
    if into is None:
        from lancens_cli.service.partitioned.write import partitioned_target

        _, layout = partitioned_target(ns)
        return IngestTarget("partitioned", layout.schema, layout.current)
    from lancens_cli.pipeline.write_commit import refuse_partition_table
    from lancens_cli.store.tables import open_table

    ns.require_root()
    snapshot = ns.snapshot()
    refuse_partition_table(snapshot, into)
    ref = ns.find_table(into, snapshot)
    if ref is None:
        ns.require_namespace(into.parent, snapshot)
        return IngestTarget(into.display(), None)
    return IngestTarget(into.display(), open_table(ns.storage, ref.location).schema)


def check_input(columns: Any, target: IngestTarget, allow_missing_columns: bool) -> list[str]:
    """The input's columns (an Arrow schema) against the target, by the rule `write` follows:
    columns the target cannot take are refused (exit 2), and on a partitioned root so is an
    input lacking a column a partition field takes its value from, unless
    `allow_missing_columns`. Returns the target's columns the input lacks (filled with NULL)."""
    from lancens_cli.pipeline.write_commit import check_arrow_columns
    from lancens_cli.service.partitioned.input_rows import (
        lacking_columns,
        require_partition_sources,
    )

    if target.schema is None:
        return []
    check_arrow_columns(columns, target.schema)
    lacking = lacking_columns(columns.empty_table(), target.schema)
    if target.spec is not None and not allow_missing_columns:
        require_partition_sources(lacking, target.spec, target.schema)
    return lacking


def known_columns(sources: Sources, target: Any, struct: Any, storage: dict[str, str]) -> Any:
    """The input's columns as far as they are known before Spark starts, as an Arrow schema:
    Spark's columns of Parquet and ORC (`struct`, from the first footer), the names of CSV
    headers and of other footers or first batches (typed as the target's: their types are
    checked once Spark reads them); None for local JSON, whose keys only Spark's inference
    pass tells."""
    from lancens_cli.pipeline.write_commit import arrow_schema

    if struct is not None:
        return arrow_schema(struct)
    if sources.base is None and sources.fmt == "json":
        return None
    if sources.fmt == "csv":
        return _csv_columns(sources, storage, target)[1]
    try:
        schema = _pyarrow_schema(sources, target, storage)
    except Exception:  # noqa: BLE001 - not readable as such: Spark's reader says so in its words
        return None
    return _named(schema.names, target)


def _named(names: list[str], target: Any) -> Any:
    """Columns by name, typed as the target's (strings where it has none)."""
    import pyarrow as pa

    types = {f.name: f.type for f in target} if target is not None else {}
    return pa.schema([pa.field(n, types.get(n, pa.string())) for n in names])


def ingest(
    spark_factory: Any,
    ns: Namespace,
    sources_text: list[str],
    *,
    fmt: str | None = None,
    into: Identifier | None = None,
    mode: str = "append",
    dry_run: bool = False,
    delimiter: str = ".",
    debug: bool = False,
    branch: str | None = None,
    allow_missing_columns: bool = False,
) -> IngestResult:
    """Read the sources with Spark and write them into the target; everything that can be
    refused without Spark is refused before `spark_factory()` starts it."""
    from lancens_cli.pipeline.write_commit import arrow_schema
    from lancens_cli.service.partitioned.branch import check_ref_name

    if mode not in ("append", "overwrite"):
        raise InvalidInputError(f"--mode {mode!r}: use append or overwrite")
    check_ref_name(branch, "--branch")
    if branch is not None and into is not None:
        raise InvalidInputError("--branch writes into the partitioned root: drop --into")
    storage = dict(ns.config.storage_options)
    sources = resolve_sources(sources_text, fmt, storage)
    target = target_schema(ns, into)
    require_pyspark()
    struct = arrow_native_struct(sources, storage)
    result = IngestResult(sources_text, sources.fmt, target.name, mode, dry_run=dry_run)
    known = known_columns(sources, target.schema, struct, storage)
    if known is not None:
        result.filled_with_null = check_input(known, target, allow_missing_columns)
    native = None if dry_run else struct
    started = time.monotonic()
    with scheduler_only() if native is not None else nullcontext():
        spark = spark_factory()
    result.spark_start_seconds = time.monotonic() - started
    began = time.monotonic()
    with spark_errors("the ingest"), quiet_job(spark, debug):
        if native is not None:  # Parquet and ORC: pyarrow in the tasks, no JVM rows
            with _report_file(ns, into, mode, delimiter, result, branch) as options:
                _write_row_groups(spark, sources, storage, options, native, mode)
        else:
            register(spark)  # the `lancens` data source writes the DataFrame
            frame = source_frame(spark, sources, target.schema, storage)
            columns = arrow_schema(frame.schema)
            result.filled_with_null = check_input(columns, target, allow_missing_columns)
            if dry_run:
                _dry_run(frame, ns, into, target.schema, result)
            else:
                with _report_file(ns, into, mode, delimiter, result, branch) as options:
                    _save(frame, options, mode)
    result.seconds = time.monotonic() - began
    return result


@contextmanager
def quiet_job(spark: SparkSession, debug: bool) -> Iterator[None]:
    """No JVM stack traces on the user's terminal while the job fails: the command reports
    the failure in one line (`--debug` keeps Spark's logging)."""
    if debug or is_connect(spark):  # a Connect server's logging is the server's
        yield
        return
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        spark.sparkContext.setLogLevel("ERROR")


@contextmanager
def _report_file(
    ns: Namespace,
    into: Identifier | None,
    mode: str,
    delimiter: str,
    result: IngestResult,
    branch: str | None = None,
) -> Iterator[dict[str, str]]:
    """The `lancens` data source's write options, with a `report` file that the commit fills;
    what it says is copied into `result` once the write is done."""
    handle, report_path = tempfile.mkstemp(prefix="lancens-ingest-", suffix=".json")
    os.close(handle)
    options = {"root": ns.config.root, "report": report_path, "delimiter": delimiter}
    # the ingest checked its input's columns itself (`check_input`), naming its own flag
    options["allowMissingColumns"] = "true"
    origin = current_origin()
    if origin is not None:  # the commit, in Spark's process, records the command
        options["origin"] = json.dumps(origin.__dict__, default=str)
    options.update({f"storage.{k}": v for k, v in ns.config.storage_options.items()})
    if branch is not None:
        options["branch"] = branch
    if into is not None:
        options["path"] = into.display(delimiter)
    try:
        yield options
        with open(report_path, encoding="utf-8") as report_file:
            text = report_file.read()
    finally:
        os.unlink(report_path)
    report = json.loads(text) if text else {}
    result.rows = int(report.get("rows", 0))
    if into is None:
        result.partitions = report.get("partitions", [])
        result.manifest_version = report.get("manifest_version")
    else:
        result.table_version = report.get("version")
        result.partitions = []
        if report.get("created"):
            result.mode = "create"


def _save(frame: DataFrame, options: dict[str, str], mode: str) -> None:
    """The DataFrame written through the `lancens` data source."""
    writer = frame.write.format("lancens").mode(mode)
    for key, value in options.items():
        if key != "path":
            writer = writer.option(key, value)
    if "path" in options:
        writer.save(options["path"])
    else:
        writer.save()


def arrow_native_struct(sources: Sources, storage: dict[str, str]) -> Any | None:
    """The Spark columns of Parquet or ORC sources when pyarrow can read them for Spark (every
    column of a type Spark holds); None: Spark's own readers (CSV, JSON, other types)."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    from lancens_cli.pipeline.arrow_ingest import FORMATS

    if sources.fmt not in FORMATS:
        return None
    try:
        schema = _pyarrow_schema(sources, None, storage)
    except Exception:  # noqa: BLE001 - not readable as such: Spark's reader says so in its words
        return None
    try:
        fields = [StructField(f.name, from_arrow_type(f.type), True) for f in schema]
    except Exception:  # noqa: BLE001 - a type Spark's Arrow conversion lacks (uint32, ...)
        return None
    return StructType(fields)


def _write_row_groups(
    spark: SparkSession,
    sources: Sources,
    storage: dict[str, str],
    options: dict[str, str],
    struct: Any,
    mode: str,
) -> None:
    from lancens_cli.pipeline.arrow_ingest import RowGroupFiles, write_row_groups
    from lancens_cli.pipeline.source_options import SourceOptions
    from lancens_cli.pipeline.write_commit import WRITE_OPTIONS, LancensWriter, arrow_schema

    writer = LancensWriter(SourceOptions.parse(options, WRITE_OPTIONS), struct, mode == "overwrite")
    target = arrow_schema(struct)
    files = RowGroupFiles(sources.paths, sources.fmt, sources.base, storage, target)
    write_row_groups(spark, writer, files)


def _dry_run(
    frame: DataFrame, ns: Namespace, into: Identifier | None, schema: Any, result: IngestResult
) -> None:
    """Every row conformed and split as the write would (so bad rows fail here too); the
    partitions they would touch, and which are new. Nothing is written."""
    if into is not None or schema is None:
        result.rows = frame.count()
        return
    from lancens_cli.service.partitioned.placement import LevelIndex
    from lancens_cli.service.partitioned.write import partitioned_target

    snapshot, layout = partitioned_target(ns)
    spec = layout.current
    counted = (
        frame.mapInArrow(_partition_counter(layout.schema, spec), "key string, rows long")
        .groupBy("key")
        .sum("rows")
    )
    index = LevelIndex(snapshot, spec)
    from lancens_cli.partition.rows import child_id
    from lancens_cli.pipeline.write_task import decode_value
    from lancens_cli.service.partitioned.placement import (
        TABLE_NAME,
        PartitionTouch,
        locate_partitions,
    )

    fields = [f.field_id for f in spec.fields]
    for key, rows in counted.collect():
        values = tuple(decode_value(v) for v in json.loads(key))
        found = locate_partitions(PartitionTouch(values, None), spec, index)
        exists = found[-1] is not None and child_id(found[-1], TABLE_NAME) in snapshot
        result.rows += int(rows)
        result.partitions.append(
            {
                "values": dict(zip(fields, json.loads(key), strict=True)),
                "rows": int(rows),
                "created": not exists,
            }
        )
    result.partitions.sort(key=lambda p: json.dumps(p["values"], sort_keys=True))


def _partition_counter(schema: Any, spec: Any) -> Any:
    def count(batches: Any) -> Any:
        import pyarrow as pa

        from lancens_cli.pipeline.task_failures import carried
        from lancens_cli.pipeline.write_task import partition_counts

        try:
            for batch in batches:
                counts = partition_counts(iter([batch]), schema, spec)
                yield pa.RecordBatch.from_pydict(
                    {"key": list(counts), "rows": list(counts.values())}
                )
        except Exception as exc:
            raise carried(exc) from None

    return count
