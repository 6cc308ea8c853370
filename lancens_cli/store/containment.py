"""The trust boundary: which catalog locations a command may open, write or delete.

`__manifest` is a Lance table any Lance writer can append to, so a row's location is input, not
a fact. Every location a command opens, writes or deletes for a catalog row goes through
`RowLocations` (store/row_verdicts.py, one per `__manifest` snapshot): it accepts a location
only when it is a plain relative path, names nothing the layout reserves, resolves (local: the
real path, symlinks followed; object stores: bucket and normalised key) strictly inside the
root (a `/` boundary: `cat-sib/` is not inside `cat/`), and belongs to no other row (neither
the same directory nor one inside another row's). A refused row is reported by `check`, shown
by `ls` without being opened, refused by the commands that name it (exit 5), and skipped, with
a word, by the commands that walk the whole catalog. Shallow clones may read a source outside
the root; that is Lance following a base path, not a catalog row, and nothing here writes or
deletes there. This module holds the rules; row_verdicts.py applies them to a snapshot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import MANIFEST_TABLE, V1_SUFFIX
from lancens_cli.store import link_record, listing_cache
from lancens_cli.store.storage import check_relative

MAX_LOCATION_CHARS = 1024  # far beyond any name lancens makes; longer is not a real table
LEASE_DIR = ".lancens-prune"  # prune's leases (service/prune/lease.py)
JOBS_DIR = ".lancens-jobs"  # Spark write jobs' logs of data files (pipeline/write_task.py)
RESERVED_TOP = frozenset({MANIFEST_TABLE, LEASE_DIR, JOBS_DIR})


@dataclass(frozen=True)
class RefusedLocation:
    """A catalog row whose location no command may touch, and why."""

    object_id: str
    location: str
    reason: str


def shown(text: str, limit: int = 120) -> str:
    """A location fit for a one-line message: control characters escaped, length bounded."""
    if len(text) <= limit and text.isprintable():
        return text
    escaped = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)
    return escaped if len(escaped) <= limit else escaped[:limit] + f"... ({len(text)} chars)"


def syntax_problem(location: Any) -> str | None:
    """Why a location is not a plain path relative to the root, or None."""
    if not isinstance(location, str) or not location:
        return "the row has no location"
    if len(location) > MAX_LOCATION_CHARS:
        return f"the location is {len(location)} characters long (at most {MAX_LOCATION_CHARS})"
    if not location.isprintable():
        return "the location holds control characters"

    try:
        top = check_relative(location).split("/", 1)[0]
    except InvalidInputError as exc:
        return exc.message
    if top in RESERVED_TOP:
        return f"the location is inside {top}, which lancens reserves"
    return None


def canonical(storage: Any, location: str) -> str:
    """The location's canonical form: the real local path, or the object key as written."""
    if storage.is_local:
        return os.path.realpath(storage.uri(location))
    return location


def canonical_root(storage: Any) -> str:
    return os.path.realpath(storage.uri()) if storage.is_local else ""


class LocalResolver:
    """`canonical` for many locations under one local root, at one directory listing per
    directory instead of one `lstat` per component of every path.

    `os.path.realpath` of `<root>/a/b` asks the file system about every component of the whole
    path, the root's included: at 100k catalog rows that was two thirds of `ls`. Here the root is
    resolved once, each directory the locations pass through is listed once (`os.scandir` knows
    which entries are symbolic links), and a location meets `realpath` only when one of its own
    components is a link. The answer is `realpath`'s: a component that is no link, or does not
    exist, is appended as it is."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._links: dict[str, frozenset[str]] = {}

    def resolve(self, location: str) -> str:
        real = self.root
        for part in location.split("/"):
            if part in self.links_in(real):
                return os.path.realpath(os.path.join(self.root, location))
            real = f"{real.rstrip(os.sep)}{os.sep}{part}"
        return real

    def links_in(self, directory: str) -> frozenset[str]:
        """The names of the symbolic links in one directory (listed once, or taken from the
        listing that found the root's tables: store/link_record.py)."""
        found = self._links.get(directory)
        if found is None:
            found = link_record.recorded_links(directory)
        if found is None:  # a big root's from the cache, as the listing of its tables takes it
            try:
                listing = listing_cache.listed(directory, V1_SUFFIX)
            except OSError:  # unreadable: realpath appends, and so do we
                listing = None
            found = frozenset(() if listing is None else listing.links)
        self._links[directory] = found
        return found


def inside(child: str, parent: str, local: bool) -> bool:
    """Whether canonical `child` lies strictly below canonical `parent` (a `/` boundary)."""
    if not local:
        return child != parent and (not parent or child.startswith(parent.rstrip("/") + "/"))
    return child != parent and child.startswith(parent.rstrip(os.sep) + os.sep)


class DirectoryJudge:
    """`directory_location_problem` for many locations of one root (every table of a catalog):
    the root resolved once, and each location through one `LocalResolver`, not a `realpath`
    of every component of its whole path."""

    def __init__(self, storage: Any) -> None:
        self.root = canonical_root(storage)
        self.resolver = LocalResolver(self.root) if storage.is_local else None

    def problem(self, location: str) -> str | None:
        problem = syntax_problem(location)
        if problem is not None or self.resolver is None:
            return problem
        real = self.resolver.resolve(location)
        if not inside(real, self.root, True):
            return f"the directory resolves outside the root, to {shown(real)}"
        return None


def directory_location_problem(storage: Any, location: str) -> str | None:
    """Whether one location may be opened, without the whole catalog at hand (a `<name>.lance`
    directory found by listing, a partition table a read selected): its syntax, reserved
    names, and where it resolves."""
    problem = syntax_problem(location)
    if problem is not None or not storage.is_local:
        return problem
    real = canonical(storage, location)
    if not inside(real, canonical_root(storage), True):
        return f"the directory resolves outside the root, to {shown(real)}"
    return None
