"""Which versions of a table its shallow clones read, found without reading every version.

A shallow clone (spec 002) reads, through a base path, the files of the one source version it
was cloned from. Finding that version by comparing file sets costs a read of every data file
path of every version: a table of V versions of F fragments each means V x F paths, and
pylance builds a Python object for each (minutes for a table appended to a few thousand times).

Lance's version list makes it cheap: with each version it gives the counts of the data files and
deletion files that version's fragments name. A version can hold exactly the files a clone reads
only if both its counts equal the clone's, and all of them only if both are at least the clone's;
file sets are read for those candidates alone, newest first. When no candidate holds the files,
every version is read as before and the ones sharing a file with the clone stay. (A manifest
that names one data file twice, as an append committed twice does, counts it twice: such a
version is never taken for the exact one, so the newest version holding all the files stays;
a covering version is never missed, since a count is never below its distinct files.)
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
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


def clone_dependents(
    locations: set[str], based: Iterable[tuple[str, Sequence[str]]]
) -> dict[str, list[str]]:
    """source location -> the locations of tables reading it through a base path, from the
    tables' `locations` and (location, base paths) of those that have any (`based`)."""
    found: dict[str, list[str]] = defaultdict(list)
    for location, bases in based:
        for base in bases:
            source = table_of_base(base, locations)
            if source is not None and source != location:
                found[source].append(location)
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
    reads: list[tuple[str, set[str]]] = []
    for clone in clone_locations:
        clone_ds = lance.dataset(storage.uri(clone), storage_options=options)
        ids = {
            bid
            for bid, base in clone_ds.base_paths().items()
            # one canonical spelling: a clone made through a symlink, `//` or `..` counts
            if storage.relative(str(base.path).rstrip("/")) == source.location
        }
        wanted = _read_through(clone_ds, ids)
        if read_by_clones is not None:
            read_by_clones |= wanted
        if wanted:
            reads.append((clone, wanted))
    if not reads:
        return {}
    versions = SourceVersions(
        lance.dataset(storage.uri(source.location), storage_options=options),
        [info.version for info in source.versions],
    )
    needed: dict[int, str] = {}
    for clone, wanted in reads:
        holding = versions.holding(wanted)
        for version in [holding] if holding is not None else versions.sharing(wanted):
            needed.setdefault(version, clone)
    return needed


class SourceVersions:
    """A source table's versions, each read only as far as a question needs: the counts
    Lance's version list gives, then the file sets of candidates."""

    def __init__(self, dataset: Any, versions: list[int]) -> None:
        self._dataset = dataset
        self._versions = sorted(versions, reverse=True)  # newest first: the newest wins ties
        self._counts = _file_counts(dataset)
        self._files: dict[int, set[str]] = {}

    def holding(self, wanted: set[str]) -> int | None:
        """The version holding exactly `wanted`, else the newest holding all of it."""
        need = _counts_of(wanted)
        self._files.clear()  # kept for one clone's question only
        for version in self._versions:
            counts = self._counts.get(version)
            if counts in (None, need) and self.files(version) == wanted:
                return version
        for version in self._versions:
            counts = self._counts.get(version)
            could = counts is None or (counts[0] >= need[0] and counts[1] >= need[1])
            if could and wanted <= self.files(version):
                return version
        return None

    def sharing(self, wanted: set[str]) -> list[int]:
        """Every version holding any of `wanted` (each read in full: the last resort)."""
        return [v for v in self._versions if self._read_files(v) & wanted]

    def files(self, version: int) -> set[str]:
        if version not in self._files:
            self._files[version] = self._read_files(version)
        return self._files[version]

    def _read_files(self, version: int) -> set[str]:
        view = self._dataset.checkout_version(version)
        files = set().union(*(_fragment_files(f.metadata) for f in view.get_fragments()))
        return files | _index_dirs(view, None)


def _file_counts(dataset: Any) -> dict[int, tuple[int, int]]:
    """version -> (data files, deletion files) from Lance's version list; a version whose
    summary lacks them is left out (then its files are read)."""
    counts: dict[int, tuple[int, int]] = {}
    try:
        listed = dataset.versions()
    except Exception:  # noqa: BLE001 - no summaries: every version is a candidate
        return counts
    for info in listed:
        summary = info.get("metadata") or {}
        try:
            counts[int(info["version"])] = (
                int(summary["total_data_files"]),
                int(summary["total_deletion_files"]),
            )
        except (KeyError, TypeError, ValueError):
            continue
    return counts


def _counts_of(files: set[str]) -> tuple[int, int]:
    """(data files, deletion files) among paths relative to a table."""
    data = sum(1 for f in files if f.startswith("data/"))
    return data, sum(1 for f in files if f.startswith("_deletions/"))


def _read_through(clone_ds: Any, base_ids: set[int]) -> set[str]:
    """The files every version of a clone reads through `base_ids`."""
    wanted: set[str] = set()
    for info in clone_ds.versions():
        view = clone_ds.checkout_version(int(info["version"]))
        for fragment in view.get_fragments():
            wanted |= _fragment_files(fragment.metadata, base_ids)
        wanted |= _index_dirs(view, base_ids)  # a clone's indexes are the source's files too
    return wanted


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
