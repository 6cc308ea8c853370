"""What each version of a table did, as Lance's own transactions record it.

Every Lance commit writes the operation that made its version (`LanceDataset.read_transaction`).
The operation's class, as pylance names it, is the word shown (`Append` -> `append`,
`CreateIndex` -> `create index`), so nothing is guessed from file counts; an operation pylance
does not name (`BaseOperation`) is `other`. Rows and bytes come from each version's own
statistics (`ds.versions()`), else from its manifest (`partitioned.sizes.version_size`): no data
file is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import lance

from lancens_cli.service.partitioned.sizes import version_size
from lancens_cli.store.version_pick import commit_time
from lancens_cli.words import utc_iso

# TypeError: pylance 14 cannot build the operation of a compaction that rewrote an index
# (`LanceOperation.RewrittenIndex` lacks arguments); the version's operation is then unknown
READ_ERRORS = (OSError, ValueError, RuntimeError, TypeError)
UNNAMED = "BaseOperation"  # what pylance hands back for an operation it has no class for


@dataclass(frozen=True)
class VersionStats:
    """One readable version of a table line: when it was committed, its rows and bytes."""

    timestamp: datetime  # UTC
    rows: int | None
    bytes: int | None


@dataclass
class VersionChange:
    """One version and what its transaction says it did."""

    version: int
    operation: str  # pylance's operation class in words; "unknown": no transaction to read
    lance_operation: str | None  # the class name itself (None: no transaction recorded)
    rows: int | None  # live rows after this version
    rows_delta: int | None  # against the version before it (None: that one is not readable)
    bytes: int | None
    timestamp: str | None
    detail: str | None = None
    branch: str | None = None  # None: main

    def to_json(self) -> dict[str, Any]:
        plain = {
            "version": self.version,
            "operation": self.operation,
            "lance_operation": self.lance_operation,
            "rows": self.rows,
            "rows_delta": self.rows_delta,
            "bytes": self.bytes,
            "timestamp": self.timestamp,
            "detail": self.detail,
        }
        return plain if self.branch is None else {**plain, "branch": self.branch}


def opened(dataset: Any, storage_options: dict[str, str] | None = None) -> Any:
    """A LanceDataset as given, or the one at a URI (latest of main)."""
    if isinstance(dataset, str):
        return lance.dataset(dataset, storage_options=storage_options)
    return dataset


def line(dataset: Any, branch: str | None) -> Any:
    """The dataset on `branch` (None: main) at its latest version."""
    return dataset if branch is None else dataset.checkout_version((branch, None))


def version_stats(dataset: Any) -> dict[int, VersionStats]:
    """Every readable version of the dataset's line, from one `versions()` call."""
    found = {}
    for info in dataset.versions():
        metadata = info.get("metadata") or {}
        rows, size = metadata.get("total_rows"), metadata.get("total_files_size")
        found[int(info["version"])] = VersionStats(
            commit_time(info),
            int(rows) if rows is not None else None,
            int(size) if size is not None else None,
        )
    return found


def rows_at(dataset: Any, history: dict[int, VersionStats], version: int) -> int | None:
    """Live rows of one version of the dataset's line (0 before its first version)."""
    if version == 0:
        return 0
    stats = history.get(version)
    if stats is None:
        return None
    if stats.rows is not None:
        return stats.rows
    try:
        return version_size(dataset.checkout_version(version)).rows
    except READ_ERRORS:
        return None


def operations(
    dataset: Any,
    after: int,
    upto: int,
    *,
    branch: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> list[VersionChange]:
    """Every version after `after` up to `upto` of `branch` (None: main), with what its
    transaction says it did. A version no longer readable (pruned) is `unknown`."""
    ds = line(opened(dataset, storage_options), branch)
    history = version_stats(ds)
    previous = rows_at(ds, history, after) if after == 0 or after in history else None
    changes = []
    for version in range(after + 1, upto + 1):
        stats = history.get(version)
        if stats is None:
            changes.append(
                VersionChange(
                    version, "unknown", None, None, None, None, None, "no longer readable (pruned)"
                )
            )
            previous = None
            continue
        rows = rows_at(ds, history, version)
        size = stats.bytes
        if size is None:
            try:
                size = version_size(ds.checkout_version(version)).bytes
            except READ_ERRORS:
                size = None
        operation = operation_of(ds, version)
        name = None if operation is None else type(operation).__name__
        changes.append(
            VersionChange(
                version,
                operation_word(name),
                name,
                rows,
                None if rows is None or previous is None else rows - previous,
                size,
                utc_iso(stats.timestamp),
                _detail(ds, history, version, operation),
                branch,
            )
        )
        previous = rows
    return changes


def operation_word(name: str | None) -> str:
    """pylance's operation class as words: `CreateIndex` -> `create index`."""
    if name is None:
        return "unknown"
    if name == UNNAMED:
        return "other"
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower()


def operation_of(dataset: Any, version: int) -> Any:
    """The operation that made `version`, or None when Lance has no transaction for it."""
    try:
        found = dataset.read_transaction(version)
    except READ_ERRORS:
        return None
    return None if found is None else found.operation


def _detail(dataset: Any, history: dict[int, VersionStats], version: int, op: Any) -> str | None:
    """What the operation's own fields add to its name (never inferred from sizes)."""
    name = type(op).__name__ if op is not None else None
    if name == UNNAMED:
        return "an operation pylance does not name"
    if name == "Delete":
        return f"where {op.predicate}" if getattr(op, "predicate", None) else None
    if name == "Restore":
        return f"to version {op.version}"
    if name == "Rewrite":
        old = sum(len(group.old_fragments) for group in op.groups)
        new = sum(len(group.new_fragments) for group in op.groups)
        return f"compacted {old} fragment(s) into {new}"
    if name == "CreateIndex":
        built = [index.name for index in op.new_indices or []]
        gone = [index.name for index in op.removed_indices or []]
        words = ([f"built {', '.join(built)}"] if built else []) + (
            [f"removed {', '.join(gone)}"] if gone else []
        )
        return "; ".join(words) or None
    if name == "UpdateConfig":
        keys = []
        for updates in (op.config_updates, op.table_metadata_updates, op.schema_metadata_updates):
            keys += sorted((getattr(updates, "updates", None) or {}).keys())
        return f"set {', '.join(keys)}" if keys else None
    if name == "Clone":
        if getattr(op, "branch_name", None):
            return f"branch {op.branch_name} from version {op.ref_version}"
        return f"clone of version {op.ref_version}"
    if name in ("Project", "Merge"):
        return _schema_detail(dataset, history, version, op.schema)
    return None


def _schema_detail(
    dataset: Any, history: dict[int, VersionStats], version: int, schema: Any
) -> str | None:
    """Columns added, dropped and renamed against the version before, by Lance field id."""
    if version - 1 not in history:
        return None
    try:
        before = _fields(dataset.checkout_version(version - 1).lance_schema)
    except READ_ERRORS:
        return None
    after = _fields(schema)
    added = {after[i][0]: after[i][1] for i in sorted(set(after) - set(before))}
    dropped = {before[i][0]: before[i][1] for i in sorted(set(before) - set(after))}
    # a column Lance rewrote (a new type) is a new field id under the same name
    words = [f"{n}: {dropped[n]} -> {t} (rewritten)" for n, t in added.items() if n in dropped]
    words += [f"added {n}" for n in added if n not in dropped]
    words += [f"dropped {n}" for n in dropped if n not in added]
    for i in sorted(set(before) & set(after)):
        (old_name, old_type), (new_name, new_type) = before[i], after[i]
        if old_name != new_name:
            words.append(f"renamed {old_name} -> {new_name}")
        if old_type != new_type:
            words.append(f"{new_name}: {old_type} -> {new_type}")
    return "; ".join(words) or "schema unchanged"


def _fields(lance_schema: Any) -> dict[int, tuple[str, str | None]]:
    """Field id -> (dotted path, type of a leaf) of every field of a Lance schema."""
    found: dict[int, tuple[str, str | None]] = {}

    def visit(fields: list[Any], prefix: str) -> None:
        for f in fields:
            children = f.children()
            kind = None if children else str(f.to_arrow().type)
            found[f.id()] = (prefix + f.name(), kind)
            visit(children, f"{prefix}{f.name()}.")

    visit(lance_schema.fields(), "")
    return found
