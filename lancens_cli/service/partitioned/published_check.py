"""`check` of what readers of a partitioned namespace read: each partition table's published
version (spec 004, Read Behavior), not its latest.

A row's `read_tag`, `read_branch` + `read_version` or `read_version` must load, and every data
and deletion file of that version must exist. The table checks already cover the latest
version of `main`, so only a published version other than that one is opened again.
"""

from __future__ import annotations

from typing import Any

from lancens_cli.errors import LancensError
from lancens_cli.models import KIND_TABLE, STATE_OK, Identifier
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.branch import published_branch
from lancens_cli.store.tables import open_published, open_table, published_version, table_state
from lancens_cli.store.verify import version_problems

UNREADABLE = "published_version_unreadable"


def check_published(ns: Namespace, rows: list[dict[str, Any]], report: Any, delimiter: str) -> None:
    """Report every table row whose published version readers cannot read."""
    for row in rows:
        target = published_version(row)
        if row.get("object_type") != KIND_TABLE or target is None or not row.get("location"):
            continue
        location = row["location"]
        if table_state(ns.storage, location) != STATE_OK:
            continue  # reported by the table checks
        name = Identifier.from_object_id(row["object_id"]).display(delimiter)
        for message in _problems(ns, row, target):
            report.add(UNREADABLE, name, location, message)


def _problems(ns: Namespace, row: dict[str, Any], target: Any) -> list[str]:
    what = _describe(target)
    try:
        if (
            isinstance(target, int)
            and int(open_table(ns.storage, row["location"]).version) == target
        ):
            return []  # the latest of main: the table checks verified it
        dataset = open_published(ns.storage, row)
    except LancensError as exc:
        return [f"the published {what} does not load (readers fail): {exc.message}"]
    branch = published_branch(dataset, row)
    prefix = f"tree/{branch}/" if branch else ""
    found = version_problems(ns.storage, row["location"], dataset, prefix)
    return [f"the published {what}: {p.message} (readers fail)" for p in found]


def _describe(target: Any) -> str:
    if isinstance(target, str):
        return f"tag {target!r}"
    if isinstance(target, tuple):
        return f"branch {target[0]!r} version {target[1]}"
    return f"version {target}"
