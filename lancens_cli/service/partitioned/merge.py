"""`lancens merge --from FILE --on KEY`: an upsert into a partitioned namespace, one commit.

Each source row is matched by its key against the rows every partition table publishes (in
every spec version: a row keeps its key when its partition changes, so no table is left out),
as a hash join of the key columns alone. A matched row is replaced by the source row (or left,
`--when-matched ignore`); an unmatched one is inserted (or left out, `--when-not-matched
ignore`). The rows written are routed by the current spec as a write routes them, and the old
rows they replace are deleted in the same `__manifest` commit (update.py `Replacement`): a row
whose partition values change moves. A key twice in the source, or matched in two rows of the
namespace, is refused in words before anything is written (as Delta refuses a MERGE whose
source matches a target row twice); a NULL key matches nothing, as in SQL.

`--delete-not-matched-by-source [--where PRED]` (Delta's WHEN NOT MATCHED BY SOURCE THEN
DELETE) also deletes the rows of the namespace that PRED holds for (every row without it) and
whose key the source lacks (a NULL key included), found by the same read of each table's keys;
they go in the same commit, so a nightly full extract keeps a partition range in sync.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import ConcurrentModificationError, InvalidInputError
from lancens_cli.models import Result, json_value
from lancens_cli.parallel import completed_map
from lancens_cli.partition.predicate import FALSE, And, InList, IsNull, Node, Or, flatten
from lancens_cli.partition.schema_evolution import column_sources, history_from_metadata
from lancens_cli.partition.table_filter import filter_for
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.delete import (
    delete_condition,
    delete_touch,
)
from lancens_cli.service.partitioned.input_rows import conform, lacking_columns
from lancens_cli.service.partitioned.partitions import PartitionMatch, select_partitions
from lancens_cli.service.partitioned.placement import PartitionTouch
from lancens_cli.service.partitioned.update import Replacement, written_entry
from lancens_cli.service.partitioned.write import partitioned_target
from lancens_cli.store.catalog_rows import LATEST, PublishedRef, open_published
from lancens_cli.store.known_rows import ADDRESS_COLUMN, KnownRows
from lancens_cli.store.manifest import ManifestSnapshot

MATCHED = ("update", "ignore")
NOT_MATCHED = ("insert", "ignore")
_SEEN = "__lancens_seen"  # a marker column of the key join
_PART = "__lancens_table"  # which table a key row of the join came from
_JOINED_AT_ONCE = 4_000_000  # key rows of tables matched against the source in one join
_READERS = 8  # partition tables whose keys are read at once
_KEY_BATCH_ROWS = 1 << 20  # rows of keys Lance reads in one batch


@dataclass
class PartitionMerge(Result):
    source_rows: int
    matched: int
    updated: int
    inserted: int
    manifest_version: int = 0
    dry_run: bool = False
    partitions: list[dict[str, Any]] = field(default_factory=list)
    deleted: int = 0  # rows the source lacks, deleted (--delete-not-matched-by-source)

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "source_rows": self.source_rows,
            "rows_matched": self.matched,
            "rows_updated": self.updated,
            "rows_inserted": self.inserted,
            "rows_deleted": self.deleted,
            "manifest_version": self.manifest_version,
            "partitions": self.partitions,
        }


def merge_rows(
    ns: Namespace,
    data: Any,
    on: list[str],
    when_matched: str = "update",
    when_not_matched: str = "insert",
    dry_run: bool = False,
    progress: Callable[[int], Callable[[], None]] | None = None,
    unmatched: Unmatched | None = None,
) -> PartitionMerge:
    """Upsert the source rows by `on` (and delete the rows `unmatched` names that the source
    lacks); every input error (keys, columns, duplicates, a key matched twice, a bad
    condition) is raised before anything is written."""
    snapshot, layout = partitioned_target(ns)
    keys = merge_keys(on, layout.schema, when_matched, when_not_matched)
    gone = unmatched.node(layout.schema) if unmatched is not None else False  # None: every row
    source = merge_source(data, layout.schema, keys, "namespace column")
    plan = plan_merge(ns, snapshot, layout, source.select(keys), when_matched, gone)
    rows = source.filter(plan.chosen(source, when_not_matched))
    result = plan.result(rows.num_rows, dry_run)
    if not rows.num_rows and not plan.deletes:
        return result
    replaced = Replacement.of_rows(ns, snapshot, layout, plan.deletes, rows)
    if not dry_run:
        result.manifest_version = replaced.commit(plan.guard(ns), progress)
    result.partitions = [written_entry(t, dry_run, layout) for t in replaced.touches]
    return result


@dataclass
class MergePlan:
    """What the source's keys decide against the namespace, before any row is written: the
    keys that matched (each in one row of one table) and each table's touch deleting what
    goes (matched rows being replaced, rows the source lacks)."""

    snapshot: ManifestSnapshot
    keys: list[str]
    source_rows: int
    when_matched: str
    matched: pa.Table
    deletes: dict[str, PartitionTouch]
    deleted: int
    read: dict[str, PublishedRef]  # what each partition table published when its keys were read

    def hit(self, source: pa.Table) -> pa.Array:
        """For each source row (its key columns at least), whether its key matched."""
        return matched_mask(source, self.matched, self.keys)

    def chosen(self, source: pa.Table, when_not_matched: str) -> pa.Array:
        """The source rows the merge writes: matched ones it updates, unmatched ones it
        inserts."""
        hit = self.hit(source)
        none = pa.repeat(False, source.num_rows)
        return pc.or_(
            hit if self.when_matched == "update" else none,
            pc.invert(hit) if when_not_matched == "insert" else none,
        )

    def result(self, written: int, dry_run: bool) -> PartitionMerge:
        """The merge's counts once `written` source rows are chosen."""
        matched = self.matched.num_rows  # a source key is unique, and matched at most once
        updated = matched if self.when_matched == "update" else 0
        result = PartitionMerge(self.source_rows, matched, updated, written - updated)
        result.dry_run, result.deleted = dry_run, self.deleted
        result.manifest_version = self.snapshot.version
        return result

    def guard(self, ns: Namespace) -> Callable[[ManifestSnapshot], None]:
        """The commit's check that no partition table changed since its keys were read."""
        return _unchanged_since(ns, self.read, self.snapshot.version)


def plan_merge(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    layout: Any,
    wanted_keys: pa.Table,
    when_matched: str,
    gone: Node | None | bool = False,
) -> MergePlan:
    """Match the source's keys (`wanted_keys`, in the namespace's types, each once) against
    every partition table's, refusing a key two rows hold; with `gone` (a condition, or None
    for every row), the rows it holds for that the source lacks are deleted too."""
    schema = layout.schema
    keys = wanted_keys.column_names
    selection = select_partitions(ns, None)
    history = history_from_metadata(snapshot.metadata)
    wanted = wanted_keys.append_column(_SEEN, pa.repeat(True, wanted_keys.num_rows))
    found = _match_keys(
        lambda m: _keys_of(ns, m, keys, schema, history, wanted, gone),
        selection.matches,
        wanted,
        keys,
    )
    matched = _require_matched_once(selection.matches, found, keys)
    updating = when_matched == "update"
    deletes = {}
    for match, one in zip(selection.matches, found, strict=True):
        node = one.delete_node(keys, updating)
        if node is not None:
            deletes[match.object_id] = _delete_touch(match, one, node, updating)
    return MergePlan(
        snapshot,
        keys,
        wanted_keys.num_rows,
        when_matched,
        matched,
        deletes,
        sum(one.gone_rows for one in found),
        {m.object_id: m.published for m in selection.matches},
    )


def merge_keys(
    on: list[str], schema: pa.Schema, when_matched: str, when_not_matched: str
) -> list[str]:
    """The key columns `--on` names, checked with the two choices (exit 2 in words)."""
    keys = [k.strip() for part in on for k in part.split(",") if k.strip()]
    if not keys:
        raise InvalidInputError("--on: name the key column(s) rows are matched by")
    unknown = [k for k in keys if k not in schema.names]
    if unknown:
        raise InvalidInputError(
            f"--on: unknown column {unknown[0]!r} (columns: {', '.join(schema.names)})"
        )
    if len(set(keys)) != len(keys):
        raise InvalidInputError("--on: a key column is named twice")
    if when_matched not in MATCHED:
        raise InvalidInputError(f"--when-matched: {when_matched!r} is not one of {MATCHED}")
    if when_not_matched not in NOT_MATCHED:
        raise InvalidInputError(
            f"--when-not-matched: {when_not_matched!r} is not one of {NOT_MATCHED}"
        )
    return keys


def merge_source(data: Any, schema: pa.Schema, keys: list[str], every: str) -> pa.Table:
    """The source rows in `schema`, refused when they lack a column (a matched row would lose
    its values; `every` names what to give: "namespace column") or hold a key twice."""
    lacking = lacking_columns(data, schema)
    if lacking:
        raise InvalidInputError(
            f"merge: the input lacks {', '.join(lacking)}: a matched row would lose its "
            f"values (give every {every})"
        )
    source = conform(data, schema)
    require_unique(source, keys)
    return source


def require_unique(source: pa.Table, keys: list[str]) -> None:
    """A key twice in the source would update one row twice: refused, naming it. A key with
    a NULL matches nothing (as in SQL), so rows with one are never the same key."""
    held = source.select(keys)
    for column in keys:
        held = held.filter(pc.is_valid(held.column(column)))
    counted = held.group_by(keys).aggregate([([], "count_all")])
    twice = counted.filter(pc.greater(counted.column("count_all"), 1))
    if twice.num_rows:
        key = {k: json_value(twice.column(k)[0].as_py()) for k in keys}
        raise InvalidInputError(f"merge: the source holds key {key} more than once")


@dataclass(frozen=True)
class Unmatched:
    """`--delete-not-matched-by-source`: the rows the source lacks are deleted among those
    `where` holds for (None: every row)."""

    where: str | None = None

    def node(self, schema: pa.Schema) -> Node | None:
        """The condition, checked as `delete --where` checks one (None: every row)."""
        if self.where is None:
            return None
        return delete_condition(self.where, schema)


@dataclass
class _Found:
    """One partition table's published rows whose keys the source holds (each once per row
    that has it, in the namespace's names; None: the table lacks a key column, whose NULLs
    match nothing), and how its schema generation names the columns. With
    `--delete-not-matched-by-source`: the condition on the rows to delete, the keys the source
    lacks (NULL keys aside) and how many rows that deletes."""

    keys: pa.Table | None
    schema: pa.Schema
    renamed: dict[str, str | None]
    gone: pa.Table | None = None
    gone_rows: int = 0
    gone_where: Node | None = None
    gone_nulls: bool = False  # rows with a NULL key go too
    known: KnownRows | None = None  # the matched rows' addresses (store/known_rows.py)
    # until matched: the table's keys and row addresses (`_rowaddr`), and where they were
    # read (its location and version of main; None: a branch, deleted from by its filter)
    read: pa.Table | None = None
    read_from: tuple[str, int] | None = None

    def delete_node(self, keys: list[str], matched: bool) -> Node | None:
        """The namespace condition of every row to delete here: the matched rows (`matched`:
        they are replaced) and the rows the source lacks; None: none."""
        parts: list[Node] = []
        if matched and self.keys is not None and self.keys.num_rows:
            parts.append(_key_condition(self.keys, keys))
        if self.gone_rows:
            lacking: list[Node] = [IsNull(k) for k in keys] if self.gone_nulls else []
            if self.gone is not None and self.gone.num_rows:
                lacking.append(_key_condition(self.gone, keys))
            which = flatten(Or(tuple(lacking))) if len(lacking) > 1 else lacking[0]
            parts.append(which if self.gone_where is None else And((self.gone_where, which)))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else flatten(Or(tuple(parts)))

    def delete_filter(self, node: Node) -> str:
        """The Lance filter of exactly the rows `node` names, in the table's own columns."""
        rendered = filter_for(node, self.schema, self.renamed)
        return "false" if rendered is FALSE else (rendered or "true")


def _keys_of(
    ns: Namespace,
    match: PartitionMatch,
    keys: list[str],
    schema: pa.Schema,
    history: list[Any],
    wanted: pa.Table,
    gone: Node | None | bool = False,
) -> _Found:
    """One table's published keys and row addresses, to be matched (`_match_keys`); with
    `gone` (a condition, or None for every row), the rows it holds for that the source
    lacks. False: none are deleted."""
    row = {**match.published.as_json(), "location": match.location}
    dataset = open_published(ns.storage, row)
    sources = column_sources(dataset.schema, schema, history)
    renamed = {name: src for name, src in sources.items() if src != name}
    found = _Found(None, dataset.schema, renamed)
    if gone is not False:
        _lacking(dataset, found, keys, schema, sources, wanted, gone)
    if any(not sources.get(k) for k in keys):
        return found
    read = dataset.to_table(  # batches as big as a table's fragments: a fifth less time
        columns=[sources[k] for k in keys], with_row_address=True, batch_size=_KEY_BATCH_ROWS
    )
    table = pa.table({k: read.column(sources[k]).cast(schema.field(k).type) for k in keys})
    found.read = table.append_column(ADDRESS_COLUMN, read.column(ADDRESS_COLUMN))
    if match.published.branch_in(dataset) is None:
        found.read_from = (match.location, int(dataset.version))
    return found


def _match_keys(
    read: Callable[[PartitionMatch], _Found],
    matches: list[PartitionMatch],
    wanted: pa.Table,
    keys: list[str],
) -> list[_Found]:
    """Each table's rows whose keys the source holds (`_Found.keys`, and their addresses),
    `read` a few tables at a time and matched as they come. One integer key (the usual id) is
    looked up in the source's keys (`IntegerKeys`) by the thread that read the table, on both
    cores; other keys are joined with the source a few million rows of tables at a time: one
    hash of the source per join, not one per table, and no more keys held than a join takes."""
    found: list[Any] = [None] * len(matches)
    lookup = IntegerKeys.of(wanted, keys)
    if lookup is not None:

        def read_and_match(match: PartitionMatch) -> _Found:
            one = read(match)
            if one.read is not None:
                _match_integers(one, lookup, keys[0])
            return one

        for position, one in completed_map(read_and_match, matches, _READERS):
            found[position] = one
        return found
    batch: list[int] = []
    rows = 0
    for position, one in completed_map(read, matches, _READERS):
        found[position] = one
        if one.read is None:
            continue
        batch.append(position)
        rows += one.read.num_rows
        if rows >= _JOINED_AT_ONCE:
            _match_batch(found, batch, wanted, keys)
            batch, rows = [], 0
    if batch:
        _match_batch(found, batch, wanted, keys)
    return found


class IntegerKeys:
    """The source's one integer key, looked up fast: its values sorted (an exact binary
    search), and a bit per slot of a multiplicative hash of them, so that the table keys
    whose slot holds no source key (nearly all of a big table's) skip the search. The
    search, not the slots, says what matches: keys that share a slot cost a search, never a
    wrong answer."""

    _GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2**64 over the golden ratio, odd

    def __init__(self, ordered: np.ndarray) -> None:
        self.ordered = ordered
        # slots: a power of two about 8 per key, at least 2**16 and at most 2**24 (16 MiB)
        self._bits = int(min(24, max(16, (8 * len(ordered)).bit_length())))
        self._slots = np.zeros(1 << self._bits, dtype=bool)
        self._slots[self._slot(ordered)] = True

    @classmethod
    def of(cls, wanted: pa.Table, keys: list[str]) -> IntegerKeys | None:
        """The source's one integer key without NULLs (they match nothing); None: the key is
        another kind, or several columns."""
        if len(keys) != 1 or not pa.types.is_integer(wanted.schema.field(keys[0]).type):
            return None
        values = pc.drop_null(wanted.column(keys[0])).to_numpy()
        return cls(np.sort(values))

    def _slot(self, values: np.ndarray) -> np.ndarray:
        spread = values.astype(np.uint64, copy=False) * self._GOLDEN  # wraps, as a hash may
        return spread >> np.uint64(64 - self._bits)

    def holds(self, values: np.ndarray) -> np.ndarray:
        """Whether each of `values` (of the source key's type) is one of the source's keys."""
        hit = self._slots[self._slot(values)]
        maybe = np.flatnonzero(hit)
        if len(maybe):
            candidates = values[maybe]
            at = np.searchsorted(self.ordered, candidates).clip(max=len(self.ordered) - 1)
            hit[maybe] = self.ordered[at] == candidates
        return hit


def _match_integers(one: _Found, lookup: IntegerKeys, key: str) -> None:
    """One table's rows whose integer key is among the source's."""
    assert one.read is not None
    column = one.read.column(key)
    hit = lookup.holds(pc.fill_null(column, 0).to_numpy())
    if column.null_count:
        hit &= pc.is_valid(column).to_numpy(zero_copy_only=False)
    _matched(one, one.read.filter(pa.array(hit)), [key])


def _match_batch(found: list[_Found], batch: list[int], wanted: pa.Table, keys: list[str]) -> None:
    """One join of the source with the keys of the tables `batch` numbers in `found`."""
    parts = []
    for number in batch:
        read = found[number].read
        assert read is not None
        label = pa.repeat(pa.scalar(number, pa.int32()), read.num_rows)
        parts.append(read.append_column(_PART, label))
    joined = pa.concat_tables(parts).join(wanted, keys, join_type="inner")  # NULLs never join
    joined = joined.take(pc.sort_indices(joined, sort_keys=[(_PART, "ascending")]))
    numbers = joined.column(_PART).to_numpy()
    for number in batch:
        start, end = (int(i) for i in np.searchsorted(numbers, [number, number + 1]))
        _matched(found[number], joined.slice(start, end - start), keys)


def _matched(one: _Found, mine: pa.Table, keys: list[str]) -> None:
    """Keep one table's matched keys and their row addresses; drop what was read."""
    one.keys = mine.select(keys)
    if one.read_from is not None:
        one.known = KnownRows(*one.read_from, mine.column(ADDRESS_COLUMN))
    one.read = None


def _lacking(
    dataset: Any,
    found: _Found,
    keys: list[str],
    schema: pa.Schema,
    sources: dict[str, str | None],
    wanted: pa.Table,
    where: Node | None | bool,
) -> None:
    """The rows of one table `where` holds for (None: every row) whose key the source lacks
    (a NULL key, or a key column the table lacks, matches nothing): set on `found`."""
    condition = None if isinstance(where, bool) else where
    rendered = filter_for(condition, found.schema, found.renamed)
    if rendered is FALSE:
        return
    found.gone_where = condition
    present = [k for k in keys if sources.get(k)]
    read = dataset.to_table(columns=[sources[k] for k in present], filter=rendered)
    table = pa.table(
        {
            k: read.column(sources[k]).cast(schema.field(k).type)
            if sources.get(k)
            else pa.nulls(read.num_rows, schema.field(k).type)
            for k in keys
        }
    )
    lacked = table.join(wanted, keys, join_type="left anti")  # NULL keys never join
    found.gone_rows = lacked.num_rows
    nulls = (
        pc.or_(*[pc.is_null(lacked.column(k)) for k in keys])
        if len(keys) > 1
        else (pc.is_null(lacked.column(keys[0])))
    )
    found.gone_nulls = bool(pc.any(nulls).as_py()) if lacked.num_rows else False
    found.gone = lacked.filter(pc.invert(nulls)).select(keys) if lacked.num_rows else None


def _require_matched_once(
    matches: list[PartitionMatch], found: list[_Found], keys: list[str]
) -> pa.Table:
    """Every matched key, refusing a key two rows of the namespace hold (in one table or in
    two): counted by key, the tables named only for a key found twice."""
    parts = []
    for number, one in enumerate(found):
        if one.keys is not None and one.keys.num_rows:
            label = pa.repeat(pa.scalar(number, pa.int32()), one.keys.num_rows)
            parts.append(one.keys.append_column(_PART, label))
    if not parts:
        return pa.table({k: pa.array([], pa.null()) for k in keys})
    every = pa.concat_tables(parts)
    counted = every.group_by(keys).aggregate([([], "count_all")])
    twice = counted.filter(pc.greater(counted.column("count_all"), 1))
    if twice.num_rows:
        first = twice.slice(0, 1).select(keys)
        held = every.join(first, keys, join_type="inner").column(_PART).to_pylist()
        key = {k: json_value(first.column(k)[0].as_py()) for k in keys}
        tables = sorted({matches[number].table for number in held})
        where = "twice in " + tables[0] if len(tables) == 1 else "in " + " and ".join(tables)
        raise InvalidInputError(
            f"merge: key {key} matches rows {where}; nothing was written (a key must match "
            "at most one row)"
        )
    return every.select(keys)


def matched_mask(source: pa.Table, matched: pa.Table, keys: list[str]) -> pa.Array:
    """For each source row, whether its key matched a row of the namespace."""
    if not matched.num_rows:
        return pa.repeat(False, source.num_rows)
    numbered = source.select(keys).append_column("__row", pa.array(np.arange(source.num_rows)))
    flagged = matched.append_column(_SEEN, pa.repeat(True, matched.num_rows))
    joined = numbered.join(flagged, keys, join_type="inner")
    hit = np.zeros(source.num_rows, dtype=bool)
    hit[joined.column("__row").to_numpy()] = True
    return pa.array(hit)


def _delete_touch(
    match: PartitionMatch, found: _Found, node: Node, replaced: bool
) -> PartitionTouch:
    """The touch deleting one table's matched rows (`replaced`) and the rows the source lacks:
    their keys as its filter."""
    touch = delete_touch(match, found.delete_filter(node), rows_from_base=True)
    if replaced and not found.gone_rows:  # exactly the matched rows go: known by address
        touch.known_rows = found.known
    matched = found.keys.num_rows if found.keys is not None and replaced else 0
    touch.rows_deleted = matched + found.gone_rows  # as planned
    return touch


def _key_condition(table_keys: pa.Table, keys: list[str]) -> Node:
    if len(keys) == 1:
        values = tuple(table_keys.column(keys[0]).to_pylist())
        return InList(keys[0], values)
    rows = table_keys.to_pylist()
    return flatten(Or(tuple(And(tuple(InList(k, (r[k],)) for k in keys)) for r in rows)))


def _unchanged_since(
    ns: Namespace, read: dict[str, PublishedRef], read_at: int
) -> Callable[[ManifestSnapshot], None]:
    """The keys were matched against every partition table as published then (`read`): a
    table published anew since, or created, may hold a source key the merge would then insert
    twice, so the merge fails instead (as Delta fails a MERGE on a concurrent append). A
    table merely pinned at the version it was read at (a NULL `read_version` given one before
    the commit) is no change."""

    def guard(snapshot: ManifestSnapshot) -> None:
        if snapshot.version == read_at:
            return
        for match in select_partitions(ns, None).matches:
            before = read.get(match.object_id)
            if before == match.published or (before == LATEST and match.published.tag is None):
                continue
            raise ConcurrentModificationError(
                f"partition table {match.table} changed while the merge ran; nothing was "
                "written: run it again"
            )

    return guard
