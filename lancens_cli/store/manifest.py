"""The `__manifest` table: reading snapshots and compare-and-swap commits of batched edits.

Every mutation reads the manifest at version N, builds the complete new content and commits an
`Overwrite` at exactly N+1 (put-if-not-exists underneath). On conflict the staged data files are
removed, the manifest is read again and the edit is rebuilt from the fresh snapshot, with bounded
retries and jittered backoff. Extra columns (partition fields) and table metadata survive our
commits. A writer that does not know the extra columns (pylance's `DirectoryNamespace`) drops
them when it rewrites `__manifest`. So a partitioned namespace carries PARTITIONED_WRITER_FLAG
(below): a writer that does not know that bit refuses to write at all. `__manifest` is described
in the Lance Directory Namespace specification, https://lance.org/format/namespace/.
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

import lance
import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli import interrupt
from lancens_cli.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    ManifestError,
    TableVersionNotFoundError,
    lance_message,
)
from lancens_cli.models import MANIFEST_TABLE, OBJECT_ID_DELIMITER
from lancens_cli.store.catalog_rows import PublishedRef
from lancens_cli.store.commit import COMMIT_ERRORS, backoff, is_conflict
from lancens_cli.store.commit_record import CommitChanges, changes_of, transaction_properties
from lancens_cli.store.inspect import index_summaries
from lancens_cli.store.lance_input import write_fragments
from lancens_cli.store.storage import Storage
from lancens_cli.store.version_pick import pick_version, version_history

T = TypeVar("T")

READER_FLAGS_KEY = "lance.namespace.manifest.reader_feature_flags"
WRITER_FLAGS_KEY = "lance.namespace.manifest.writer_feature_flags"
# The reference (pylance 14.0.2) knows no flag bits and refuses any it does not know: a reader
# bit stops it from opening the catalog, a writer bit from changing it. A partitioned namespace
# carries our writer bit, so that a writer that would drop the `partition_field_*` columns on
# its next rewrite refuses to write at all, while every reader still reads.
PARTITIONED_WRITER_FLAG = 1 << 10
KNOWN_READER_FLAGS = 0
KNOWN_WRITER_FLAGS = PARTITIONED_WRITER_FLAG
# what `describe` calls each namespace feature flag bit of `__manifest` (ours, so far)
MANIFEST_FLAG_NAMES = {PARTITIONED_WRITER_FLAG: "partitioned namespace writer (lancens)"}


def manifest_flag_names(value: int) -> list[str]:
    """The names of `__manifest`'s feature flag bits; a bit nobody we know sets is `bit N`."""
    names = [name for bit, name in MANIFEST_FLAG_NAMES.items() if value & bit]
    unknown = value & ~sum(MANIFEST_FLAG_NAMES)
    names += [f"bit {n} (unknown)" for n in range(unknown.bit_length()) if unknown >> n & 1]
    return names


# A committed transaction file: `<read version>-<uuid>.txn` (a name of another shape is a file
# Lance is still writing under a staging name, renamed into place when done)
TRANSACTION_NAME = re.compile(r"\d+-[^/]+\.txn")
_METADATA_COMMITS = 4  # metadata commits one mutation may land before its rows
_SCANNED_LOOKUPS = 16  # a snapshot's lookups by id made in Arrow before a dict of every id
BASE_COLUMNS = ("object_id", "object_type", "location", "metadata", "base_objects")
INDEXES = (
    ("object_id_btree", "object_id", "BTREE"),
    ("object_type_bitmap", "object_type", "BITMAP"),
    ("base_objects_label_list", "base_objects", "LABEL_LIST"),
)


def manifest_schema() -> Any:
    """The on-disk schema exactly as the reference writes it."""
    return pa.schema(
        [
            pa.field(
                "object_id",
                pa.string(),
                nullable=False,
                metadata={"lance-schema:unenforced-primary-key:position": "0"},
            ),
            pa.field("object_type", pa.string(), nullable=False),
            pa.field("location", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("base_objects", pa.list_(pa.field("object_id", pa.string()))),
        ]
    )


def encode_properties(properties: dict[str, str] | None) -> str | None:
    """Compact JSON as the reference writes it; None when there are no properties."""
    if not properties:
        return None
    return json.dumps(properties, separators=(",", ":"), sort_keys=True)


def decode_properties(text: str | None) -> dict[str, str]:
    """A row's `metadata` as properties; what is not a JSON object reads as none (any Lance
    writer can put anything there: `check` reports it, see `metadata_problem`)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            return {}
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    except (ValueError, RecursionError):
        return {}


def metadata_problem(text: Any, what: str = "metadata") -> str | None:
    """Why a row's `metadata` (named `what` in the message) is not the JSON object the spec
    stores there, or None."""
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        return f"{what}: not text"
    try:
        value = json.loads(text)
    except RecursionError:
        return f"{what}: JSON nested too deeply"
    except ValueError:
        return f"{what}: not valid JSON"
    return None if isinstance(value, dict) else f"{what}: JSON but not an object"


def properties_problem(row: dict[str, Any]) -> str | None:
    """Why a namespace row's stored properties cannot be read, or None."""
    return metadata_problem(row.get("metadata"), "its properties")


ROW_BATCH = 4096  # rows made into dicts at a time (`ManifestSnapshot.each_row`)


@dataclass
class ManifestSnapshot:
    """`__manifest` at one version (version 0: it does not exist yet)."""

    version: int
    table: Any
    metadata: dict[str, str]
    data_storage_version: str | None = None
    _index: dict[str, int] | None = field(default=None, repr=False)
    _scans: int = field(default=0, repr=False, compare=False)  # lookups made without `_index`
    _rows: list[dict[str, Any]] | None = field(default=None, repr=False)
    _containment: Any = field(default=None, repr=False, compare=False)  # store/containment.py
    _layout: Any = field(default=None, repr=False, compare=False)  # service/partitioned/layout

    @property
    def exists(self) -> bool:
        return self.version > 0

    @property
    def rows(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = self.table.to_pylist()
        return self._rows

    def each_row(self) -> Iterator[dict[str, Any]]:
        """Every row as a dict, made a batch at a time and let go (`rows` keeps them all:
        over a million rows that is a third of a GB)."""
        if self._rows is not None:
            yield from self._rows
            return
        for batch in self.table.to_batches(max_chunksize=ROW_BATCH):
            yield from batch.to_pylist()

    def columns(self, *names: str) -> Iterator[tuple[Any, ...]]:
        """The named columns of every row, a tuple a row (None for a column the table lacks):
        a pass over 100,000 rows without a dict for every row, which `rows` makes for good."""
        if self._rows is not None:
            return (tuple(row.get(name) for name in names) for row in self._rows)
        present, count = set(self.table.column_names), self.table.num_rows
        return zip(
            *(
                self.table.column(name).to_pylist() if name in present else [None] * count
                for name in names
            ),
            strict=True,
        )

    def _ids(self) -> dict[str, int]:
        if self._index is None:
            ids = self.table.column("object_id").to_pylist()
            self._index = {object_id: i for i, object_id in enumerate(ids)}
        return self._index

    def _position(self, object_id: str) -> int | None:
        """Where `object_id`'s row lies (the last, as the dict keeps it, should a damaged
        catalog repeat it). The first few lookups scan the column in Arrow (a few ms over a
        million rows); a command that asks for more gets a dict of every id, which costs a
        second and a Python string a row at that size."""
        if self._index is None and self._scans < _SCANNED_LOOKUPS:
            self._scans += 1
            ids = self.table.column("object_id")
            try:
                wanted = pa.scalar(object_id, ids.type)
            except (UnicodeEncodeError, pa.ArrowInvalid):
                return None  # a name that is not UTF-8 (a directory's): no row's id spells it
            found = pc.indices_nonzero(pc.equal(ids, wanted))
            return int(found[-1].as_py()) if len(found) else None
        return self._ids().get(object_id)

    def get(self, object_id: str) -> dict[str, Any] | None:
        position = self._position(object_id)
        if position is None:
            return None
        if self._rows is not None:
            return self._rows[position]
        return self.table.slice(position, 1).to_pylist()[0]

    def __contains__(self, object_id: str) -> bool:
        return self._position(object_id) is not None

    def children(self, object_id: str, recursive: bool = False) -> list[dict[str, Any]]:
        """Rows directly (or, recursively, anywhere) below a namespace; root is ''."""
        mask = self._child_mask(object_id, recursive)
        if self._rows is not None:
            return [self._rows[i] for i in pc.indices_nonzero(mask).to_pylist()]
        return self.table.filter(mask).to_pylist()

    def child_table_and_positions(
        self,
        object_id: str,
        recursive: bool = False,
        unless: Callable[[Any], Any] | None = None,
    ) -> Any:
        """`child_table`, and where its rows lie in the snapshot (int64), less the rows
        `unless` marks (a mask of the table): the rows are filtered once (a snapshot read with
        only some columns, `ManifestStore.read(columns)`, gives only those)."""
        mask = self._child_mask(object_id, recursive)
        table = self.table
        if unless is not None:
            mask = pc.and_(mask, pc.invert(unless(table)))
        if not (mask.null_count == 0 and pc.all(mask).as_py() is not False):
            table = table.filter(mask)
        return table, pc.indices_nonzero(mask).cast(pa.int64())

    def child_table(self, object_id: str, recursive: bool = False) -> Any:
        """`children` as an Arrow table: the rows below a namespace without a dict for each
        (a listing of a million root tables makes dicts for one page only)."""
        return self._rows_of(self._child_mask(object_id, recursive))

    def _rows_of(self, mask: Any) -> Any:
        """The rows `mask` keeps; the table itself when it keeps them all (a flat root's
        children: no second copy of a million rows)."""
        if mask.null_count == 0 and pc.all(mask).as_py() is not False:
            return self.table
        return self.table.filter(mask)

    def _child_mask(self, object_id: str, recursive: bool) -> Any:
        """Which rows lie below `object_id` (directly, unless recursive): one pass in Arrow."""
        ids = self.table.column("object_id")
        prefix = object_id + OBJECT_ID_DELIMITER if object_id else ""
        mask = pc.not_equal(ids, object_id)
        if prefix:
            mask = pc.and_(mask, pc.starts_with(ids, prefix))
        if not recursive:
            depth = prefix.count(OBJECT_ID_DELIMITER)
            mask = pc.and_(mask, pc.equal(pc.count_substring(ids, OBJECT_ID_DELIMITER), depth))
        return mask

    def locations(self) -> dict[str, str]:
        """location -> object_id of every table row."""
        return {
            location: object_id
            for object_id, object_type, location in self.columns(
                "object_id", "object_type", "location"
            )
            if object_type == "table" and location
        }

    @property
    def reader_flags(self) -> int:
        return _flag_value(self.metadata, READER_FLAGS_KEY)

    @property
    def writer_flags(self) -> int:
        return _flag_value(self.metadata, WRITER_FLAGS_KEY)


def require_writable(snapshot: ManifestSnapshot) -> None:
    """Refuse to change a manifest whose writer feature flags we do not understand."""
    if snapshot.writer_flags & ~KNOWN_WRITER_FLAGS:
        raise ManifestError(
            f"__manifest requires writer features {snapshot.writer_flags} that this "
            "version of lancens does not understand; it may be read but not changed"
        )


def _flag_value(metadata: dict[str, str], key: str) -> int:
    text = metadata.get(key)
    if text in (None, ""):
        return 0
    try:
        return int(text)
    except ValueError:
        raise ManifestError(f"__manifest metadata {key} = {text!r} is not a number") from None


class ManifestEdit:
    """Changes to apply to one snapshot; turned into the new full content at commit time."""

    def __init__(self, snapshot: ManifestSnapshot) -> None:
        self.snapshot = snapshot
        self._removed: set[str] = set()
        self._added: dict[str, dict[str, Any]] = {}
        self._columns: list[Any] = []
        self.metadata_updates: dict[str, str] = {}
        # data rows the commit publishes and unpublishes, when the command knows them; and the
        # operation, when the command's own name says less (prune's compaction)
        self.rows_added: int | None = None
        self.rows_removed: int | None = None
        self.operation: str | None = None

    @property
    def is_empty(self) -> bool:
        return not self._removed and not self._added and not self.new_columns

    @property
    def new_columns(self) -> list[Any]:
        names = set(self.snapshot.table.schema.names)
        return [f for f in self._columns if f.name not in names]

    def add_columns(self, fields: Iterable[Any]) -> None:
        """Nullable columns every row gets (NULL where a row does not set them)."""
        for f in fields:
            if all(f.name != known.name for known in self._columns):
                self._columns.append(f)

    def set_metadata(self, updates: dict[str, str]) -> None:
        """Table metadata to set; committed just before the rows (see ManifestStore.mutate)."""
        current = self.snapshot.metadata
        self.metadata_updates.update({k: v for k, v in updates.items() if current.get(k) != v})

    def has(self, object_id: str) -> bool:
        if object_id in self._added:
            return True
        return object_id in self.snapshot and object_id not in self._removed

    def add(self, row: dict[str, Any]) -> None:
        object_id = row["object_id"]
        if self.has(object_id):
            raise KeyError(object_id)
        self._added[object_id] = row

    def remove(self, object_id: str) -> None:
        if object_id in self._added:
            del self._added[object_id]
        if object_id in self.snapshot:
            self._removed.add(object_id)

    def replace(self, object_id: str, **changes: Any) -> None:
        """Change columns of an existing row, keeping the columns not named."""
        current = self._added.get(object_id) or self.snapshot.get(object_id)
        if current is None:
            raise KeyError(object_id)
        self.remove(object_id)
        self._added[object_id] = {**current, **changes}

    def publish(self, object_id: str, ref: PublishedRef) -> None:
        """Send readers of a table row to `ref` (its `read_*` columns; the rest kept)."""
        self.replace(object_id, **ref.columns())

    def changes(self, metadata: bool = False) -> CommitChanges:
        """What this edit changes, as the commit records it (`metadata`: the metadata commit
        that goes before the rows)."""
        if metadata:
            return changes_of({}, {}, list(self.metadata_updates), (None, None))
        touched = self._removed | (set(self._added) & set(self.snapshot._ids()))
        before = {i: row for i in touched if (row := self.snapshot.get(i)) is not None}
        rows = (self.rows_added, self.rows_removed)
        return changes_of(before, self._added, [], rows)

    def build(self) -> Any:
        table = self.snapshot.table
        for column in self.new_columns:
            table = table.append_column(column, pa.nulls(table.num_rows, column.type))
        replaced = self._removed | (set(self._added) & set(self.snapshot._ids()))
        if replaced:
            mask = pc.invert(pc.is_in(table.column("object_id"), pa.array(sorted(replaced))))
            table = table.filter(mask)
        if self._added:
            new_rows = pa.Table.from_pylist(list(self._added.values()), schema=table.schema)
            table = pa.concat_tables([table, new_rows])
        return table


@dataclass(frozen=True)
class Landed(Generic[T]):
    """What one `ManifestStore.commit` call committed, and its last plan's answer."""

    result: T
    planned_on: int  # the version the last plan read (the commit, if any, is the next one)
    versions: tuple[int, ...] = ()  # every version this call committed, in order
    metadata_only: tuple[int, ...] = ()  # those that set table metadata alone

    @property
    def rows_version(self) -> int | None:
        """The last version that committed rows (None: no row changed)."""
        rows = [v for v in self.versions if v not in self.metadata_only]
        return rows[-1] if rows else None


@dataclass
class ManifestStore:
    """Reads and commits `__manifest` below a namespace root."""

    storage: Storage
    retries: int = 20
    build_indexes: bool = False
    on_retry: Callable[[int], None] | None = None
    # Where a warning goes (an index not built): the command line prints it; elsewhere the
    # `warnings` module has it. The store itself never writes to the terminal.
    on_warning: Callable[[str], None] = field(default=lambda text: _warn(text))
    # a past version to read (time travel); a store pinned to one is read-only
    pinned_version: int | None = None

    @property
    def uri(self) -> str:
        return self.storage.uri(MANIFEST_TABLE)

    def pinned(self, version: int) -> ManifestStore:
        """This store reading `__manifest` as it was at `version` (read-only)."""
        return dataclasses.replace(self, pinned_version=version)

    def resolve_version(self, version: str | int | None, timestamp: str | None) -> int:
        """The `__manifest` version a time-travel read names: `version` as given (it must still
        be readable), or the newest committed at or before `timestamp` (ISO 8601; without an
        offset, UTC). TableVersionNotFoundError (exit 3) names the readable range."""
        if version is not None and timestamp is not None:
            raise InvalidInputError("give a version or a timestamp to read, not both")
        latest = dataclasses.replace(self, pinned_version=None).open_dataset()
        if latest is None:
            raise TableVersionNotFoundError("__manifest does not exist: it has no versions")
        return pick_version(version_history(latest), version, timestamp, MANIFEST_TABLE)

    def published_by_version(self) -> dict[int, set[str]]:
        """The table locations each readable `__manifest` version publishes (the newest too),
        read once: a partition table a restore stopped publishing is still read by time travel
        to the versions before, so it is not debris until they expire."""
        latest = dataclasses.replace(self, pinned_version=None).open_dataset()
        if latest is None:
            return {}
        found: dict[int, set[str]] = {}
        for number, _ in version_history(latest):
            try:
                rows = latest.checkout_version(number).to_table(columns=["object_type", "location"])
            except (OSError, ValueError, RuntimeError):
                continue  # a version being pruned away as we read: it publishes nothing more
            found[number] = {
                location
                for kind, location in zip(
                    rows.column("object_type").to_pylist(),
                    rows.column("location").to_pylist(),
                    strict=True,
                )
                if kind == "table" and location
            }
        return found

    def exists(self) -> bool:
        """Whether there is a manifest to open; ManifestError when one is there but damaged.

        A `__manifest` that exists but has no version is never taken for an absent one: that
        would hide the catalog, and the next commit would start a new one over it. The one
        exception is what a first commit leaves when it dies before its version lands: data
        files only, or with transaction files of version 0 younger than a minute (a rerun).
        `_versions/` is looked for again before damage is reported: a writer may have made its
        first commits (and more) between the two looks.
        """
        if self.storage.dir_exists(f"{MANIFEST_TABLE}/_versions"):
            return True
        if not self.storage.exists(MANIFEST_TABLE):
            return False
        if not self.storage.is_dir(MANIFEST_TABLE):
            raise ManifestError(
                f"__manifest cannot be read: {self.uri} is not a directory; nothing was changed "
                "(move it aside if it is not the catalog)"
            )
        transactions = [  # not a file Lance is still writing under a staging name (.tmpXYZ)
            name
            for name, _ in self.storage.walk_files(f"{MANIFEST_TABLE}/_transactions")
            if TRANSACTION_NAME.fullmatch(name)
        ]
        if not transactions or self._first_commit_in_flight(transactions):
            return False
        if self.storage.dir_exists(f"{MANIFEST_TABLE}/_versions"):
            return True  # a writer's first commits landed while we looked: not damage
        data = sum(1 for _ in self.storage.walk_files(f"{MANIFEST_TABLE}/data"))
        raise ManifestError(
            f"__manifest cannot be read: {self.uri} has no _versions/ (deleted or damaged) but "
            f"records {len(transactions)} commit(s); nothing was changed. Its {data} data "
            "file(s) in __manifest/data still hold the catalog rows: restore "
            "__manifest/_versions/ from a backup, or move __manifest aside and register the "
            "tables again (`lancens migrate-v1` for <name>.lance directories, `lancens "
            "register` for the others; lance.file.LanceFileReader reads the old rows)"
        )

    def _first_commit_in_flight(self, transactions: list[str]) -> bool:
        """Only transaction files of version-0 commits, each younger than a minute (one gone
        when its time is asked counts as young: a writer is at work)."""
        if not all(name.startswith("0-") for name in transactions):
            return False
        now = datetime.now(UTC)
        for name in transactions:
            changed = self.storage.modified(f"{MANIFEST_TABLE}/_transactions/{name}")
            if changed is not None and now - changed > timedelta(minutes=1):
                return False
        return True

    def open_dataset(self) -> Any:
        """The Lance dataset, or None when the manifest has not been created yet.

        Opened first, and looked for (`exists`) only when that fails: on an object store the
        look is a listing, and a run opens `__manifest` several times. Found after all (a
        first commit landed between the open and the look), it is opened once more."""
        try:
            return self._lance_open()
        except (ValueError, OSError, RuntimeError):
            if not self.exists():
                return None
        try:
            return self._lance_open()
        except (ValueError, OSError, RuntimeError) as exc:
            if self.pinned_version is not None and "not found" in str(exc).lower():
                raise TableVersionNotFoundError(
                    f"__manifest version {self.pinned_version} does not exist or was pruned"
                ) from None
            raise ManifestError(f"__manifest cannot be read: {lance_message(exc)}") from None

    def open_readable(self) -> Any:
        """`open_dataset`, refused unless this lancens may read its rows (a version, reader
        features it knows); its schema is checked when the rows are read."""
        ds = self.open_dataset()
        if ds is None:
            return None
        if ds.version == 0:
            raise ManifestError("__manifest cannot be read: its manifest file is empty or corrupt")
        flags = ManifestSnapshot(ds.version, None, dict(ds.metadata or {})).reader_flags
        if flags & ~KNOWN_READER_FLAGS:
            raise ManifestError(
                f"__manifest requires reader features {flags} that this "
                "version of lancens does not understand; upgrade lancens"
            )
        return ds

    def _lance_open(self) -> Any:
        return lance.dataset(
            self.uri, version=self.pinned_version, storage_options=self.storage.lance_options
        )

    def read(self, columns: Callable[[str], bool] | None = None) -> ManifestSnapshot:
        """The newest (or pinned) rows and table metadata; `columns`: only the columns it
        names are read (a listing of two million rows needs neither base objects nor read
        versions: 40 MiB less held)."""
        ds = self.open_readable()
        if ds is None:
            return ManifestSnapshot(0, manifest_schema().empty_table(), {})
        snapshot = ManifestSnapshot(ds.version, None, dict(ds.metadata or {}))
        _check_schema(ds.schema)
        try:
            snapshot.table = ds.to_table(columns=_projection(ds.schema.names, columns))
        except (ValueError, OSError, RuntimeError) as exc:
            raise ManifestError(f"__manifest cannot be read: {lance_message(exc)}") from None
        snapshot.data_storage_version = ds.data_storage_version
        return snapshot

    def mutate(
        self,
        plan: Callable[[ManifestSnapshot, ManifestEdit], T],
        *,
        metadata_last: bool = False,
        message: str | None = None,
    ) -> T:
        """`commit`, for a caller that needs only what its plan answered."""
        return self.commit(plan, metadata_last=metadata_last, message=message).result

    def commit(
        self,
        plan: Callable[[ManifestSnapshot, ManifestEdit], T],
        *,
        metadata_last: bool = False,
        message: str | None = None,
    ) -> Landed[T]:
        """Apply `plan` to the newest snapshot and commit it, re-planning on conflict; what
        landed (every version this call committed) comes back with the last plan's answer.

        `plan` may raise (e.g. the name is taken); it is called again on every retry and after
        each metadata commit, so it must derive everything from the snapshot it is given (its
        earlier answers are stale: only the last one counts, and `Landed` carries it).

        Lance commits rows (an Overwrite) and table metadata (UpdateConfig) in separate
        operations, never in one. By default the metadata lands first; `metadata_last` lands
        the rows and columns first, for a change whose metadata names them (a partition spec
        names its `partition_field_*` columns and `v<N>` namespace): every version in between
        then reads consistently, as if the change had not begun.

        `message` is the rows' commit message (Lance keeps it with the version's transaction):
        what `versions __manifest` shows for a version that is not a write, e.g. a restore.
        """
        if self.pinned_version is not None:
            raise InvalidInputError(
                f"__manifest version {self.pinned_version} is a past version: it is read-only"
            )
        attempt = 0
        versions: list[int] = []
        metadata_only: list[int] = []
        while attempt <= self.retries:
            interrupt.checkpoint()  # Ctrl-C before a commit: the caller's clean-up runs
            snapshot = self.read()
            edit = ManifestEdit(snapshot)
            result = plan(snapshot, edit)
            if edit.is_empty and not edit.metadata_updates:
                return Landed(result, snapshot.version, tuple(versions), tuple(metadata_only))
            require_writable(snapshot)
            if metadata_last and edit.metadata_updates and not edit.is_empty:
                # the rows first; the next round plans again and finds only the metadata
                if self._try_commit(snapshot, edit.build(), message, edit):
                    self._landed(snapshot, versions)
                    _refuse_endless(versions)
                    continue
            elif edit.metadata_updates:
                # Metadata goes first, in its own commit; the plan sees it on the next round
                # and the rows follow. A crash in between leaves the metadata, which a rerun
                # of the same plan finds already there.
                if self._commit_metadata(snapshot, edit):
                    self._landed(snapshot, versions, metadata_only)
                    _refuse_endless(versions)
                    continue
            elif self._try_commit(snapshot, edit.build(), message, edit):
                self._landed(snapshot, versions)
                return Landed(result, snapshot.version, tuple(versions), tuple(metadata_only))
            attempt += 1  # a landed metadata commit is progress, not a retry
            if self.on_retry:
                self.on_retry(attempt)
            backoff(attempt)
        raise ConcurrentModificationError(
            f"__manifest kept changing under us; gave up after {self.retries} retries"
        )

    def _landed(
        self,
        snapshot: ManifestSnapshot,
        versions: list[int],
        metadata_only: list[int] | None = None,
    ) -> None:
        """Note a commit at snapshot.version + 1; the catalog's indexes follow the rows."""
        interrupt.mark_durable()
        versions.append(snapshot.version + 1)
        if metadata_only is not None:
            metadata_only.append(snapshot.version + 1)
        elif self.build_indexes:
            self.create_indexes()

    def _try_commit(
        self,
        snapshot: ManifestSnapshot,
        table: Any,
        message: str | None = None,
        edit: ManifestEdit | None = None,
    ) -> bool:
        """Commit at exactly snapshot.version + 1; False when another writer got there first.
        The transaction records the command and what `edit` changes (store/commit_record.py)."""
        options = self.storage.lance_options
        try:
            fragments = write_fragments(
                table,
                self.uri,
                schema=table.schema,
                mode="overwrite",  # files for an Overwrite: the schema may gain columns
                storage_options=options,
                data_storage_version=snapshot.data_storage_version,
            )
        except (OSError, ValueError, RuntimeError) as exc:
            raise ManifestError(f"__manifest cannot be written: {lance_message(exc)}") from None
        changes = edit.changes() if edit is not None else CommitChanges()
        transaction = lance.Transaction(
            read_version=snapshot.version,
            operation=lance.LanceOperation.Overwrite(table.schema, fragments),
            transaction_properties=transaction_properties(
                changes, message, edit.operation if edit is not None else None
            ),
        )
        try:
            lance.LanceDataset.commit(self.uri, transaction, max_retries=0, storage_options=options)
            return True
        except COMMIT_ERRORS as exc:
            self._remove_staged(fragments)
            if is_conflict(exc):
                return False
            if snapshot.version == 0 and self.exists():
                return False  # lost the race to create version 1
            raise ManifestError(f"__manifest commit failed: {lance_message(exc)}") from None

    def _commit_metadata(self, snapshot: ManifestSnapshot, edit: ManifestEdit) -> bool:
        """Set table metadata at snapshot.version + 1; False when another commit got there.

        A manifest that does not exist yet is first created with its columns and no rows.
        """
        if not snapshot.exists:
            empty = ManifestEdit(snapshot)
            empty.add_columns(edit._columns)
            return self._try_commit(snapshot, empty.build())
        updates: dict[str, str | None] = dict(edit.metadata_updates)  # None would remove
        operation = lance.LanceOperation.UpdateConfig(
            table_metadata_updates=lance.LanceOperation.UpdateMap(updates, False)
        )
        properties = transaction_properties(edit.changes(metadata=True), None, edit.operation)
        try:
            lance.LanceDataset.commit(
                self.uri,
                lance.Transaction(snapshot.version, operation, transaction_properties=properties),
                max_retries=0,
                storage_options=self.storage.lance_options,
            )
            return True
        except COMMIT_ERRORS as exc:
            if is_conflict(exc):
                return False
            raise ManifestError(
                f"__manifest metadata cannot be set: {lance_message(exc)}"
            ) from None

    def _remove_staged(self, fragments: Iterable[Any]) -> None:
        for fragment in fragments:
            for data_file in fragment.files:
                self.storage.delete_file(f"{MANIFEST_TABLE}/data/{data_file.path}")

    def create_indexes(self) -> list[str]:
        """Build the reference's three scalar indexes (replacing stale ones)."""
        ds = self.open_dataset()
        if ds is None or ds.count_rows() == 0:
            return []
        built = []
        # Partition columns get a bitmap each: without them the object_type / object_id
        # indexes select every table row and pruning reads them all (3x slower at 100k
        # partitions, bench/bench_partitions.py); with them the filter runs on indexes alone.
        partition = [
            (f"{column}_bitmap", column, "BITMAP")
            for column in ds.schema.names
            if column.startswith("partition_field_")
        ]
        for name, column, kind in (*INDEXES, *partition):
            try:
                ds.create_scalar_index(column, kind, name=name, replace=True)
                built.append(name)
            except Exception as exc:  # an index is an optimisation; never fail the commit
                self.on_warning(f"index {name} not built: {exc}")
        return built

    def describe_indexes(self) -> list[dict[str, Any]]:
        ds = self.open_dataset()
        return [] if ds is None else index_summaries(ds)


def _refuse_endless(versions: list[int]) -> None:
    """A plan that keeps asking for another commit before its rows never settles: give up."""
    if len(versions) > _METADATA_COMMITS:
        raise ManifestError("__manifest keeps changing; giving up")


def _warn(text: str) -> None:
    warnings.warn(text, RuntimeWarning, stacklevel=3)


def _projection(names: list[str], columns: Callable[[str], bool] | None) -> list[str] | None:
    """The columns to read: those `columns` names, or all (None)."""
    if columns is None:
        return None
    chosen = [name for name in names if columns(name)]
    return chosen if len(chosen) < len(names) else None


def _check_schema(schema: Any) -> None:
    expected = {
        "object_id": pa.string(),
        "object_type": pa.string(),
        "location": pa.string(),
        "metadata": pa.string(),
    }
    names = set(schema.names)
    for name, arrow_type in expected.items():
        if name not in names:
            raise ManifestError(f"__manifest has no {name!r} column: not a namespace manifest")
        if schema.field(name).type != arrow_type:
            raise ManifestError(
                f"__manifest column {name!r} is {schema.field(name).type}, expected {arrow_type}"
            )
