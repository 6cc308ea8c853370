"""Which entries of a local directory are symbolic links, as one listing of it found them, so
that a second pass over a root of a million entries is not needed.

Listing a root's `<name>.lance` directories and judging every catalog row's location (a link
there may lead a row elsewhere) each need one pass over the root; at a million entries a pass
is half a second. The listing pass records the links it saw, and the location pass takes them
when the directory cannot have changed since: the same directory (device and inode) with the
same modification and change times, and those times settled well before the listing began. A
directory's times move with every entry added, removed or renamed in it; a time at most a
clock tick old could still be shared by a change made after the listing, so such a record is
not kept (as git treats an index written in the same second as a file: racily clean).
"""

from __future__ import annotations

import os
import threading

# Times this far before a listing began cannot be shared by a change made after it began: the
# coarse clock that stamps directories lags the wall clock by a tick (milliseconds).
SETTLED_NS = 2_000_000_000
KEPT = 8  # records kept (a command lists the root, now and then a directory or two more)

Stamp = tuple[int, int, int, int]
_records: dict[Stamp, tuple[frozenset[str], frozenset[str]]] = {}  # (links, linked directories)
_lock = threading.Lock()


def stamp(path: str) -> Stamp | None:
    """The directory's identity and times, or None when it cannot be read."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_mtime_ns, found.st_ctime_ns)


def record_links(
    path: str,
    before: Stamp | None,
    listed_at_ns: int,
    links: list[str],
    linked_directories: list[str] | None = None,
) -> None:
    """Keep the links one listing of `path` found, when the directory's times (`before`,
    taken before the listing began at `listed_at_ns`) had settled, and the directory is the
    same after it (a path through a link swapped meanwhile names another). Times in whole
    seconds (a network or FUSE file system, stamped by a clock that may lag ours) are not
    trusted to move with a change in the same second: no record. `linked_directories`: the
    links among the names the listing returned (those that led to a directory then)."""
    if before is None or not unchanged_since(path, before, listed_at_ns):
        return
    with _lock:  # commands list in threads now and then
        while len(_records) >= KEPT:
            _records.pop(next(iter(_records)))
        _records[before] = (frozenset(links), frozenset(linked_directories or ()))


def settled(before: Stamp | None, listed_at_ns: int) -> bool:
    """Whether a directory's times, taken before a listing began at `listed_at_ns`, will move
    with any change made after it began: old enough, and finer than whole seconds."""
    if before is None or max(before[2], before[3]) > listed_at_ns - SETTLED_NS:
        return False
    return not (before[2] % 1_000_000_000 == 0 and before[3] % 1_000_000_000 == 0)


def unchanged_since(path: str, before: Stamp, listed_at_ns: int) -> bool:
    """Whether what one listing of `path` found may be kept: the directory's times had settled
    before it began (`before`, taken then) and the directory is the same after it (a path
    through a link swapped meanwhile names another)."""
    return settled(before, listed_at_ns) and stamp(path) == before


def recorded_links(path: str) -> frozenset[str] | None:
    """The links a listing recorded for this directory as it still is, or None."""
    found = _recorded(path)
    return None if found is None else found[0]


def recorded_linked_directories(path: str) -> frozenset[str] | None:
    """The links a listing of this directory (as it still is) returned as directories."""
    found = _recorded(path)
    return None if found is None else found[1]


def _recorded(path: str) -> tuple[frozenset[str], frozenset[str]] | None:
    now = stamp(path)
    return None if now is None else _records.get(now)
