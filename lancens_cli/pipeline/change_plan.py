"""Planning the change feed (`readChanges`, `scan --changes`) as pieces the readers read.

The steps come from `service/history/changes.py` (manifests, deletion files and transactions
only). Each side of a step becomes pieces like a read's: a table version, its fragments, the
rows taken by address, the filter for the table's own schema generation. A `ChangeTag` says what
the rows are and which step they belong to; the sides of a step that must be read together
(moves cancelled, updates paired) carry its key as their `group`, and one slice reads them all.
Conditions on the change columns are kept for the reader (`ChangeTag.keep`): the tables lack
those columns. The modules that load Lance (`store.tables`, `service.history.changes`'s
planners, `partition.schema_evolution`) are imported inside the functions that use them, as in
`read_plan.py`: the data source's workers import this module before they fork.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.predicate import FALSE, And, Node, columns_of, flatten
from lancens_cli.partition.table_filter import filter_for
from lancens_cli.pipeline.pieces import ROWS_PER_SLICE, Piece, fragment_bytes, schema_history
from lancens_cli.pipeline.slice_reader import spark_arrow_schema
from lancens_cli.service.history.changes import (
    CHANGE_COLUMNS,
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    Side,
    Step,
)
from lancens_cli.store.opened_versions import OPENED

if TYPE_CHECKING:
    from lancens_cli.pipeline.source_options import SourceOptions
    from lancens_cli.service.history.incremental import SinceNames
    from lancens_cli.service.namespace import Namespace

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_OPENERS = 8  # table versions opened at once while planning
CHANGE_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string(), nullable=False),
    pa.field(COMMIT_VERSION, pa.int64(), nullable=False),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), nullable=False),
)


def with_change_columns(schema: Any) -> Any:
    """The schema of a change feed: the rows' columns, then the three change columns."""
    taken = [name for name in CHANGE_COLUMNS if name in schema.names]
    if taken:
        raise InvalidInputError(
            f"the rows have a column named {taken[0]!r}, which the change feed adds: they "
            "cannot be read as a change feed"
        )
    return pa.schema([*schema, *CHANGE_FIELDS])


@dataclass(frozen=True)
class ChangeTag:
    """What a change piece's rows are."""

    kind: str  # insert or delete (paired rows become update_preimage / update_postimage)
    commit_version: int
    commit_micros: int  # the commit time, microseconds since the epoch (UTC)
    group: str | None  # the step's key when its sides are read together
    by_content: bool
    row_ids: bool
    # the conditions the reader applies to each change row, once it has its change columns
    # (and, for a step read together, once its updates are paired): every conjunct on a
    # change column, and of a step read together every conjunct
    keep: Node | None
    # the columns `keep` reads besides the change columns and the ones returned (Spark's
    # Arrow types)
    needs: Any = None
    # a step read together: every column of the rows (in Spark's Arrow types), which rows are
    # compared by, whatever columns the reader returns
    whole: Any = None


@dataclass(frozen=True)
class _Conditions:
    """A feed's condition split: what Lance filters, what the reader applies after."""

    data: Node | None  # the conjuncts on the rows' own columns
    change: list[Node]  # the conjuncts that read a change column

    @classmethod
    def of(cls, nodes: list[Node]) -> _Conditions:
        on_changes = [n for n in nodes if columns_of(n) & set(CHANGE_COLUMNS)]
        data = [n for n in nodes if not columns_of(n) & set(CHANGE_COLUMNS)]
        return cls(flatten(And(tuple(data))) if data else None, on_changes)

    def after(self, paired: bool) -> Node | None:
        """What the reader applies: of a paired step, the data conjuncts too (filtered before
        pairing, an update's image would lose its other half)."""
        nodes = [*self.change, *([self.data] if paired and self.data is not None else [])]
        return flatten(And(tuple(nodes))) if nodes else None


def change_pieces(
    ns: Namespace,
    opts: SourceOptions,
    schema: Any,
    nodes: list[Node],
    names: SinceNames | None,
) -> list[Piece]:
    """The pieces of a change feed whose rows meet every node."""
    from lancens_cli.service.history.incremental import OPTION_NAMES

    named = names or OPTION_NAMES
    version, timestamp = opts.since() or (None, None)
    conditions = _Conditions.of(nodes)
    ident = opts.ident()
    data_schema = pa.schema([f for f in schema if f.name not in CHANGE_COLUMNS])
    if ident is None:
        from lancens_cli.service.history.changes import namespace_changes
        from lancens_cli.service.history.incremental import change_range

        start, end = change_range(ns, version, timestamp, named)
        history = schema_history(ns)

        def step_pieces(step: Step) -> list[Piece]:
            return [
                piece
                for side in step.sides
                for piece in _side_pieces(ns, step, side, data_schema, history, None, conditions)
            ]

        return namespace_changes(ns, start, end, step_pieces)
    steps, ids = _table_steps(ns, ident, version, timestamp, named)
    sides = [(step, side) for step in steps for side in step.sides]

    def planned(pair: tuple[Step, Side]) -> list[Piece]:
        return _side_pieces(ns, *pair, data_schema, None, ids, conditions)

    with ThreadPoolExecutor(max_workers=_OPENERS) as pool:  # Lance releases the GIL
        return [piece for pieces in pool.map(planned, sides) for piece in pieces]


def _table_steps(
    ns: Namespace, ident: Any, version: str | None, timestamp: str | None, names: SinceNames
) -> tuple[list[Step], dict[str, int]]:
    """The steps of one table read alone, over its own versions, and its columns' Lance field
    ids at the version read (an earlier version's columns are matched by them: a rename)."""
    from lancens_cli.service.history.changes import table_changes
    from lancens_cli.service.history.incremental import table_since
    from lancens_cli.store.catalog_rows import PublishedRef, open_published

    ref = ns.require_table(ident, ns.snapshot())
    row = {**(ref.row or {}), "location": ref.location}
    dataset = open_published(ns.storage, row)
    branch = PublishedRef.of(row).branch_in(dataset)
    what = f"table {ident.display()}"
    start = table_since(dataset, version, timestamp, what, names)
    steps = table_changes(ns.storage, ref.location, dataset, branch, start, what)
    return steps, _field_ids(dataset)


def _field_ids(dataset: Any) -> dict[str, int]:
    return {f.name(): int(f.id()) for f in dataset.lance_schema.fields()}


def _renamed(
    dataset: Any,
    held: Any,
    schema: Any,
    history: list[Any] | None,
    ids: dict[str, int] | None,
) -> tuple[tuple[str, str | None], ...]:
    """The columns a table version (whose Arrow schema is `held`) holds under another name
    (None: not at all): through the namespace's schema history, or, for one table, by Lance's
    field ids."""
    from lancens_cli.partition.schema_evolution import column_sources

    if history is not None:
        sources = column_sources(held, schema, history)
    elif ids is not None:
        names = {number: name for name, number in _field_ids(dataset).items()}
        sources = {f.name: names.get(ids[f.name]) if f.name in ids else None for f in schema}
    else:
        return ()
    return tuple((name, src) for name, src in sources.items() if src != name)


def _side_pieces(
    ns: Namespace,
    step: Step,
    side: Side,
    schema: Any,
    history: list[Any] | None,
    ids: dict[str, int] | None,
    conditions: _Conditions,
) -> list[Piece]:
    with OPENED.lent(ns.storage, side.location, side.version, side.branch) as dataset:
        held = dataset.schema  # pylance builds it anew each time it is asked
        renamed = _renamed(dataset, held, schema, history, ids)
        condition = filter_for(conditions.data, held, dict(renamed))
        if condition is FALSE:
            return []
        keep = conditions.after(step.paired)
        needed = columns_of(keep) if keep is not None else set()
        tag = ChangeTag(
            side.kind,
            step.commit_version,
            _micros(step.commit_time),
            step.key if step.paired else None,
            step.by_content,
            step.row_ids,
            keep,
            spark_arrow_schema(pa.schema([f for f in schema if f.name in needed])),
            spark_arrow_schema(schema) if step.paired else None,
        )
        piece = Piece(
            table=step.table,
            location=side.location,
            version=side.version,
            branch=side.branch,
            fragments=side.fragments,
            rows=side.count,
            filter=None if step.paired else condition,
            renamed=renamed,
            change=tag,
            take=side.rows,
        )
        fragments = [dataset.get_fragment(fid) for fid in side.fragments]
        if side.rows is not None or tag.group is not None:
            return [replace(piece, bytes=_side_bytes(fragments, side))]
        pieces = []
        for fragment in fragments:
            rows = int(fragment.count_rows())
            if rows:
                one = (int(fragment.fragment_id),)
                size = fragment_bytes(fragment)
                pieces.append(replace(piece, fragments=one, rows=rows, bytes=size))
        return pieces


def _side_bytes(fragments: list[Any], side: Side) -> int | None:
    """The bytes a side reads: its fragments' data files, or of rows taken by address their
    share of them (None: a file's size is not recorded)."""
    sizes = [fragment_bytes(f) for f in fragments]
    if any(size is None for size in sizes):
        return None
    whole = sum(s or 0 for s in sizes)
    physical = sum(f.metadata.physical_rows or 0 for f in fragments)
    return whole * side.count // physical if side.rows is not None and physical else whole


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def change_slices(pieces: list[Piece]) -> list[tuple[Piece, ...]]:
    """The pieces each task reads: a step read together in one slice, the rest up to
    ROWS_PER_SLICE rows a slice, in the order of the versions."""
    slices: list[tuple[Piece, ...]] = []
    groups: dict[str, list[Piece]] = {}
    batch: list[Piece] = []
    rows = 0
    for piece in pieces:
        group = piece.change.group if piece.change is not None else None
        if group is not None:
            if group not in groups:
                groups[group] = []
                slices.append(())  # its place, filled below
            groups[group].append(piece)
            continue
        if batch and rows + piece.rows > ROWS_PER_SLICE:
            slices.append(tuple(batch))
            batch, rows = [], 0
        batch.append(piece)
        rows += piece.rows
    if batch:
        slices.append(tuple(batch))
    filled = iter(groups.values())
    return [s if s else tuple(next(filled)) for s in slices]
