"""Planning a read in the driver: which tables, at which exact versions, in which slices.

`__manifest` is read once, with the pruning filter `partitions --where` uses
(`service.partitioned.partitions.select_partitions`); every chosen table is opened at the
reference its row publishes (`store.catalog_rows.PublishedRef`) and that version is written down
as a number (a tag or a branch resolved here), with the fragments to read.
The tasks then open exactly those versions and never look at `__manifest`: a read sees each
write whole or not at all.

The modules that load Lance (`store.catalog_rows`' opening, `service.partitioned.partitions`,
`partition.schema_evolution`) are imported inside the planning functions: `read.py` imports this
module in every Python worker, and Lance loads only where it is used, after the worker forked.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lancens_cli.errors import InvalidInputError, RefusedError
from lancens_cli.partition.condition_data import decode
from lancens_cli.partition.predicate import (
    FALSE,
    And,
    Node,
    flatten,
)
from lancens_cli.partition.table_filter import filter_for
from lancens_cli.pipeline.pieces import (
    ROWS_PER_SLICE,
    Piece,
    fragment_bytes,
    planned_bytes,
    schema_history,
)
from lancens_cli.pipeline.source_options import SourceOptions
from lancens_cli.store.containment import directory_location_problem

if TYPE_CHECKING:
    from lancens_cli.models import Identifier
    from lancens_cli.service.history.incremental import SinceNames
    from lancens_cli.service.namespace import Namespace

_OPENERS = 8  # tables opened at once while planning (Lance releases the GIL)


# Read-only options. `where`: a Spark SQL condition the source applies exactly (every conjunct
# must be one lancens understands, see partition/spark_conditions.py); `prune`: a condition
# used only to prune and filter as far as it is understood (the caller filters the rows with
# it again: `scan` does); `timeZone`: the Spark session time zone in which their timestamp
# literals without an offset name instants.
# `pruneCondition`: what `prune` gives, already parsed (partition/condition_data.py): `scan`
# hands the source the conjuncts it parsed instead of the text to parse again.
# `versionAsOf` / `timestampAsOf`: read the namespace as that `__manifest` version published it.
# `sinceVersion` / `sinceTimestamp`: an incremental read, only the rows appended after that
# `__manifest` version (exclusive) up to the one read (service/history/incremental.py).
# `readChanges`: the change feed, every row inserted or deleted after that start, with its
# `_change_type`, `_commit_version` and `_commit_timestamp` (service/history/changes.py).
# `limit`: the reader needs at most this many rows (`scan --limit`, with no filter left to Spark):
# only the fragments that hold them are planned, when no row filter is pushed to Lance.
READ_OPTIONS = frozenset(
    (
        "where",
        "prune",
        "prunecondition",
        "timezone",
        "versionasof",
        "timestampasof",
        "sinceversion",
        "sincetimestamp",
        "readchanges",
        "limit",
    )
)


def arrow_schema(opts: SourceOptions) -> Any:
    """The source's Arrow schema: the namespace schema, or the table's at its read version."""
    ns = opts.namespace()
    ns.require_root()
    ident = opts.ident()
    if ident is None:
        schema = _namespace_schema(ns)
    else:
        from lancens_cli.store.catalog_rows import open_published

        ref = ns.require_table(ident, ns.snapshot())
        row = {**(ref.row or {}), "location": ref.location}
        schema = open_published(ns.storage, row).schema
    if opts.changes():
        from lancens_cli.pipeline.change_plan import with_change_columns

        return with_change_columns(schema)
    return schema


def _namespace_schema(ns: Namespace) -> Any:
    from lancens_cli.service.partitioned.layout import layout_from_metadata

    dataset = ns.manifest.open_dataset()
    layout = layout_from_metadata(dict(dataset.metadata or {})) if dataset is not None else None
    if layout is None:
        raise InvalidInputError(
            "the root is not a partitioned namespace: name a table to read, "
            "e.g. load('ns.table') or `lancens scan ns.table`"
        )
    return layout.schema


def option_nodes(opts: SourceOptions, schema: Any) -> list[Any]:
    """The predicate nodes of the `where`, `prune` and `pruneCondition` options (READ_OPTIONS)."""
    zone = opts.extra.get("timezone")
    nodes: list[Any] = []
    where, prune = opts.extra.get("where"), opts.extra.get("prune")
    if where or prune:  # the SQL parser loads for a condition given as text only
        from lancens_cli.partition.spark_conditions import split_condition
    if where:
        condition = split_condition(where, schema, session_zone=zone)
        for part in condition.left:
            raise InvalidInputError(
                f"option where: lancens cannot apply {part.text!r} exactly ({part.reason}); "
                "filter the DataFrame with it instead (.filter(...)), and give it as option "
                "prune to still prune partitions by it"
            )
        nodes += condition.understood
    if prune:
        nodes += split_condition(prune, schema, session_zone=zone).understood
    parsed = opts.extra.get("prunecondition")
    if parsed:
        nodes += decode(parsed, schema)
    return nodes


@dataclass(frozen=True)
class _Target:
    table: str
    location: str
    row: dict[str, Any]
    filter: Node | None  # the condition the table's rows must meet (parsed once, not again)
    spec_version: int | None
    object_id: str = ""
    # an incremental read (service/history/incremental.py): the row the start version
    # published of this table (None: none, every row is new)
    since: dict[str, Any] | None = None
    incremental: bool = False
    # an incremental read of one table: the start as asked (version, timestamp), one of the
    # table's own versions
    table_since: tuple[str | None, str | None] | None = None


def plan_pieces(
    opts: SourceOptions,
    schema: Any,
    nodes: list[Node],
    limit: int | None = None,
    names: SinceNames | None = None,
) -> list[Piece]:
    """The pieces of a read where every node holds (resolved once, here); Spark-free, so the
    CLI plans a read in its own process as the data source's driver plans it.

    `schema` is the source's Arrow schema (the namespace schema, or the table's): the nodes
    are typed against it. With `limit`, only the first fragments that hold that many rows are
    planned, as long as no row filter could drop rows (`fewest_pieces`). `names`: how messages
    name the start of an incremental read (default: the data source's options).
    """
    ns = opts.namespace()
    ns.require_root()
    if opts.changes():
        from lancens_cli.pipeline.change_plan import change_pieces

        return change_pieces(ns, opts, schema, nodes, names)
    if opts.since() is None:
        return _planned(ns, opts, schema, nodes, limit, names)
    from lancens_cli.service.history.incremental import OPTION_NAMES, NotAppendOnly

    try:
        return _planned(ns, opts, schema, nodes, limit, names)
    except NotAppendOnly as problem:
        raise (names or OPTION_NAMES).refusal(problem) from None


def _planned(
    ns: Namespace,
    opts: SourceOptions,
    schema: Any,
    nodes: list[Node],
    limit: int | None,
    names: SinceNames | None,
) -> list[Piece]:
    ident = opts.ident()
    targets = _partition_targets(ns, nodes) if ident is None else [_table_target(ns, ident, nodes)]
    if opts.since() is not None and ident is None:
        targets = _since(ns, opts, targets, names)
    elif opts.since() is not None:
        targets = [replace(t, incremental=True, table_since=opts.since()) for t in targets]
    history = schema_history(ns) if ident is None else None
    found: list[Piece] = []
    pool = ThreadPoolExecutor(max_workers=_OPENERS)
    try:
        for pieces in pool.map(lambda t: _pieces(ns, t, schema, history, names), targets):
            found += pieces
            if limit is not None and fewest_pieces(found, limit) is not None:
                break  # the tables not opened yet are not needed
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if limit is not None:
        found = fewest_pieces(found, limit) or found
    return found


def fewest_pieces(pieces: list[Piece], limit: int) -> list[Piece] | None:
    """The first pieces that hold `limit` rows, or None when they cannot be known to: a piece
    with a row filter holds an unknown number of matching rows (its count is before the filter),
    or all the pieces together hold fewer."""
    chosen: list[Piece] = []
    rows = 0
    for piece in pieces:
        if piece.filter is not None:
            return None
        if rows >= limit:
            return chosen
        chosen.append(piece)
        rows += piece.rows
    return chosen if rows >= limit else None


def _conjunction(nodes: list[Node]) -> Node | None:
    if not nodes:
        return None
    return flatten(And(tuple(nodes)))


def _partition_targets(ns: Namespace, nodes: list[Node]) -> list[_Target]:
    from lancens_cli.service.partitioned.partitions import select_partitions

    node = _conjunction(nodes)
    selection = select_partitions(ns, node, strict=True)  # the nodes, not their text again

    targets = []
    for match in selection.matches:
        problem = directory_location_problem(ns.storage, match.location)
        if problem is not None:  # never opened; and never skipped, which would drop its rows
            raise RefusedError(
                f"partition table {match.table}: lancens will not read its location: {problem} "
                "(see `lancens check`)"
            )
        row = {**match.published.as_json(), "location": match.location}
        residual = selection.residual_nodes.get(f"v{match.spec_version}")
        targets.append(
            _Target(match.table, match.location, row, residual, match.spec_version, match.object_id)
        )
    return targets


def _table_target(ns: Namespace, ident: Identifier, nodes: list[Node]) -> _Target:
    snapshot = ns.snapshot()
    ref = ns.require_table(ident, snapshot)
    row = dict(ref.row or {})
    row["location"] = ref.location
    node = _conjunction(nodes)
    return _Target(ident.display(), ref.location, row, node, None)


def _since(
    ns: Namespace, opts: SourceOptions, targets: list[_Target], names: SinceNames | None
) -> list[_Target]:
    """The targets of an incremental read: each with what the start version published of it;
    the tables published alike at both versions are left out (nothing of them is new)."""
    from lancens_cli.service.history.incremental import published_alike

    since = since_range(opts, ns, names)
    assert since is not None
    chosen = []
    for target in targets:
        before = since.then(target.object_id, target.location)
        if before is None or not published_alike(before, target.row):
            chosen.append(replace(target, since=before, incremental=True))
    return chosen


def since_range(
    opts: SourceOptions, ns: Namespace | None = None, names: SinceNames | None = None
) -> Any:
    """The `Since` of an incremental read of a partitioned namespace
    (service/history/incremental.py), or None for a whole read or a read of one table (whose
    start is one of its own versions: `_new_rows`)."""
    from lancens_cli.service.history.incremental import OPTION_NAMES, since_versions

    if opts.since() is None or opts.ident() is not None:
        return None
    version, timestamp = opts.since() or (None, None)
    return since_versions(ns or opts.namespace(), version, timestamp, names or OPTION_NAMES)


def _new_rows(
    ns: Namespace, target: _Target, dataset: Any, branch: str | None, names: SinceNames | None
) -> list[Any]:
    """The new rows of one table of an incremental read, on the line it is published on."""
    from lancens_cli.service.history.incremental import (
        OPTION_NAMES,
        appended_rows,
        table_new_rows,
        table_since,
    )

    if target.table_since is not None:  # one table, from one of its own versions
        what = f"table {target.table}"
        start = table_since(dataset, *target.table_since, what, names or OPTION_NAMES)
        return appended_rows(dataset, start, branch, what)
    what = f"partition table {target.table}"
    return table_new_rows(ns.storage, target.location, dataset, branch, target.since, what)


def _pieces(
    ns: Namespace,
    target: _Target,
    schema: Any,
    history: list[Any] | None,
    names: SinceNames | None = None,
) -> list[Piece]:
    from lancens_cli.partition.schema_evolution import column_sources
    from lancens_cli.store.catalog_rows import PublishedRef, open_published

    dataset = open_published(ns.storage, target.row)
    branch = PublishedRef.of(target.row).branch_in(dataset)  # so tasks can open that version again
    renamed: tuple[tuple[str, str | None], ...] = ()
    if history is not None:
        sources = column_sources(dataset.schema, schema, history)
        renamed = tuple((name, src) for name, src in sources.items() if src != name)
    condition = filter_for(target.filter, dataset.schema, dict(renamed))
    if condition is FALSE:
        return []
    piece = Piece(
        table=target.table,
        location=target.location,
        version=int(dataset.version),
        branch=branch,
        fragments=(),
        rows=0,
        filter=condition,
        spec_version=target.spec_version,
        renamed=renamed,
    )
    if target.incremental:
        return [
            replace(
                piece,
                fragments=(new.fragment_id,),
                rows=new.count,
                window=None if new.offset is None else (new.offset, new.count),
                bytes=fragment_bytes(dataset.get_fragment(new.fragment_id), new.count),
            )
            for new in _new_rows(ns, target, dataset, branch, names)
        ]
    pieces = []
    for fragment in dataset.get_fragments():
        rows = int(fragment.count_rows())
        if rows:
            one = (int(fragment.fragment_id),)
            pieces.append(replace(piece, fragments=one, rows=rows, bytes=fragment_bytes(fragment)))
    return pieces


def slice_groups(pieces: list[Piece]) -> list[tuple[Piece, ...]]:
    """The pieces each Spark task reads: fragments of big tables alone, small ones together,
    up to ROWS_PER_SLICE rows a task (a change feed's as `change_plan` groups them)."""
    if any(piece.change is not None for piece in pieces):
        from lancens_cli.pipeline.change_plan import change_slices

        return change_slices(pieces)
    slices: list[tuple[Piece, ...]] = []
    batch: list[Piece] = []
    rows = 0
    for piece in sorted(pieces, key=lambda p: (p.table, p.fragments)):
        if batch and rows + piece.rows > ROWS_PER_SLICE:
            slices.append(tuple(batch))
            batch, rows = [], 0
        last = batch[-1] if batch else None
        together = last is not None and last.window is None and piece.window is None
        if together and (last.location, last.version) == (piece.location, piece.version):
            batch[-1] = replace(
                last,
                fragments=last.fragments + piece.fragments,
                rows=last.rows + piece.rows,
                bytes=planned_bytes([last, piece]),
            )
        else:
            batch.append(piece)
        rows += piece.rows
    if batch:
        slices.append(tuple(batch))
    return slices
