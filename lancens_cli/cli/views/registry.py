"""The registry from result type to its view, summary line and warnings, and the `View` a
terminal or pipe renders. It is keyed by the result's qualified type name, so looking a view up
imports no module: `lancens ls` never loads the Spark pipeline to find out how a scan is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Rows = list[list[Any]]
# what a view may hold instead: rows made as they are read, once (a pipe's lines, a report of
# a million tables); a terminal lays them out whole
RowStream = Iterable[list[Any]]


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
    rows: Rows | RowStream
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


def view(qualified: str) -> Callable[[Callable[[Any], View]], Callable[[Any], View]]:
    def register(func: Callable[[Any], View]) -> Callable[[Any], View]:
        _VIEWS[qualified] = func
        return func

    return register


def summary(qualified: str) -> Callable[[Callable[[Any], str]], Callable[[Any], str]]:
    def register(func: Callable[[Any], str]) -> Callable[[Any], str]:
        _SUMMARIES[qualified] = func
        return func

    return register


def warning(qualified: str) -> Callable[[Callable[[Any], list[str]]], Callable[[Any], list[str]]]:
    def register(func: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
        _WARNINGS[qualified] = func
        return func

    return register
