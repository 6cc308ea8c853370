"""The sorted listing of a big local root, kept between commands, so that a page of `ls` costs
a page: the keys (row ids and directory-only table names) in order, and where each entry comes
from. A page is a binary search for its token and a `take` of its rows from `__manifest`.

Everything `ls` works out over the whole catalog is a function of the `__manifest` version, the
root's entries and what lies in a few directories. So the index is written by a listing that
worked it out (of at least `CACHED_FROM` entries or catalog rows, the root's times settled
before it began, as for `store/listing_cache.py`), with the version and the root's identity
and times; and it is read only while both are the same, and these still hold:

- every table row was accepted by its location's spelling alone (one plain directory under the
  root, no link, no other row there): its verdict cannot change while the root's entries do
  not. A catalog with any other row is listed whole each time;
- a deregistration marker, which lies inside a table's directory and so does not move the
  root's times, is where it was: each marked directory still marked, and no directory the page
  shows by its name alone (`marker_check`) marked since;
- nothing in it is a name that is not UTF-8.

A partitioned root's index also keeps what `ls` shows of its specs (`partition_summary`, a
function of the `__manifest` version); a page labels its rows by the specs in the table
metadata of that same version.

Anything else (a missing, damaged or foreign file) is the whole listing, which writes a new one.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lancens_cli.models import MANIFEST_TABLE, VERSIONS_DIR
from lancens_cli.service.namespace import Namespace
from lancens_cli.store import link_record, listing_cache
from lancens_cli.store.link_record import Stamp
from lancens_cli.store.tables import V1_SUFFIX, is_deregistered

# A new number for any change to what `ls` shows or how it is worked out: an index is what an
# older lancens worked out, and is taken only when the format is the same.
FORMAT = "lancens-listing-index 3"
COLUMNS = ("keys", "positions", "locations", "held", "marker_check")
MARKED_KEPT = 1_000  # deregistered directories an index rechecks; past this, none is written
WHOLE_FROM_INDEX = 4096  # entries a listing without --limit takes from the index
SUFFIX = ".index"  # beside the root's listing in the cache, keyed the same way
RECURSIVE_SUFFIX = ".index-recursive"  # `ls -R`: everything below the root


@dataclass
class IndexedPage:
    """A page read from the index: its entries in order, as (row position in `rows`, or None
    for a directory-only table; name; location), the page's rows taken from `__manifest`, whether
    a root directory holds each row's location, and whether more entries follow; the
    partitioned root's summary as kept (None: another root), and `__manifest`'s table metadata
    (where a page's rows find their partition specs)."""

    entries: list[tuple[int | None, str, str | None]]
    rows: list[dict[str, Any]]
    held: list[bool]
    more: bool
    partitioning: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None


@dataclass
class Listed:
    """What a whole listing worked out, as the index keeps it: the sorted keys, and for each
    its row's position in `__manifest` (-1: a directory-only table), the location of the
    directory whose deregistration marker decides what it shows (a directory-only table's own,
    or the directory no row names that holds a row's location; null for the others), whether
    a root directory holds the row's location, and whether that marker is to be checked; and
    the directories such markers hid."""

    keys: Any
    positions: Any
    locations: Any
    held: Any
    marker_check: Any
    marked: list[str]


class Start:
    """The root as a listing found it: taken before the listing, checked after it."""

    def __init__(self, ns: Namespace) -> None:
        self.path = ns.storage.uri() if ns.storage.is_local else None
        self.stamp = link_record.stamp(self.path) if self.path else None
        self.at_ns = time.time_ns()


@dataclass
class Found:
    """An index kept of this root as it stands and this `__manifest` version (its facts alone
    read, not yet its body): where it is, what it must be of, and how many entries it holds."""

    path: str
    file: str
    expected: dict[str, Any]
    ds: Any  # `__manifest`, opened at the version the index must be of
    entries: Any

    @property
    def long(self) -> bool:
        """More entries than a listing without `--limit` takes from it: such a listing lists
        whole, and need not write the same index again."""
        return isinstance(self.entries, int) and self.entries > WHOLE_FROM_INDEX


def find(ns: Namespace, recursive: bool) -> Found | None:
    """The index of the root's listing (`recursive`: of everything below it) whose facts
    match the root and `__manifest` now; None when there is none (a root never indexed does
    not open `__manifest`). A page still checks the rest (`page`)."""
    path = ns.storage.uri() if ns.storage.is_local else None
    if path is None or not _indexable(ns):
        return None
    file = _file_of(path, recursive)
    if file is None or not os.path.exists(file):
        return None
    stamp = link_record.stamp(path)
    if stamp is None:
        return None
    ds = ns.manifest.open_readable()
    if ds is None:
        return None
    expected = _facts(ns, path, stamp, ds.version)
    facts = listing_cache.read_facts(file, expected)
    if facts is None:
        return None
    return Found(path, file, expected, ds, facts.get("entries"))


def page(ns: Namespace, found: Found, after: str | None, limit: int | None) -> IndexedPage | None:
    """The page after `after` from the index `found`, or None when it cannot be trusted.
    Without a `limit`, the rest of the listing when it is at most `WHOLE_FROM_INDEX` entries
    (a partitioned root's specs, the namespaces of a root of many tables); a longer one is
    listed whole, in chunks."""
    path, ds = found.path, found.ds
    kept = _read(found.file, found.expected)
    if kept is None:
        return None
    table, facts = kept
    if not _links_lead_as_they_did(path, facts["links"]):
        return None
    if not all(is_deregistered(ns.storage, location) for location in facts["marked"]):
        return None
    keys = table.column("keys")
    start = 0 if after is None else bisect.bisect_right(_Texts(keys), after)
    if limit is None:
        limit = len(keys) - start
        if limit > WHOLE_FROM_INDEX:
            return None
    chosen = table.slice(start, limit)
    if any(_marked_since(ns, chosen)):
        return None
    more = _any_shown(ns, table.slice(start + limit))
    if more is None:
        return None
    try:
        return _page_of(ds, chosen, more, facts["partitioning"])
    except (ValueError, OSError, RuntimeError):
        return None  # the whole listing reads `__manifest` again, and says what is wrong


def keep(
    ns: Namespace,
    start: Start,
    version: int,
    listed: Listed,
    recursive: bool,
    partitioning: dict[str, Any] | None = None,
) -> None:
    """Write the index of a whole listing that began at `start` of `__manifest` `version`
    (with a partitioned root's summary; the caller decides it is worth a file), when the root
    had settled before it and is the same after it."""
    path = start.path
    if path is None or start.stamp is None:
        return
    if not _indexable(ns) or len(listed.marked) > MARKED_KEPT:
        return
    if not link_record.unchanged_since(path, start.stamp, start.at_ns):
        return
    links = _root_links(path)
    if links is None:
        return
    columns = (listed.keys, listed.positions, listed.locations, listed.held, listed.marker_check)
    table = pa.table(dict(zip(COLUMNS, columns, strict=True)))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    facts = {
        **_facts(ns, path, start.stamp, version),
        "marked": listed.marked,
        "links": links,
        "partitioning": partitioning,
        "entries": len(listed.keys),
    }
    listing_cache.write_file(_file_of(path, recursive), facts, sink.getvalue())


def _root_links(path: str) -> list[tuple[str, bool]] | None:
    """The root's `<name>.lance` links, and whether each led to a directory, as the listing
    this command made found them (None: it made none that it could keep)."""
    links = link_record.recorded_links(path)
    linked = link_record.recorded_linked_directories(path)
    if links is None or linked is None:
        return None
    return sorted((name, name in linked) for name in links if name.endswith(V1_SUFFIX))


def _links_lead_as_they_did(path: str, links: list[list[Any]]) -> bool:
    """Whether each of the root's links still leads to a directory, or still does not: a link
    can be pointed elsewhere, or its target come and go, without the root's times moving."""
    return all(os.path.isdir(os.path.join(path, name)) == bool(was) for name, was in links)


def _marked_since(ns: Namespace, entries: Any) -> Iterator[bool]:
    """For each entry whose directory no row names, whether a deregistration marker is there
    now (none was when the index was written)."""
    for location, check in zip(
        entries.column("locations").to_pylist(),
        entries.column("marker_check").to_pylist(),
        strict=True,
    ):
        yield bool(check) and is_deregistered(ns.storage, location)


def _any_shown(ns: Namespace, following: Any) -> bool | None:
    """Whether an entry after the page is still shown: the first that needs no marker looked
    at, or whose directory has none. None when the first after the page is marked now (the
    whole listing says what follows)."""
    if not len(following):
        return False
    return None if next(_marked_since(ns, following.slice(0, 1))) else True


def _indexable(ns: Namespace) -> bool:
    return ns.config.manifest_enabled


def _file_of(path: str, recursive: bool) -> str | None:
    return listing_cache.file_of(path, RECURSIVE_SUFFIX if recursive else SUFFIX)


def _facts(ns: Namespace, path: str, stamp: Stamp, version: int) -> dict[str, Any]:
    """What an index is of: the root as it stood, the `__manifest` version and the directory
    of its versions (a `__manifest` replaced in place keeps the root's times), and the options
    that decide what `ls` lists."""
    return {
        "format": FORMAT,
        "path": path,
        "stamp": stamp,
        "version": version,
        "versions": link_record.stamp(os.path.join(path, MANIFEST_TABLE, VERSIONS_DIR)),
        "options": [ns.config.dir_listing_enabled, ns.config.manifest_enabled],
    }


def _read(file: str | None, expected: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
    """The index's table and facts, when the file is whole and of `expected`."""
    found = listing_cache.read_file(file, expected)
    if found is None:
        return None
    facts, body = found
    if not isinstance(facts.get("marked"), list) or not isinstance(facts.get("links"), list):
        return None
    if "partitioning" not in facts or not isinstance(facts["partitioning"], dict | None):
        return None
    try:
        table = pa.ipc.open_file(pa.py_buffer(body)).read_all()
    except (pa.ArrowInvalid, OSError):
        return None
    if table.column_names != list(COLUMNS):
        return None
    return table, facts


def _page_of(ds: Any, chosen: Any, more: bool, partitioning: dict[str, Any] | None) -> IndexedPage:
    positions = chosen.column("positions").to_pylist()
    wanted = [p for p in positions if p >= 0]
    rows = ds.take(wanted).to_pylist() if wanted else []
    held = chosen.column("held").to_pylist()
    entries: list[tuple[int | None, str, str | None]] = []
    row_held: list[bool] = []
    for key, position, location, holds in zip(
        chosen.column("keys").to_pylist(),
        positions,
        chosen.column("locations").to_pylist(),
        held,
        strict=True,
    ):
        if position >= 0:
            entries.append((len(row_held), key, None))
            row_held.append(bool(holds))
        else:
            entries.append((None, key, location))
    return IndexedPage(entries, rows, row_held, more, partitioning, dict(ds.metadata or {}))


class _Texts(Sequence[str]):
    """An Arrow string array as a sequence `bisect` can search without converting it whole."""

    def __init__(self, array: Any) -> None:
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index: Any) -> Any:
        return self._array[index].as_py()
