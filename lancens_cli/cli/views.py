"""How each command's result is shown: one registry from result type to its view.

A result is a `models.Result`: plain data with its JSON document (`to_json()`). What a person sees
is decided here, and only here: the columns and rows of the table a terminal shows (and a pipe
gets as tab-separated lines), the table's title, and the summary line a command writes to
stderr. `output.emit` asks this registry, never the result.

The registry is keyed by the result's qualified type name, so looking a view up imports no
module: `lancens ls` never loads the Spark pipeline to find out how a scan is shown.

The few helpers a view needs from the pipeline, service, partition and schema modules are imported
inside that view, so that `lancens --help` starts without pyarrow or Lance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lancens_cli.models import Identifier, json_value
from lancens_cli.words import human_time, noun, plural

Rows = list[list[Any]]


@dataclass(frozen=True)
class View:
    """A result as a table: its columns and rows; on a terminal also its title, a style per row
    (None: plain) and lines printed after the table. `sizes` names the columns of byte counts:
    a terminal shows them in binary units (`words.human_bytes`), a pipe as integers. `optional`
    names the columns a terminal too narrow for the table leaves out, least important first
    (a pipe and --json keep every column). `sparse` names the columns a terminal leaves out when
    no row has a value there (a partition on a root that has none, a message): a pipe keeps
    them, `-` in each row, so its columns never depend on the data and `cut -f` keeps working.
    A terminal never breaks a value a person copies across lines (`keeps_whole`)."""

    columns: list[str]
    rows: Rows
    title: str | None = None
    styles: list[str | None] | None = None
    after: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    sparse: tuple[str, ...] = ()

    def keeps_whole(self, column: str) -> bool:
        """Whether the column holds values pasted into other commands (ids, locations, times,
        versions): a terminal shows each on one line, where prose wraps."""
        return column in WHOLE_VALUES


# The columns of ids, locations, times and versions, in every view: text to copy, never broken.
WHOLE_VALUES = frozenset(
    {
        "id",
        "table",
        "object",
        "target",
        "location",
        "timestamp",
        "version",
        "read_version",
        "version_before",
        "version_after",
        "restored_to",
        "new_version",
        "manifest_version",
    }
)


_VIEWS: dict[str, Callable[[Any], View]] = {}
_SUMMARIES: dict[str, Callable[[Any], str]] = {}
_WARNINGS: dict[str, Callable[[Any], list[str]]] = {}


def _key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def view_of(result: Any) -> View | None:
    """The result's table, or None for a result shown as its fields (key, value lines)."""
    for cls in type(result).__mro__:
        shown = _VIEWS.get(_key(cls))
        if shown is not None:
            return shown(result)
    return None


def summary_of(result: Any) -> str:
    """The one line a command writes to stderr after its result."""
    for cls in type(result).__mro__:
        said = _SUMMARIES.get(_key(cls))
        if said is not None:
            return said(result)
    raise KeyError(f"no summary for {_key(type(result))}")


def warnings_of(result: Any) -> list[str]:
    """The lines a command writes to stderr as `warning: ...` after its summary: what it left
    undone that is no failure (none for most results)."""
    for cls in type(result).__mro__:
        said = _WARNINGS.get(_key(cls))
        if said is not None:
            return said(result)
    return []


def _view(qualified: str) -> Callable[[Callable[[Any], View]], Callable[[Any], View]]:
    def register(func: Callable[[Any], View]) -> Callable[[Any], View]:
        _VIEWS[qualified] = func
        return func

    return register


def _summary(qualified: str) -> Callable[[Callable[[Any], str]], Callable[[Any], str]]:
    def register(func: Callable[[Any], str]) -> Callable[[Any], str]:
        _SUMMARIES[qualified] = func
        return func

    return register


def _warning(qualified: str) -> Callable[[Callable[[Any], list[str]]], Callable[[Any], list[str]]]:
    def register(func: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
        _WARNINGS[qualified] = func
        return func

    return register


def _labels_text(labels: list[str], shown: int = 5) -> str:
    """Partitions by their values, the first `shown` of them and how many more."""
    text = "; ".join(labels[:shown])
    return text + (f"; {len(labels) - shown} more" if len(labels) > shown else "")


def _would(dry_run: bool) -> str:
    return "would " if dry_run else ""


# --- catalog and maintenance ------------------------------------------------------------------


@_view("lancens_cli.models.Listing")
def _listing(r: Any) -> View:
    columns = ["id", "kind", "location", "source", "state"]
    rows = [[e.id, e.kind, e.location, e.source, e.state] for e in r.entries]
    if any(e.partition_text() for e in r.entries):  # a partitioned root: which partition
        columns.append("partition")
        for row, e in zip(rows, r.entries, strict=True):
            row.append(e.partition_text())
    styles = [None if e.state in ("ok", "") else "yellow" for e in r.entries]
    after = (f"next page: --page-token {r.next_page_token}",) if r.next_page_token else ()
    title = f"namespace {r.namespace or '(root)'}"
    return View(columns, rows, title, styles, after, optional=("source", "location"))


@_view("lancens_cli.models.ChangeSet")
def _changes(r: Any) -> View:
    rows = [[_would(c.dry_run) + c.action, c.kind, c.id, c.location, c.detail] for c in r.changes]
    title = "dry run: nothing changed" if r.dry_run else None
    after = (r.message,) if r.message else ()
    return View(["action", "kind", "id", "location", "detail"], rows, title, after=after)


@_view("lancens_cli.service.check_report.CheckReport")
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
    _with_partitions(header, rows, [r.labels.get(f.object) for f in r.findings], at=3)
    state = "healthy" if r.healthy else plural(r.open_findings, "problem")
    return View(header, rows, f"check {r.scope or '(root)'}: {state}", sparse=("partition",))


@_view("lancens_cli.service.catalog.migrate.MigrationReport")
def _migration(r: Any) -> View:
    rows = [[t.status, t.name, t.location, t.state, t.reason] for t in r.tables]
    mode = " (dry run)" if r.dry_run else " (check)" if r.check else ""
    return View(
        ["status", "table", "location", "state", "reason"], rows, f"migrate-v1 {r.root}{mode}"
    )


@_view("lancens_cli.service.versions.TableVersions")
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


@_view("lancens_cli.service.versions.NamespaceVersions")
def _namespace_versions(r: Any) -> View:
    header = ["table", "versions", "expiring", "kept by", "reclaimable", "location"]
    rows = [
        [
            t.table,
            t.versions,
            t.expiring,
            ", ".join(f"{k} {n}" for k, n in sorted(t.kept_by.items())),
            t.bytes_reclaimable,
            t.location,
        ]
        for t in r.tables
    ]
    _with_partitions(header, rows, [t.label for t in r.tables])
    optional = ("location", "reclaimable")
    sparse = ("partition",)
    return View(header, rows, "versions", sizes=("reclaimable",), optional=optional, sparse=sparse)


def _with_partitions(header: list[str], rows: Rows, labels: list[Any], at: int = 1) -> None:
    """A `partition` column at `at` (after the table's id): a partition table's values as `ls`
    shows them, None for any other row. Always there, whether or not a row is a partition
    table's (the view marks it `sparse`): a pipe's columns never move after a first write."""
    header.insert(at, "partition")
    for row, label in zip(rows, labels, strict=True):
        row.insert(at, label.text() if label is not None else None)


@_view("lancens_cli.service.prune.report.PruneReport")
def _prune(r: Any, brief: bool = False) -> View:
    """Every table, debris and refused row; `brief` (a terminal without --verbose): only the
    tables with something to do, and a line counting the others."""
    from lancens_cli.service.indexes.actions import IndexAction
    from lancens_cli.service.prune.report import TableStatus

    header = ["table", "location", "status", "removed", "files", "bytes", "kept"]
    rows = []
    labels: list[Any] = []  # which partition each table row is (None: not a partition table)
    idle = 0
    quiet = (TableStatus.NOTHING_TO_DO, TableStatus.GONE)  # statuses with nothing to say
    for t in [*([r.manifest] if r.manifest else []), *r.tables]:
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
            idle += 1
            continue
        status = t.status + (f": {t.error}" if t.error else "") + indexed
        rows.append(
            [t.table or "-", t.location, status, removed, t.files_removed, t.bytes_freed, kept]
        )
        labels.append(r.labels.get(t.object_id) if t.object_id else None)
    for d in r.debris:
        rows.append([d.object or "-", d.location, f"{d.action}: {d.code}", "", "", "", ""])
    for refused in r.refused:
        rows.append([refused["table"], "", f"skipped: {refused['reason']}", "", "", "", ""])
    _with_partitions(header, rows, labels + [None] * (len(rows) - len(labels)))
    hidden = f"{plural(idle, 'table')} with nothing to do not shown (--verbose lists them)"
    after = (hidden,) if idle else ()
    optional = ("kept", "location", "files", "bytes", "partition")
    sparse = ("partition",)
    return View(header, rows, prune_title(r), after=after, optional=optional, sparse=sparse)


@_view("lancens_cli.cli.prune.PruneOnTerminal")
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


# --- partitioned namespaces -------------------------------------------------------------------


@_view("lancens_cli.service.partitioned.spec_change.SpecChange")
def _spec_change(r: Any) -> View:
    from lancens_cli.schema_json import type_to_json

    rows = []
    for f in r.spec.fields:
        sources = r.sources.get(f.field_id, [])
        how = f.transform.display(sources) if f.transform else f"expr({f.expression})"
        note = "reused" if f.field_id in r.reused else ""
        rows.append([f.field_id, how, type_to_json(f.result_type)["type"], f.column, note])
    columns = ["field_id", "definition", "result_type", "manifest column", "note"]
    return View(columns, rows, "partition spec")


@_summary("lancens_cli.service.partitioned.spec_change.SpecChange")
def _spec_change_summary(r: Any) -> str:
    if r.action == "exists" and not r.new_columns:
        return f"partition spec v{r.spec.id} is already the current spec: nothing to do"
    verb = {"create": "created", "evolve": "added", "exists": "already current"}[r.action]
    would = "would be " if r.dry_run and r.action != "exists" else ""
    columns = ", ".join(n for n, _ in r.new_columns) or "none"
    return f"partition spec v{r.spec.id} {would}{verb}; new __manifest columns: {columns}"


@_view("lancens_cli.service.partitioned.evolve_schema.SchemaEvolution")
def _schema_evolution(r: Any) -> View:
    return View(["change", "outcome"], [[c.text(), o] for c, o in r.changes], "schema evolution")


@_summary("lancens_cli.service.partitioned.evolve_schema.SchemaEvolution")
def _schema_evolution_summary(r: Any) -> str:
    would = "would be " if r.dry_run else ""
    return (
        f"{plural(r.tables, 'partition table')} {would}brought to the schema, "
        f"{r.up_to_date} already at it; "
        f"{plural(r.manifest_commits, '__manifest commit')}"
    )


@_view("lancens_cli.service.partitioned.partitions.PartitionSelection")
def _partitions(r: Any) -> View:
    from lancens_cli.service.partitioned.label import PartitionLabel

    rows = [
        [
            m.table,
            f"v{m.spec_version}",
            PartitionLabel(m.spec_version, tuple(m.values.items())).text(),
            m.rows,
            m.bytes,
            m.published.version,
            m.published.branch or m.published.tag,
            m.location,
        ]
        for m in r.matches
    ]
    columns = ["table", "spec", "partition", "rows", "size", "read_version", "branch/tag"]
    columns.append("location")
    return View(
        columns,
        rows,
        "partition tables",
        sizes=("size",),
        optional=("location", "branch/tag", "read_version", "spec"),
    )


@_view("lancens_cli.service.partitioned.tags.TagResult")
def _tags(r: Any) -> View:
    rows = [
        [
            Identifier.from_object_id(t.table_id).display(),
            t.branch or "main",
            t.version,
            _would(r.dry_run and t.action != "exists") + t.action,
        ]
        for t in r.tables
    ]
    return View(["table", "branch", "version", "action"], rows, f"tag {r.name}")


@_summary("lancens_cli.service.partitioned.tags.TagResult")
def _tags_summary(r: Any) -> str:
    made = sum(1 for t in r.tables if t.action != "exists")
    verb = "would tag" if r.dry_run else "tagged"
    text = f"{verb} {plural(len(r.tables), 'partition table')} {r.name} ({made} new or moved)"
    if r.publish:
        text += (
            "; read_tag would be published"
            if r.dry_run
            else f"; read_tag published in __manifest version {r.manifest_version}"
        )
    return text


_WRITE_ACTIONS = {"create": "created", "replace": "replaced", "append": "appended"}


def _write_action(t: Any, dry_run: bool) -> str:
    action = "create" if t.created else ("replace" if t.overwrite else "append")
    return f"would {action}" if dry_run else _WRITE_ACTIONS[action]


@_view("lancens_cli.service.partitioned.write.PartitionWrite")
def _partition_write(r: Any) -> View:
    header = [*r.fields, "rows", "read_version", "action", "table"]
    rows = [
        [
            *(json_value(v) for v in t.values),
            t.row_count,
            t.version,
            _write_action(t, r.dry_run),
            Identifier.from_object_id(t.table_id).display(),
        ]
        for t in r.partitions
    ]
    return View(header, rows, "partitions to write" if r.dry_run else "partitions written")


@_summary("lancens_cli.service.partitioned.write.PartitionWrite")
def _partition_write_summary(r: Any) -> str:
    """What `write` did, with the `__manifest` version it made: a pipeline's checkpoint."""
    created = sum(1 for t in r.partitions if t.created)
    branch = r.partitions[0].branch if r.partitions else None
    what = (
        f"{plural(r.rows, 'row')} into {plural(len(r.partitions), 'partition')} of "
        f"spec v{r.spec_id} ({created} new)" + (f" on branch {branch}" if branch else "")
    )
    if r.dry_run:
        return f"dry run: would write {what}; nothing changed"
    if not r.partitions:
        return f"wrote {what}; nothing to publish"
    return f"wrote {what}, __manifest version {r.manifest_version}"


# --- join-plan and the Spark commands ---------------------------------------------------------


@_view("lancens_cli.service.join.plan.JoinPlan")
def join_plan_view(r: Any) -> View:
    """One row per group; when not compatible, one row per reason."""
    from lancens_cli.partition.rows import dotted

    if not r.compatible:
        return View(["reason"], [[reason] for reason in r.reasons], "join plan: not compatible")
    several = len(r.pairs) > 1
    labels = [relation.label for relation in r.current.relations]
    header = ["specs", "key"] if several else labels
    header += ["left", "left tables", "right", "right tables"]
    rows = []
    for g in r.groups:
        if several:
            key = ", ".join(f"{k}={json_value(v)}" for k, v in g.key.items())
            lead = [f"v{g.left_spec} x v{g.right_spec}", key]
        else:
            lead = [json_value(v) for v in g.key.values()]
        left = ", ".join(dotted(t.object_id) for t in g.left)
        right = ", ".join(dotted(t.object_id) for t in g.right)
        rows.append([*lead, len(g.left), left, len(g.right), right])
    c = r.counts()
    title = (
        f"join plan: {plural(c['groups'], 'group')} of {c['left_partitions']} left and "
        f"{plural(c['right_partitions'], 'right partition')}"
    )
    return View(header, rows, title)


@_summary("lancens_cli.service.join.plan.JoinPlan")
def _join_plan_summary(r: Any) -> str:
    if not r.compatible:
        return f"not compatible: {r.reasons[0]}" if r.reasons else "not compatible"
    c = r.counts()
    return (
        f"compatible ({r.scope}): {plural(c['groups'], 'group')}, "
        f"{c['matched_groups']} with partitions on both sides"
    )


def join_explain_lines(r: Any) -> list[str]:
    """`join --explain`: how the join runs (the groups, or why it shuffles) and Spark's plan."""
    out: list[str] = []
    if r.job.spj:
        c = r.job.plan.counts()
        out.append(
            f"storage-partitioned join ({r.job.how}): {len(r.job.groups_work())} group(s) to "
            f"run in {r.job.tasks} task(s), of {c['groups']} group(s) of "
            f"{c['left_partitions']} left and {c['right_partitions']} right partition table(s)"
        )
        groups = join_plan_view(r.job.plan)
        out.append("\t".join(groups.columns))
        out += ["\t".join(str(v) for v in row) for row in groups.rows]
    else:
        out.append(f"shuffle join ({r.job.how}): the layouts do not allow SPJ")
        out += [f"  {reason}" for reason in r.job.fallback_reasons]
    out += ["", "== Physical Plan ==", r.plan_text]
    return out


@_view("lancens_cli.pipeline.join.JoinRows")
def _join_rows(r: Any) -> View:
    more = f" (first {r.limit}; --limit to see more)" if r.more else ""
    return View(r.columns, [list(row) for row in r.rows], f"{len(r.rows)} row(s){more}")


@_view("lancens_cli.pipeline.join.JoinCount")
def _join_count(r: Any) -> View:
    return View(["count"], [[r.count]])


@_view("lancens_cli.pipeline.join.JoinFiles")
def _join_files(r: Any) -> View:
    return View(["path", "format", "rows", "files"], [[r.path, r.format, r.rows, r.files]])


@_view("lancens_cli.pipeline.scan.ScanRows")
def _scan_rows(r: Any) -> View:
    return View(r.columns, [[json_value(v) for v in row] for row in r.rows], "rows")


@_view("lancens_cli.pipeline.scan.ScanExplain")
def _scan_explain(r: Any) -> View:
    header = ["spec", "table", "version", "fragments", "rows", "lance filter", "location"]
    rows = [
        [
            "-" if t.spec_version is None else f"v{t.spec_version}",
            t.table,
            t.version if t.branch is None else f"{t.branch}@{t.version}",
            t.fragments,
            t.rows,
            t.filter or "",
            t.location,
        ]
        for t in r.tables
    ]
    return View(header, rows, "tables read")


@_view("lancens_cli.pipeline.ingest.IngestResult")
def _ingest(r: Any) -> View:
    header = ["target", "mode", "rows", "partitions", "created", "manifest_version", "seconds"]
    version = r.manifest_version if r.table_version is None else r.table_version
    row = [
        r.target,
        _would(r.dry_run) + r.mode,
        r.rows,
        len(r.partitions),
        r.created,
        version,
        round(r.seconds, 2),
    ]
    return View(header, [row], "ingest")


@_summary("lancens_cli.pipeline.ingest.IngestResult")
def _ingest_summary(r: Any) -> str:
    verb = "would write" if r.dry_run else "wrote"
    where = (
        f"{plural(len(r.partitions), 'partition')} ({r.created} new)"
        if r.target == "partitioned"
        else f"table {r.target}"
    )
    version = (
        f", __manifest version {r.manifest_version}"
        if r.manifest_version is not None and not r.dry_run
        else ""
    )
    return f"{verb} {plural(r.rows, 'row')} into {where}{version} in {r.seconds:.1f} s"


# --- history ----------------------------------------------------------------------------------


def _ref_text(ref: Any) -> str:
    """A published ref (`store.catalog_rows.PublishedRef`) as one cell, `-` for none."""
    return "-" if ref is None else ref.cell()


_RESTORE_VERBS = {"republished": "republish", "moved": "move", "unpublished": "unpublish"}


@_view("lancens_cli.service.history.restore.RestoreResult")
def _restore(r: Any) -> View:
    state = "dry run: nothing changed" if r.dry_run else f"new version {r.new_version}"
    if r.status == "nothing to restore":
        state = "nothing to restore"
    elif not r.dry_run and r.new_version is None:
        state = "nothing changed"
    title = f"restore {r.target} to version {r.restored_to} (was {r.planned_on}): {state}"
    after = tuple(r.notes)
    if not r.changes:
        header = ["target", "restored_to", "rows_before", "rows_after", "new_version"]
        row = [r.target, r.restored_to, r.rows_before, r.rows_after, r.new_version]
        return View(header, [row] if r.target != "__manifest" else [], title, after=after)
    header = ["action", "table", "before", "after", "rows_before", "rows_after", "location"]
    rows = [
        [
            f"would {_RESTORE_VERBS[c.action]}" if r.dry_run else c.action,
            Identifier.from_object_id(c.object_id).display(),  # as every output names tables
            _ref_text(c.before),
            _restored_ref_text(c),
            c.rows_before,
            c.rows_after,
            c.location,
        ]
        for c in r.changes
    ]
    header.append("lacking_indexes")  # always, `-` when none: a pipe's columns never move
    for row, c in zip(rows, r.changes, strict=True):
        row.append(", ".join(_lacked_text(i) for i in c.lacking_indexes) or None)
    _with_partitions(header, rows, [c.label for c in r.changes], at=1)
    optional = ("location", "table")
    sparse = ("lacking_indexes", "partition")
    return View(header, rows, title, after=after, optional=optional, sparse=sparse)


def _restored_ref_text(change: Any) -> str:
    """What a restore publishes for a partition: `v1`, or a version of its own built on N's
    (`v3 (made from v1)`; a dry run, before its number exists: `new version (made from v1)`)."""
    if change.brought_from is None or change.after is None:
        return _ref_text(change.after)
    made = f"(made from v{change.brought_from})"
    if change.after.version is None:
        return f"new version {made}"
    return f"{_ref_text(change.after)} {made}"


def _lacked_text(lacked: Any) -> str:
    return f"{lacked.name} (too few rows)" if lacked.too_few else lacked.name


def _rows_text(rows: int | None) -> str:
    """A row count as a person reads it: `1,200 rows` (`? rows`: could not be counted)."""
    return "? rows" if rows is None else f"{rows:,} {noun(rows, 'row')}"


def _restore_what(r: Any, done: bool) -> str:
    """The partitions (or the table) a restore changes and their rows, before and after."""
    was = "before" if done else "now"
    rows = f"{_rows_text(r.rows_before)} {was} -> {_rows_text(r.rows_after)}"
    if r.target != "__manifest":
        return rows
    return f"{plural(len(r.changes), 'partition')}, {rows}"


def restore_question(plan: Any) -> str:
    """What the y/N prompt (and the refusal off a terminal) asks before a restore (`plan`: a
    `RestorePlan`)."""
    return f"restore {plan.target} to version {plan.restored_to}: {_restore_what(plan, False)}"


@_summary("lancens_cli.service.history.restore.RestoreResult")
def _restore_summary(r: Any) -> str:
    if r.status == "nothing to restore":
        if r.restored_to == r.planned_on:
            why = f"{r.target} version {r.restored_to} is already the newest"
        elif r.target == "__manifest":
            why = f"__manifest version {r.planned_on} already publishes what version "
            why += f"{r.restored_to} published"
        else:
            why = f"{r.target}'s newest version {r.planned_on} already holds version "
            why += f"{r.restored_to}'s data"
        return f"nothing to restore: {why}"
    made = sum(1 for c in r.changes if c.brought_from is not None)
    own = ""
    if made:
        verb = "would get" if r.new_version is None else "got"
        own = f"; {made} {verb} a new table version made from the restored one"
    if r.new_version is None:
        return (
            f"would restore {r.target} to version {r.restored_to} ({_restore_what(r, False)}{own})"
        )
    over = f"; restored over version(s) {r.restored_over}" if r.restored_over else ""
    return (
        f"restored {r.target} to version {r.restored_to} as version {r.new_version} "
        f"({_restore_what(r, True)}{own}){over}"
    )


@_warning("lancens_cli.service.history.restore.RestoreResult")
def _restore_warnings(r: Any) -> list[str]:
    """The restored partition tables left without an index of the namespace, and the fix."""
    if not r.unindexed:
        return []
    names = sorted({i.name for c in r.unindexed for i in c.lacking_indexes})
    left = "would leave" if r.dry_run else "left"
    it = "it" if len(names) == 1 else "them"
    text = (
        f"restore {left} {plural(len(r.unindexed), 'partition table')} without the namespace's "
        f"{noun(len(names), 'index', 'indexes')} {', '.join(names)} "
        f"({_labels_text([c.label.text() for c in r.unindexed if c.label is not None])})"
    )
    if r.index_remedy is None:
        return [
            text + f": too few rows to train {it} yet; prune --optimize-indexes builds {it} later"
        ]
    return [text + f": {'then ' if r.dry_run else ''}run {r.index_remedy} (see the notes)"]


def _published_text(p: Any) -> str:
    """What a row publishes as one cell: `v3`, `tag snap (v3)`, `branch b1 v2`, or `-`."""
    if p is None:
        return "-"
    version = "?" if p.version is None else f"v{p.version}"
    if p.ref.tag is not None:
        return f"tag {p.ref.tag} ({version})"
    return f"branch {p.ref.branch} {version}" if p.ref.branch is not None else version


def _change_text(c: Any) -> str:
    """One table version in a cell: `v4 append +10`, `b1 v2 append +5` on a branch."""
    delta = "" if not c.rows_delta else f" {c.rows_delta:+d}"
    line = f"{c.branch} " if c.branch is not None else ""
    return f"{line}v{c.version} {c.operation}{delta}"


@_view("lancens_cli.service.history.diff.PartitionDiff")
def _partition_diff(r: Any) -> View:
    header = ["change", "partition", "spec", "from", "to", "rows from", "rows to", "operations"]
    header += ["table", "location"]
    rows = [
        [
            p.change,
            p.label.text(),
            f"v{p.label.spec_version}",
            _published_text(p.before),
            _published_text(p.after),
            None if p.before is None else p.before.rows,
            None if p.after is None else p.after.rows,
            "; ".join(_change_text(c) for c in p.operations) or p.note or "",
            p.table,
            p.location,
        ]
        for p in r.partitions
    ]
    # the catalog's own changes as rows of the same columns (a pipe shows them too): the spec
    # versions added, and the schema's fields (`table` holds the field's name)
    for added in r.spec_versions_added:
        fields = ", ".join(added["fields"])
        rows.append(
            ["spec added", None, f"v{added['spec_version']}", *[None] * 4, fields, None, None]
        )
    for c in r.schema_changes:
        before = getattr(c, "before", None) if c.change not in ("added", "removed") else None
        after = getattr(c, "after", None) if c.change not in ("added", "removed") else None
        text = _schema_change_text(c)
        rows.append(
            [f"schema {c.change}", None, None, before, after, None, None, text, c.name, None]
        )
    title = (
        f"diff of __manifest versions {_versions_between(r)}: "
        f"{len(r.added)} added, {len(r.removed)} removed, {len(r.changed)} changed, "
        f"{r.untouched} untouched"
    )
    return View(header, rows, title, optional=("location", "table", "spec"))


def _schema_change_text(c: Any) -> str:
    if c.change in ("added", "removed"):
        return f"{c.change} {c.name} ({c.type}), field id {c.field_id}"
    what = "renamed" if c.change == "renamed" else f"{c.name} changed type"
    return f"{what} {c.before} -> {c.after}, field id {c.field_id}"


@_view("lancens_cli.service.history.diff.TableDiff")
def _table_diff(r: Any) -> View:
    header = ["version", "timestamp", "operation", "rows", "rows_delta", "size", "detail"]
    rows = [
        [
            c.version if c.branch is None else f"{c.branch}@{c.version}",
            human_time(c.timestamp),
            c.operation,
            c.rows,
            c.rows_delta,
            c.bytes,
            c.detail,
        ]
        for c in r.versions
    ]
    of = f"partition {r.label.text()}" if r.label is not None else r.table
    title = f"diff of {of} versions {_versions_between(r)}"
    return View(header, rows, title, sizes=("size",), optional=("size", "timestamp"))


def _versions_between(r: Any) -> str:
    """`4 (2026-11-27T02:55:01.123456Z) -> 7 (...)`: the versions a diff compares, each with its
    commit time, whole, as `--from-timestamp` / `--to-timestamp` take it back."""
    return (
        f"{r.from_version} ({human_time(r.from_timestamp)}) -> "
        f"{r.to_version} ({human_time(r.to_timestamp)})"
    )


# --- indexes ------------------------------------------------------------------------------------


@_view("lancens_cli.service.indexes.build.CreatedIndex")
def _created_index(r: Any) -> View:
    header = ["table", "location", "version_before", "version_after", "published", "note"]
    rows = [
        [t.table, t.location, t.version_before, t.version_after, t.published, t.note or ""]
        for t in r.tables
    ]
    index = r.index
    params = ", ".join(f"{k}={v}" for k, v in sorted(index.params.items()))
    title = f"index {index.name}: {index.type.lower()} on {index.column}"
    title += (f" ({params})" if params else "") + (
        ": nothing to do" if r.status == "nothing to do" else ""
    )
    return View(header, rows, title, optional=("location",))


@_summary("lancens_cli.service.indexes.build.CreatedIndex")
def _created_index_summary(r: Any) -> str:
    if r.status == "nothing to do":
        return _index_defined_summary(r)
    verb = "would build" if r.dry_run else "built"
    built = sum(1 for t in r.tables if t.status == verb)
    short = len(r.too_few)
    left = len(r.tables) - built - short
    text = f"index {r.index.name}: {verb} on {plural(built, 'table')}"
    if short:
        left_without = "would be left" if r.dry_run else "left"
        text += f", {plural(short, 'table')} {left_without} without it (too few rows)"
    if left:
        text += f", {plural(left, 'table')} left alone (see notes)"
    if r.manifest_version is not None:
        text += f"; published in __manifest v{r.manifest_version}"
    if r.stored:
        text += "; kept as the namespace's definition"
    return text


def _index_defined_summary(r: Any) -> str:
    """The same definition again: nothing to do, and the partition tables that lack it."""
    from lancens_cli.service.indexes.build import OPTIMIZE_REMEDY

    index = r.index
    params = "".join(f", {k}={v}" for k, v in sorted(index.params.items()))
    text = (
        f"index {index.name} ({index.type.lower()} on {index.column}{params}) is already the "
        "namespace's definition: nothing to do"
    )
    if r.lacking:
        short = f", {r.lacking_too_few} with too few rows yet" if r.lacking_too_few else ""
        text += (
            f"; {plural(r.lacking, 'partition table')} {'lacks' if r.lacking == 1 else 'lack'} "
            f"it{short}: {OPTIMIZE_REMEDY} builds it there"
        )
    return text


@_warning("lancens_cli.service.indexes.build.CreatedIndex")
def _created_index_warnings(r: Any) -> list[str]:
    """The partition tables left without the index: too few vectors to train it yet."""
    if not r.too_few:
        return []
    from lancens_cli.service.indexes.definitions import training_vectors

    shown = _labels_text(
        [f"{t.label.text() if t.label else t.table}: {t.rows} rows" for t in r.too_few]
    )
    keeps = "would keep" if r.dry_run else "keeps"
    return [
        f"index {r.index.name} {'would not be' if r.dry_run else 'not'} built on "
        f"{plural(len(r.too_few), 'partition table')} with too few vectors for "
        f"{r.index.type.lower()} to train ({shown}); the namespace {keeps} the definition and "
        "prune --optimize-indexes builds it there once a table has "
        f"{training_vectors(r.index)} vectors"
    ]
