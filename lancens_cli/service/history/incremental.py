"""Incremental reads: the rows a partitioned namespace gained between two `__manifest` versions.

A pipeline that runs every hour reads what arrived since its last run (`sinceVersion`, as
Iceberg's incremental append scan and Delta's change feed from `startingVersion`). Between
`__manifest` versions A (exclusive) and B, each partition table B publishes is compared with
what A published of it:

- not published at A (a new partition, under any spec version): all its rows at B are new;
- published at the same version: nothing is new;
- otherwise the table's own versions from A's to B's are walked, as Lance's transactions and
  manifests tell them, with every fragment's rows marked old or new: an `Append` adds new
  fragments; a `Rewrite` (compaction) moves rows, new and old alike, into new fragments in the
  order of its groups, so a compacted fragment may hold old rows then new ones (a window of its
  rows is new); a `Restore` to a version in between (a partitioned write setting a dead write's
  versions aside) takes that version's rows back; an operation that leaves every fragment's
  rows as they were (an index, a config change, a column added in place) changes nothing.

Everything else cannot be told as appends and is refused in words naming the partition and the
version: a delete, an update, an overwrite, a restore to before A (`lancens restore`), a schema
change that rewrote fragments, a version prune removed. So a pipeline never silently misses or
repeats a row. Only manifests and transactions are read: no data file, no anti-join.

Version 0 is the start of everything: every row is new. One table read on its own (`scan ID`,
`load("ns.table")`) is read from its own version A (`table_since`), with the same walk and the
same refusals. Messages name the start as the caller does: the data source's options
(`sinceVersion`), or the CLI's flags (`--since-version`: `FLAG_NAMES`).

The store modules and pyarrow's compute functions are imported inside the functions that use
them: the data source's Python workers import this module, and Lance loads only where it is
used, after the worker forked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.rows import dotted, partition_table_rows
from lancens_cli.service.history.transactions import operation_of, operation_word
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.store.catalog_rows import PublishedRef

if TYPE_CHECKING:
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.store.storage import Storage


Segments = list[tuple[int, bool]]  # runs of a fragment's live rows, in order: (rows, new?)


@dataclass(frozen=True)
class NewRows:
    """New rows of one fragment at the end version: rows [offset, offset + count) of its live
    rows in scan order (`offset` None: the whole fragment)."""

    fragment_id: int
    offset: int | None
    count: int


class NotAppendOnly(InvalidInputError):
    """What happened between the versions cannot be told as appends."""


@dataclass(frozen=True)
class SinceNames:
    """How the caller names the start of an incremental read, for its messages."""

    version: str = "sinceVersion"
    timestamp: str = "sinceTimestamp"
    changes: str = "readChanges"  # the change feed, which reads what appends cannot tell

    def refusal(self, problem: NotAppendOnly) -> NotAppendOnly:
        """`problem` with where to go instead: the change feed reads deletes and updates."""
        return NotAppendOnly(
            f"{problem.message}; the change feed ({self.changes}) reads deletes, updates and "
            "overwrites too"
        )


OPTION_NAMES = SinceNames()  # the data source's options
FLAG_NAMES = SinceNames("--since-version", "--since-timestamp", "--changes")  # the CLI's


@dataclass
class Since:
    """The two `__manifest` versions of an incremental read, and what the start published."""

    start: int  # exclusive
    end: int
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # object id -> row at start

    def then(self, object_id: str, location: str) -> dict[str, Any] | None:
        """What the start version published of a partition table (None: it did not)."""
        before = self.rows.get(object_id)
        if before is not None and before.get("location") != location:
            raise NotAppendOnly(
                f"partition table {dotted(object_id)} moved between __manifest versions "
                f"{self.start} and {self.end}: its rows cannot be told as appends"
            )
        return before


def since_versions(
    ns: Namespace,
    version: str | int | None,
    timestamp: str | None,
    names: SinceNames = OPTION_NAMES,
) -> Since:
    """The start (`version`, or the newest committed at or before `timestamp`; version 0: the
    start of everything) and the end (the version `ns` reads) of an incremental read, checked:
    the start must be readable and not after the end, and every partition table it published
    must still be published."""
    _one_start(version, timestamp, names)
    now = ns.snapshot()  # the version read: pinned by versionAsOf, else the newest
    end = now.version
    if _from_the_start(version):
        return Since(0, end)
    start = ns.manifest.resolve_version(version, timestamp)
    if start > end:
        raise InvalidInputError(_after_the_end(start, end, version, timestamp, names))
    then = {row["object_id"]: row for row in ns.as_of(version=start).snapshot().rows}
    published = set(now.locations().values())
    layout = layout_of(now)
    tables = partition_table_rows(then.values(), layout.specs) if layout is not None else []
    for object_id in (row["object_id"] for row in tables):
        if object_id not in published:
            raise NotAppendOnly(
                f"partition table {dotted(object_id)} was published at __manifest version "
                f"{start} and is not at {end} (a restore): its rows cannot be told as appends"
            )
    return Since(start, end, then)


def change_range(
    ns: Namespace, version: str | int | None, timestamp: str | None, names: SinceNames
) -> tuple[int, int]:
    """The `__manifest` versions a change feed reads between: the start as asked (exclusive; 0:
    the start of everything) and the version read; nothing else is required of them."""
    _one_start(version, timestamp, names)
    end = ns.snapshot().version
    if _from_the_start(version):
        return 0, end
    start = ns.manifest.resolve_version(version, timestamp)
    if start > end:
        raise InvalidInputError(_after_the_end(start, end, version, timestamp, names))
    return start, end


def table_since(
    dataset: Any,
    version: str | int | None,
    timestamp: str | None,
    what: str,
    names: SinceNames = OPTION_NAMES,
) -> int | None:
    """The version of one table (`dataset`, opened at the version read) an incremental read of
    it starts after: `version`, or its newest committed at or before `timestamp`, readable and
    not after the version read; None for version 0 (every row is new)."""
    from lancens_cli.store.version_pick import pick_version, version_history

    _one_start(version, timestamp, names)
    if _from_the_start(version):
        return None
    start = pick_version(version_history(dataset), version, timestamp, what)
    end = int(dataset.version)
    if start > end:
        raise InvalidInputError(f"{what}: " + _after_the_end(start, end, version, timestamp, names))
    return start


def _one_start(version: str | int | None, timestamp: str | None, names: SinceNames) -> None:
    if version is not None and timestamp is not None:
        raise InvalidInputError(f"give {names.version} or {names.timestamp}, not both")


def _from_the_start(version: str | int | None) -> bool:
    """Version 0: before the first version, so every row read is new."""
    from lancens_cli.store.version_pick import parse_version

    return version is not None and parse_version(version) == 0


def _after_the_end(
    start: int, end: int, version: str | int | None, timestamp: str | None, names: SinceNames
) -> str:
    asked = f"{names.version} {start}" if version is not None else f"{names.timestamp} {timestamp}"
    named = "" if version is not None else f" names version {start}, which"
    return f"{asked}{named} is after the version read ({end}): give an earlier one"


def published_alike(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether two rows send readers to the same table version (nothing new between)."""
    return PublishedRef.of(before) == PublishedRef.of(after)


def table_new_rows(
    storage: Storage,
    location: str,
    dataset: Any,
    branch: str | None,
    before: dict[str, Any] | None,
    what: str,
) -> list[NewRows]:
    """The new rows of a table opened at the end version (on `branch`) since the row the
    start version published of it (None: every row is new)."""
    since = None
    if before is not None:
        then_ref = PublishedRef.of(before)
        then = then_ref.open(storage, location)
        if then_ref.branch_in(then) != branch:
            raise NotAppendOnly(
                f"{what}: published on another branch than before; incremental reads follow "
                "one line"
            )
        since = int(then.version)
    return appended_rows(dataset, since, branch, what)


def in_window(batch: Any, fragment_id: int, offset: int, count: int) -> Any:
    """The rows of `batch` (scanned with `with_row_address`) inside rows [offset, offset +
    count) of the fragment, by row address (fragment id in the high 32 bits, the row's place
    in the fragment in the low: a fragment a compaction wrote has no deleted rows, so places
    and scan order agree)."""
    import pyarrow.compute as pc

    first = (fragment_id << 32) + offset
    address = batch.column(batch.schema.get_field_index("_rowaddr"))
    keep = pc.and_(pc.greater_equal(address, first), pc.less(address, first + count))
    return batch.filter(keep)


def appended_rows(dataset: Any, since: int | None, branch: str | None, what: str) -> list[NewRows]:
    """The new rows of `dataset` (a table opened at the end version, on `branch`) since its
    version `since` on the same line (None: the table is new, every row is). `what` names the
    table in messages (its partition)."""
    if since is None:
        return [
            NewRows(f.fragment_id, None, rows)
            for f in dataset.get_fragments()
            if (rows := live_rows(f.metadata))
        ]
    end = int(dataset.version)
    if since > end:
        raise NotAppendOnly(
            f"{what}: its published version went back from {since} to {end} (a restore); "
            "read it whole, or from a version after the restore"
        )
    state = _walk(dataset, since, end, branch, what)
    return _windows(state)


def _walk(dataset: Any, since: int, end: int, branch: str | None, what: str) -> dict[int, Segments]:
    """Every fragment's segments at `end`, walking each version after `since`."""
    before = _at(dataset, since, branch, what)
    state = {f.fragment_id: [(live_rows(f.metadata), False)] for f in before.get_fragments()}
    states = {since: state}
    shape = _shape(before)
    for version in range(since + 1, end + 1):
        current = _at(dataset, version, branch, what)
        operation = _operation(current, version, what)
        name = type(operation).__name__
        word = operation_word(name)
        now = _shape(current)
        if name == "Restore":
            target = int(operation.version)
            if target not in states:
                raise NotAppendOnly(
                    f"{what}: version {version} restored version {target}, from before the "
                    "start (a restore): the rows in between cannot be told as appends"
                )
            state = states[target]
        elif name == "Append":
            state = _appended(state, shape, now, version, what)
        elif name == "Rewrite":
            state = _rewritten(state, operation, now, version, what)
        elif now != shape:
            raise NotAppendOnly(
                f"{what}: version {version} ({word}) changed rows in place; only appends and "
                "compactions can be read incrementally"
            )
        if set(state) != set(now):
            raise NotAppendOnly(f"{what}: version {version} ({word}) is not understood")
        states[version], shape = state, now
    return state


def _appended(
    state: dict[int, Segments],
    shape: dict[int, tuple[int, int]],
    now: dict[int, tuple[int, int]],
    version: int,
    what: str,
) -> dict[int, Segments]:
    if any(now.get(fid) != rows for fid, rows in shape.items()):
        raise NotAppendOnly(f"{what}: version {version} (append) changed existing fragments")
    added = {fid: [(_rows_of(rows), True)] for fid, rows in now.items() if fid not in shape}
    return {**state, **added}


def _rewritten(
    state: dict[int, Segments],
    operation: Any,
    now: dict[int, tuple[int, int]],
    version: int,
    what: str,
) -> dict[int, Segments]:
    """A compaction: each group's rows, in the order of its old fragments, fill its new ones."""
    result = dict(state)
    for group in operation.groups:
        rows: Segments = []
        for old in group.old_fragments:
            if old.id not in result:
                raise NotAppendOnly(f"{what}: version {version} (compaction) is not understood")
            rows += result.pop(old.id)
        for new in group.new_fragments:
            if new.id not in now:
                raise NotAppendOnly(f"{what}: version {version} (compaction) is not understood")
            result[new.id], rows = _take(rows, _rows_of(now[new.id]))
        if any(count for count, _ in rows):
            raise NotAppendOnly(f"{what}: version {version} (compaction) lost rows")
    return result


def _take(rows: Segments, count: int) -> tuple[Segments, Segments]:
    """The first `count` rows of `rows`, and the rest."""
    taken: Segments = []
    while count and rows:
        size, new = rows[0]
        used = min(size, count)
        taken.append((used, new))
        rows = [(size - used, new), *rows[1:]] if size > used else rows[1:]
        count -= used
    if count:
        raise NotAppendOnly("a compaction wrote more rows than it read")
    return taken, rows


def _windows(state: dict[int, Segments]) -> list[NewRows]:
    found = []
    for fid in sorted(state):
        segments = state[fid]
        if len(segments) == 1 or all(new for _, new in segments):
            if all(new for _, new in segments) and (total := sum(c for c, _ in segments)):
                found.append(NewRows(fid, None, total))
            continue
        offset = 0
        for count, new in _merged(segments):
            if new and count:
                found.append(NewRows(fid, offset, count))
            offset += count
    return found


def _merged(segments: Segments) -> Segments:
    merged: Segments = []
    for count, new in segments:
        if merged and merged[-1][1] == new:
            merged[-1] = (merged[-1][0] + count, new)
        else:
            merged.append((count, new))
    return merged


def _at(dataset: Any, version: int, branch: str | None, what: str) -> Any:
    try:
        return dataset.checkout_version((branch, version) if branch else version)
    except (OSError, ValueError, RuntimeError):
        raise NotAppendOnly(
            f"{what}: its version {version} was pruned, so what it did cannot be told; "
            "read it whole, or from a later version"
        ) from None


def _operation(dataset: Any, version: int, what: str) -> Any:
    operation = operation_of(dataset, version)
    if operation is None:
        raise NotAppendOnly(f"{what}: version {version} records no transaction to tell it by")
    return operation


def _shape(dataset: Any) -> dict[int, tuple[int, int]]:
    """fragment id -> (physical rows, deleted rows): what an operation that moves no row keeps."""
    return {
        f.fragment_id: (f.metadata.physical_rows or 0, _deleted(f.metadata))
        for f in dataset.get_fragments()
    }


def _rows_of(shape: tuple[int, int]) -> int:
    return shape[0] - shape[1]


def live_rows(metadata: Any) -> int:
    """A fragment's rows less its deletions, from its metadata."""
    return (metadata.physical_rows or 0) - _deleted(metadata)


def _deleted(metadata: Any) -> int:
    deletion = metadata.deletion_file
    return (deletion.num_deleted_rows or 0) if deletion is not None else 0
