"""`check` of what readers of a partitioned namespace read: each partition table's published
version (spec 004, Read Behavior), not its latest.

A row's `read_tag`, `read_branch` + `read_version` or `read_version` must load, and every data
and deletion file of that version must exist. The table checks already cover the latest
version of `main`, so only a published version other than that one is opened again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lancens_cli.errors import LancensError
from lancens_cli.models import KIND_TABLE, STATE_OK, Identifier
from lancens_cli.service.namespace import Namespace
from lancens_cli.store.catalog_rows import LATEST, PublishedRef
from lancens_cli.store.tables import open_table, table_state
from lancens_cli.store.verify import version_problems

UNREADABLE = "published_version_unreadable"


def check_published(
    ns: Namespace,
    rows: Iterable[dict[str, Any]],
    report: Any,
    delimiter: str,
    latest_of: Callable[[str], int | None] | None = None,
) -> None:
    """Report every table row whose published version readers cannot read (`latest_of`: a
    table's latest version of main when known without opening it, by location)."""
    for row in rows:
        ref = PublishedRef.of(row)
        if row.get("object_type") != KIND_TABLE or ref == LATEST or not row.get("location"):
            continue
        location = row["location"]
        if table_state(ns.storage, location) != STATE_OK:
            continue  # reported by the table checks
        name = Identifier.from_object_id(row["object_id"]).display(delimiter)
        latest = latest_of(location) if latest_of is not None else None
        for message in _problems(ns, row, ref, latest):
            report.add(UNREADABLE, name, location, message)


def _problems(
    ns: Namespace, row: dict[str, Any], ref: PublishedRef, latest: int | None = None
) -> list[str]:
    """`latest`: main's latest version, when known without opening the table."""
    what = ref.words()
    location = row["location"]
    try:
        if ref.main_version is not None:
            if latest is None:
                latest = int(open_table(ns.storage, location).version)
            if latest == ref.main_version:
                return []  # the latest of main: the table checks verified it
        dataset = ref.open(ns.storage, location)
    except LancensError as exc:
        return [f"the published {what} does not load (readers fail): {exc.message}"]
    branch = ref.branch_in(dataset)
    prefix = f"tree/{branch}/" if branch else ""
    found = version_problems(ns.storage, location, dataset, prefix)
    return [f"the published {what}: {p.message} (readers fail)" for p in found]
