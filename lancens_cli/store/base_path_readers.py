"""Which tables of a namespace read files of another table through base paths (spec 002).

A shallow clone keeps reading its source's data files through a base path holding the source's
absolute location, and so does every version of a branch (`tree/<branch>/`) of the table it
belongs to. Moving or deleting a table directory breaks whoever points into it. This scan finds
them before `rename` moves or `drop` deletes a directory. `prune` asks more (every version a
clone may read, service/prune/clones.py) but places a base path by the same rule,
`Storage.relative`, which knows every spelling Lance records.

Bounded: only manifests are read (never data), one per table for its latest version plus one per
tag and one per branch head, in parallel; a table that does not load is skipped (`check` reports
it). A table with no `_refs/` (no tag, no branch: most tables) is not opened with Lance: the base
paths of its newest manifest file are read by hand (store/base_paths.py), a listing and one small
read instead of a dataset open, so that a `drop` in a catalog of a million tables is minutes, not
hours. Anything unexpected there (no manifest, a footer not understood) falls back to Lance.
Older untagged versions are not scanned. A declared base path counts even when no file of
that version uses it (an overwritten clone keeps it): erring on the side of refusing. A base
path Lance recorded relative to some working directory cannot be placed and is not matched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import LancensError
from lancens_cli.models import REFS_DIR, VERSIONS_DIR
from lancens_cli.parallel import ordered
from lancens_cli.store.base_paths import base_path_strings, split_manifest_file
from lancens_cli.store.containment import DirectoryJudge, directory_location_problem
from lancens_cli.store.manifest_names import version_from_manifest_name
from lancens_cli.store.protobuf import ManifestFormatError
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import open_table


@dataclass
class Dependent:
    """A table whose versions `via` read files below the location `needs`."""

    table: str
    location: str
    needs: str
    via: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.table} ({', '.join(self.via)})"


def referenced_paths(storage: Storage, location: str) -> list[tuple[str, str]]:
    """(which version, base path) of the latest version, every tag and every branch head."""
    quick = _latest_alone(storage, location, directory_location_problem(storage, location))
    return quick if quick is not None else _opened_paths(storage, location)


def _opened_paths(storage: Storage, location: str) -> list[tuple[str, str]]:
    """`referenced_paths` as Lance's open of the table answers it."""
    try:
        ds = open_table(storage, location)
    except LancensError:
        return []
    found = [("latest", base.path) for base in ds.base_paths().values()]
    refs: list[tuple[str, Any]] = []
    try:
        refs += [(f"tag {name}", name) for name in sorted(ds.tags.list())]
        refs += [(f"branch {name}", (name, None)) for name in sorted(ds.branches.list())]
    except (OSError, RuntimeError, ValueError):
        pass  # unreadable refs: what the latest version holds is still known
    for label, ref in refs:
        try:
            version = ds.checkout_version(ref)
        except (OSError, RuntimeError, ValueError):
            continue  # a ref that no longer resolves reads nothing
        found += [(label, base.path) for base in version.base_paths().values()]
    return found


def _latest_alone(
    storage: Storage, location: str, problem: str | None
) -> list[tuple[str, str]] | None:
    """The base paths of a table that has no tags and no branches, from its newest manifest
    file as Lance finds it (the highest version in `_versions/`); None when it has refs, or
    anything is not as expected (then Lance opens it). `problem`: the location's
    (store/containment.py), for which `open_table` refuses it, with its reasons."""
    if problem is not None:
        return None
    try:
        if storage.exists(f"{location}/{REFS_DIR}"):
            return None
        names = [entry.name for entry in storage.list_dir(f"{location}/{VERSIONS_DIR}")]
        versions = {version_from_manifest_name(name): name for name in names}
        versions.pop(None, None)
        if not versions:
            return None
        newest = versions[max(v for v in versions if v is not None)]
        data = storage.read_bytes(f"{location}/{VERSIONS_DIR}/{newest}")
        _, message, _ = split_manifest_file(data)
        return [("latest", path) for path in base_path_strings(message)]
    except (ManifestFormatError, ValueError, OSError, LancensError):
        return None  # UnicodeDecodeError is a ValueError


def _scans(storage: Storage, locations: list[str]) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """(location, `referenced_paths`) of every table. On local disk the tables read by hand
    are read in this thread (pure Python: threads would only take turns holding the
    interpreter), and those Lance opens in a few threads; an object store's, all in threads
    (each read a round trip)."""
    if not storage.is_local:
        yield from ordered(lambda loc: (loc, referenced_paths(storage, loc)), locations, 16)
        return
    opened = []
    judge = DirectoryJudge(storage)
    for location in locations:
        quick = _latest_alone(storage, location, judge.problem(location))
        if quick is None:
            opened.append(location)
        else:
            yield location, quick
    # bounded, unlike pool.map (a future per table at once); the quick look is not repeated
    yield from ordered(lambda loc: (loc, _opened_paths(storage, loc)), opened, 4)


def _owner(storage: Storage, path: str, locations: Iterable[str]) -> str | None:
    """The table location (among `locations`) that a base path points into."""
    relative = storage.relative(path)  # every spelling: a path, file:/, file:///, file://localhost/
    if relative is None:
        return None
    relative = relative.rstrip("/")
    for location in locations:
        if relative == location or relative.startswith(location + "/"):
            return location
    return None


def find_dependents(
    storage: Storage, tables: Mapping[str, str], targets: Iterable[str] | None = None
) -> dict[str, list[Dependent]]:
    """For each table location (`tables`: location -> name), the other tables reading from it.

    `targets` limits the answer to those locations (all are scanned either way: any table may
    point into them). A table's own branches are not dependents: they move with it.
    """
    wanted = set(tables if targets is None else targets)
    result: dict[str, list[Dependent]] = {location: [] for location in wanted}
    if not wanted:
        return result
    deepest_first = sorted(wanted, key=len, reverse=True)  # the deepest location owns a path
    for location, paths in _scans(storage, list(tables)):
        found: dict[str, Dependent] = {}
        for label, path in paths:
            owner = _owner(storage, path, deepest_first)
            if owner is None or owner == location:
                continue
            dependent = found.setdefault(owner, Dependent(tables[location], location, owner))
            if label not in dependent.via:
                dependent.via.append(label)
        for owner, dependent in found.items():
            result[owner].append(dependent)
    for dependents in result.values():
        dependents.sort(key=lambda d: d.table)
    return result
