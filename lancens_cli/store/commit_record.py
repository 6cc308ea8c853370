"""What a `__manifest` commit records of the command that made it, in Lance's transaction
properties: the operation, the command's options and what it changed, so that `versions
__manifest` reads as Delta's `DESCRIBE HISTORY` does.

The command line says once, for the whole command, what is running (`committing_as`); every
commit `ManifestStore` makes while it runs carries it, whichever service made the commit, and
counts what the commit changes from its `ManifestEdit`. A commit made by another writer, or by a
lancens before this record, has none: it reads as Lance's own operation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.store.catalog_rows import PublishedRef

OPERATION_KEY = "lancens.operation"
OPTIONS_KEY = "lancens.options"
CHANGES_KEY = "lancens.changes"
MESSAGE_KEY = "__lance_commit_message"  # where Lance keeps a commit message


@dataclass(frozen=True)
class CommitOrigin:
    """The command a commit belongs to: its operation (`write`, `restore`, `create index`, ...)
    and its options as given, secrets left out."""

    operation: str
    options: dict[str, Any] = field(default_factory=dict)


_origin: ContextVar[CommitOrigin | None] = ContextVar("lancens_commit_origin", default=None)


@contextmanager
def committing_as(origin: CommitOrigin, *, unless_set: bool = False) -> Iterator[None]:
    """Every `__manifest` commit made inside records `origin` (`unless_set`: only when no
    command said what it is, as for a user's own Spark job)."""
    if unless_set and _origin.get() is not None:
        yield
        return
    token = _origin.set(origin)
    try:
        yield
    finally:
        _origin.reset(token)


def current_origin() -> CommitOrigin | None:
    return _origin.get()


@dataclass
class CommitChanges:
    """What one commit changed in the catalog, counted from its edit; data rows when the
    command knows them (`ManifestEdit.rows_added` / `rows_removed`)."""

    tables_added: int = 0
    tables_removed: int = 0
    tables_republished: int = 0
    namespaces_added: int = 0
    namespaces_removed: int = 0
    rows_added: int | None = None
    rows_removed: int | None = None
    metadata_keys: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], 0)}


def changes_of(
    before: dict[str, dict[str, Any]],
    after: dict[str, dict[str, Any]],
    metadata_keys: list[str],
    rows: tuple[int | None, int | None],
) -> CommitChanges:
    """`before` and `after`: the rows the edit removes or replaces, and the rows it writes."""
    changes = CommitChanges(rows_added=rows[0], rows_removed=rows[1])
    changes.metadata_keys = sorted(metadata_keys)
    for object_id, row in after.items():
        old = before.get(object_id)
        kind = row.get("object_type")
        if old is None:
            if kind == "table":
                changes.tables_added += 1
            else:
                changes.namespaces_added += 1
        elif kind == "table" and PublishedRef.of(old) != PublishedRef.of(row):
            changes.tables_republished += 1
    for object_id, row in before.items():
        if object_id not in after:
            if row.get("object_type") == "table":
                changes.tables_removed += 1
            else:
                changes.namespaces_removed += 1
    return changes


def transaction_properties(
    changes: CommitChanges, message: str | None, operation: str | None = None
) -> dict[str, str]:
    """The properties a commit carries: Lance keeps them with its transaction."""
    properties: dict[str, str] = {}
    origin = current_origin()
    if origin is not None or operation is not None:
        properties[OPERATION_KEY] = operation or (origin.operation if origin else "")
        if origin is not None and origin.options:
            properties[OPTIONS_KEY] = json.dumps(origin.options, sort_keys=True, default=str)
    recorded = changes.to_json()
    if recorded:
        properties[CHANGES_KEY] = json.dumps(recorded, sort_keys=True)
    if message:
        properties[MESSAGE_KEY] = message
    return properties


@dataclass(frozen=True)
class CommitRecord:
    """What a `__manifest` version's transaction says of the commit (read back)."""

    operation: str | None  # None: not recorded (another writer, an older lancens)
    options: dict[str, Any]
    changes: dict[str, Any]
    message: str | None


def record_of(properties: dict[str, str] | None) -> CommitRecord:
    properties = properties or {}

    def parsed(key: str) -> dict[str, Any]:
        try:
            value = json.loads(properties.get(key) or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    return CommitRecord(
        properties.get(OPERATION_KEY) or None,
        parsed(OPTIONS_KEY),
        parsed(CHANGES_KEY),
        properties.get(MESSAGE_KEY),
    )
