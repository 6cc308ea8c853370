"""Where each partition a write touches goes in a `__manifest` snapshot: the partition's
namespaces, one per level of the spec, and its `dataset` table, found or new (spec 004's random
namespace names). `PartitionTouch` is one partition's part of a write, from the split of the
input to its commit.

It stands apart from `write.py` because the Spark data source and `ingest` plan with it too:
they find the partition tables before tasks write, and the driver's commit places the touches
again in the snapshot it publishes on.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import ConcurrentModificationError
from lancens_cli.models import KIND_NAMESPACE, KIND_TABLE
from lancens_cli.partition.rows import NAME_ALPHABET, NAME_LENGTH, child_id, partition_rows
from lancens_cli.partition.spec import PartitionSpec
from lancens_cli.store.catalog_rows import LATEST, PublishedRef
from lancens_cli.store.manifest import ManifestSnapshot
from lancens_cli.store.partition_tables import read_back
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import v2_location

TABLE_NAME = "dataset"


def partition_namespace_name() -> str:
    """Spec 004: a random 16-character base36 name (about 83 bits)."""
    return "".join(secrets.choice(NAME_ALPHABET) for _ in range(NAME_LENGTH))


@dataclass
class PartitionTouch:
    """One partition a write touched."""

    values: tuple[Any, ...]
    rows: Any  # the pyarrow Table of its rows; None when tasks wrote `fragments` (Spark)
    path: list[str] = field(default_factory=list)  # namespace object ids, one per level
    table_id: str = ""
    location: str = ""
    base_version: int | None = None  # the read_version the write started from
    version: int | None = None  # the version it committed
    created: bool = False
    fragments: Any = None  # written data files, reused when a commit is redone
    written_to: str | None = None  # the new table already written, if any
    num_rows: int = 0  # the row count when `rows` is None
    overwrite: bool = False  # replace the partition's rows instead of appending
    schema: Any = None  # the table schema, for commits of pre-written fragments
    branch: str | None = None  # the branch the write goes to (None: main)
    base_ref: PublishedRef = LATEST  # what the row published when prepared
    base_branch: str | None = None  # the branch of the published version (None: main)
    highest_field_id: int = -1  # the highest id the namespace schema ever used (spec 004)
    indexes: list[Any] = field(default_factory=list)  # a new table's (service/indexes/)
    delete_filter: str | None = None  # a delete: the rows to remove (Lance SQL), no rows added
    rows_deleted: int = 0  # what the delete removed in its last table commit
    # its rows were worked out from the rows of its base version (an update): a base that
    # changed cannot be rebased onto, the change fails instead
    rows_from_base: bool = False
    # the addresses of exactly the rows `delete_filter` names, read at the base version
    # (store/known_rows.py): the commit deletes them by offset when its line holds that version
    known_rows: Any = None

    @property
    def row_count(self) -> int:
        return self.rows.num_rows if self.rows is not None else self.num_rows

    @property
    def only_deletes(self) -> bool:
        """A delete: rows go and none come (an update or a merge also adds rows, held or
        written already by Spark tasks)."""
        return self.delete_filter is not None and self.rows is None and self.fragments is None


class LevelIndex:
    """(parent object id, value) -> child namespace, for one snapshot; built once."""

    def __init__(self, snapshot: ManifestSnapshot, spec: PartitionSpec) -> None:
        self.children: dict[tuple[str, Any], str] = {}
        rows = sorted(snapshot.rows, key=lambda r: r["object_id"])
        for found in partition_rows(rows, [spec], KIND_NAMESPACE):
            if found.level >= len(spec.fields):
                continue
            value = found.row.get(spec.fields[found.level].column)
            self.children.setdefault((found.parent, value_key(value)), found.object_id)

    def find(self, parent: str, value: Any) -> str | None:
        return self.children.get((parent, value_key(value)))


def locate_partitions(
    touch: PartitionTouch, spec: PartitionSpec, index: LevelIndex
) -> list[str | None]:
    """The existing namespace of each level on the partition's path (None from the first gap)."""
    path: list[str | None] = []
    parent: str | None = spec.namespace
    for value in touch.values:
        parent = index.find(parent, value) if parent is not None else None
        path.append(parent)
    return path


def value_key(value: Any) -> Any:
    """How `fresh` and the level index key a partition value (its type counts)."""
    return (type(value).__name__, value)


def prepare(
    storage: Storage,
    touch: PartitionTouch,
    spec: PartitionSpec,
    snapshot: ManifestSnapshot,
    index: LevelIndex,
    fresh: dict[tuple[str, Any], str],
) -> None:
    """Decide where the touch goes in this snapshot: an existing table or new namespaces.

    `fresh` holds the names of the namespaces this write creates, by (parent, value), so that
    partitions sharing a prefix of values share its namespaces, in every round.
    """
    found = locate_partitions(touch, spec, index)
    path: list[str] = []
    parent = spec.namespace
    for level, existing in enumerate(found):
        if existing is None:
            key = (parent, value_key(touch.values[level]))
            if key not in fresh or fresh[key] in snapshot:
                fresh[key] = child_id(parent, partition_namespace_name())
            existing = fresh[key]
        parent = existing
        path.append(parent)
    table_id = child_id(path[-1] if path else spec.namespace, TABLE_NAME)
    row = snapshot.get(table_id)
    if row is not None and row["object_type"] == KIND_TABLE:
        row_locations(storage, snapshot).require(table_id)  # never a write outside the root
        if touch.created and touch.location != row["location"]:
            if touch.rows is None:
                touch.rows = read_back(storage, touch)
            touch.fragments = None  # our new table lost to another writer's: write there
        elif touch.location and touch.location != row["location"]:
            _follow(storage, touch, row["location"])  # a restore published another table
        touch.created = False
        touch.location = row["location"]
        touch.base_ref = PublishedRef.of(row)
        touch.base_version = row.get("read_version")
    else:
        if not touch.created or touch.table_id != table_id:
            if touch.rows is None:  # pre-written fragments elsewhere: hold their rows
                touch.rows = read_back(storage, touch)
            touch.location = v2_location(table_id)
            touch.fragments = None
        touch.created = True
        touch.base_version = None
        touch.base_ref = LATEST
    touch.path, touch.table_id = path, table_id


def follow_row(storage: Storage, touch: PartitionTouch, snapshot: ManifestSnapshot) -> None:
    """Point a touch of an existing partition table (a delete: found by its id, in whichever
    spec version) at what its row publishes in this snapshot; a row gone meanwhile (the
    partition removed, the namespace's specs rewritten) fails the change, nothing published."""
    row = snapshot.get(touch.table_id)
    if row is None or row["object_type"] != KIND_TABLE:
        raise ConcurrentModificationError(
            f"partition table {touch.table_id!r} was removed while the change ran; nothing "
            "was published: run it again"
        )
    row_locations(storage, snapshot).require(touch.table_id)  # never a change outside the root
    touch.location = row["location"]
    touch.base_ref = PublishedRef.of(row)
    touch.base_version = row.get("read_version")


def _follow(storage: Storage, touch: PartitionTouch, location: str) -> None:
    """The partition is published at another table now (a restore put back an earlier one):
    the rows go there. Data files written for the old table are written again from the rows,
    or, when only the files are held (Spark tasks wrote them), copied to the new table's data
    directory under the same names, so the fragments stay valid there."""
    if touch.fragments is None:
        return
    if touch.rows is not None:
        touch.fragments = None
        return
    for fragment in touch.fragments:
        for data_file in fragment.files:
            name = f"data/{data_file.path}"
            storage.copy_file(f"{touch.location}/{name}", f"{location}/{name}")
