"""How `create index` shows its result: the tables built, the summary and the tables left
without the index. The service names a view needs are imported inside it, so that
`lancens --help` starts without pyarrow or Lance."""

from __future__ import annotations

from typing import Any

from lancens_cli.cli.views.cells import labels_text
from lancens_cli.cli.views.registry import View, summary, view, warning
from lancens_cli.words import plural


@view("lancens_cli.service.indexes.build.CreatedIndex")
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


@summary("lancens_cli.service.indexes.build.CreatedIndex")
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


@warning("lancens_cli.service.indexes.build.CreatedIndex")
def _created_index_warnings(r: Any) -> list[str]:
    """The partition tables left without the index: too few vectors to train it yet."""
    if not r.too_few:
        return []
    from lancens_cli.service.indexes.definitions import training_vectors

    shown = labels_text(
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
