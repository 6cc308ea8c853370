"""Bringing one table's indexes current: what `prune --optimize-indexes` does per table.

Rows appended after an index was built stay out of it (a query scans them) until Lance's
`optimize_indices` adds the new fragments; a compaction remaps indexes itself, and whatever
Lance's statistics still count as unindexed afterwards is added the same way. A partition
table also gets the namespace's index definitions it lacks (service/indexes/definitions.py).

A plain table is read at its latest version: Lance commits there (and rebases over a
concurrent append, which readers of "latest" see anyway). A partition table is read at the
version `__manifest` publishes: the work starts only when that is its latest (no write in
flight), every commit must land right after the previous one (else a writer's unpublished
rows are in it and it is never published), and the run publishes the final version
(service/prune/run.py). A shallow clone whose indexes live in its source is left alone: Lance
would write the optimised index where the clone cannot read it (as with compaction).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lance

from lancens_cli.errors import CatalogDamagedError, LancensError, lance_message
from lancens_cli.partition.rows import partition_table_rows
from lancens_cli.service.indexes.actions import IndexAction
from lancens_cli.service.indexes.definitions import (
    PQ_TRAINING_VECTORS,
    IndexDefinition,
    definitions_of,
    training_vectors,
)
from lancens_cli.service.indexes.steps import borrowed_indexes, build_chain, too_few_vectors
from lancens_cli.service.namespace import Namespace
from lancens_cli.store.catalog_rows import open_published
from lancens_cli.store.inspect import index_summaries

BORROWED = (
    "indexes left alone: {names} are read from the table's clone source (optimising them "
    "here would leave them unreadable); optimise the source or a deep copy"
)
IN_FLIGHT = "indexes not optimised: a write is in flight (version {latest}); the next run will"
WRITER_WON = "indexes not published: a writer committed to the table meanwhile; the next run will"
# A vector index built on fewer rows than its quantizer trains on (PQ: 256) holds no rows
# (an earlier lancens, or another writer, built it); Lance's optimisation then adds none, so it
# is trained again once the table has enough. A missing one is not built until then.
TRAINING_ROWS = PQ_TRAINING_VECTORS
TOO_FEW = "index {names} holds no rows (too few rows to train); trained once the table has {rows}"
NOT_YET = "index {name} not built: {why}; built once the table has {needed} vectors"
# what a dry run says of each action (the work's own actions stay as they are)
WOULD = {
    IndexAction.MISSING: IndexAction.WOULD_BUILD,
    IndexAction.UNINDEXED_ROWS: IndexAction.WOULD_OPTIMIZE,
}
# what the work made of each action
MADE = {IndexAction.MISSING: IndexAction.BUILT, IndexAction.UNINDEXED_ROWS: IndexAction.OPTIMIZED}


def _statistics(ds: Any, name: str) -> dict[str, Any]:
    try:
        return ds.stats.index_stats(name)
    except Exception:  # noqa: BLE001 - an index Lance cannot describe: shown as unknown
        return {}


def unindexed_rows(ds: Any, name: str) -> int | None:
    """Rows of `ds` the index `name` does not cover (None when Lance cannot say)."""
    found = _statistics(ds, name).get("num_unindexed_rows")
    return None if found is None else int(found)


def index_states(ds: Any) -> list[dict[str, Any]]:
    """Each index of `ds`: name, type (Lance's statistics name vector types: IVF_PQ),
    columns and unindexed rows."""
    found = []
    for summary in index_summaries(ds):
        stats = _statistics(ds, summary["name"])
        unindexed = stats.get("num_unindexed_rows")
        kind = stats.get("index_type")
        found.append(
            {
                "name": summary["name"],
                "type": kind if kind not in (None, "N/A") else summary["type"],
                "columns": summary["fields"],
                "unindexed_rows": None if unindexed is None else int(unindexed),
                "indexed_rows": summary["rows"],
            }
        )
    return found


def pending(entries: list[dict[str, Any]]) -> bool:
    """Whether a table's index entries say it had (or has) work: an index missing or missing
    rows; such a table gets no record entry, so the next run looks at it again."""
    return any(e["action"] != IndexAction.CURRENT for e in entries)


def optimize_table(
    ds: Any, definitions: list[IndexDefinition], exact: bool, dry_run: bool, notes: list[str]
) -> tuple[list[dict[str, Any]], int | None]:
    """Build the `definitions` `ds` lacks and add its unindexed rows to its indexes.

    The entries per index (`unindexed_rows` before, `rows_indexed`, `action`) and the version
    holding the work, or None when nothing was committed (or, with `exact`, a writer's commit
    came between ours: then nothing of it may be published)."""
    states = index_states(ds)
    have = {s["name"] for s in states}
    missing = [d for d in definitions if d.name not in have]
    short = _too_few(ds, missing, notes)
    empty = {s["name"] for s in states if s["unindexed_rows"] and not s["indexed_rows"]}
    stale = [s["name"] for s in states if s["unindexed_rows"] and s["name"] not in empty]
    retrain = sorted(empty) if empty and ds.count_rows() >= TRAINING_ROWS else []
    if empty and not retrain:
        notes.append(TOO_FEW.format(names=", ".join(sorted(empty)), rows=TRAINING_ROWS))
    entries = [{**s, "rows_indexed": 0, "action": IndexAction.CURRENT} for s in states]
    entries += [
        {"name": d.name, "type": d.type, "columns": [d.column], "unindexed_rows": None}
        | {"indexed_rows": 0, "rows_indexed": 0}
        | {"action": IndexAction.TOO_FEW_ROWS if d.name in short else IndexAction.MISSING}
        for d in missing
    ]
    for e in entries:
        if e["name"] in empty and e["name"] not in retrain:
            e["action"] = IndexAction.TOO_FEW_ROWS
        elif e["name"] in (*stale, *retrain):
            e["action"] = IndexAction.UNINDEXED_ROWS
    missing = [d for d in missing if d.name not in short]
    if not missing and not stale and not retrain:
        return entries, None
    borrowed = borrowed_indexes(ds)
    if borrowed:
        notes.append(BORROWED.format(names=", ".join(borrowed)))
        return entries, None
    if dry_run:
        for e in entries:
            e["action"] = WOULD.get(e["action"], e["action"])
        return entries, None
    if missing and build_chain(ds, missing, exact) is None:
        notes.append(WRITER_WON)
        return entries, None
    for names, again in ((stale, False), (retrain, True)):
        if not names:
            continue
        before = ds.version
        ds.optimize.optimize_indices(index_names=names, retrain=again)
        if exact and ds.version != before + 1:
            notes.append(WRITER_WON)
            return entries, None
    _after(ds, entries)
    return entries, ds.version


def _too_few(ds: Any, missing: list[IndexDefinition], notes: list[str]) -> set[str]:
    """The missing definitions `ds` has too few vectors for, each named in `notes`: built now,
    each would hold no rows, so they wait for the rows."""
    short = set()
    for d in missing:
        why = too_few_vectors(ds, d)
        if why is not None:
            short.add(d.name)
            notes.append(NOT_YET.format(name=d.name, why=why, needed=training_vectors(d)))
    return short


def _after(ds: Any, entries: list[dict[str, Any]]) -> None:
    """What each entry's work indexed, from Lance's statistics after it."""
    rows = ds.count_rows()
    for e in entries:
        if e["action"] not in MADE:
            continue
        left = unindexed_rows(ds, e["name"])
        was = rows if e["action"] == IndexAction.MISSING else e["unindexed_rows"] or 0
        e["rows_indexed"] = max(0, was - (left or 0))
        e["action"] = MADE[e["action"]]
        e["unindexed_rows_after"] = left


def _indexes_only(ds: Any, published: int) -> bool:
    """Whether every version after `published` only added indexes (an earlier run's work a
    writer's publication overtook): the rows are the published ones, the work may go on."""
    try:
        transactions = ds.get_transactions(ds.version - published)
    except Exception:  # noqa: BLE001 - unknown history: a write may be in flight
        return False
    kinds = {type(t.operation).__name__ for t in transactions if t is not None}
    return len(transactions) == ds.version - published and kinds == {"CreateIndex"}


def before_index_work(location: str) -> None:
    """A seam for tests that interleave a writer with the index work (does nothing)."""


def optimize_for_prune(
    ns: Namespace,
    location: str,
    published: int | None,
    definitions: list[IndexDefinition],
    dry_run: bool,
    notes: list[str],
) -> tuple[list[dict[str, Any]], list[int] | None]:
    """One table's index work in a prune: its entries, and for a partition table
    `[published, new version]` when there is a version to publish.

    `published` is a partition table's `read_version` (None for any other table)."""
    ds = lance.dataset(ns.storage.uri(location), storage_options=ns.storage.lance_options)
    if published is not None and ds.version != published and not _indexes_only(ds, published):
        notes.append(IN_FLIGHT.format(latest=ds.version))
        return [], None
    before_index_work(location)
    try:
        entries, after = optimize_table(ds, definitions, published is not None, dry_run, notes)
    except Exception as exc:  # noqa: BLE001 - named in the table's error: the table failed
        raise LancensError(f"indexes: {lance_message(exc)}") from exc
    if published is None or after is None:
        return entries, None
    return entries, [published, after]


def namespace_indexes(ns: Namespace, snapshot: Any, layout: Any) -> list[dict[str, Any]]:
    """`describe` of a partitioned root: each index definition, and how many published
    partition tables lack it (of them, how many have too few vectors to train it yet) or miss
    rows in it (each read at the version it publishes)."""
    try:
        definitions = definitions_of(snapshot.metadata)
    except CatalogDamagedError as exc:
        return [{"error": exc.message}]
    if not definitions:
        return []
    rows = partition_table_rows(snapshot.rows, layout.specs)

    def states(row: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], set[str]] | None:
        """Each index's state by name, and the lacking definitions it has too few vectors for."""
        try:
            ds = open_published(ns.storage, row)
            found = {s["name"]: s for s in index_states(ds)}
            lacking = [d for d in definitions if d.name not in found]
            return found, {d.name for d in lacking if too_few_vectors(ds, d) is not None}
        except Exception:  # noqa: BLE001 - unreadable: counted apart (describe says so)
            return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        read = list(pool.map(states, rows))
    found = [f for f in read if f is not None]
    shown = []
    for d in definitions:
        have = [f[d.name] for f, _ in found if d.name in f]
        shown.append(
            {
                **d.to_json(),
                "partition_tables": len(rows),
                "lacking": sum(1 for f, _ in found if d.name not in f),
                "too_few_rows": sum(1 for _, short in found if d.name in short),
                "missing_rows": sum(1 for s in have if s["unindexed_rows"]),
                "unindexed_rows": sum(s["unindexed_rows"] or 0 for s in have),
                "unreadable": len(read) - len(found),
            }
        )
    return shown
