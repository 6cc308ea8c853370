"""What one Spark task of a `lancens` write does (on an executor).

The task conforms its Arrow batches to the target schema, splits them by the current partition
spec (the same code `lancens write` runs), and writes Lance fragments into the partition
tables, a bounded chunk at a time, so a worker holds at most one chunk of its input split.
Nothing is committed here: the fragments travel to the driver in the commit message. A task
that fails removes the files it wrote before it fails. Every data file is also written down in
the job's log (`.lancens-jobs/<job id>/`, a small file per call to Lance, as soon as it
returns), so that an aborted job removes the files of tasks that never reported: attempts Spark
cancelled or retried that still finished their write; a task that finds the job aborted removes
what it wrote. (A worker killed inside Lance's write leaves files no log names; `check --fix`
reports and removes them after the grace.)

New partitions get their table directory from the job id and the partition values alone, so
every task writing the same new partition writes into the same directory.

Lance, pyspark's `TaskContext` and the service modules that load Lance are imported inside the
functions: Lance is imported in the task, after the Python worker forked, and
`lancens_cli.pipeline.write_task` imports without Spark.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as t

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.rows import NAME_ALPHABET, NAME_LENGTH, child_id
from lancens_cli.pipeline.task_failures import carried
from lancens_cli.store.containment import JOBS_DIR  # the write jobs' logs, below the root

if TYPE_CHECKING:
    from lancens_cli.store.storage import Storage

CHUNK_ROWS = 1 << 20  # rows of input a task splits and writes at once
CHUNK_BYTES = 128 << 20
WRITERS = 4  # partition tables a task writes at once


@dataclass
class WritePlan:
    """What the driver resolved when the writer was made; pickled to every task."""

    root_properties: dict[str, Any]
    job_id: str  # 32 hex digits; its first 8 prefix every new table directory of the job
    schema: Any  # the pyarrow schema rows are conformed to
    spec: Any = None  # the current PartitionSpec (None: a plain table)
    children: dict[tuple[str, Any], str] = field(default_factory=dict)  # level index
    tables: dict[str, str] = field(default_factory=dict)  # partition table id -> location
    location: str | None = None  # a plain table's directory
    overwrite: bool = False
    create: bool = False  # a plain table this job creates
    branch: str | None = None  # partition tables' branch the job writes to (None: main)

    @property
    def prefix(self) -> str:
        return self.job_id[:8]

    def new_location(self, object_id: str) -> str:
        """The V2 `<8 hex>_<object id>` directory of a table this job creates."""
        return f"{self.prefix}_{object_id}"

    def child_name(self, parent: str, value: Any) -> str:
        """A new partition namespace's 16-character base36 name, the same in every task."""
        text = f"{self.job_id}\0{parent}\0{type(value).__name__}\0{value!r}"
        number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:16], "big")
        chars = []
        for _ in range(NAME_LENGTH):
            number, digit = divmod(number, len(NAME_ALPHABET))
            chars.append(NAME_ALPHABET[digit])
        return "".join(chars)


def encode_value(value: Any) -> Any:
    """A partition value as JSON (dates and times keep their type)."""
    if isinstance(value, dt.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    return value


def decode_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    kind, text = next(iter(value.items()))
    if kind == "datetime":
        return dt.datetime.fromisoformat(text)
    if kind == "date":
        return dt.date.fromisoformat(text)
    if kind == "bytes":
        return bytes.fromhex(text)
    return decimal.Decimal(text)


def _chunks(batches: Iterator[Any]) -> Iterator[list[Any]]:
    pending: list[Any] = []
    rows = size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= CHUNK_ROWS or size >= CHUNK_BYTES:
            yield pending
            pending, rows, size = [], 0, 0
    if pending:
        yield pending


class _Written:
    """The fragments one task wrote, by table; JSON for the commit message."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def add(self, key: str, entry: dict[str, Any], fragments: list[Any], rows: int) -> None:
        with self._lock:
            found = self.entries.setdefault(key, {**entry, "fragments": [], "rows": 0})
            found["fragments"] += [f.to_json() for f in fragments]
            found["rows"] += rows

    def to_text(self) -> str:
        return json.dumps(list(self.entries.values()))


def run_task(plan: WritePlan, batches: Iterator[Any]) -> str:
    """Write the task's rows as fragments; the commit message's JSON text."""
    written = _Written()
    storage = _storage(plan)
    if storage.exists(aborted_marker(plan.job_id)):
        raise JobAbortedError("the job was aborted")
    try:
        for chunk in _chunks(batches):
            if plan.spec is None:
                _write_plain(plan, storage, chunk, written)
            else:
                _write_partitioned(plan, storage, chunk, written)
    except BaseException as exc:
        delete_written(storage, json.loads(written.to_text()))
        raise carried(exc) from None
    if storage.exists(aborted_marker(plan.job_id)):  # finished after the job failed
        delete_written(storage, json.loads(written.to_text()))
        raise carried(JobAbortedError("the job was aborted"))
    return written.to_text()


def _storage(plan: WritePlan) -> Any:
    from lancens_cli.service.namespace import Namespace

    return Namespace.from_properties(plan.root_properties).storage


def _table(plan: WritePlan, chunk: list[Any]) -> Any:

    from lancens_cli.service.partitioned.input_rows import conform

    table = spark_times(pa.Table.from_batches(chunk), plan.schema, session_zone())
    check_list_sizes(table, plan.schema)
    return conform(table, plan.schema)


def check_list_sizes(table: Any, target: Any) -> None:
    """Refuse in one line a list that a fixed-size list column (a vector) of `target` cannot
    take. Spark has no fixed-size list: a vector reaches the task as a list, and `conform`'s cast
    makes it the target's vector again, but Arrow's own refusal names no column and no sizes."""
    kinds = {f.name: f.type for f in target}
    for name, column in zip(table.column_names, table.columns, strict=True):
        want = kinds.get(name)
        if want is not None and want != column.type and _holds_fixed_lists(want):
            for chunk in column.chunks:
                _check_sizes(chunk, want, name)


def _listed(kind: Any) -> bool:
    return t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind)


def _holds_fixed_lists(kind: Any) -> bool:
    """Whether a column of this type needs its lists' sizes checked (most columns do not)."""
    if t.is_fixed_size_list(kind):
        return True
    if _listed(kind):
        return _holds_fixed_lists(kind.value_type)
    if t.is_struct(kind):
        return any(_holds_fixed_lists(f.type) for f in kind)
    return False


def _check_sizes(array: Any, want: Any, path: str) -> None:
    """`array`'s lists (at any depth of lists and structs) against `want`'s fixed sizes."""
    kind = array.type
    if t.is_struct(want) and t.is_struct(kind):
        children = array.flatten()  # a NULL struct's children read as NULL
        for f in want:
            index = kind.get_field_index(f.name)
            if index >= 0 and _holds_fixed_lists(f.type):
                _check_sizes(children[index], f.type, f"{path}.{f.name}")
        return
    if not _listed(kind) or not _listed(want):
        return  # not a list: the kinds were checked before the job, `conform` casts or refuses
    if t.is_fixed_size_list(want) and kind != want:
        sizes = pc.list_value_length(array)
        other = sizes.filter(pc.not_equal(sizes, want.list_size))  # NULL lists drop out
        if len(other):
            raise InvalidInputError(
                f"column {path!r} takes vectors of {want.list_size} values; a row of the input "
                f"holds {other[0].as_py()}"
            )
    if _holds_fixed_lists(want.value_type):
        _check_sizes(array.flatten(), want.value_type, f"{path}[]")


def session_zone() -> str:
    """The Spark session time zone of the running task (Spark hands SQL settings to its
    tasks); UTC outside Spark."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        zone = context.getLocalProperty("spark.sql.session.timeZone") if context else None
    except Exception:  # noqa: BLE001 - not in a Spark task
        zone = None
    return zone or "UTC"


def spark_times(table: Any, target: Any, zone: str) -> Any:
    """Timestamp columns moved between instants and wall times as Spark's own CAST does in
    the session zone: TIMESTAMP -> TIMESTAMP_NTZ is the wall time there, TIMESTAMP_NTZ ->
    TIMESTAMP the instant that wall time names there (a skipped time moved forward by the gap,
    a repeated one at its earlier offset, as java.time does). Never a silent shift."""
    kinds = {f.name: f.type for f in target}
    columns, changed = [], False
    for name, column in zip(table.column_names, table.columns, strict=True):
        want = kinds.get(name)
        if want is not None and t.is_timestamp(want) and t.is_timestamp(column.type):
            if column.type.tz is not None and want.tz is None:  # instant -> wall time
                zoned = column.cast(pa.timestamp(column.type.unit, tz=zone))
                column, changed = pc.local_timestamp(zoned), True
            elif column.type.tz is None and want.tz is not None:  # wall time -> instant
                column, changed = _instants(column, zone), True
        columns.append(column)
    return pa.table(columns, names=table.column_names) if changed else table


def _instants(column: Any, zone: str) -> Any:
    unit = column.type.unit
    try:
        return pc.assume_timezone(column, timezone=zone, ambiguous="earliest", nonexistent="raise")
    except pa.ArrowInvalid:  # a wall time the zone skips: java.time's rule, value by value
        place = ZoneInfo(zone)
        values = [
            None if v is None else v.replace(tzinfo=place, fold=0) for v in column.to_pylist()
        ]
        return pa.array(values, pa.timestamp(unit, tz=zone))


def job_log_dir(job_id: str) -> str:
    return f"{JOBS_DIR}/{job_id}"


def aborted_marker(job_id: str) -> str:
    """Written by `abort()`: a task still running (Spark does not wait for the tasks it
    cancels) removes what it writes instead of leaving it behind."""
    return f"{JOBS_DIR}/{job_id}.aborted"


class JobAbortedError(RuntimeError):
    """A task of a job the driver has aborted."""


def _log_written(
    storage: Storage, job_id: str, entry: dict[str, Any], fragments: list[Any]
) -> None:
    """Write down the data files Lance just wrote, in the job's log, before anything else
    happens; a straggler of an aborted job removes them instead (and says so by failing)."""
    files = [f.path for fragment in fragments for f in fragment.files]
    record = {"location": entry["location"], "branch": entry.get("branch"), "files": files}
    storage.write_text(f"{job_log_dir(job_id)}/{secrets.token_hex(8)}.json", json.dumps(record))
    if storage.exists(aborted_marker(job_id)):
        for path in files:
            storage.delete_file(f"{data_root(entry)}/data/{path}")
        raise JobAbortedError("the job was aborted")


def _write_fragments(
    storage: Storage, entry: dict[str, Any], rows: Any, schema: Any, job_id: str
) -> list[Any]:
    from lancens_cli.store.lance_input import write_fragments

    fragments = write_fragments(
        rows, storage.uri(data_root(entry)), schema=schema, storage_options=storage.lance_options
    )
    _log_written(storage, job_id, entry, fragments)
    return fragments


def forget_job_log(storage: Storage, job_id: str) -> None:
    """Remove a job's log (and the logs' directory once no job has one)."""
    storage.delete_tree(job_log_dir(job_id))
    storage.remove_empty_dir(JOBS_DIR)


def job_logged_entries(storage: Storage, job_id: str) -> list[dict[str, Any]]:
    """The data files the job's log names, as entries `delete_written` takes."""
    entries = []
    for item in storage.list_dir(job_log_dir(job_id)):
        try:
            record = json.loads(storage.read_bytes(f"{job_log_dir(job_id)}/{item.name}"))
        except (OSError, ValueError):
            continue
        fragments = [{"files": [{"path": path} for path in record.get("files", [])]}]
        entries.append(
            {"location": record["location"], "branch": record.get("branch"), "fragments": fragments}
        )
    return entries


def _write_plain(plan: WritePlan, storage: Storage, chunk: list[Any], written: _Written) -> None:
    table = _table(plan, chunk)
    entry = {"location": plan.location}
    fragments = _write_fragments(storage, entry, table, plan.schema, plan.job_id)
    written.add(plan.location, {"location": plan.location}, fragments, table.num_rows)


def _write_partitioned(
    plan: WritePlan, storage: Storage, chunk: list[Any], written: _Written
) -> None:
    from lancens_cli.service.partitioned.input_rows import split_by_partition

    table = _table(plan, chunk)
    placed = [_place(plan, touch) for touch in split_by_partition(table, plan.spec, plan.schema)]

    def write(item: tuple[Any, dict[str, Any]]) -> None:
        touch, entry = item
        fragments = _write_fragments(storage, entry, touch.rows, plan.schema, plan.job_id)
        written.add(entry["table_id"], entry, fragments, touch.rows.num_rows)

    # Partition tables side by side, as `write` does: Lance encodes and writes outside the GIL.
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        for _ in pool.map(write, placed):
            pass


def _place(plan: WritePlan, touch: Any) -> tuple[Any, dict[str, Any]]:
    """The partition's table: the existing one, or the job's directory for a new one."""
    from lancens_cli.service.partitioned.placement import TABLE_NAME, value_key

    parent, path, new = plan.spec.namespace, [], False
    for value in touch.values:
        child = None if new else plan.children.get((parent, value_key(value)))
        if child is None:
            new = True
            child = child_id(parent, plan.child_name(parent, value))
        path.append(child)
        parent = child
    table_id = child_id(parent, TABLE_NAME)
    entry = {
        "table_id": table_id,
        "location": plan.tables.get(table_id) or plan.new_location(table_id),
        "created": table_id not in plan.tables,
        "path": path,
        "values": [encode_value(v) for v in touch.values],
    }
    if plan.branch is not None:  # a branch keeps its data files in `tree/<branch>/`
        entry["branch"] = plan.branch
    return touch, entry


def data_root(entry: dict[str, Any]) -> str:
    """The directory whose `data/` holds an entry's files: the table, or its branch's."""
    branch = entry.get("branch")
    return entry["location"] if branch is None else f"{entry['location']}/tree/{branch}"


def delete_written(storage: Storage, entries: list[dict[str, Any]]) -> None:
    """Remove the data files the entries list (a failed task's, an aborted job's)."""
    for entry in entries:
        for fragment in entry.get("fragments", []):
            for data_file in fragment.get("files", []):
                storage.delete_file(f"{data_root(entry)}/data/{data_file['path']}")


def partition_counts(batches: Iterator[Any], schema: Any, spec: Any) -> dict[str, int]:
    """Rows conformed and split as the write would (bad rows fail here too), counted by their
    partition values (JSON of the encoded values)."""
    from lancens_cli.service.partitioned.input_rows import conform, split_by_partition

    counts: dict[str, int] = {}
    for batch in batches:
        table = pa.Table.from_batches([batch])
        check_list_sizes(table, schema)
        for touch in split_by_partition(conform(table, schema), spec, schema):
            key = json.dumps([encode_value(v) for v in touch.values])
            counts[key] = counts.get(key, 0) + touch.rows.num_rows
    return counts
