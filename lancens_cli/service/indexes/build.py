"""`create index`: an index on one table, or on every published partition table at once.

A plain table gets Lance's index commit on its latest version. A partition table is read at
the `read_version` `__manifest` publishes, so an index built on it means nothing until
published: each published partition table (on main; tables published by a tag or a branch
are left alone and listed) gets the index on a version of its own made from the published one,
and every such version is published in ONE `__manifest` commit together with the namespace's
definition (service/partitioned/republish.py: a table moved only while `__manifest` still
publishes the version its index was built on). Lance rebases an index commit over a writer's
concurrent append; a build that did not land on exactly the next version holds that writer's
unpublished rows, so it is never published (it expires like any unpublished version).

A product-quantized index (ivf_pq, ivf_hnsw_pq) needs 256 vectors to train: on fewer, Lance
does not refuse, it commits an index that holds no rows. So such a build is never made: one
table named alone is refused (exit 2), a partition table is left without it and listed as
`too few rows` (the definition stays the namespace's: `prune --optimize-indexes` builds it once
the table has enough), and a new partition table's first write leaves it to prune too.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lance

from lancens_cli.errors import InvalidInputError, lance_message
from lancens_cli.models import KIND_TABLE, Identifier, Result
from lancens_cli.partition.rows import partition_rows
from lancens_cli.service.indexes.definitions import (
    INDEXES_KEY,
    IndexDefinition,
    definitions_of,
    definitions_text,
    require_fits,
    training_vectors,
    with_definition,
)
from lancens_cli.service.indexes.steps import build_chain, build_one, too_few_vectors
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.label import PartitionLabel
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.service.partitioned.naming import label_of
from lancens_cli.service.partitioned.republish import Republish, republish
from lancens_cli.store.catalog_rows import PublishedRef, open_published
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot
from lancens_cli.store.row_verdicts import require_row, row_locations
from lancens_cli.words import plural

BUILDERS = 4  # partition tables indexed at once (Lance's index builds use every core)
WRITER_WON = "not published: a writer committed to the table meanwhile; prune builds it later"
IN_FLIGHT = (
    "a write is in flight (an unpublished version); prune --optimize-indexes builds it later"
)
TOO_FEW_LATER = (
    "not built: {why}; prune --optimize-indexes builds it once the table has {needed} vectors"
)
# What `IndexedTable.status` says: the index is on the table (published), would be (dry run),
# was not built for too few vectors, or the table was left alone for another reason (its note)
BUILT, WOULD_BUILD, TOO_FEW_ROWS, LEFT_ALONE = "built", "would build", "too few rows", "left alone"
# What `CreatedIndex.status` says besides BUILT and WOULD_BUILD: the namespace already defines
# exactly this index, so nothing is built (tables that lack it are prune's work)
NOTHING_TO_DO = "nothing to do"
OPTIMIZE_REMEDY = "lancens prune --optimize-indexes --yes"


@dataclass
class IndexedTable:
    """One table `create index` built (or would build) the index on."""

    table: str
    location: str
    version_before: int | None
    version_after: int | None = None
    published: bool | None = None  # partition tables: whether __manifest now reads it
    note: str | None = None
    status: str = LEFT_ALONE  # BUILT, WOULD_BUILD, TOO_FEW_ROWS or LEFT_ALONE (see the note)
    rows: int | None = None  # the rows of the version the index went (or would go) on
    label: PartitionLabel | None = None  # which partition (partition tables)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            **(self.label.json_fields() if self.label is not None else {}),
            "location": self.location,
            "status": self.status,
            "rows": self.rows,
            "version_before": self.version_before,
            "version_after": self.version_after,
            "published": self.published,
            "note": self.note,
        }


@dataclass
class CreatedIndex(Result):
    """What `create index` did: the index, each table it went to, the tables it left alone
    (published by a tag or a branch, a write in flight, too few vectors to train it) and the
    `__manifest` version that publishes them (partitioned roots)."""

    index: IndexDefinition
    target: str
    tables: list[IndexedTable] = field(default_factory=list)
    dry_run: bool = False
    manifest_version: int | None = None
    stored: bool = False  # the definition is in the namespace's properties
    status: str = BUILT  # BUILT, WOULD_BUILD or NOTHING_TO_DO (the same definition again)
    # NOTHING_TO_DO: the published partition tables on main that lack the index, and of them
    # those with too few vectors to train it yet (prune --optimize-indexes builds it there)
    lacking: int | None = None
    lacking_too_few: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index.to_json(),
            "target": self.target,
            "status": self.status,
            "dry_run": self.dry_run,
            "definition_stored": self.stored,
            "manifest_version": self.manifest_version,
            "tables": [t.to_json() for t in self.tables],
            "lacking": self.lacking,
            "lacking_too_few_rows": self.lacking_too_few,
        }

    @property
    def too_few(self) -> list[IndexedTable]:
        """The tables left without the index: too few vectors to train it (yet)."""
        return [t for t in self.tables if t.status == TOO_FEW_ROWS]


def _require_enough(ds: Any, index: IndexDefinition, shown: str) -> None:
    """One table named alone must have the vectors its index trains on (else exit 2)."""
    why = too_few_vectors(ds, index)
    if why is not None:
        raise InvalidInputError(
            f"table {shown} has {why}: the index would hold none of its rows; build it once "
            f"the table has {training_vectors(index)} vectors, or use --type ivf_flat or ivf_sq"
        )


def _trained(ds: Any, index: IndexDefinition, rows: int | None) -> str | None:
    """A note when Lance trained fewer IVF partitions than asked (a small table: it trains
    at most one a vector, one per 256 for a product quantizer); the index holds every row."""
    asked = index.params.get("num_partitions")
    if not index.is_vector or asked is None:
        return None
    try:
        trained = ds.stats.index_stats(index.name)["indices"][0]["num_partitions"]
    except Exception:  # noqa: BLE001 - statistics Lance cannot give: nothing to say
        return None
    if not isinstance(trained, int) or trained >= asked:
        return None
    return f"trained {trained} of the {asked} IVF partitions asked ({plural(rows or 0, 'row')})"


def create_index(
    ns: Namespace,
    ident: Identifier,
    index: IndexDefinition,
    *,
    replace: bool = False,
    dry_run: bool = False,
    delimiter: str = ".",
) -> CreatedIndex:
    """`create index`: on the table `ident` names, or (the root of a partitioned namespace)
    on every published partition table, with the definition kept in `__manifest`."""
    ns.require_root()
    snapshot = ns.snapshot()
    if ident.is_root:
        result = _on_partitions(ns, snapshot, index, replace, dry_run)
        result.status = _status(result)
        for table in result.tables:  # as every command takes an id (`--delimiter`)
            table.table = Identifier.from_object_id(table.table).display(delimiter)
        return result
    ref = ns.require_table(ident, snapshot)
    shown = ident.display(delimiter)
    if ref.row is not None and ref.row.get("read_version") is not None:
        ns.require_writable(snapshot)
        require_row(ns.storage, snapshot, ident.object_id)
        published = open_published(ns.storage, ref.row)
        _require_new(published, index, replace, shown)
        require_fits(index, published.schema, f"table {shown}")
        _require_enough(published, index, shown)
        result = CreatedIndex(index, shown, dry_run=dry_run)
        done = _build_published(ns, ref.row, index, replace, dry_run)
        done.table = shown  # as the command was given it, not the object id
        result.tables.append(done)
        _publish(ns, result, {ident.object_id: done}, None)
        result.status = WOULD_BUILD if dry_run else BUILT
        return result
    ds = lance.dataset(ns.storage.uri(ref.location), storage_options=ns.storage.lance_options)
    _require_new(ds, index, replace, shown)
    require_fits(index, ds.schema, f"table {shown}")
    _require_enough(ds, index, shown)
    table = IndexedTable(shown, ref.location, ds.version, status=WOULD_BUILD)
    table.rows = ds.count_rows()
    if not dry_run:
        build_one(ds, index)
        table.version_after, table.status = ds.version, BUILT
        table.note = _trained(ds, index, table.rows)
    return CreatedIndex(index, shown, [table], dry_run, status=WOULD_BUILD if dry_run else BUILT)


def _status(result: CreatedIndex) -> str:
    """A namespace-wide result's status: nothing to do stays; else built or would build."""
    if result.status == NOTHING_TO_DO:
        return NOTHING_TO_DO
    return WOULD_BUILD if result.dry_run else BUILT


def _require_new(ds: Any, index: IndexDefinition, replace: bool, shown: str) -> None:
    """Without `--replace`, an index of that name must not exist on the table yet."""
    if not replace and any(i.name == index.name for i in ds.describe_indices()):
        raise InvalidInputError(
            f"table {shown} already has an index named {index.name!r}; pass --replace to rebuild it"
        )


def _on_partitions(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    index: IndexDefinition,
    replace: bool,
    dry_run: bool,
) -> CreatedIndex:
    layout = layout_of(snapshot)
    if layout is None:
        raise InvalidInputError(
            "the root is not a partitioned namespace: name the table to index (create index ID)"
        )
    ns.require_writable(snapshot)
    require_fits(index, layout.schema, "the namespace schema")
    stored = _stored_as(definitions_of(snapshot.metadata), index, replace)
    if stored:  # the same definition again: as add-partition-spec with the same spec
        return _already_defined(ns, snapshot, layout, index, dry_run)
    with_definition(definitions_of(snapshot.metadata), index, replace)  # checked before building
    verdicts = row_locations(ns.storage, snapshot)
    result = CreatedIndex(index, "(every partition table)", dry_run=dry_run)
    rows, labels, done = [], {}, {}
    for part in partition_rows(snapshot.rows, layout.specs, KIND_TABLE):
        row, object_id = part.row, part.object_id
        labels[object_id] = label_of(part.spec, row)
        problem = verdicts.problem(object_id)
        if problem is not None or PublishedRef.of(row).main_version is None:
            why = problem.reason if problem else "published by a tag or a branch: left alone"
            result.tables.append(IndexedTable(object_id, row["location"], None, note=why))
        else:
            rows.append(row)
    with ThreadPoolExecutor(max_workers=BUILDERS) as pool:
        built = pool.map(lambda row: _build_published(ns, row, index, True, dry_run), rows)
        for row, table in zip(rows, built, strict=True):
            result.tables.append(table)
            done[row["object_id"]] = table
    for table in result.tables:
        table.label = labels[table.table]

    def store(current: ManifestSnapshot, edit: ManifestEdit) -> None:
        kept = with_definition(definitions_of(current.metadata), index, True)
        edit.set_metadata({INDEXES_KEY: definitions_text(kept)})

    _publish(ns, result, done, None if dry_run else store)
    result.stored = not dry_run
    return result


def _stored_as(current: list[IndexDefinition], index: IndexDefinition, replace: bool) -> bool:
    """Whether the namespace already defines exactly `index` (without `--replace`: nothing to
    build). Another definition under its name is refused in one line naming the difference,
    before anything is read or built."""
    same = next((d for d in current if d.name == index.name), None)
    if same is None or replace:
        return False
    if same == index:
        return True
    raise InvalidInputError(
        f"the namespace already defines an index named {index.name!r} as {_spelled(same)}; "
        f"this one differs in {_difference(same, index)}; pass --replace to redefine it"
    )


def _spelled(index: IndexDefinition) -> str:
    """An index definition as the user wrote it: `ivf_pq on vec (num_partitions=2)`."""
    params = ", ".join(f"{k}={v}" for k, v in sorted(index.params.items()))
    return f"{index.type.lower()} on {index.column}" + (f" ({params})" if params else "")


def _difference(stored: IndexDefinition, new: IndexDefinition) -> str:
    """What differs between two definitions of one name: `type: btree -> bitmap`."""
    said = []
    if stored.column != new.column:
        said.append(f"column: {stored.column} -> {new.column}")
    if stored.type != new.type:
        said.append(f"type: {stored.type.lower()} -> {new.type.lower()}")
    for key in sorted(stored.params.keys() | new.params.keys()):
        was, now = stored.params.get(key, "default"), new.params.get(key, "default")
        if was != now:
            said.append(f"{key}: {was} -> {now}")
    return ", ".join(said)


def _already_defined(
    ns: Namespace, snapshot: ManifestSnapshot, layout: Any, index: IndexDefinition, dry_run: bool
) -> CreatedIndex:
    """The answer to the same definition again: nothing built, no commit; how many partition
    tables lack the index (prune --optimize-indexes builds it there), from their manifests."""
    result = CreatedIndex(index, "(every partition table)", dry_run=dry_run, stored=True)
    result.status = NOTHING_TO_DO
    verdicts = row_locations(ns.storage, snapshot)
    rows = [
        part.row
        for part in partition_rows(snapshot.rows, layout.specs, KIND_TABLE)
        if verdicts.problem(part.object_id) is None and _on_main(part.row)
    ]
    with ThreadPoolExecutor(max_workers=BUILDERS * 2) as pool:
        found = [f for f in pool.map(lambda row: _lacks(ns, row, index), rows) if f is not None]
    result.lacking = sum(1 for lacks, _ in found if lacks)
    result.lacking_too_few = sum(1 for _, short in found if short)
    return result


def _on_main(row: dict[str, Any]) -> bool:
    """Whether a partition table is published on main at a version (the tables the index goes
    to; a tag's or a branch's are left alone)."""
    return PublishedRef.of(row).main_version is not None


def _lacks(ns: Namespace, row: dict[str, Any], index: IndexDefinition) -> tuple[bool, bool] | None:
    """Whether the published version lacks the index, and has too few vectors to train it;
    None when it cannot be read (describe and check say why)."""
    try:
        ds = open_published(ns.storage, row)
        if any(i.name == index.name for i in ds.describe_indices()):
            return False, False
        return True, too_few_vectors(ds, index) is not None
    except Exception:  # noqa: BLE001 - a count for the answer's words, never a refusal
        return None


def _build_published(
    ns: Namespace, row: dict[str, Any], index: IndexDefinition, replace: bool, dry_run: bool
) -> IndexedTable:
    """The index on a version of the partition table made from its published one; what goes
    wrong is the table's note (a table of an earlier schema generation may lack the column)."""
    published = row["read_version"]
    table = IndexedTable(row["object_id"], row["location"], published)
    uri = ns.storage.uri(row["location"])
    try:
        ds = lance.dataset(uri, storage_options=ns.storage.lance_options)
        if ds.version != published:
            table.note = IN_FLIGHT
            return table
        _require_new(ds, index, replace, row["object_id"])
        require_fits(index, ds.schema, "the partition table")
        table.rows = ds.count_rows()
        why = too_few_vectors(ds, index)
        if why is not None:
            table.status = TOO_FEW_ROWS
            table.note = TOO_FEW_LATER.format(why=why, needed=training_vectors(index))
            return table
        if dry_run:
            table.status = WOULD_BUILD
            return table
        after = build_chain(ds, [index], exact=True)
    except Exception as exc:  # noqa: BLE001 - one table's failure is its note; the rest publish
        table.note = f"not built: {lance_message(exc)}"
        return table
    table.note = WRITER_WON if after is None else _trained(ds, index, table.rows)
    table.version_after = after
    table.published = False if after is not None else None
    return table


def _publish(ns: Namespace, result: CreatedIndex, done: dict[str, IndexedTable], also) -> None:
    """Every built partition table in one `__manifest` commit (with `also`'s edit)."""
    moves = [
        Republish(object_id, t.version_before, t.version_after)
        for object_id, t in done.items()
        if t.version_after is not None and t.version_before is not None
    ]
    if result.dry_run or (not moves and also is None):
        return
    published = republish(ns, moves, also)
    result.manifest_version = published.manifest_version
    for object_id, table in done.items():
        if table.version_after is not None:
            table.published = object_id in published.moved
            table.status = BUILT if table.published else LEFT_ALONE
            if not table.published:
                table.note = "not published: the partition was written meanwhile; prune builds it"
