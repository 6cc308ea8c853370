"""`lancens scan`: a Spark read through the `lancens` data source.

`--where` is any Spark SQL condition, parsed once here. Spark applies all of it to the rows; the
data source gets the conjuncts the predicate model understands (`partition/spark_conditions.py`)
already parsed, as data (`partition/condition_data.py`), to prune partition tables and filter in
Lance, so the result
is what Spark's own filter of the source gives. Only the columns the result and the
condition need are declared to the data source (Spark's Python data sources read every column
of the schema they are given). `--explain` reads the slices the reader planned back out of the
physical plan: the partition tables chosen per spec version, their versions and filters.

pyspark and the modules that import it (`read.py`) are imported inside functions, so that
`lancens_cli.pipeline.scan` imports without Spark: `scan --count` answered from Lance's
manifests (`count_from_manifests`, planned by `read_plan.py` as the data source's driver plans)
never loads it. So are `service.partitioned.partitions`, which loads Lance for `--explain`'s
total only, and `service.history.incremental`.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as t

from lancens_cli import interrupt
from lancens_cli.errors import InvalidInputError, TableAlreadyExistsError
from lancens_cli.models import Result, json_value
from lancens_cli.partition.condition_data import encode
from lancens_cli.partition.predicate import FALSE
from lancens_cli.pipeline.read_plan import READ_OPTIONS, arrow_schema, plan_pieces
from lancens_cli.pipeline.row_values import plain_values, utc_clock
from lancens_cli.pipeline.source_options import SourceOptions
from lancens_cli.pipeline.spark_session import is_connect
from lancens_cli.pipeline.task_failures import spark_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lancens_cli.partition.spark_conditions import Condition

# The CLI's Spark sessions run in UTC: a timestamp literal without an offset is a UTC instant.
SESSION_ZONE = "UTC"

FORMATS = ("parquet", "csv", "json")  # what `scan --to` and `join --to` write


def require_output_format(fmt: str) -> str:
    """The file format of `scan --to` and `join --to`, checked before Spark starts (exit 2)."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    return fmt


TERMINAL_LIMIT = 20


@dataclass
class ScanRequest:
    """What `lancens scan` was asked for."""

    root: str
    storage: dict[str, str]
    identifier: str | None = None
    delimiter: str = "."
    where: str | None = None
    columns: list[str] | None = None
    limit: int | None = None
    count: bool = False
    to: str | None = None
    fmt: str = "parquet"
    explain: bool = False
    stream: bool = False  # rows one partition at a time (an unbounded scan into a pipe)
    version_as_of: int | None = None  # a past __manifest version to read
    timestamp_as_of: str | None = None  # or the newest at or before this time
    since_version: int | None = None  # only rows appended after this __manifest version
    since_timestamp: str | None = None  # or after the newest at or before this time
    changes: bool = False  # the change feed since then: inserts, deletes, updates
    net: bool = False  # the change feed's net effect: each row's insert or delete, once


@dataclass
class ScanRows(Result):
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "rows": [[json_value(v) for v in row] for row in self.rows],
            "returned": len(self.rows),
            "truncated": self.truncated,
        }


@dataclass
class ScanCount(Result):
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count}


@dataclass
class ScanWritten(Result):
    path: str
    format: str
    columns: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "columns": self.columns}


@dataclass
class TableChoice:
    """One table the read opens, as the planned slices name it."""

    table: str
    spec_version: int | None
    location: str
    version: int
    branch: str | None
    fragments: int
    rows: int
    filter: str | None


@dataclass
class ScanExplain(Result):
    tables: list[TableChoice]
    slices: int
    pushed: list[str]
    left_to_spark: str | None
    plan: str
    partitions_total: int | None = None
    not_pushed: list[dict[str, str]] = field(default_factory=list)
    engine: str = "spark"  # what reads the rows: "spark", or "local" (this process)
    engine_reason: str = ""  # why that engine

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "engine_reason": self.engine_reason,
            "tables": [vars(t) for t in self.tables],
            "tables_read": len(self.tables),
            "partitions_total": self.partitions_total,
            "slices": self.slices,
            "pushed_to_lancens": self.pushed,
            "left_to_spark": self.left_to_spark,
            "not_pushed": self.not_pushed,
            "physical_plan": self.plan,
        }


# --------------------------------------------------------------------------- the job


def source_options(request: ScanRequest) -> dict[str, str]:
    """The data source options that name what `request` reads."""
    options = {"root": request.root, "delimiter": request.delimiter}
    options.update({f"storage.{k}": v for k, v in request.storage.items()})
    if request.version_as_of is not None:
        options["versionAsOf"] = str(request.version_as_of)
    if request.timestamp_as_of is not None:
        options["timestampAsOf"] = request.timestamp_as_of
    if request.since_version is not None:
        options["sinceVersion"] = str(request.since_version)
    if request.since_timestamp is not None:
        options["sinceTimestamp"] = request.since_timestamp
    if request.changes:
        options["readChanges"] = "true"
    return options


def request_condition(request: ScanRequest) -> tuple[Any, Condition | None]:
    """The source's Arrow schema and the split `--where` (input errors found before Spark)."""
    schema = arrow_schema(request_options(request))
    if not request.where:
        return schema, None
    from lancens_cli.partition.spark_conditions import split_condition  # loads the SQL parser

    return schema, split_condition(
        request.where, schema, session_zone=SESSION_ZONE, label="--where"
    )


def check_request(request: ScanRequest) -> None:
    """Refuse before Spark starts what needs no Spark to refuse (exit 2 or 3, one line): a bad
    `--where` or column, and an incremental read that cannot be told as appends (a start that
    is not readable, a restore, an overwrite, a delete since), planned as the data source will
    plan it, with messages in the CLI's flags."""
    from lancens_cli.service.history.incremental import FLAG_NAMES

    schema, condition = request_condition(request)
    result_columns(request.columns, result_schema(request, schema))
    opts = request_options(request)
    if opts.since() is None:
        return
    nodes = condition.understood if condition is not None else []
    plan_pieces(opts, schema, nodes, limit=planned_limit(request, condition), names=FLAG_NAMES)


def count_from_manifests(request: ScanRequest) -> int | None:
    """`scan --count` as Lance's manifests answer it, with no row read and no Spark: the rows
    of the pieces the data source would plan (each fragment's rows less its deletions; an
    incremental read's row windows), when nothing is left to filter rows: no conjunct Spark
    alone applies, no filter for Lance (the partitions decide the condition whole). None when
    rows must be read. Refuses what `check_request` refuses, in the same words."""
    from lancens_cli.service.history.incremental import FLAG_NAMES

    schema, condition = request_condition(request)
    if request.changes or (condition is not None and condition.left):
        return None  # a change feed's rows are compared as they are read
    nodes = condition.understood if condition is not None else []
    if FALSE in nodes:
        return 0
    pieces = plan_pieces(request_options(request), schema, nodes, names=FLAG_NAMES)
    if any(piece.filter is not None for piece in pieces):
        return None
    return sum(piece.rows for piece in pieces)


def request_options(request: ScanRequest) -> SourceOptions:
    """The data source options of `request`, parsed as the source parses them."""
    options = source_options(request)
    named = {**options, "path": request.identifier} if request.identifier else options
    return SourceOptions.parse(named, READ_OPTIONS)


def prepare(spark: SparkSession, request: ScanRequest) -> tuple[Any, list[str], Condition | None]:
    """The DataFrame of the scan (filtered, projected), its result columns and the condition.

    Spark applies the whole `--where`; the source gets the conjuncts understood here, parsed
    (its `pruneCondition` option), to prune partition tables and filter in Lance.
    """
    from pyspark.sql import functions as F  # noqa: N812 - pyspark's convention

    from lancens_cli.pipeline.read import spark_schema

    schema, condition = request_condition(request)
    columns = result_columns(request.columns, result_schema(request, schema))
    needed = set(columns) | (condition.columns if condition is not None else set())
    if request.net:  # rows are compared whole
        needed |= set(schema.names)
    if request.count and not needed:
        needed = {count_column(schema)}
    declared = spark_schema(schema_subset(schema, needed))
    reader = spark.read.format("lancens").schema(declared)
    for key, value in source_options(request).items():
        reader = reader.option(key, value)
    if condition is not None and condition.understood:
        reader = reader.option("pruneCondition", encode(condition.understood))
    limit = planned_limit(request, condition)
    if limit is not None:
        reader = reader.option("limit", str(limit))
    df = reader.load(request.identifier) if request.identifier else reader.load()
    if request.where:
        df = df.filter(F.expr(request.where))
    if request.net:
        df = net_frame(df, schema)
    return df.select(*[F.col(quote_identifier(c)) for c in columns]), columns, condition


def result_schema(request: ScanRequest, schema: Any) -> Any:
    """The columns a scan can return: the source's, and of a net change feed its rows' columns
    and `_change_type` only (a net change has no one version)."""
    if not request.net:
        return schema
    from lancens_cli.service.history.changes import COMMIT_TIMESTAMP, COMMIT_VERSION

    return pa.schema([f for f in schema if f.name not in (COMMIT_VERSION, COMMIT_TIMESTAMP)])


def net_frame(df: DataFrame, schema: Any) -> DataFrame:
    """The net effect of a change feed's DataFrame: rows inserted and not deleted again, and
    deleted and not inserted again, counted as multisets, as many times as they are left over.

    Rows are grouped whole, as Spark's EXCEPT ALL compares them; but Spark can neither group
    nor compare a map, so a column holding one is grouped by `_comparable` (each map as its
    entries, in their stored order, as the local engine compares them) and carried along
    beside."""
    from pyspark.sql import functions as F  # noqa: N812 - pyspark's convention

    from lancens_cli.service.history.changes import (
        CHANGE_COLUMNS,
        CHANGE_TYPE,
        DELETE,
        INSERT,
        POSTIMAGE,
    )
    from lancens_cli.store.lance_input import holds_map

    data = [f for f in schema if f.name not in CHANGE_COLUMNS]
    keys, carried, shown = [], [], []
    for number, f in enumerate(data):
        column, key = F.col(quote_identifier(f.name)), f"{_NET}key_{number}"
        keys.append(_comparable(column, f.type).alias(key))
        if holds_map(f.type):
            carried.append(F.first(column).alias(f.name))
            shown.append(F.col(quote_identifier(f.name)))
        else:
            shown.append(F.col(key).alias(f.name))
    added = F.col(CHANGE_TYPE).isin(INSERT, POSTIMAGE)
    balance = F.col(f"{_NET}balance")
    counted = F.sum(F.when(added, 1).otherwise(-1)).alias(f"{_NET}balance")
    left = df.groupBy(*keys).agg(counted, *carried).filter(balance != 0)
    copies = F.explode(F.array_repeat(F.lit(True), F.abs(balance).cast("int")))
    kind = F.when(balance > 0, F.lit(INSERT)).otherwise(F.lit(DELETE))
    return left.select(*shown, kind.alias(CHANGE_TYPE), copies.alias(f"{_NET}copy")).drop(
        f"{_NET}copy"
    )


_NET = "__lancens_net_"  # the net's own columns, beside the rows'


def _comparable(column: Any, kind: Any) -> Any:
    """`column` as Spark can group it, exactly: each map, at any depth, as the array of its
    entries (key-value structs) in their stored order; a null stays null."""
    from pyspark.sql import functions as F  # noqa: N812 - pyspark's convention

    from lancens_cli.store.lance_input import holds_map

    if not holds_map(kind):
        return column
    if t.is_map(kind):
        key, item = kind.key_type, kind.item_type
        return F.transform(
            F.map_entries(column),
            lambda entry: F.struct(
                _comparable(entry.getField("key"), key).alias("key"),
                _comparable(entry.getField("value"), item).alias("value"),
            ),
        )
    if t.is_struct(kind):
        fields = [_comparable(column.getField(f.name), f.type).alias(f.name) for f in kind]
        return F.when(column.isNotNull(), F.struct(*fields))
    return F.transform(column, lambda value: _comparable(value, kind.value_type))


def planned_limit(request: ScanRequest, condition: Condition | None) -> int | None:
    """The rows the source plans for: `--limit` and one more (is there more?), when Spark
    filters nothing out after the source (nothing of `--where` is left to it). A count and
    files written take every row: `--limit` is of the rows printed."""
    if request.count or request.to:
        return None
    if request.limit is not None and (condition is None or not condition.left):
        return request.limit + 1
    return None


def quote_identifier(name: str) -> str:
    """A column name as Spark SQL reads it, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"


def result_columns(requested: list[str] | None, schema: Any) -> list[str]:
    if not requested:
        return list(schema.names)
    unknown = [c for c in requested if c not in schema.names]
    if unknown:
        raise InvalidInputError(
            f"--columns: unknown column(s) {', '.join(unknown)} "
            f"(columns: {', '.join(schema.names)})"
        )
    return list(dict.fromkeys(requested))


def schema_subset(schema: Any, names: set[str]) -> Any:
    return pa.schema([f for f in schema if f.name in names])


def count_column(schema: Any) -> str:
    """A column to count rows by (Spark's Python sources read every declared column)."""

    def width(f: Any) -> int:
        return f.type.bit_width if t.is_primitive(f.type) else 1 << 20

    return min(schema, key=width).name


def run_scan(spark: SparkSession, request: ScanRequest) -> Any:
    """Rows, a count, files written, or the plan: what `lancens scan` prints."""
    with spark_errors("the scan"):
        df, columns, condition = prepare(spark, request)
        if request.explain:
            return explain(df, request, condition)
        if request.count:
            return ScanCount(int(df.count()))
        if request.to:
            return _write(df, request, columns)
        if request.stream and request.limit is None:
            return ScanStream(columns, _guarded(stream_rows(df)))
        return _rows(df, columns, request.limit)


def _rows(df: DataFrame, columns: list[str], limit: int | None) -> ScanRows:
    with utc_clock():
        if limit is None:
            return ScanRows(columns, [plain_values(r) for r in df.collect()], False)
        found = [plain_values(r) for r in df.limit(limit + 1).collect()]
    return ScanRows(columns, found[:limit], len(found) > limit)


@dataclass
class ScanStream:
    columns: list[str]
    rows: Iterator[list[Any]]


def stream_rows(df: DataFrame) -> Iterator[list[Any]]:
    """Every row, a partition at a time (for an unbounded scan written to a pipe); a Ctrl-C
    stops it at the next row (the rows already fetched are not all printed first)."""
    with utc_clock():
        for row in df.toLocalIterator():
            interrupt.checkpoint()
            yield plain_values(row)


def _guarded(rows: Iterator[list[Any]]) -> Iterator[list[Any]]:
    with spark_errors("the scan"):
        yield from rows


def _write(df: DataFrame, request: ScanRequest, columns: list[str]) -> ScanWritten:
    target = request.to
    assert target is not None
    if "://" not in target and os.path.exists(target):
        raise TableAlreadyExistsError(f"--to {target}: it already exists; remove it first")
    writer = df.write.mode("errorifexists").format(request.fmt)
    if request.fmt == "csv":
        writer = writer.option("header", "true").option("escape", '"')  # RFC 4180
    writer.save(target)
    return ScanWritten(target, request.fmt, columns)


# --------------------------------------------------------------------------- --explain


def planned_slices(df: DataFrame) -> list[Any]:
    """The slices the reader planned for `df`, read back from Spark's physical plan.

    Each scan node of the plan holds the pickled input partitions our `partitions()`
    returned; they name every table, version and fragment the tasks will read.
    """
    from lancens_cli.pipeline.read import LancensSlice

    found = []
    for scan in _scan_nodes(df._jdf.queryExecution().executedPlan()):
        partitions = scan.inputPartitions()
        for i in range(partitions.size()):
            item = partitions.apply(i)
            if not hasattr(item, "pickedPartition"):
                continue
            value = pickle.loads(bytes(item.pickedPartition()))
            if isinstance(value, LancensSlice):
                found.append(value)
    return found


def _scan_nodes(node: Any) -> Iterator[Any]:
    name = node.getClass().getSimpleName()
    if name == "BatchScanExec":
        yield node
    if name == "AdaptiveSparkPlanExec":
        yield from _scan_nodes(node.executedPlan())
    children = node.children()
    for i in range(children.size()):
        yield from _scan_nodes(children.apply(i))


def tables_read(pieces: Iterable[Any]) -> list[TableChoice]:
    """One line per table (and version) the pieces read, fragments and rows summed."""
    by_table: dict[tuple[str, int, str | None], TableChoice] = {}
    for piece in pieces:
        key = (piece.location, piece.version, piece.branch)
        seen = by_table.get(key)
        if seen is None:
            by_table[key] = TableChoice(
                piece.table,
                piece.spec_version,
                piece.location,
                piece.version,
                piece.branch,
                len(piece.fragments),
                piece.rows,
                piece.filter,
            )
        else:
            seen.fragments += len(piece.fragments)
            seen.rows += piece.rows
    return sorted(by_table.values(), key=lambda t: (t.spec_version or 0, t.table))


def explain(df: DataFrame, request: ScanRequest, condition: Condition | None) -> ScanExplain:
    """What the scan would read: tables, slices, and which conjuncts prune and filter in
    lancens (Spark applies the whole condition again) and which only Spark applies."""
    if is_connect(df.sparkSession):  # the slices are read back from the JVM's plan
        raise InvalidInputError(
            "--explain reads Spark's physical plan, which a Spark Connect client cannot reach: "
            "run it with --master (local or a cluster)"
        )
    slices = planned_slices(df)
    plan = df._jdf.queryExecution().executedPlan().toString()
    left = condition.left if condition is not None else []
    return ScanExplain(
        tables=tables_read(p for s in slices for p in s.pieces),
        slices=len(slices),
        pushed=[c.text for c in condition.conjuncts if c.node is not None] if condition else [],
        left_to_spark=" AND ".join(c.text for c in left) or None,
        plan=plan.rstrip(),
        partitions_total=partition_total(request),
        not_pushed=[{"condition": c.text, "reason": c.reason or ""} for c in left],
    )


def partition_total(request: ScanRequest) -> int | None:
    """The partition tables the namespace publishes, for `--explain`'s "N of M" (None: a
    table, or a change feed, whose table versions are of many `__manifest` versions)."""
    if request.identifier is not None or request.changes:
        return None
    from lancens_cli.service.partitioned.partitions import select_partitions

    ns = SourceOptions.parse(source_options(request), READ_OPTIONS).namespace()
    return select_partitions(ns, None).total
