"""A table's versions as one listing of its directory shows them (no Lance read)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from lancens_cli.errors import StorageUnavailableError
from lancens_cli.models import VERSIONS_DIR
from lancens_cli.store.manifest_names import version_from_manifest_name
from lancens_cli.store.object_storage import modified_of as _modified
from lancens_cli.store.storage import Storage


@dataclass(slots=True)
class VersionInfo:
    version: int
    timestamp: datetime


def version_times(storage: Storage, location: str) -> dict[int, datetime]:
    """Every version of a table with when its manifest was written (one listing)."""
    return {version: when for version, (_name, when) in version_files(storage, location).items()}


def version_files(storage: Storage, location: str) -> dict[int, tuple[str, datetime]]:
    """Every version of a table: its `_versions/` file name and when it was written.

    One listing of `_versions/`. Reading each manifest for its timestamp (`ds.versions()`) costs
    one read per version; the file's modification time is never earlier than the commit (a copy
    only makes it later, which keeps a version longer), and Lance checks its own timestamp again
    before removing one.
    """
    found: dict[int, tuple[str, datetime]] = {}
    directory = f"{location}/{VERSIONS_DIR}"
    if storage.is_local:
        try:
            with os.scandir(storage.uri(directory)) as entries:
                items = [(e.name, e.stat().st_mtime) for e in entries if e.is_file()]
        except FileNotFoundError:
            return found
        stamped = [(name, datetime.fromtimestamp(mtime, UTC)) for name, mtime in items]
    else:
        try:
            infos = storage.remote(
                storage.fs.ls, storage.fs_path(directory), detail=True, refresh=True
            )
        except FileNotFoundError:
            return found
        now = datetime.now(UTC)
        stamped = [(i["name"].rsplit("/", 1)[-1], _modified(i) or now) for i in infos]
    for name, when in stamped:
        version = version_from_manifest_name(name)
        if version is not None:
            found[version] = (name, when)
    return found


class DirTimes:
    """Directories with their times in ns, as (name, time) pairs, held in little memory: a
    run keeps them for every table until its record is written. Tables share one tuple of
    names when their directories are named alike (most are), the times are one array."""

    __slots__ = ("names", "stamps")
    _shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    SHARED_AT_MOST = 1024  # layouts shared (a table's index directories make its own)

    def __init__(self, pairs: Iterable[tuple[str, int]]) -> None:
        pairs = list(pairs)
        names = tuple(sys.intern(str(name)) for name, _stamp in pairs)
        shared = DirTimes._shared
        if names in shared or len(shared) < DirTimes.SHARED_AT_MOST:
            names = shared.setdefault(names, names)
        self.names = names
        self.stamps = array("q", [int(stamp) for _name, stamp in pairs])

    def __reduce__(self) -> tuple[Any, ...]:
        return (DirTimes, (list(self),))

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return zip(self.names, self.stamps, strict=True)

    def __len__(self) -> int:
        return len(self.names)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Iterable) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DirTimes({list(self)!r})"

    def to_json(self) -> list[list[Any]]:
        return [[name, stamp] for name, stamp in self]


@dataclass(slots=True)
class TableListing:
    """What one listing of a table directory tells prune."""

    versions: dict[int, tuple[str, datetime]]  # version -> its `_versions/` file and mtime
    has_refs: bool  # a `_refs/` directory: tags or branches to read
    data_files: int  # files in `data/` (the sweep's shortcut: no more than the latest's)
    # A digest of everything the listing saw (every path below the table; on object stores
    # each object's size, time and ETag, locally each file's inode): equal digests mean no
    # file was added, removed or replaced in between. `times`: every time the listing saw.
    # Empty for a listing made only to plan (`list_for_plan`): no record entry comes of it.
    digest: str = ""
    times: tuple[datetime, ...] = ()
    # Locally, every directory below the table with its time in ns ("" is the table's own):
    # a file added, removed or renamed into a directory changes that directory's time.
    dirs: DirTimes | tuple[()] = ()


def list_table(storage: Storage, location: str) -> TableListing:
    """One listing of the table: on an object store one recursive listing request (per 1,000
    keys) serves the versions, the tags check, the data-file count and the digest; locally one
    scan of each directory below the table."""
    if storage.is_local:
        return _list_local(storage.uri(location))
    base = storage.fs_path(location).rstrip("/") + "/"
    try:
        found = storage.remote(storage.fs.find, base, detail=True, refresh=True)
    except FileNotFoundError:
        return TableListing({}, False, 0)
    now = datetime.now(UTC)
    listed = _Listed()
    for name, info in sorted(found.items()):
        if info.get("type") != "file" or not name.startswith(base) or name.endswith("/"):
            continue  # ("directory" markers some tools write are no files)
        tag = info.get("ETag") or info.get("etag") or ""
        listed.add(name[len(base) :], info.get("size"), _modified(info) or now, tag)
    return listed.done()


class _Listed:
    """One table's listing on an object store, built from its objects in name order."""

    __slots__ = ("versions", "has_refs", "data", "digest", "times")

    def __init__(self) -> None:
        self.versions: dict[int, tuple[str, datetime]] = {}
        self.has_refs = False
        self.data = 0
        self.digest = hashlib.sha256()
        self.times: list[datetime] = []

    def add(self, inside: str, size: object, when: datetime, tag: str) -> None:
        """One object, `inside` the table's directory."""
        self.times.append(when)
        self.digest.update(f"{inside}\0{size}\0{when.isoformat()}\0{tag}\n".encode())
        top, _, rest = inside.partition("/")
        if top == VERSIONS_DIR and "/" not in rest:
            version = version_from_manifest_name(rest)
            if version is not None:
                self.versions[version] = (rest, when)
        elif top == "_refs":
            self.has_refs = True
        elif top == "data":
            self.data += 1

    def done(self) -> TableListing:
        return TableListing(
            self.versions, self.has_refs, self.data, self.digest.hexdigest(), tuple(self.times)
        )


class UnorderedListing(StorageUnavailableError):
    """The store listed keys out of name order (as S3 directory buckets do)."""


def list_tables(
    storage: Storage, locations: list[str]
) -> Iterator[tuple[str, TableListing | None]]:
    """Each table's listing, exactly as `list_table` gives it, as soon as it is complete, or
    None where the caller should list the table itself (in its own threads).

    On S3 from one listing of the whole root: a request per 1,000 objects of the root, where a
    listing per table costs at least a request per table (1,000 tables of 16 objects: 16
    requests, not 1,000). S3 lists keys in name order, so a table's keys come together and its
    listing is complete, and handed on, when the first key past them arrives; a key out of
    order raises `UnorderedListing` (the caller lists each table instead; no table is planned
    before every listing is in). Elsewhere (local
    disk, GCS), or for a single table, None for each: one `list_table` per table is no more.
    """
    if storage.scheme != "s3" or len(locations) < 2:
        for location in locations:
            yield location, None
        return
    wanted = set(locations)
    bucket, _, key_prefix = storage.fs_path().partition("/")
    key_prefix = f"{key_prefix.strip('/')}/" if key_prefix.strip("/") else ""
    listing: dict[str, _Listed] = {}  # the tables whose keys are coming now
    done: set[str] = set()
    now = datetime.now(UTC)
    last = ""
    for obj in _objects(storage, bucket, key_prefix):
        rel = obj["Key"][len(key_prefix) :]
        if rel < last:
            raise UnorderedListing(
                f"storage at {storage.root_uri} listed {rel!r} after {last!r}, out of name order"
            )
        last = rel
        for location in [loc for loc in listing if not rel.startswith(f"{loc}/")]:
            done.add(location)
            yield location, listing.pop(location).done()
        if rel.endswith("/"):  # a "directory" marker, not a file (as in `list_table`)
            continue
        tag = obj.get("ETag") or ""
        for owner in _owners(rel, wanted):
            if owner not in listing:
                listing[owner] = _Listed()
            listing[owner].add(rel[len(owner) + 1 :], obj.get("Size"), _modified(obj) or now, tag)
    for location, listed in listing.items():
        done.add(location)
        yield location, listed.done()
    for location in sorted(wanted - done):  # no object below it
        yield location, _Listed().done()


def _owners(rel: str, locations: set[str]) -> list[str]:
    """The tables `rel` lies below (one, unless a table's directory holds another)."""
    owners = []
    at = rel.find("/")
    while at != -1:
        if rel[:at] in locations:
            owners.append(rel[:at])
        at = rel.find("/", at + 1)
    return owners


def _objects(storage: Storage, bucket: str, prefix: str) -> Iterator[dict]:
    """Every object below `prefix`, a `ListObjectsV2` page (1,000 keys) at a time."""
    token = None
    while True:
        more: dict[str, str] = {"ContinuationToken": token} if token else {}
        page = storage.remote(
            storage.fs.call_s3, "list_objects_v2", Bucket=bucket, Prefix=prefix, **more
        )
        yield from page.get("Contents", [])
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated"):
            return
        if not token:  # a listing cut short must never pass for a whole one
            raise StorageUnavailableError(
                f"storage at {storage.root_uri} cut a listing short without saying where it goes on"
            )


def _list_local(top: str) -> TableListing:
    """Every directory below `top` scanned once: each file's name, inode (a file replaced under
    the same name, as Lance's rename-into-place does, is a new inode, whatever the clock's
    resolution) and time. (A prune run may list a table twice, before and after its work: the
    per-file work is kept to what `scandir` cannot give without a call, the file's time.)"""
    try:
        top_stamp = os.stat(top).st_mtime_ns
        top_children = _scanned(top)
    except (FileNotFoundError, NotADirectoryError):
        return TableListing({}, False, 0)
    versions: dict[int, tuple[str, datetime]] = {}
    lines: list[str] = []  # what the digest takes, in listing order
    stamps: list[float] = []
    dirs: list[tuple[str, int]] = []
    data = 0
    pending = [("", top_stamp)]
    while pending:
        rel, stamp = pending.pop()
        dirs.append((rel, stamp))
        prefix = f"{rel}/" if rel else ""
        in_data = rel == "data" or rel.startswith("data/")
        try:
            children = _scanned(os.path.join(top, rel)) if rel else top_children
            for entry in children:
                name = entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append((prefix + name, entry.stat(follow_symlinks=False).st_mtime_ns))
                    continue
                mtime = entry.stat(follow_symlinks=False).st_mtime
                stamps.append(mtime)
                lines.append(f"{prefix}{name}\0{entry.inode()}\n")
                if in_data:
                    data += 1
                elif rel == VERSIONS_DIR:
                    version = version_from_manifest_name(name)
                    if version is not None:
                        versions[version] = (name, datetime.fromtimestamp(mtime, UTC))
        except (FileNotFoundError, NotADirectoryError):
            lines.append(f"{rel}\0gone\n")  # changed while we listed
    has_refs = any(entry.name == "_refs" for entry in top_children)
    digest = hashlib.sha256("".join(lines).encode()).hexdigest()
    times = tuple(datetime.fromtimestamp(mtime, UTC) for mtime in stamps)
    return TableListing(versions, has_refs, data, digest, times, DirTimes(sorted(dirs)))


def list_for_plan(
    top: str, wanted: Callable[[dict[int, tuple[str, datetime]]], bool]
) -> TableListing | None:
    """What planning a local table needs of its listing, and no more: its versions with their
    times and how many files `data/` holds. A `stat` of each version file only, and no digest:
    for a table whose record entry will come from its listing after its work (4,000 tables:
    0.13 s, against 0.33 s for `list_table`). None (list it whole) when it has `_refs/` (tags
    or branches to read) or `wanted(versions)` says no. Symlinks are files here, as in
    `list_table`."""
    try:
        top_children = {entry.name: entry for entry in _scanned(top)}
    except (FileNotFoundError, NotADirectoryError):
        return TableListing({}, False, 0)
    if "_refs" in top_children:
        return None

    def below(name: str) -> list[os.DirEntry[str]]:
        entry = top_children.get(name)
        if entry is None or not entry.is_dir(follow_symlinks=False):
            return []
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # (changed meanwhile)
            return _scanned(entry.path)
        return []

    versions: dict[int, tuple[str, datetime]] = {}
    for entry in below(VERSIONS_DIR):
        version = version_from_manifest_name(entry.name)
        if version is not None and not entry.is_dir(follow_symlinks=False):
            mtime = entry.stat(follow_symlinks=False).st_mtime
            versions[version] = (entry.name, datetime.fromtimestamp(mtime, UTC))
    if not wanted(versions):
        return None
    data, pending = 0, below("data")
    while pending:
        entry = pending.pop()
        if not entry.is_dir(follow_symlinks=False):
            data += 1
            continue
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            pending.extend(_scanned(entry.path))
    return TableListing(versions, False, data)


def _scanned(path: str) -> list[os.DirEntry[str]]:
    """A directory's entries in name order."""
    with os.scandir(path) as entries:
        return sorted(entries, key=attrgetter("name"))


def directories_unchanged(top: str, dirs: Iterable[tuple[str, int]]) -> bool:
    """Whether every directory of a local table still has the recorded time: then no file was
    added, removed or renamed anywhere below it (a new directory changes its parent's time).
    One `stat` per directory, no listing."""
    try:
        return all(
            os.stat(os.path.join(top, rel) if rel else top).st_mtime_ns == stamp
            for rel, stamp in dirs
        )
    except OSError:
        return False
