"""Reading the change feed's pieces into Arrow batches, for Spark's tasks and `scan` alike.

A piece's rows are read from its table version: whole fragments by a scan, or the rows it names
by address (row id on a table with stable row ids) with Lance's take, so a deleted row is read
from the version where it was alive and nothing else of its fragment is. The change columns are
added to each batch. The sides of a step read together (`ChangeTag.group`) are compared first,
on every column: on a table with stable row ids a row id both deleted and inserted is an update
(`update_preimage`, `update_postimage`), or nothing when its values did not change; in a step
that moved rows (`by_content`) a deleted row and an inserted row with equal values cancel. Then
the conditions on the change columns (`ChangeTag.keep`) are applied. A table version is opened
once and lent (`store.opened_versions`, which loads Lance only when it opens one), and
DataFusion is imported where a condition is left to the reader: Spark's workers import this
module before they fork.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.parallel import ordered_chain
from lancens_cli.partition.predicate import Node, to_sql
from lancens_cli.pipeline.slice_reader import BATCH_ROWS, conform_batch
from lancens_cli.service.history.changes import (
    CHANGE_COLUMNS,
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    DELETE,
    INSERT,
    POSTIMAGE,
    PREIMAGE,
)
from lancens_cli.store.opened_versions import OPENED

if TYPE_CHECKING:
    from lancens_cli.pipeline.change_plan import ChangeTag
    from lancens_cli.pipeline.pieces import Piece
    from lancens_cli.service.namespace import Namespace

_ROW_ID = "_rowid"
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_ROW_NUMBER = "__lancens_row"


def read_changes(
    ns: Namespace, pieces: tuple[Piece, ...], target: Any, workers: int = 1
) -> Iterator[Any]:
    """The change rows of a slice's pieces, as batches in exactly `target`'s schema: the
    pieces read alone, then the steps read together, `workers` of them at once (a feed's
    pieces are many and small: a few rows taken by address each)."""
    alone: list[tuple[Piece, ...]] = []
    groups: dict[str, list[Piece]] = defaultdict(list)
    for piece in pieces:
        if piece.change.group is not None:
            groups[piece.change.group].append(piece)
        else:
            alone.append((piece,))
    units = [*alone, *(tuple(members) for members in groups.values())]
    yield from ordered_chain(lambda unit: _read_unit(ns, unit, target), units, workers)


def _read_unit(ns: Namespace, unit: tuple[Piece, ...], target: Any) -> Iterator[Any]:
    """A piece read alone, or the pieces of a step read together."""
    if unit[0].change.group is not None:
        yield from _read_step(ns, list(unit), target)
        return
    (piece,) = unit
    tag = piece.change
    for batch in _batches(ns, piece, _data_schema(target, tag.needs)):
        yield from _finished(batch, pa.repeat(tag.kind, batch.num_rows), tag, target)


def _data_schema(target: Any, needs: Any) -> Any:
    """The rows' own columns `target` returns, and those the reader's condition reads."""
    fields = [f for f in target if f.name not in CHANGE_COLUMNS]
    held = {f.name for f in fields}
    return pa.schema([*fields, *(f for f in needs or () if f.name not in held)])


def _batches(ns: Namespace, piece: Piece, target: Any) -> Iterator[Any]:
    """The piece's rows in `target`'s columns, and `_rowid` last (so a batch of no column
    still has its rows)."""
    with OPENED.lent(ns.storage, piece.location, piece.version, piece.branch) as dataset:
        present = set(dataset.schema.names)
        sources = dict(piece.renamed)
        held = {f.name: sources.get(f.name, f.name) for f in target}
        columns = [held[f.name] for f in target if held[f.name] in present]
        back = {held[f.name]: f.name for f in target if held[f.name] in present}
        for batch in _raw(dataset, piece, columns):
            if not batch.num_rows:
                continue
            batch = batch.rename_columns([back.get(n, n) for n in batch.schema.names])
            conformed = conform_batch(batch, target)
            ids = batch.column(batch.schema.get_field_index(_ROW_ID))
            with_ids = conformed.schema.append(pa.field(_ROW_ID, ids.type))
            yield pa.RecordBatch.from_arrays([*conformed.columns, ids], schema=with_ids)


def _raw(dataset: Any, piece: Piece, columns: list[str]) -> Iterator[Any]:
    """The piece's rows as Lance gives them, with their row ids (addresses without stable ids)."""
    if piece.take is not None and piece.filter is None:
        for start in range(0, len(piece.take), BATCH_ROWS):
            wanted = list(piece.take[start : start + BATCH_ROWS])
            yield from dataset._take_rows(wanted, columns=[*columns, _ROW_ID]).to_batches()
        return
    scanner = dataset.scanner(
        columns=columns,
        filter=piece.filter,
        fragments=[dataset.get_fragment(i) for i in piece.fragments],
        batch_size=BATCH_ROWS,
        with_row_id=True,
    )
    wanted_ids = pa.array(piece.take, pa.uint64()) if piece.take is not None else None
    for batch in scanner.to_batches():
        if wanted_ids is not None:
            batch = batch.filter(pc.is_in(batch.column(_ROW_ID), value_set=wanted_ids))
        yield batch


def _finished(batch: Any, kinds: Any, tag: ChangeTag, target: Any) -> Iterator[Any]:
    """`batch` (the rows' columns) with the change columns (`kinds`: each row's change type,
    a list or an Arrow array), the rows `tag.keep` holds for, as `target`."""
    rows = batch.num_rows
    extra = {
        CHANGE_TYPE: kinds if isinstance(kinds, pa.Array) else pa.array(kinds, pa.string()),
        COMMIT_VERSION: pa.repeat(pa.scalar(tag.commit_version, pa.int64()), rows),
        COMMIT_TIMESTAMP: pa.repeat(pa.scalar(tag.commit_micros, _TIMESTAMP), rows),
    }
    names = [n for n in batch.schema.names if n != _ROW_ID]
    full = pa.RecordBatch.from_arrays(
        [batch.column(n) for n in names] + list(extra.values()), names=[*names, *extra]
    )
    if tag.keep is not None:
        full = full.filter(_holds(full, tag.keep))
    if full.num_rows:
        yield pa.RecordBatch.from_arrays([full.column(f.name) for f in target], schema=target)


def _holds(batch: Any, node: Node) -> Any:
    """Which rows of `batch` `node` holds for (not NULL), as DataFusion evaluates it: the
    engine of the filters Lance applies, so a row is judged as a pushed filter judges it.
    DataFusion is imported here, where a condition is left to the reader."""
    from datafusion import SessionContext

    numbered = batch.append_column(_ROW_NUMBER, pa.array(np.arange(batch.num_rows, dtype=np.int64)))
    context = SessionContext()
    context.register_record_batches("changes", [[numbered]])
    kept = context.sql(f"SELECT {_ROW_NUMBER} FROM changes WHERE {to_sql(node)}").to_arrow_table()
    return pc.is_in(pa.array(np.arange(batch.num_rows, dtype=np.int64)), value_set=kept.column(0))


def _read_step(ns: Namespace, pieces: list[Piece], target: Any) -> Iterator[Any]:
    """The rows of one step's sides read together: updates paired, moves cancelled."""
    tag = pieces[0].change
    whole = tag.whole
    read: dict[str, list[Any]] = {DELETE: [], INSERT: []}
    for piece in pieces:
        read[piece.change.kind] += list(_batches(ns, piece, whole))
    deleted = _table(read[DELETE], whole)
    inserted = _table(read[INSERT], whole)
    old_kinds, new_kinds = _compared(deleted, inserted, tag)
    for table, kinds in ((deleted, old_kinds), (inserted, new_kinds)):
        chosen = [i for i, kind in enumerate(kinds) if kind is not None]
        if not chosen:
            continue
        rows = table.take(pa.array(chosen, pa.int64())).combine_chunks()
        named = [kind for kind in kinds if kind is not None]
        start = 0
        for batch in rows.to_batches():
            yield from _finished(batch, named[start : start + batch.num_rows], tag, target)
            start += batch.num_rows


def _table(batches: list[Any], whole: Any) -> Any:
    schema = whole.append(pa.field(_ROW_ID, pa.uint64()))
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def _compared(
    deleted: Any, inserted: Any, tag: ChangeTag
) -> tuple[list[str | None], list[str | None]]:
    """What each deleted and each inserted row of a step is (None: no change at all)."""
    old_kinds: list[str | None] = [DELETE] * deleted.num_rows
    new_kinds: list[str | None] = [INSERT] * inserted.num_rows
    old_keys = _keys(deleted)
    new_keys = _keys(inserted)
    if tag.row_ids:
        where_new = {rid: i for i, rid in enumerate(inserted.column(_ROW_ID).to_pylist())}
        for i, rid in enumerate(deleted.column(_ROW_ID).to_pylist()):
            j = where_new.get(rid)
            if j is None:
                continue
            same = old_keys[i] == new_keys[j]
            old_kinds[i], new_kinds[j] = (None, None) if same else (PREIMAGE, POSTIMAGE)
    if tag.by_content:
        waiting = Counter(k for k, kind in zip(new_keys, new_kinds, strict=True) if kind == INSERT)
        cancelled: Counter[str] = Counter()
        for i, key in enumerate(old_keys):
            if old_kinds[i] == DELETE and waiting[key] > cancelled[key]:
                cancelled[key] += 1
                old_kinds[i] = None
        for j, key in enumerate(new_keys):
            if new_kinds[j] == INSERT and cancelled[key]:
                cancelled[key] -= 1
                new_kinds[j] = None
    return old_kinds, new_kinds


def _keys(table: Any) -> list[str]:
    """Each row's values as one comparable text (NaN equal to NaN, as a move keeps it)."""
    data = table.drop_columns([_ROW_ID])
    return [repr(row) for row in zip(*(c.to_pylist() for c in data.columns), strict=True)]


def net_effect(batches: Iterator[Any]) -> Iterator[Any]:
    """The net effect of change rows (with `_change_type`): each row's inserts less its deletes
    (updates' images alike), compared whole; a row more inserted is an insert, more deleted a
    delete, as many times. The commit columns go: a net change has no one version."""
    read = [b for b in batches if b.num_rows]
    if not read:
        return
    table = pa.Table.from_batches(read).combine_chunks()
    data = table.drop_columns([n for n in CHANGE_COLUMNS if n in table.column_names])
    keys = [repr(row) for row in zip(*(c.to_pylist() for c in data.columns), strict=True)]
    signs = [
        1 if kind in (INSERT, POSTIMAGE) else -1 for kind in table.column(CHANGE_TYPE).to_pylist()
    ]
    balance: Counter[str] = Counter()
    for key, sign in zip(keys, signs, strict=True):
        balance[key] += sign
    chosen: list[int] = []
    kinds: list[str] = []
    for i, (key, sign) in enumerate(zip(keys, signs, strict=True)):
        if balance[key] * sign > 0:  # this row's side is the one left over: one more copy
            balance[key] -= sign
            chosen.append(i)
            kinds.append(INSERT if sign > 0 else DELETE)
    rows = data.take(pa.array(chosen, pa.int64()))
    kind = pa.field(CHANGE_TYPE, pa.string(), nullable=False)  # as the feed's schema has it
    yield from rows.append_column(kind, pa.array(kinds, pa.string())).to_batches()
