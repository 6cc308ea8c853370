"""The sorted listing of a big local root, kept between commands, so that a page of `ls` costs
a page: the keys (row ids and directory-only table names) in order, and where each entry comes
from. A page is a binary search for its token and a `take` of its rows from `__manifest`.

Everything `ls` works out over the whole catalog is a function of the `__manifest` version, the
root's entries and what lies in a few directories. So the index is written by a listing that
worked it out (at least `CACHED_FROM` entries, the root's times settled before it began, as for
`store/listing_cache.py`), with the version and the root's identity and times; and it is read
only while both are the same, and these still hold:

- every table row was accepted by its location's spelling alone (one plain directory under the
  root, no link, no other row there): its verdict cannot change while the root's entries do
  not. A catalog with any other row is listed whole each time;
- a deregistration marker, which lies inside a table's directory and so does not move the
  root's times, is where it was: each marked directory still marked, and no directory the page
  shows by its name alone (`marker_check`) marked since;
- nothing in it is a name that is not UTF-8, and the root is not partitioned.

Anything else (a missing, damaged or foreign file) is the whole listing, which writes a new one.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lancens_cli.service.namespace import Namespace
from lancens_cli.store import link_record, listing_cache
from lancens_cli.store.link_record import Stamp
from lancens_cli.store.tables import is_deregistered

FORMAT = "lancens-listing-index 1"
MARKED_KEPT = 1_000  # deregistered directories an index rechecks; past this, none is written
SUFFIX = ".index"  # beside the root's listing in the cache, keyed the same way
RECURSIVE_SUFFIX = ".index-recursive"  # `ls -R`: everything below the root


@dataclass
class IndexedPage:
    """A page read from the index: its entries in order, as (row position in `rows`, or None
    for a directory-only table; name; location), the page's rows taken from `__manifest`, whether
    a root directory holds each row's location, and whether more entries follow."""

    entries: list[tuple[int | None, str, str | None]]
    rows: list[dict[str, Any]]
    held: list[bool]
    more: bool


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


def page(ns: Namespace, after: str | None, limit: int, recursive: bool) -> IndexedPage | None:
    """The page after `after` from the index of the root's listing (`recursive`: of everything
    below it), or None when no index can be trusted."""
    path = ns.storage.uri() if ns.storage.is_local else None
    if path is None or not _indexable(ns):
        return None
    stamp = link_record.stamp(path)
    if stamp is None:
        return None
    ds = ns.manifest.open_readable()
    if ds is None:
        return None
    kept = _read(_file_of(path, recursive), path, stamp, ds.version)
    if kept is None:
        return None
    table, marked = kept
    if not all(is_deregistered(ns.storage, location) for location in marked):
        return None
    keys = table.column("key")
    start = 0 if after is None else bisect.bisect_right(_Texts(keys), after)
    chosen = table.slice(start, limit)
    if any(
        is_deregistered(ns.storage, location)
        for location, check in zip(
            chosen.column("location").to_pylist(),
            chosen.column("marker_check").to_pylist(),
            strict=True,
        )
        if check
    ):
        return None
    return _page_of(ds, chosen, more=start + limit < len(keys))


def keep(ns: Namespace, start: Start, version: int, listed: Listed, recursive: bool) -> None:
    """Write the index of a whole listing that began at `start` of `__manifest` `version`,
    when it is worth a file and the root had settled before it and is the same after it."""
    path = start.path
    if path is None or start.stamp is None or len(listed.keys) < listing_cache.CACHED_FROM:
        return
    if len(listed.marked) > MARKED_KEPT or not link_record.settled(start.stamp, start.at_ns):
        return
    if link_record.stamp(path) != start.stamp:
        return
    table = pa.table(
        {
            "key": listed.keys,
            "position": listed.positions,
            "location": listed.locations,
            "held": listed.held,
            "marker_check": listed.marker_check,
        }
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    facts = {**_facts(path, start.stamp, version), "marked": listed.marked}
    listing_cache.write_file(_file_of(path, recursive), facts, sink.getvalue().to_pybytes())


def _indexable(ns: Namespace) -> bool:
    return ns.config.dir_listing_enabled and ns.config.manifest_enabled


def _file_of(path: str, recursive: bool) -> str:
    return listing_cache.file_of(path, RECURSIVE_SUFFIX if recursive else SUFFIX)


def _facts(path: str, stamp: Stamp, version: int) -> dict[str, Any]:
    return {"format": FORMAT, "path": path, "stamp": stamp, "version": version}


def _read(file: str, path: str, stamp: Stamp, version: int) -> tuple[Any, list[str]] | None:
    """The index's table and marked directories, when the file is whole and of this format,
    root, root times and `__manifest` version."""
    found = listing_cache.read_file(file, _facts(path, stamp, version))
    if found is None:
        return None
    facts, body = found
    marked = facts.get("marked")
    if not isinstance(marked, list):
        return None
    try:
        table = pa.ipc.open_file(pa.py_buffer(body)).read_all()
    except (pa.ArrowInvalid, OSError):
        return None
    return table, [str(location) for location in marked]


def _page_of(ds: Any, chosen: Any, more: bool) -> IndexedPage:
    positions = chosen.column("position").to_pylist()
    wanted = [p for p in positions if p >= 0]
    rows = ds.take(wanted).to_pylist() if wanted else []
    held = chosen.column("held").to_pylist()
    entries: list[tuple[int | None, str, str | None]] = []
    row_held: list[bool] = []
    for key, position, location, holds in zip(
        chosen.column("key").to_pylist(),
        positions,
        chosen.column("location").to_pylist(),
        held,
        strict=True,
    ):
        if position >= 0:
            entries.append((len(row_held), key, None))
            row_held.append(bool(holds))
        else:
            entries.append((None, key, location))
    return IndexedPage(entries, rows, row_held, more)


class _Texts(Sequence[str]):
    """An Arrow string array as a sequence `bisect` can search without converting it whole."""

    def __init__(self, array: Any) -> None:
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index: Any) -> Any:
        return self._array[index].as_py()
