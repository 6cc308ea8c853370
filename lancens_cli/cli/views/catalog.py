"""How the catalog and maintenance commands show their results: ls, the changes of create,
rename, drop and register, check, migrate-v1, versions and prune. The service names a view needs
are imported inside it, so that `lancens --help` starts without pyarrow or Lance."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from lancens_cli.cli.views.cells import partition_cell, with_partitions, would_prefix
from lancens_cli.cli.views.registry import Rows, RowStream, View, view
from lancens_cli.words import human_time, plural


@view("lancens_cli.models.Listing")
def _listing(r: Any) -> View:
    columns = ["id", "kind", "location", "source", "state"]
    entries = list(r.entries)  # a long listing's entries are made as read: read them once
    rows = [[e.id, e.kind, e.location, e.source, e.state] for e in entries]
    if any(e.partition_text() for e in entries):  # a partitioned root: which partition
        columns.append("partition")
        for row, e in zip(rows, entries, strict=True):
            row.append(e.partition_text())
    styles = [None if e.state in ("ok", "") else "yellow" for e in entries]
    after = (f"next page: --page-token {r.next_page_token}",) if r.next_page_token else ()
    title = f"namespace {r.namespace or '(root)'}"
    return View(columns, rows, title, styles, after, optional=("source", "location"))


@view("lancens_cli.models.ChangeSet")
def _changes(r: Any) -> View:
    rows = [
        [would_prefix(c.dry_run) + c.action, c.kind, c.id, c.location, c.detail] for c in r.changes
    ]
    title = "dry run: nothing changed" if r.dry_run else None
    after = (r.message,) if r.message else ()
    return View(["action", "kind", "id", "location", "detail"], rows, title, after=after)


@view("lancens_cli.service.check_report.CheckReport")
def _check(r: Any) -> View:
    rows = [
        [
            "fixed" if f.fixed else ("fixable" if f.fixable else "problem"),
            f.code,
            f.object,
            f.location,
            f.message,
        ]
        for f in r.findings
    ]
    header = ["status", "code", "object", "location", "message"]
    with_partitions(header, rows, [r.labels.get(f.object) for f in r.findings], at=3)
    state = "healthy" if r.healthy else plural(r.open_findings, "problem")
    return View(header, rows, f"check {r.scope or '(root)'}: {state}", sparse=("partition",))


@view("lancens_cli.service.catalog.migrate.MigrationReport")
def _migration(r: Any) -> View:
    rows = [[t.status, t.name, t.location, t.state, t.reason] for t in r.tables]
    mode = " (dry run)" if r.dry_run else " (check)" if r.check else ""
    return View(
        ["status", "table", "location", "state", "reason"], rows, f"migrate-v1 {r.root}{mode}"
    )


@view("lancens_cli.service.versions.TableVersions")
def _table_versions(r: Any) -> View:
    # __manifest's rows are catalog rows (tables and namespaces), not data rows
    counted = "catalog rows" if r.table == "__manifest" else "rows"
    header = ["version", "timestamp", counted, "size", "tags", "branches", "message"]
    header += ["operation", "changes", "options", "fate", "why"]
    rows = [
        [
            v.version,
            human_time(v.timestamp),
            v.rows,
            v.bytes,
            ", ".join(v.tags),
            ", ".join(v.branches),
            v.message or None,  # __manifest: what a version that is no write did (a restore)
            v.operation,  # __manifest: the command that made it, as its commit recorded
            _changes_words(v.changes) or None,
            _options_words(v.options) or None,
            v.fate,
            "; ".join(v.reasons),
        ]
        for v in r.versions
    ]
    title = "versions" + (f" of partition {r.label.text()}" if r.label is not None else "")
    optional = ("size", "branches", "tags", counted, "message", "options", "changes")
    sparse = ("message", "operation", "changes", "options")
    return View(header, rows, title, sizes=("size",), optional=optional, sparse=sparse)


_CHANGE_WORDS = (
    ("tables_added", "+{} tables"),
    ("tables_removed", "-{} tables"),
    ("tables_republished", "{} republished"),
    ("namespaces_added", "+{} namespaces"),
    ("namespaces_removed", "-{} namespaces"),
    ("rows_added", "+{} rows"),
    ("rows_removed", "-{} rows"),
)


def _changes_words(changes: dict[str, Any]) -> str:
    """A commit's recorded changes as a line: `+4 tables, +1,200 rows`, `set schema`."""
    words = [form.format(f"{changes[key]:,}") for key, form in _CHANGE_WORDS if key in changes]
    if changes.get("metadata_keys"):
        words.append("set " + ", ".join(changes["metadata_keys"]))
    return ", ".join(words)


def _options_words(options: dict[str, Any]) -> str:
    """A command's recorded options as it was typed: `--column id --type btree`."""
    words = []
    for flag, value in options.items():
        values = value if isinstance(value, list) else [value]
        for one in values:
            shown = "" if one is True else f" {one}"
            words.append(f"{flag}{shown}" if flag.startswith("-") else str(one))
    return " ".join(words)


@view("lancens_cli.service.versions.NamespaceVersions")
def _namespace_versions(r: Any) -> View:
    """A row a table, made as read: a root's lines wait in a temporary file, not in rows."""
    header = ["table", "partition", "versions", "expiring", "kept by", "reclaimable", "location"]
    rows = (
        [
            t.table,
            partition_cell(t.label),
            t.versions,
            t.expiring,
            ", ".join(f"{k} {n}" for k, n in sorted(t.kept_by.items())),
            t.bytes_reclaimable,
            t.location,
        ]
        for t in r.tables
    )
    optional = ("location", "reclaimable")
    sparse = ("partition",)
    return View(header, rows, "versions", sizes=("reclaimable",), optional=optional, sparse=sparse)


@view("lancens_cli.service.prune.report.PruneReport")
def _prune(r: Any, brief: bool = False) -> View:
    """Every table, debris and refused row, made as read (a run's results wait on disk);
    `brief` (a terminal without --verbose): only the tables with something to do, and a line
    counting the others."""
    header = ["table", "partition", "location", "status", "removed", "files", "bytes", "kept"]
    idle: list[Any] = []  # the tables with nothing to do that `brief` leaves out
    rows: Rows | RowStream = _prune_rows(r, brief, idle)
    after: tuple[str, ...] = ()
    if brief:  # on a terminal: laid out whole anyway, and the tables left out counted
        rows = list(rows)
        hidden = f"{plural(len(idle), 'table')} with nothing to do not shown"
        after = (f"{hidden} (--verbose lists them)",) if idle else ()
    optional = ("kept", "location", "files", "bytes", "partition")
    sparse = ("partition",)
    return View(header, rows, prune_title(r), after=after, optional=optional, sparse=sparse)


def _prune_rows(r: Any, brief: bool, idle: list[Any]) -> Iterator[list[Any]]:
    from lancens_cli.service.indexes.actions import IndexAction
    from lancens_cli.service.prune.report import TableStatus

    quiet = (TableStatus.NOTHING_TO_DO, TableStatus.GONE)  # statuses with nothing to say
    for t in itertools.chain([r.manifest] if r.manifest else [], r.tables):
        kept = "; ".join(
            f"{k['branch'] + ' ' if 'branch' in k else ''}v{k['version']}: "
            + ", ".join(k["reasons"])
            for k in t.kept
        )
        removed = (
            len(t.versions_removed)
            + len(t.unpublished_removed)
            + sum(len(v) for v in t.branch_versions_removed.values())
        )
        indexed = _index_work(t, IndexAction.CURRENT)
        if brief and not _prune_work(t, removed, indexed, quiet):
            idle.append(t.location)
            continue
        status = t.status + (f": {t.error}" if t.error else "") + indexed
        label = r.labels.get(t.object_id) if t.object_id else None
        yield [
            t.table or "-", partition_cell(label), t.location, status, removed,
            t.files_removed, t.bytes_freed, kept,
        ]  # fmt: skip
    for d in r.debris:
        yield [d.object or "-", None, d.location, f"{d.action}: {d.code}", "", "", "", ""]
    for refused in r.refused:
        yield [refused["table"], None, "", f"skipped: {refused['reason']}", "", "", "", ""]


@view("lancens_cli.cli.prune.PruneOnTerminal")
def _prune_brief(r: Any) -> View:
    return _prune(r.report, brief=True)


def _prune_work(t: Any, removed: int, indexed: str, quiet: tuple[str, ...]) -> bool:
    """Whether a prune table row has something to say: removed or would remove versions or
    files, compacted, worked on indexes (`indexed`: `_index_work`'s words), or failed. The
    `quiet` statuses, `nothing to do` and `gone` (dropped meanwhile), have not."""
    return bool(
        removed
        or t.files_removed
        or t.unreferenced_removed
        or t.error
        or t.status not in quiet
        or indexed
    )


def _index_work(t: Any, current: str) -> str:
    """`--optimize-indexes`: each index with work (an action but `current`), as
    `; indexes: name action (rows)`."""
    shown = [
        f"{i['name']} {i['action']} ({i.get('rows_indexed') or i.get('unindexed_rows') or 0} rows)"
        for i in t.indexes
        if i["action"] != current
    ]
    return f"; indexes: {', '.join(shown)}" if shown else ""


def prune_title(r: Any) -> str:
    """A prune report's one-line summary (without its rows: a report may hold 100,000 tables)."""
    totals = r.totals()
    verb = "would remove" if r.dry_run else "removed"
    indexed = totals["rows_indexed"]
    return (
        f"prune: {verb} {plural(totals['versions_removed'], 'version')}, "
        f"{plural(totals['files_removed'], 'file')}, {plural(totals['bytes_freed'], 'byte')}"
        + (f"; indexed {plural(indexed, 'row')}" if indexed else "")
    )
