"""A partition table's data files that no version references: what the tasks of a Spark
write leave when the driver dies before it commits them (`check` reports them, and `--fix`
deletes them past the grace: service/debris_check.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lancens_cli.service.namespace import Namespace
from lancens_cli.store.verify import BRANCHES_PREFIX


def unreferenced_files(
    ns: Namespace, dataset: Any, location: str, grace: timedelta, present: set[str] | None = None
) -> list[tuple[str, bool]]:
    """The data files below a partition table (opened: `dataset`, its latest version) that
    no version of it or of its branches references, with whether each is past the grace.

    `present`: every file of the table (store/verify.table_files), when listed already. Then
    a table whose data files its latest version all references, and that has no branch,
    has none: most tables, answered without reading every version's manifest."""
    if present is not None and not any(name.startswith(BRANCHES_PREFIX) for name in present):
        data = {name for name in present if name.startswith("data/")}
        if data <= _own_data_files(dataset):
            return []
    try:
        tracked = set(dataset.tracked_files().read_all().column("path").to_pylist())
    except (OSError, ValueError, RuntimeError):
        return []  # reported by the table checks
    # our own listing, not Lance's: it also shows the staging file of a write killed
    # half-way through a data file (Lance's listing leaves those out)
    found = _unreferenced(ns, location, "data", tracked, grace)
    # a branch write (`write --branch`) puts its files in `tree/<branch>/data`
    try:
        branches = list(dataset.branches.list())
    except (OSError, ValueError, RuntimeError):
        branches = []
    for name in branches:
        try:
            head = dataset.checkout_version((name, None))
            files = head.tracked_files().read_all().to_pylist()
        except (OSError, ValueError, RuntimeError):
            continue  # an unreadable branch head is the published-version check's finding
        own = {f["path"] for f in files if f["base_uri"].rstrip("/").endswith(f"tree/{name}")}
        found += _unreferenced(ns, location, f"tree/{name}/data", own, grace, f"tree/{name}/")
    return found


def _unreferenced(
    ns: Namespace,
    location: str,
    directory: str,
    tracked: set[str],
    grace: timedelta,
    prefix: str = "",
) -> list[tuple[str, bool]]:
    """Files below `location/directory` that `tracked` (paths relative to the dataset or
    branch root, with `prefix` the branch's place in the table) does not name, with whether
    each is older than the grace."""
    now = datetime.now(UTC)
    found = []
    for path, _size in ns.storage.walk_files(f"{location}/{directory}"):
        inside = f"{directory}/{path}"
        if inside[len(prefix) :] in tracked:
            continue
        modified = ns.storage.modified(f"{location}/{inside}")
        found.append((inside, modified is not None and now - modified > grace))
    return found


def _own_data_files(dataset: Any) -> set[str]:
    """The data files of this version in the table's own `data/` (not through a base path),
    as paths below the table."""
    return {
        f"data/{data_file.path}"
        for fragment in dataset.get_fragments()
        for data_file in fragment.metadata.files
        if getattr(data_file, "base_id", None) is None
    }
