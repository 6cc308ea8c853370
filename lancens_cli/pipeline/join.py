"""`lancens join`: execute a storage-partitioned join (SPJ) of two partitioned namespaces on Spark.

The driver plans with `join-plan` (service/join/plan.py) over every spec version that holds
partition tables, resolves each table's published version and row count once (so the join reads
one snapshot of each side, and tasks never read `__manifest`), and builds a DataFrame that runs
the groups as Spark tasks (`mapInArrow` over one id per task; pipeline/join_tasks.py), the
groups packed by size into as many tasks as the session runs at once. Each task joins its groups
in Arrow, so no row crosses the network: the physical plan has no Exchange.

When the layouts are not compatible (join-plan's reasons), or a left join would meet one left
partition in several right spec versions, the job says why and runs an ordinary Spark join of
both sides, each read one partition table per task.

Columns reach Spark in the Arrow types it takes (`spark_arrow_type`): a fixed-size list (a
vector) as a list of the same values, as `scan` gives it; a type Spark has nothing for (unsigned
integers) is refused before Spark starts.

Output column names: a column whose name occurs on one side only keeps its name; a name that
occurs on both sides becomes `l_<name>` and `r_<name>`. `--columns` picks output names, and
`l.<col>` / `r.<col>` name a side's source column whatever its output name, in `--columns` and in
`--where` (`checked_where`: the condition over the output columns, checked as `scan --where` is
before Spark starts).

pyspark is imported inside functions, so that `lancens_cli.pipeline.join` imports without
Spark: `lancens join` plans and pins the job with it before Spark starts.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as t

from lancens_cli.errors import InvalidInputError, TableAlreadyExistsError
from lancens_cli.models import Result
from lancens_cli.pipeline.join_tasks import encode_schema, pack, task_function
from lancens_cli.pipeline.spark_session import is_connect, task_slots
from lancens_cli.service.join.plan import JoinPlan, PartitionTable, Side, join_plan
from lancens_cli.service.namespace import Namespace
from lancens_cli.store.catalog_rows import PublishedRef

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lancens_cli.service.history.incremental import SinceNames

HOWS = ("inner", "left")


# --- output columns ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OutColumn:
    side: str  # "l" or "r"
    source: str
    name: str


def output_columns(left_names: list[str], right_names: list[str]) -> list[OutColumn]:
    """Every column of both sides under its output name (see the module docstring)."""
    clash = set(left_names) & set(right_names)
    out = [OutColumn("l", n, f"l_{n}" if n in clash else n) for n in left_names]
    out += [OutColumn("r", n, f"r_{n}" if n in clash else n) for n in right_names]
    seen: dict[str, OutColumn] = {}
    for c in out:
        if c.name in seen:
            other = seen[c.name]
            raise InvalidInputError(
                f"output column {c.name!r} would name both {other.side}.{other.source} and "
                f"{c.side}.{c.source}: rename one of them"
            )
        seen[c.name] = c
    return out


def choose_columns(columns: list[OutColumn], wanted: list[str] | None) -> list[OutColumn]:
    """`--columns a,l.b,r.c` in the order given; None: all of them."""
    if not wanted:
        return columns
    by_name = {c.name: c for c in columns}
    by_source = {f"{c.side}.{c.source}": c for c in columns}
    chosen: list[OutColumn] = []
    for text in wanted:
        found = by_name.get(text) or by_source.get(text)
        if found is None:
            known = ", ".join(c.name for c in columns)
            raise InvalidInputError(f"--columns: no output column {text!r} (columns: {known})")
        if found not in chosen:
            chosen.append(found)
    return chosen


def parse_columns(text: list[str] | None) -> list[str] | None:
    if not text:
        return None
    names = [n.strip() for t in text for n in t.split(",") if n.strip()]
    if not names:
        raise InvalidInputError("--columns: no column named")
    return names


# --- the job ----------------------------------------------------------------------------------


def _side_json(ns: Namespace, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "root": ns.storage.root_uri,
        "storage": dict(ns.config.storage_options),
        "columns": [list(p) for p in pairs],
    }


def _nullable(schema: Any, pairs: list[tuple[str, str]], side: str) -> Any:
    """The columns read, under their output names, nullable, in the types Spark takes."""
    by_name = {f.name: f for f in schema}
    return pa.schema(
        [
            pa.field(out, spark_arrow_type(by_name[src].type, f"{side}.{src}"), nullable=True)
            for src, out in pairs
        ]
    )


def spark_arrow_type(kind: Any, column: str) -> Any:
    """`kind` if Spark takes Arrow columns of it, else the type Spark's Arrow conversion gives it,
    which the tasks cast their columns to (as `scan` does): a fixed-size list (a vector) becomes a
    list of the same values, Spark having no fixed-size list. A type Spark has nothing for is
    refused here, in one line, before Spark starts."""
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

    try:
        spark = to_arrow_type(from_arrow_type(kind, prefer_timestamp_ntz=True), timezone="UTC")
    except Exception:  # noqa: BLE001 - pyspark's own words are a stack of types
        raise InvalidInputError(
            f"column {column!r} has type {kind}, which Spark cannot take; leave it out of the "
            "join's columns (--columns, and no --where)"
        ) from None
    return kind if _taken_alike(kind, spark) else spark


def _taken_alike(kind: Any, spark: Any) -> bool:
    """Whether Spark takes Arrow columns of `kind` as it takes its own `spark` type: a timestamp's
    zone, a list's item name and large strings or binaries change nothing it reads."""
    if t.is_timestamp(kind) and t.is_timestamp(spark):
        return kind.unit == spark.unit
    if (t.is_large_string(kind) and t.is_string(spark)) or (
        t.is_large_binary(kind) and t.is_binary(spark)
    ):
        return True
    if t.is_list(kind) and t.is_list(spark):
        return _taken_alike(kind.value_type, spark.value_type)
    if t.is_struct(kind) and t.is_struct(spark):
        return kind.num_fields == spark.num_fields and all(
            a.name == b.name and _taken_alike(a.type, b.type)
            for a, b in zip(kind, spark, strict=True)
        )
    if t.is_map(kind) and t.is_map(spark):
        return _taken_alike(kind.key_type, spark.key_type) and _taken_alike(
            kind.item_type, spark.item_type
        )
    return kind == spark


@dataclass
class JoinJob:
    """What the driver decided: SPJ or shuffle, the columns, the resolved partition tables."""

    plan: JoinPlan
    how: str
    left_ns: Namespace
    right_ns: Namespace
    columns: list[OutColumn]  # what the source yields (every column when --where is given)
    selected: list[OutColumn]  # what the user sees, after --where
    left_keys: list[str]  # output names of the key columns
    right_keys: list[str]
    left_read: list[tuple[str, str]]  # (source, output name) read from each side
    right_read: list[tuple[str, str]]
    fallback_reasons: list[str] = field(default_factory=list)
    resolved: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # an incremental join (`--since-version`): only the left side's new rows are read
    left_since: Any = None  # service/history/incremental.Since
    tasks: int = 0  # how many Spark tasks run the groups (set when the DataFrame is built)
    # an inner join's keys declared never NULL (see `schema`); off for rows written to files
    keys_never_null: bool = True

    @property
    def spj(self) -> bool:
        return not self.fallback_reasons

    @property
    def schema(self) -> Any:
        """The joined rows' schema. Every column may hold NULLs (a partition table written
        before a column was added reads it as NULL) but an inner join's keys: a NULL key
        matches nothing. Saying so spares Spark a null test per key and row when it turns the
        tasks' Arrow batches into rows; files keep the keys nullable (`keys_never_null`), as
        Spark's own joins write them, so their schema never depends on how the join ran."""
        left, right = self.side_schema("l"), self.side_schema("r")
        fields = {f.name: f for f in [*left, *right]}
        if self.how == "inner" and self.keys_never_null:
            for key in [*self.left_keys, *self.right_keys]:
                fields[key] = fields[key].with_nullable(False)
        return pa.schema([fields[c.name] for c in self.columns])

    def side_schema(self, side: str) -> Any:
        s = self.plan.left if side == "l" else self.plan.right
        return _nullable(s.layout.schema, self.left_read if side == "l" else self.right_read, side)

    def check_spark_types(self) -> None:
        """Refuse a column Spark cannot take now, in the driver, before Spark starts. Planning
        needs no pyspark: without it, the Spark step says how to install it."""
        try:
            import pyspark  # noqa: F401
        except ImportError:
            return
        self.side_schema("l")
        self.side_schema("r")

    # --- pinning versions in the driver -------------------------------------------------
    def pinned(self, label: str, table: PartitionTable) -> dict[str, Any]:
        """The row a task opens: the table's location at a version fixed now, with its rows."""
        key = (label, table.object_id)
        if key not in self.resolved:
            ns = self.left_ns if label == "left" else self.right_ns
            since = self.left_since if label == "left" else None
            self.resolved[key] = _pin(ns, table, since)
        return self.resolved[key]

    def _pin_all(self, tables: list[tuple[str, PartitionTable]]) -> None:
        """Pin every table the job reads, several at a time (each is a manifest read)."""
        todo = list({(label, t.object_id): (label, t) for label, t in tables}.values())
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda item: self.pinned(*item), todo))

    def groups_work(self) -> list[dict[str, Any]]:
        """One unit per group that can reach the output, with the rows it reads."""
        groups = [
            g for g in self.plan.groups if g.left and (self.how != "inner" or g.right)
        ]  # a group with nothing that can reach the output is not run
        self._pin_all(
            [("left", t) for g in groups for t in g.left]
            + [("right", t) for g in groups for t in g.right]
        )
        work = []
        for g in groups:
            left = [self.pinned("left", t) for t in g.left]
            if self.left_since is not None and not any(t["rows"] for t in left):
                continue  # no new row on the left: nothing of the group reaches the output
            right = [self.pinned("right", t) for t in g.right]
            work.append(
                {
                    "key": {k: str(v) for k, v in g.key.items()},
                    "left": left,
                    "right": right,
                    "rows": sum(t["rows"] for t in [*left, *right]),
                }
            )
        return work

    def pin(self) -> None:
        """Pin every table the job reads now, in the driver: an incremental join that cannot be
        told as appends (a restore, an overwrite, a delete since) is refused before Spark
        starts, and the DataFrame then reads exactly these versions."""
        if self.spj:
            self.groups_work()
        else:
            self.side_work(self.plan.left)
            self.side_work(self.plan.right)

    def side_work(self, side: Side) -> list[dict[str, Any]]:
        """One unit per partition table of `side`."""
        tables = [t for ts in side.tables.values() for t in ts]
        self._pin_all([(side.label, t) for t in tables])
        pinned = [self.pinned(side.label, t) for t in tables]
        return [{"tables": [p], "rows": p["rows"]} for p in pinned]

    # --- DataFrames ---------------------------------------------------------------------
    def _base(self) -> dict[str, Any]:
        return {
            "left": _side_json(self.left_ns, self.left_read),
            "right": _side_json(self.right_ns, self.right_read),
        }

    def dataframe(self, spark: SparkSession) -> Any:
        """The joined rows, in the output columns."""
        if not self.spj:
            return self._shuffle_join(spark)
        frame, self.tasks = _tasks_frame(spark, self.join_spec(), self.groups_work(), self.schema)
        return frame

    def join_spec(self) -> dict[str, Any]:
        """What every task of a storage-partitioned join needs besides its groups."""
        return {
            **self._base(),
            "mode": "join",
            "how": self.how,
            "schema": encode_schema(self.schema),
            "left_schema": encode_schema(self.side_schema("l")),
            "right_schema": encode_schema(self.side_schema("r")),
            "left_keys": self.left_keys,
            "right_keys": self.right_keys,
        }

    def _side_frame(self, spark: SparkSession, side: Side, schema: Any) -> Any:
        job = {**self._base(), "mode": "side", "side": side.label, "schema": encode_schema(schema)}
        return _tasks_frame(spark, job, self.side_work(side), schema)[0]

    def _shuffle_join(self, spark: SparkSession) -> Any:
        left = self._side_frame(spark, self.plan.left, self.side_schema("l"))
        right = self._side_frame(spark, self.plan.right, self.side_schema("r"))
        condition = reduce(
            lambda a, b: a & b,
            [left[lk] == right[rk] for lk, rk in zip(self.left_keys, self.right_keys, strict=True)],
        )
        joined = left.join(right, condition, "inner" if self.how == "inner" else "left_outer")
        return joined.select(*[c.name for c in self.columns])


def _tasks_frame(
    spark: SparkSession, job: dict[str, Any], units: list[dict], schema: Any
) -> tuple[Any, int]:
    """A DataFrame whose tasks run `units`, packed by rows into the session's task slots, and
    how many tasks that is."""
    from pyspark.sql.pandas.types import from_arrow_schema

    packed = [[units[i] for i in p] for p in pack([u["rows"] for u in units], task_slots(spark))]
    tasks = len(packed)
    packed = packed or [[]]  # Spark wants at least one task
    count = len(packed)
    frame = spark.range(0, count, 1, count)
    return frame.mapInArrow(task_function(job, packed), from_arrow_schema(schema)), tasks


def _pin(ns: Namespace, table: PartitionTable, since: Any = None) -> dict[str, Any]:
    """The row a task opens, with a version number (on its branch) and the rows it holds.

    A numbered read_version is kept as it is; NULL (latest) and a tag are resolved here, in the
    driver, so every task reads the same version even while writers commit. The row count
    (manifest metadata, no data read) lets the driver spread the work evenly over the tasks.
    With `since` (an incremental join's left side), `new` lists the new rows as
    [fragment, offset or None, rows] and the count is theirs.
    """
    ref = table.published
    row = {"location": table.location, **ref.as_json()}
    dataset = ref.open(ns.storage, table.location)
    pinned = {**row, "rows": int(dataset.count_rows())}
    if ref.version is None or ref.is_tag:  # the version (on its branch) the tasks all open
        pinned.update(PublishedRef(int(dataset.version), ref.branch_in(dataset)).as_json())
    if since is not None:
        pinned["new"] = _new_rows(ns, table, row, dataset, since)
        pinned["rows"] = sum(count for _, _, count in pinned["new"])
    return pinned


def _new_rows(
    ns: Namespace, table: PartitionTable, row: dict[str, Any], dataset: Any, since: Any
) -> list[list[Any]]:
    """[fragment, offset (None: whole), rows] of the rows appended since the start version."""
    from lancens_cli.partition.rows import dotted
    from lancens_cli.service.history.incremental import published_alike, table_new_rows

    before = since.then(table.object_id, table.location)
    if before is not None and published_alike(before, row):
        return []
    what = f"partition table {dotted(table.object_id)}"
    branch = table.published.branch_in(dataset)
    found = table_new_rows(ns.storage, table.location, dataset, branch, before, what)
    return [[new.fragment_id, new.offset, new.count] for new in found]


def plan_job(
    left_ns: Namespace,
    right_ns: Namespace,
    on: list[tuple[str, str]],
    how: str,
    columns: list[str] | None,
    filtered: bool = False,
    since: tuple[str | None, str | None] | None = None,
    since_names: SinceNames | None = None,
) -> JoinJob:
    """Plan the join: read both `__manifest`s once, decide SPJ or shuffle, pick the columns.

    `filtered`: a --where will be applied, which may name any output column, so every column
    is read and `selected` is picked after the filter. `since` (version, timestamp): join only
    the rows the left root gained after that `__manifest` version (`since_names`: how messages
    name it; the data source's option names by default).
    """
    if how not in HOWS:
        raise InvalidInputError(f"--how {how!r}: expected one of {', '.join(HOWS)}")
    plan = join_plan(left_ns, right_ns, on, all_versions=True)
    left_names = plan.left.layout.schema.names
    right_names = plan.right.layout.schema.names
    every = output_columns(left_names, right_names)
    selected = choose_columns(every, columns)
    chosen = every if filtered else selected
    name_of = {(c.side, c.source): c.name for c in every}
    left_keys = [name_of[("l", k.left)] for k in plan.keys]
    right_keys = [name_of[("r", k.right)] for k in plan.keys]

    def read(side: str, keys: list[str]) -> list[tuple[str, str]]:
        wanted = {c.name for c in chosen if c.side == side} | set(keys)
        return [(c.source, c.name) for c in every if c.side == side and c.name in wanted]

    job = JoinJob(
        plan,
        how,
        left_ns,
        right_ns,
        chosen,
        selected,
        left_keys,
        right_keys,
        read("l", left_keys),
        read("r", right_keys),
    )
    job.fallback_reasons = _fallback_reasons(plan, how)
    job.check_spark_types()
    if since is not None:
        from lancens_cli.service.history.incremental import OPTION_NAMES, since_versions

        job.left_since = since_versions(left_ns, *since, since_names or OPTION_NAMES)
    return job


def checked_where(where: str | None, job: JoinJob) -> str | None:
    """`--where` as Spark is to read it, checked before Spark starts as `scan --where` is (a
    column no output has, a literal that can be no value of its column's type, a condition
    that does not parse: exit 2, one line): over the output columns, with `l.<col>` and
    `r.<col>` naming a side's column as in `--columns`."""
    from lancens_cli.partition.spark_conditions import split_condition
    from lancens_cli.pipeline.scan import SESSION_ZONE

    if where is None:
        return None
    text = _sides_named(where, job.columns)
    split_condition(text, job.schema, session_zone=SESSION_ZONE, label="--where")
    return text


def _sides_named(where: str, columns: list[OutColumn]) -> str:
    """`where` with each `l.<col>` / `r.<col>` replaced by that column's output name (quoted);
    the text is left as it is where it does not parse (the check says why)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from lancens_cli.pipeline.scan import quote_identifier

    names = {c.name.lower() for c in columns}
    by_side = {(c.side, c.source.lower()): c.name for c in columns if c.side not in names}
    try:
        tree = sqlglot.parse_one(where, read="spark")
    except (SqlglotError, RecursionError):
        return where
    spans = []
    for column in tree.find_all(exp.Column) if tree is not None else ():
        table = column.args.get("table")
        if table is None or column.args.get("db") is not None:
            continue
        name = by_side.get((table.name.lower(), column.name.lower()))
        if name is not None:
            spans.append((table.meta["start"], column.this.meta["end"] + 1, name))
    for start, end, name in sorted(spans, reverse=True):
        where = where[:start] + quote_identifier(name) + where[end:]
    return where


def _fallback_reasons(plan: JoinPlan, how: str) -> list[str]:
    if not plan.compatible:
        return plan.reasons or ["the partition layouts are not compatible"]
    right_versions = [i for i, ts in plan.right.tables.items() if ts]
    if how == "left" and len(right_versions) > 1:
        return [
            "a left join needs each left partition to meet all its right rows in one group, and "
            f"the right side holds partitions of {len(right_versions)} spec versions"
        ]
    return []


# --- explaining -------------------------------------------------------------------------------


def physical_plan(df: DataFrame) -> str:
    """Spark's physical plan of `df`, as `EXPLAIN` prints it (read from the JVM, which a Spark
    Connect client does not reach: there the groups are all `--explain` shows)."""
    if is_connect(df.sparkSession):
        return "(Spark's physical plan is not readable through Spark Connect)"
    return str(df._jdf.queryExecution().executedPlan().toString())


@dataclass
class JoinExplain(Result):
    """`--explain`: the groups (or why there are none) and Spark's physical plan."""

    job: JoinJob
    plan_text: str

    def to_json(self) -> dict[str, Any]:
        plan = self.job.plan
        return {
            "storage_partitioned": self.job.spj,
            "how": self.job.how,
            "on": [{"left": k.left, "right": k.right} for k in plan.keys],
            "columns": [c.name for c in self.job.selected],
            "reasons": self.job.fallback_reasons,
            "counts": plan.counts(),
            "tasks": self.job.tasks,
            "groups": [g.to_json() for g in plan.groups] if self.job.spj else [],
            "physical_plan": self.plan_text,
        }


# --- results ----------------------------------------------------------------------------------


@dataclass
class JoinRows(Result):
    """Rows printed by `join` (bounded by --limit)."""

    columns: list[str]
    rows: list[tuple]
    limit: int
    more: bool
    storage_partitioned: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "rows": [dict(zip(self.columns, r, strict=True)) for r in self.rows],
            "limit": self.limit,
            "truncated": self.more,
            "storage_partitioned": self.storage_partitioned,
        }


@dataclass
class JoinCount(Result):
    count: int
    storage_partitioned: bool

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "storage_partitioned": self.storage_partitioned}


@dataclass
class JoinFiles(Result):
    path: str
    format: str
    rows: int
    files: int
    storage_partitioned: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "rows": self.rows,
            "files": self.files,
            "storage_partitioned": self.storage_partitioned,
        }


def collect_rows(df: DataFrame, limit: int, spj: bool) -> JoinRows:
    taken = df.limit(limit + 1).collect() if limit > 0 else df.collect()
    more = limit > 0 and len(taken) > limit
    rows = [tuple(r) for r in taken[: limit if limit > 0 else None]]
    return JoinRows(list(df.columns), rows, limit, more, spj)


def write_files(spark: SparkSession, df: DataFrame, path: str, fmt: str, spj: bool) -> JoinFiles:
    """Write the joined rows with Spark; an existing path is refused, not replaced."""
    if _path_exists(spark, path):
        raise TableAlreadyExistsError(f"--to {path}: it already exists; choose a new path")
    writer = df.write.mode("errorifexists").format(fmt)
    if fmt == "csv":
        writer = writer.option("header", "true").option("escape", '"')  # RFC 4180
    writer.save(path)
    back = spark.read.format(fmt)
    if fmt == "csv":
        back = back.option("header", "true").option("escape", '"')
    written = back.load(path)
    return JoinFiles(path, fmt, written.count(), len(written.inputFiles()), spj)


def _path_exists(spark: SparkSession, path: str) -> bool:
    """Through the JVM's Hadoop file system, which knows every scheme Spark writes to. A
    Connect session has no JVM here: its writer's `errorifexists` refuses an existing path."""
    if is_connect(spark):
        return False
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return bool(fs.exists(hadoop_path))
