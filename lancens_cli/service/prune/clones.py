"""Which versions of a table its shallow clones read, found without reading every version.

A shallow clone (spec 002) reads, through a base path, the files of the one source version it
was cloned from. Finding that version by comparing file sets costs a read of every data file
path of every version: a table of V versions of F fragments each means V x F paths, and
pylance builds a Python object for each (minutes for a table appended to a few thousand times).

Fragment ids make it cheap. A data file is written for one fragment and stays that fragment's
(compaction and overwrites write new files for new ids; a deletion file's name carries its
fragment's id), and a shallow clone copies its source version's fragments with their ids. So a
version can hold exactly the files a clone reads only if its fragment ids are the ids of the
clone's fragments that read them, and hold all of them only if its ids include those. Ids cost
one integer a fragment; file sets are read for those candidates alone. The filter only ever
narrows where to look first: when no candidate holds the files, every version is read as before
and the ones sharing a file with the clone stay.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any

import lance

from lancens_cli.service.prune.protect import TableState
from lancens_cli.store.storage import Storage


def table_of_base(rel: str, locations: set[str]) -> str | None:
    """The table a base path (relative to the root) points into: its location or a prefix.

    A clone's base path is the source's root (or a branch's `tree/<name>` below it).
    """
    parts = rel.split("/")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end])
        if candidate in locations:
            return candidate
    return None


def clone_dependents(states: list[TableState]) -> dict[str, list[str]]:
    """source location -> the locations of tables reading it through a base path."""
    locations = {s.location for s in states}
    found: dict[str, list[str]] = defaultdict(list)
    for state in states:
        for base in state.bases:
            source = table_of_base(base, locations)
            if source is not None and source != state.location:
                found[source].append(state.location)
    return found


def clone_needed_versions(
    storage: Storage,
    source: TableState,
    clone_locations: list[str],
    read_by_clones: set[str] | None = None,
) -> dict[int, str]:
    """The versions of `source` its shallow clones read files of (with the clone as reason).

    For each clone, the files it reads from the source are gathered over all its versions; the
    source version holding exactly those files (else the newest holding all of them) stays.
    Should none hold them all (the clone's version was removed by another tool), every version
    sharing a file with the clone stays. `read_by_clones` collects those files (paths relative
    to the source), which no sweep of unreferenced files may touch.
    """
    options = storage.lance_options
    reads: list[tuple[str, set[str], frozenset[int]]] = []
    for clone in clone_locations:
        clone_ds = lance.dataset(storage.uri(clone), storage_options=options)
        ids = {
            bid
            for bid, base in clone_ds.base_paths().items()
            # one canonical spelling: a clone made through a symlink, `//` or `..` counts
            if storage.relative(str(base.path).rstrip("/")) == source.location
        }
        wanted, fragment_ids = _read_through(clone_ds, ids)
        if read_by_clones is not None:
            read_by_clones |= wanted
        if wanted:
            reads.append((clone, wanted, fragment_ids))
    if not reads:
        return {}
    versions = SourceVersions(
        lance.dataset(storage.uri(source.location), storage_options=options),
        [info.version for info in source.versions],
        [fragment_ids for _clone, _wanted, fragment_ids in reads],
    )
    needed: dict[int, str] = {}
    for index, (clone, wanted, _ids) in enumerate(reads):
        holding = versions.holding(index, wanted)
        for version in [holding] if holding is not None else versions.sharing(wanted):
            needed.setdefault(version, clone)
    return needed


EQUAL, SUPERSET = "equal", "superset"


class SourceVersions:
    """A source table's versions, each read only as far as a question needs: its fragment ids
    (once, compared with every clone's and not kept: a table of thousands of versions of
    thousands of fragments would hold millions of them), then the files of candidates."""

    def __init__(self, dataset: Any, versions: list[int], targets: list[frozenset[int]]) -> None:
        self._dataset = dataset
        self._versions = sorted(versions, reverse=True)  # newest first: the newest wins ties
        self._relations = {v: _relations(self._ids(v), targets) for v in self._versions}
        self._files: dict[int, set[str]] = {}

    def holding(self, target: int, wanted: set[str]) -> int | None:
        """The version holding exactly `wanted` (the files clone `target` reads), else the
        newest holding all of it."""
        self._files.clear()  # kept for one clone's question only
        for version in self._versions:
            if self._relations[version][target] == EQUAL and self.files(version) == wanted:
                return version
        for version in self._versions:
            if self._relations[version][target] is not None and wanted <= self.files(version):
                return version
        return None

    def sharing(self, wanted: set[str]) -> list[int]:
        """Every version holding any of `wanted` (each read in full: the last resort)."""
        return [v for v in self._versions if self._read_files(v) & wanted]

    def files(self, version: int) -> set[str]:
        if version not in self._files:
            self._files[version] = self._read_files(version)
        return self._files[version]

    def _ids(self, version: int) -> frozenset[int]:
        view = self._dataset.checkout_version(version)
        return frozenset(f.fragment_id for f in view.get_fragments())

    def _read_files(self, version: int) -> set[str]:
        view = self._dataset.checkout_version(version)
        files = set().union(*(_fragment_files(f.metadata) for f in view.get_fragments()))
        return files | _index_dirs(view, None)


def _relations(ids: frozenset[int], targets: list[frozenset[int]]) -> tuple[str | None, ...]:
    """For each clone's fragment ids: whether a version's ids are the same, include them, or
    neither (then the version cannot hold what the clone reads)."""
    return tuple(EQUAL if ids == t else SUPERSET if ids >= t else None for t in targets)


def _read_through(clone_ds: Any, base_ids: set[int]) -> tuple[set[str], frozenset[int]]:
    """The files every version of a clone reads through `base_ids`, and the ids of the
    fragments that read them."""
    wanted: set[str] = set()
    fragment_ids: set[int] = set()
    for info in clone_ds.versions():
        view = clone_ds.checkout_version(int(info["version"]))
        for fragment in view.get_fragments():
            files = _fragment_files(fragment.metadata, base_ids)
            if files:
                wanted |= files
                fragment_ids.add(fragment.fragment_id)
        wanted |= _index_dirs(view, base_ids)  # a clone's indexes are the source's files too
    return wanted, frozenset(fragment_ids)


def _index_dirs(dataset: Any, base_ids: set[int] | None) -> set[str]:
    """`_indices/<uuid>` of the indexes a version names (those read through `base_ids`, or
    its own with None): a clone's scalar, FTS and vector indexes live in its source."""
    try:
        with warnings.catch_warnings():  # list_indices names each index's base; not deprecated
            warnings.simplefilter("ignore", DeprecationWarning)  # away before describe_* does
            indices = dataset.list_indices()
    except Exception:  # noqa: BLE001 - unreadable index metadata: data files alone decide
        return set()
    found = set()
    for index in indices:
        base = index.get("base_id")
        if (base is None) if base_ids is None else (base in base_ids):
            found.add(f"_indices/{index['uuid']}")
    return found


def _fragment_files(fragment: Any, base_ids: set[int] | None = None) -> set[str]:
    """The data and deletion files of one fragment (only those read through `base_ids`)."""
    files = {
        f"data/{_path(f)}" for f in fragment.files if base_ids is None or f.base_id in base_ids
    }
    deletion = fragment.deletion_file
    if deletion is not None and (base_ids is None or deletion.base_id in base_ids):
        files.add(deletion.path(fragment.id))
    return files


def _path(data_file: Any) -> str:
    """A data file's path. pylance's `DataFile.path` makes a new class on every read (a
    compatibility shim, two thirds of the time a file set takes); its field is read when
    there."""
    path = getattr(data_file, "_path", None)
    return path if isinstance(path, str) else data_file.path
