"""How the history commands show their results: restore (and its y/N question) and diff."""

from __future__ import annotations

from typing import Any

from lancens_cli.cli.views.cells import labels_text, with_partitions
from lancens_cli.cli.views.registry import View, summary, view, warning
from lancens_cli.models import Identifier
from lancens_cli.words import human_time, noun, plural


def _ref_text(ref: Any) -> str:
    """A published ref (`store.catalog_rows.PublishedRef`) as one cell, `-` for none."""
    return "-" if ref is None else ref.cell()


_RESTORE_VERBS = {"republished": "republish", "moved": "move", "unpublished": "unpublish"}


@view("lancens_cli.service.history.restore.RestoreResult")
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
    with_partitions(header, rows, [c.label for c in r.changes], at=1)
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


@summary("lancens_cli.service.history.restore.RestoreResult")
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


@warning("lancens_cli.service.history.restore.RestoreResult")
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
        f"({labels_text([c.label.text() for c in r.unindexed if c.label is not None])})"
    )
    if r.index_remedy is None:
        return [
            text + f": too few rows to train {it} yet; prune --optimize-indexes builds {it} later"
        ]
    return [text + f": {'then ' if r.dry_run else ''}run {r.index_remedy} (see the notes)"]


def _published_text(p: Any) -> str:
    """What a row publishes as one cell, a table version as `versions` prints it: `3`,
    `tag snap (3)`, `b1@2` on a branch, or `-`. Only a spec version is written `v1`."""
    if p is None:
        return "-"
    version = "?" if p.version is None else str(p.version)
    if p.ref.tag is not None:
        return f"tag {p.ref.tag} ({version})"
    return f"{p.ref.branch}@{version}" if p.ref.branch is not None else version


def _change_text(c: Any) -> str:
    """One table version in a cell: `@4 append +10`, `b1@2 append +5` on a branch."""
    delta = "" if not c.rows_delta else f" {c.rows_delta:+d}"
    return f"{c.branch or ''}@{c.version} {c.operation}{delta}"


@view("lancens_cli.service.history.diff.PartitionDiff")
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


@view("lancens_cli.service.history.diff.TableDiff")
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
