"""What the last prune saw of each table, so that the next run skips the tables nothing changed.

A cron run over thousands of tables, most untouched since the last run, should cost about one
listing per table. The record, `.lancens-prune/record.json.gz` inside the root (written under
the prune lease, so by one run at a time), keeps per table location:

- `digest`: the digest of the table's listing (`store/version_files.TableListing.digest`: every
  path below the table, and each object's size and time or each local directory's time);
- `pins`: a digest of what the kept `__manifest` versions publish of the table;
- `dependents`: a digest of the shallow clones that read it (their locations and listings);
- `bases`: the locations the table itself reads through base paths (it may be a clone);
- `due`: the first moment something of the table ages into the policy (a version past
  `--older-than` or `--grace`, a file past `--grace`), or none;
- `checked`: when the table was last evaluated in full;
- `dirs` (local disk): every directory below the table with its time.

A table is skipped only when all of these hold; any doubt means a full evaluation:

- the record exists, parses, is of this format and of exactly this policy;
- the listing's digest is the recorded one, so no version, tag, branch or file came or went;
- what `__manifest` publishes of it and the clones that read it are as recorded;
- `due` has not come, and `checked` is less than `MAX_AGE` ago;
- the run can read every table (an unreadable one makes every table keep everything).

Locally, the entry also keeps each directory's time, when every one was at least `SETTLE`
older than the listing: a run first compares those (one `stat` per directory) and lists the
table only when one differs.

Skipping only ever omits work: a skipped table loses nothing, so a wrong record can delay a
deletion, never cause one. The digest does not depend on a clock's resolution: locally it holds
each file's inode (Lance replaces a file by renaming a new one into place), on object stores
each object's ETag and size.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.work import PruneWork
from lancens_cli.spill import SpilledMap
from lancens_cli.store.containment import LEASE_DIR
from lancens_cli.store.storage import Storage
from lancens_cli.store.version_files import DirTimes, TableListing, directories_unchanged

RECORD = f"{LEASE_DIR}/record.json.gz"
FORMAT = 1
MAX_AGE = timedelta(days=7)
SETTLE = timedelta(seconds=2)  # how much older than a listing a directory's time must be


def policy_key(
    policy: PrunePolicy,
    work: PruneWork,
    storage: Storage,
    delimiter: str,
    optimize_indexes: str | None = None,
) -> str:
    """Everything a run's decisions depend on besides the tables themselves: the policy, the
    work, and the settings that decide which tables and debris a run sees (and how it names
    them). `optimize_indexes` (with `--optimize-indexes`) is the namespace's index definitions
    as text: new definitions make every table be looked at again."""
    config = storage.config
    return json.dumps(
        {
            "format": FORMAT,
            **policy.to_json(),
            "compact": work.compact,
            "indexes": work.catalog_indexes,
            **({"optimize_indexes": optimize_indexes} if optimize_indexes is not None else {}),
            "manifest": config.manifest_enabled,
            "dir_listing": config.dir_listing_enabled,
            "delimiter": delimiter,
        },
        sort_keys=True,
    )


def _in_time(entry: Entry, now: datetime) -> bool:
    """Evaluated less than `MAX_AGE` ago, and nothing of it has aged into the policy since."""
    return in_time(entry.checked, entry.due, now)


def in_time(checked: datetime, due: datetime | None, now: datetime) -> bool:
    if now - checked > MAX_AGE or now < checked:
        return False
    return due is None or now < due


def settled_dirs(listing: TableListing, listed_at: datetime) -> DirTimes | None:
    """The listing's directory times, when every one is at least `SETTLE` older than it."""
    limit = (listed_at - SETTLE).timestamp() * 1e9
    dirs = listing.dirs  # a local listing's DirTimes; empty on object stores
    if not isinstance(dirs, DirTimes) or not dirs or any(stamp > limit for _rel, stamp in dirs):
        return None
    return dirs


def digest_of(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def due_after(
    listing: TableListing, policy: PrunePolicy, now: datetime, every_version: bool = False
) -> datetime | None:
    """The first moment after `now` at which anything the listing saw ages into the policy:
    a version other than the newest `--retain` past `--older-than` (any version, branches'
    too, when the table has tags or branches; any version with `every_version`, as for
    `__manifest`, whose result names the reasons its versions stay), anything past `--grace`;
    None when nothing will (then only a change brings the table back)."""
    by_number = [when for _version, (_name, when) in sorted(listing.versions.items())]
    if listing.has_refs:
        aging = listing.times
    else:
        aging = tuple(by_number if every_version else by_number[: -policy.retain])
    ahead = [when + policy.older_than for when in aging]
    ahead += [when + policy.grace for when in listing.times]
    ahead = [moment for moment in ahead if moment > now]
    return min(ahead) if ahead else None


@dataclass(frozen=True, slots=True)
class Seen:
    """What the next record entry needs of a table's listing, kept instead of the listing
    (every file's time, every directory) once the table is read: its digest, when anything
    of it ages into the policy, and its directories when they had settled."""

    digest: str
    due: datetime | None
    dirs: DirTimes | None
    at: datetime | None  # when the listing was taken (None: known from the record alone)
    objects: int = 0  # files the listing saw (what listing the table again costs)

    @classmethod
    def of(
        cls, listing: TableListing, policy: PrunePolicy, at: datetime, since: datetime | None
    ) -> Seen:
        """`at`: when the listing was taken; `since`: the moment the run judged ages by (its
        start). Whatever ages in between was judged young this run, so it counts as due."""
        start = at if since is None else min(at, since)
        due, dirs = due_after(listing, policy, start), settled_dirs(listing, at)
        return cls(listing.digest, due, dirs, at, len(listing.times))


@dataclass(frozen=True, slots=True)
class Entry:
    """One table as the last run left it."""

    digest: str
    pins: str
    dependents: str
    bases: Sequence[str]
    due: datetime | None
    checked: datetime
    # Locally: every directory's time in ns, when all were older than `SETTLE` at the listing
    # (a clock ticks coarsely: a later change within the same tick would look like none)
    dirs: DirTimes | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "pins": self.pins,
            "dependents": self.dependents,
            "bases": list(self.bases),
            "due": self.due.isoformat() if self.due else None,
            "checked": self.checked.isoformat(),
            "dirs": self.dirs.to_json() if self.dirs is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        due, dirs = data["due"], data.get("dirs")
        return cls(  # the values most tables share (digests, directory names) held once
            str(data["digest"]),
            sys.intern(str(data["pins"])),
            sys.intern(str(data["dependents"])),
            tuple(str(b) for b in data["bases"]),
            datetime.fromisoformat(due) if due else None,
            datetime.fromisoformat(data["checked"]),
            DirTimes(dirs) if dirs else None,
        )


@dataclass
class PruneRecord:
    """The record a run read (`entries`) and the one it will leave (`next`), both kept in a
    temporary file (spill.py), not in memory: a million tables' entries are gigabytes of
    Python objects. Each entry is kept as its line's JSON text, made into an `Entry` only when
    asked (`entry`): a run asks of most tables once, or never."""

    policy: str
    entries: SpilledMap[str] = field(default_factory=SpilledMap)
    next: SpilledMap[str] = field(default_factory=SpilledMap)
    root: dict[str, Any] | None = None  # the root outside its tables (service/prune/quiet.py)
    next_root: dict[str, Any] | None = None

    @classmethod
    def load(cls, storage: Storage, policy: str, with_root: bool = True) -> PruneRecord:
        """The last run's record; an empty one when it is missing, damaged, of another
        format or of another policy (then every table is evaluated in full). The root's
        state (every table of the last run's scope) only `with_root`: a run that reads the
        tables does not hold it."""
        record = cls(policy)
        try:
            head, tables = _read_record(storage.read_bytes(RECORD), with_root)
            if head.get("format") != FORMAT or head.get("policy") != policy:
                return record
            record.entries = SpilledMap(tables)
            root = head.get("root")
            record.root = root if isinstance(root, dict) else None
        except Exception:  # noqa: BLE001 - a record we cannot read is no record
            record.entries, record.root = SpilledMap(), None
        return record

    def entry(self, location: str) -> Entry | None:
        """The last run's entry of a table; None when it has none, or one that does not read
        (then the table is evaluated in full)."""
        text = self.entries.get(location)
        try:
            return Entry.from_json(json.loads(text)) if text is not None else None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def keep(self, location: str, entry: Entry) -> None:
        """`entry` in the record this run leaves."""
        self.next[location] = json.dumps(entry.to_json())

    def unchanged(self, location: str, digest: str, now: datetime) -> Entry | None:
        """The entry of a table whose listing is as recorded and whose time has not come."""
        entry = self.entry(location)
        if entry is None or not digest or entry.digest != digest:
            return None
        return entry if _in_time(entry, now) else None

    def untouched(self, storage: Storage, location: str, now: datetime) -> Entry | None:
        """Locally, without listing: the entry of a table none of whose directories changed
        time since it was recorded, and whose time has not come."""
        entry = self.entry(location)
        if entry is None or not entry.dirs or not storage.is_local or not _in_time(entry, now):
            return None
        return entry if directories_unchanged(storage.uri(location), entry.dirs) else None

    def save(self, storage: Storage) -> None:
        """Replace the record with `next` as one whole file, compressed as it is written."""
        head = {"format": FORMAT, "policy": self.policy, "root": self.next_root}
        lines = _record_lines(head, self.next.pairs(), len(self.next))
        packer = zlib.compressobj(5, zlib.DEFLATED, GZIP_WBITS)
        packed = [packer.compress(line.encode()) for line in lines]
        storage.write_bytes(RECORD, b"".join([*packed, packer.flush()]))


# The record is one JSON document written a table per line, so that neither writing nor
# reading it ever holds the whole text or its whole parsed tree (100,000 tables make 50 MB of
# text): `{<head>, "tables": {` on the first line, `"<location>": {<entry>},` on each next,
# `}}` on the last. A record of any other shape is read as one document.
TABLES_OPEN = ', "tables": {\n'
TABLES_CLOSE = "}}\n"
GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib's gzip container: what `gzip.decompress` reads


def _record_lines(
    head: dict[str, Any], entries: Iterator[tuple[str, str]], count: int
) -> Iterator[str]:
    """The record's text (`entries`: each location with its entry's JSON text)."""
    yield json.dumps(head)[:-1] + TABLES_OPEN
    for position, (location, entry) in enumerate(entries):
        ending = ",\n" if position + 1 < count else "\n"
        yield f"{json.dumps(location)}: {entry}{ending}"
    yield TABLES_CLOSE


def _read_record(
    packed: bytes, with_root: bool = True
) -> tuple[dict[str, Any], Iterator[tuple[str, str]]]:
    """The record's head and its tables, each location with its entry's JSON text, read a
    line at a time (`_record_lines`): an entry is parsed only when asked for. Without
    `with_root`, the head's `root` (every table of the last run's scope) is not parsed."""
    text = io.TextIOWrapper(gzip.GzipFile(fileobj=io.BytesIO(packed)), encoding="utf-8")
    first = text.readline()
    if not first.endswith(TABLES_OPEN):  # one document
        data = json.loads(first + text.read())
        return data, ((str(loc), json.dumps(entry)) for loc, entry in data["tables"].items())
    head = _head(first[: -len(TABLES_OPEN)] + "}", with_root)

    def tables() -> Iterator[tuple[str, str]]:
        for line in text:
            if line == TABLES_CLOSE:
                if text.read():
                    raise ValueError("text after the record's end")
                return
            yield _table_line(line)
        raise ValueError("the record ends early")

    return head, tables()


_KEY = json.JSONDecoder()


def _head(text: str, with_root: bool) -> dict[str, Any]:
    """The head object; without `with_root`, its members before `root` only (which `save`
    writes last: a million tables' scope is not made into objects for nothing). A bare
    `, "root": ` cannot lie inside a JSON string, whose quotes are escaped."""
    before, found, _ = text.partition(', "root": ')
    return dict(json.loads(before + "}" if found and not with_root else text))


def _table_line(line: str) -> tuple[str, str]:
    """A table's line, `"<location>": {<entry>},`: the location and the entry's text (an
    entry that does not read is found when asked: its table is then looked at in full)."""
    location, end = _KEY.raw_decode(line)
    entry = line[end:].rstrip().removesuffix(",")
    if not isinstance(location, str) or not entry.startswith(": ") or len(entry) < 3:
        raise ValueError("not a table's line")
    return location, entry[2:]
