"""`lancens update --set 'col = expr' --where PRED`: rows changed in place, in one commit.

The rows are found as `delete` finds them (service/partitioned/delete.py: the partition tables
the condition can match, each with its filter), read at the versions `__manifest` publishes,
given their new values (each `--set` expression evaluated by DataFusion, the SQL engine of
Lance's own filters, over the rows in the namespace schema), and written back through the
write's commit path: a table's matching rows are deleted and their new values routed to their
partitions under the current spec, as a write routes rows. A row whose partition values stay
gets Lance's Update in its own table (its old rows deleted, the new ones added, one Lance
commit); a row whose values change, or that lives under an earlier spec, moves to the table its
values now select, in the same `__manifest` commit. The new values were worked out from the
published rows, so a matched partition that another writer changed meanwhile fails the update
(nothing published) rather than being rebased. DataFusion is imported where an expression is
evaluated (`_evaluate`): `merge` uses this module's commit path and evaluates none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import Identifier, Result, json_value
from lancens_cli.partition.rows import top_namespace
from lancens_cli.partition.schema_evolution import column_sources, history_from_metadata
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.delete import (
    DeletePlan,
    commit_guard,
    delete_touch,
    plan_delete,
    run_in_parallel,
)
from lancens_cli.service.partitioned.input_rows import conform, split_by_partition
from lancens_cli.service.partitioned.placement import LevelIndex, PartitionTouch, prepare
from lancens_cli.service.partitioned.write import PartitionWrite, commit_touches
from lancens_cli.store.catalog_rows import open_published
from lancens_cli.store.known_rows import KnownRows, known_rows_of


@dataclass(frozen=True)
class Assignment:
    """One `--set 'col = expr'`: a namespace column and the SQL that gives its new value."""

    column: str
    expression: str


@dataclass
class PartitionUpdate(Result):
    where: str
    sets: list[str]
    rows: int  # rows updated (a dry run: that would be)
    tables_read: int  # partition tables the condition can match
    partitions_total: int
    moved: int = 0  # rows now in another partition table than before
    partitions: list[dict[str, Any]] = field(default_factory=list)  # each table written
    manifest_version: int = 0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "where": self.where,
            "set": self.sets,
            "rows_updated": self.rows,
            "rows_moved": self.moved,
            "partitions_matched": self.tables_read,
            "partitions_total": self.partitions_total,
            "manifest_version": self.manifest_version,
            "partitions": self.partitions,
        }


@dataclass
class UpdatePlan:
    rows_of: DeletePlan  # which tables, and each one's filter
    assignments: list[Assignment]
    sets: list[str]


def plan_update(ns: Namespace, sets: list[str], where: str) -> UpdatePlan:
    """The tables and filters (as `delete` plans them) and the checked assignments; every input
    error is raised here, before a row is read."""
    plan = plan_delete(ns, where)
    assignments = parse_assignments(sets, plan.layout.schema)
    return UpdatePlan(plan, assignments, list(sets))


def parse_assignments(sets: list[str], schema: pa.Schema) -> list[Assignment]:
    """`col = expr` texts as assignments, refused in words when a column is not the namespace's,
    is set twice, or an expression does not evaluate (DataFusion) to a value of its type."""
    if not sets:
        raise InvalidInputError("--set: give at least one 'column = expression'")
    found: dict[str, Assignment] = {}
    for text in sets:
        column, equals, expression = text.partition("=")
        column = column.strip().strip('"`')
        if not equals or not column or not expression.strip():
            raise InvalidInputError(f"--set {text!r}: write it as 'column = expression'")
        if column not in schema.names:
            raise InvalidInputError(
                f"--set {text!r}: unknown column {column!r} (columns: {', '.join(schema.names)})"
            )
        if column in found:
            raise InvalidInputError(f"--set: column {column!r} is set twice")
        found[column] = Assignment(column, expression.strip())
    assignments = list(found.values())
    new_values(schema.empty_table(), assignments, schema)  # types and names, on no row
    return assignments


def new_values(rows: pa.Table, assignments: list[Assignment], schema: pa.Schema) -> pa.Table:
    """`rows` (in the namespace schema) with the assigned columns replaced by their
    expressions' values, cast to the columns' types; refused when an expression gives a row
    count other than the rows' (a set-returning function) or an integer that wrapped."""
    by_column = {a.column: a.expression for a in assignments}
    computed = _evaluate(rows, by_column, schema.names)
    if computed.num_rows != rows.num_rows:
        raise InvalidInputError(
            f"--set: the expressions give {computed.num_rows} rows for {rows.num_rows}: "
            "each must give one value per row"
        )
    _refuse_wrapped(rows, by_column, computed, schema)
    columns = []
    for f in schema:
        column = computed.column(f.name)
        if column.type != f.type:
            try:
                column = column.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise InvalidInputError(
                    f"--set {f.name}: the expression gives {column.type}, the column is "
                    f"{f.type} ({exc})"
                ) from None
        columns.append(column)
    return conform(pa.Table.from_arrays(columns, names=schema.names), schema)


def _evaluate(rows: pa.Table, by_column: dict[str, str], names: list[str]) -> pa.Table:
    """`SELECT` of every column, an assigned one as its expression, over `rows` (DataFusion;
    column names as written, not lower-cased)."""
    import datafusion  # loaded where an expression is evaluated: `merge` needs none

    config = datafusion.SessionConfig().set(
        "datafusion.sql_parser.enable_ident_normalization", "false"
    )
    context = datafusion.SessionContext(config)
    batches = rows.to_batches() or [pa.RecordBatch.from_pylist([], schema=rows.schema)]
    context.register_record_batches("rows", [batches])
    select = ", ".join(
        f"({by_column[name]}) AS {_quoted(name)}" if name in by_column else _quoted(name)
        for name in names
    )
    try:
        return context.sql(f"SELECT {select} FROM rows").to_arrow_table()
    except Exception as exc:  # DataFusion raises its own kinds for SQL it cannot plan or run
        raise InvalidInputError(f"--set: {_first_line(exc)}") from None


def _refuse_wrapped(
    rows: pa.Table, by_column: dict[str, str], computed: pa.Table, schema: pa.Schema
) -> None:
    """DataFusion's integer arithmetic wraps around: each integer result is worked out again
    with the rows' integers as decimal(38, 0), and a value that differs (truncated toward
    zero, as integer division is) wrapped: the update is refused. An expression that cannot
    be worked out on decimals (bit operations) is not checked."""
    integers = [name for name in by_column if pa.types.is_integer(computed.schema.field(name).type)]
    if not integers or not rows.num_rows:
        return
    wide = pa.decimal128(38, 0)
    widened = pa.table(
        {
            f.name: rows.column(f.name).cast(wide) if pa.types.is_integer(f.type) else rows[f.name]
            for f in schema
        }
    )
    try:
        again = _evaluate(widened, {n: by_column[n] for n in integers}, integers)
    except InvalidInputError:
        return
    for name in integers:
        if not pa.types.is_decimal(again.schema.field(name).type):
            continue
        plain = computed.column(name).to_pylist()
        for value, exact in zip(plain, again.column(name).to_pylist(), strict=True):
            if value is not None and exact is not None and int(exact) != value:
                raise InvalidInputError(
                    f"--set {name}: {by_column[name]} is {int(exact)} for some row, beyond "
                    f"{computed.schema.field(name).type}; nothing was changed"
                )


def update_rows(
    ns: Namespace,
    plan: UpdatePlan,
    dry_run: bool = False,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> PartitionUpdate:
    """Give the planned rows their new values, every changed table published in one
    `__manifest` commit; with `dry_run`, the rows and where they would go, nothing written."""
    found = plan.rows_of
    layout, snapshot = found.layout, found.snapshot
    schema = layout.schema
    history = history_from_metadata(snapshot.metadata)
    read = run_in_parallel(lambda t: _published_rows(ns, t, schema, history), found.targets)
    old = [rows for rows, _ in read]
    result = PartitionUpdate(
        found.where,
        plan.sets,
        sum(t.num_rows for t in old),
        len(found.targets),
        found.partitions_total,
        manifest_version=snapshot.version,
        dry_run=dry_run,
    )
    if not result.rows:
        return result
    parts = [new_values(t, plan.assignments, schema) if t.num_rows else t for t in old]
    changed = pa.concat_tables([t for t in parts if t.num_rows])
    deletes = {}
    for target, (rows, known) in zip(found.targets, read, strict=True):
        if rows.num_rows:
            touch = delete_touch(target.match, target.filter, rows_from_base=True)
            touch.known_rows = known
            touch.rows_deleted = rows.num_rows  # as planned; the commit counts them again
            deletes[target.match.object_id] = touch
    replaced = Replacement.of_rows(ns, snapshot, layout, deletes, changed)
    result.moved = _moved(ns, found, parts)
    if dry_run:
        result.partitions = [written_entry(t, dry_run, layout) for t in replaced.touches]
        return result
    result.manifest_version = replaced.commit(commit_guard(ns, found), progress)
    result.partitions = [written_entry(t, False, layout) for t in replaced.touches]
    return result


def _moved(ns: Namespace, found: DeletePlan, parts: list[pa.Table]) -> int:
    """The rows whose new values (`parts`: each matched table's) select another table than
    the one they were read from."""
    spec, schema = found.layout.current, found.layout.schema
    index = LevelIndex(found.snapshot, spec)
    moved = 0
    for target, rows in zip(found.targets, parts, strict=True):
        for touch in split_by_partition(rows, spec, schema):
            prepare(ns.storage, touch, spec, found.snapshot, index, {})
            if touch.created or touch.table_id != target.match.object_id:
                moved += touch.row_count
    return moved


class Replacement:
    """Rows of some partition tables replaced by new rows, as one change: each table's old
    rows deleted (`deletes`: its touch, by table id) and the new rows written where the current
    spec routes them (`writes`: one touch per partition, holding its rows or the fragments
    Spark tasks wrote; `fresh`: the new partition namespaces those tasks chose); a table that
    both loses and gains rows gets one touch (one Lance commit: an Update). `update` and
    `merge` publish through it."""

    def __init__(
        self,
        ns: Namespace,
        snapshot: Any,
        layout: Any,
        deletes: dict[str, PartitionTouch],
        writes: list[PartitionTouch],
        fresh: dict[tuple[str, Any], str] | None = None,
    ) -> None:
        self.ns, self.snapshot, self.layout = ns, snapshot, layout
        spec = layout.current
        index = LevelIndex(snapshot, spec)
        self.fresh: dict[tuple[str, Any], str] = {} if fresh is None else fresh
        for touch in writes:
            prepare(ns.storage, touch, spec, snapshot, index, self.fresh)
        self.touches = list(deletes.values())
        self.rows = sum(touch.row_count for touch in writes)
        for touch in writes:
            same = None if touch.created else deletes.get(touch.table_id)
            if same is None:
                self.touches.append(touch)
                continue
            same.values = touch.values  # deleted and written at once
            same.rows, same.fragments, same.num_rows = touch.rows, touch.fragments, touch.num_rows
            same.schema = touch.schema or same.schema

    @classmethod
    def of_rows(
        cls,
        ns: Namespace,
        snapshot: Any,
        layout: Any,
        deletes: dict[str, PartitionTouch],
        rows: pa.Table,
    ) -> Replacement:
        """`rows` routed by the current spec, as a write routes them."""
        writes = split_by_partition(rows, layout.current, layout.schema)
        return cls(ns, snapshot, layout, deletes, writes)

    def commit(
        self,
        guard: Callable[[Any], None],
        progress: Callable[[int], Callable[[], None]] | None = None,
    ) -> int:
        """Publish every touch in one `__manifest` commit; its version."""
        spec = self.layout.current
        fields = [f.field_id for f in spec.fields]
        write = PartitionWrite(spec.id, self.rows, self.touches, fields)
        done = commit_touches(
            self.ns, self.snapshot, self.layout, write, self.fresh, progress, guard
        )
        return done.manifest_version


def _published_rows(
    ns: Namespace, target: Any, schema: pa.Schema, history: list[Any]
) -> tuple[pa.Table, KnownRows | None]:
    """The rows of one matched table its filter selects, at the version `__manifest`
    publishes, in the namespace schema (a column the table holds under an earlier name read by
    that name, one it lacks NULL); and their addresses there (store/known_rows.py)."""
    row = {**target.match.published.as_json(), "location": target.match.location}
    dataset = open_published(ns.storage, row)
    sources = column_sources(dataset.schema, schema, history)
    wanted = sorted({source for source in sources.values() if source})
    read = dataset.to_table(columns=wanted, filter=target.filter, with_row_address=True)
    columns = [
        read.column(sources[f.name]) if sources.get(f.name) else pa.nulls(read.num_rows, f.type)
        for f in schema
    ]
    rows = conform(pa.Table.from_arrays(columns, names=schema.names), schema)
    on_main = target.match.published.branch_in(dataset) is None
    return rows, known_rows_of(target.match.location, int(dataset.version), read, on_main)


def written_entry(touch: PartitionTouch, dry_run: bool, layout: Any) -> dict[str, Any]:
    """One table a row change writes: its partition values and its rows out and in (`update`
    and `merge` alike). A dry run names no table it would create: its name is chosen when it is
    created, so the values say which partition it is."""
    named = touch.table_id and not (dry_run and touch.created)
    return {
        "table": Identifier.from_object_id(touch.table_id).display() if named else None,
        "values": _partition_values(touch, layout),
        "location": touch.location if named else None,
        "rows_deleted": touch.rows_deleted,
        "rows_written": touch.row_count,
        "created": touch.created,
        "read_version": None if dry_run else touch.version,
    }


def _partition_values(touch: PartitionTouch, layout: Any) -> dict[str, Any]:
    """The touch's values by partition field, under the spec of its table (the current one
    for a table not created yet), as `partitions` and `ingest --dry-run` show them."""
    spec = layout.current
    if touch.table_id:
        owner = top_namespace(touch.table_id)
        spec = next((s for s in layout.specs if s.namespace == owner), spec)
    fields = [f.field_id for f in spec.fields]
    return {f: json_value(v) for f, v in zip(fields, touch.values, strict=True)}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
