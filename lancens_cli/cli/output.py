"""Rendering results and errors (the output contract: README "Output and exit codes").

What each result shows is its view (`cli/views/`); this module only renders views.

stdout carries only the result: a rich table on a terminal, tab-separated lines when piped,
exactly one JSON document with --json. Messages and errors go to stderr; in JSON mode an error is
one `{"error": {"name", "code", "message"}}` object there.

rich and `describe_view.py` (which loads pyarrow) are imported inside `_emit_rich`, so that `lancens
--help`, piped and --json output start without them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from lancens_cli.cli.views import View, view_of
from lancens_cli.errors import LancensError
from lancens_cli.models import (
    NamespaceDescription,
    Result,
    RootDescription,
    Streamed,
    TableDescription,
    to_plain,
)
from lancens_cli.words import human_bytes


def use_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def emit(result: Result, *, json_mode: bool, stream: TextIO | None = None) -> None:
    if not isinstance(result, Result):
        raise TypeError(f"{type(result).__qualname__} is not a command result (models.Result)")
    stream = stream or sys.stdout
    if json_mode:
        write_json(result.to_json(), stream)
        return
    if stream.isatty():
        _emit_rich(result, stream)
    else:
        pending: list[str] = []
        size = 0
        for line in plain_lines(result):  # a line a row, written a block at a time
            pending.append(line + "\n")
            size += len(line) + 1
            if size >= JSON_CHUNK:
                stream.write("".join(pending))
                pending, size = [], 0
        stream.write("".join(pending))


JSON_CHUNK = 1 << 16  # characters gathered before a write to the stream


def write_json(plain: Any, stream: TextIO) -> None:
    """One JSON document, written as it is encoded: a report of 100,000 tables never exists
    as one string, and its lazy parts (`models.Streamed`) are built an item at a time.

    The items of a `Streamed` list of the top level (a report's tables) go one to a line,
    encoded compact by json's C encoder: indenting them runs in Python, 0.14 s against
    0.02 s for 4,000 tables, and a line per table is what a reader greps anyway."""
    if isinstance(plain, dict) and any(isinstance(v, Streamed) for v in plain.values()):
        _write_with_streamed(plain, stream)
        return
    pending: list[str] = []
    size = 0
    for chunk in json.JSONEncoder(indent=2, default=str).iterencode(plain):
        pending.append(chunk)
        size += len(chunk)
        if size >= JSON_CHUNK:
            stream.write("".join(pending))
            pending, size = [], 0
    pending.append("\n")
    stream.write("".join(pending))


def _write_with_streamed(plain: dict[str, Any], stream: TextIO) -> None:
    """`plain` as `json.dumps(plain, indent=2)` writes it, but for its `Streamed` values."""
    stream.write("{")
    for position, (key, value) in enumerate(plain.items()):
        stream.write(("," if position else "") + "\n  " + json.dumps(str(key)) + ": ")
        if not isinstance(value, Streamed):
            stream.write(json.dumps(value, indent=2, default=str).replace("\n", "\n  "))
            continue
        stream.write("[")
        pending: list[str] = []
        size = 0
        encode = json.JSONEncoder(default=str).encode  # one encoder: a million lines, one made
        for index, item in enumerate(value):
            line = ("," if index else "") + "\n    " + encode(item)
            pending.append(line)
            size += len(line)
            if size >= JSON_CHUNK:
                stream.write("".join(pending))
                pending, size = [], 0
        pending.append("\n  ]" if len(value) else "]")
        stream.write("".join(pending))
    stream.write("\n}\n" if plain else "}\n")


def message(text: str) -> None:
    """A note for the human (stderr), never part of the result."""
    sys.stderr.write(text + "\n")


def scrub(text: str, secrets: list[str]) -> str:
    """Replace every secret value in a text (errors may quote requests or options)."""
    for secret in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "****")
    return text


def emit_error(error: LancensError, *, json_mode: bool, secrets: list[str] | None = None) -> None:
    text = scrub(" ".join(error.message.split()), secrets or [])  # one line, no secret
    if json_mode:
        payload = {"error": {**error.to_dict(), "message": text}}
        sys.stderr.write(json.dumps(payload) + "\n")
    else:
        sys.stderr.write(f"lancens: error: {text}\n")


# --- plain text (piped) ----------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str, separators=(",", ":"))
    return printable(str(value).replace("\t", " ").replace("\n", " "))


def printable(text: str) -> str:
    """Control characters as `\\xNN`: a catalog row written by any tool never reaches a
    terminal raw (an escape sequence could rewrite the screen)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else f"\\x{ord(ch):02x}" for ch in text)


def _flatten(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        pairs = []
        for key, inner in value.items():
            pairs.extend(_flatten(f"{prefix}.{key}" if prefix else str(key), inner))
        return pairs
    return [(prefix, value)]


def plain_row(row: list[Any]) -> str:
    """One row as a piped line: tab-separated cells, None as `-`."""
    return "\t".join(_cell(v) for v in row)


def plain_lines(result: Any) -> Iterator[str]:
    """The result as piped: its view's rows as tab-separated lines, else `key<TAB>value` lines
    of its fields. A line at a time: a view's rows may be made as they are read (a report of
    a million tables is never held whole as rows)."""
    shown = view_of(result)
    if shown is not None:
        return map(plain_row, shown.rows)
    plain = result.to_json()
    if isinstance(plain, dict):
        return iter([f"{key}\t{_cell(value)}" for key, value in _flatten("", plain)])
    return iter([_cell(plain)])


# --- terminal ---------------------------------------------------------------------------------


def _emit_rich(result: Any, stream: TextIO) -> None:
    from rich.console import Console

    console = Console(file=stream, no_color=not use_color(stream), highlight=False)
    shown = view_of(result)
    if shown is not None:
        _emit_view(console, shown)
        return
    if isinstance(result, (RootDescription, NamespaceDescription, TableDescription)):
        from lancens_cli.cli.describe_view import render

        render(console, result)
        return
    console.print(to_plain(result))


def _emit_view(console: Any, shown: View) -> None:
    """A view on a terminal: a table whose columns of ids, locations, times and versions never
    break across lines (`View.keeps_whole`) while prose wraps; where even without the optional
    columns those values cannot stand side by side, each row as a block of `column: value`
    lines (as psql's expanded display), every column kept."""
    from rich.table import Table

    rows = list(shown.rows)  # a terminal's table is laid out whole
    styles = shown.styles or [None] * len(rows)
    sized = {shown.columns.index(c) for c in shown.sizes}
    texts = []
    for row in rows:
        cells = [
            human_bytes(v) if i in sized and isinstance(v, int) else v for i, v in enumerate(row)
        ]
        texts.append([_cell(v) if v is not None else "" for v in cells])
    present = _present(shown, texts)
    keep, left_out = _fit(shown, texts, console.width, present)
    widths = _widths(shown, texts, keep, console.width)
    if widths is None:
        _emit_records(console, shown, texts, styles, present)
    else:
        table = Table(title=shown.title, title_justify="left")
        for i in keep:  # a long cell wraps, a long word folds: a value is never cut to "…"
            whole = shown.keeps_whole(shown.columns[i])
            table.add_column(shown.columns[i], overflow="fold", no_wrap=whole, width=widths.get(i))
        for row, style in zip(texts, styles, strict=True):
            table.add_row(*(row[i] for i in keep), style=style)
        console.print(table)
    for line in shown.after:
        console.print(line)
    if left_out and widths is not None:
        message(
            f"columns left out for width: {', '.join(left_out)} "
            "(a wider terminal, a pipe or --json shows them)"
        )


def _present(shown: View, texts: list[list[str]]) -> list[int]:
    """The columns a terminal shows at all: not a `sparse` one that no row has a value in."""
    return [
        i
        for i, name in enumerate(shown.columns)
        if name not in shown.sparse or any(row[i] not in ("", "-") for row in texts)
    ]


def _fit(
    shown: View, texts: list[list[str]], width: int, present: list[int]
) -> tuple[list[int], list[str]]:
    """The columns a terminal `width` wide shows: every one `present` when they fit, else
    without the view's optional columns, least important first, until they do. Fitting: every
    value to keep whole at its full width, and prose at least PROSE_WIDTH wide (what is longer
    wraps). The indexes of the columns shown, and the names left out."""
    full = _full_widths(shown, texts)
    keep = list(present)
    left_out: list[str] = []
    for name in shown.optional:
        needed = sum(_narrowest(shown, texts, full, i, PROSE_WIDTH) for i in keep)
        if needed + 3 * len(keep) + 1 <= width:  # padding and a rule each, one edge
            break
        if name in shown.columns and shown.columns.index(name) in keep:
            keep.remove(shown.columns.index(name))
            left_out.append(name)
    return keep, left_out


PROSE_WIDTH = 20  # prose narrower than this reads badly: optional columns go first
PROSE_WORD = 20  # a word of prose longer than this may fold; a shorter one never does


def _widths(
    shown: View, texts: list[list[str]], keep: list[int], width: int
) -> dict[int, int] | None:
    """Each shown column's width in a table `width` wide: {} when every value fits on one line;
    else the values to keep whole at their full width and the prose columns sharing the rest,
    none narrower than its longest word. None: even so the table does not fit (rich would
    then fold ids and times to make it)."""
    full = _full_widths(shown, texts)
    room = width - 3 * len(keep) - 1  # padding and a rule each, one edge
    if sum(full[i] for i in keep) <= room:
        return {}
    least = {i: _narrowest(shown, texts, full, i, 0) for i in keep}
    spare = room - sum(least.values())
    if spare < 0:
        return None
    widths = dict(least)
    wants = sorted(keep, key=lambda i: full[i] - least[i])  # the modest first: a short cell
    for n, i in enumerate(wants):  # ("1.9 KiB") gets its whole width before prose its share
        share = min(full[i] - least[i], spare // (len(wants) - n))
        widths[i] += share
        spare -= share
    return widths


def _full_widths(shown: View, texts: list[list[str]]) -> list[int]:
    """Each column's width with no cell wrapped: its header or its longest cell."""
    from rich.cells import cell_len

    return [
        max([cell_len(name), *(cell_len(row[i]) for row in texts)])
        for i, name in enumerate(shown.columns)
    ]


def _narrowest(shown: View, texts: list[list[str]], full: list[int], i: int, prose: int) -> int:
    """The narrowest column `i` may get: a value to keep whole, its full width; prose, its
    longest word (header too, at most PROSE_WORD) and at least `prose` (its full width when
    less)."""
    from rich.cells import cell_len

    if shown.keeps_whole(shown.columns[i]):
        return full[i]
    words = [shown.columns[i], *(row[i] for row in texts)]
    longest = max((cell_len(word) for text in words for word in text.split()), default=1)
    return min(full[i], max(1, prose, min(longest, PROSE_WORD)))


def _emit_records(
    console: Any,
    shown: View,
    texts: list[list[str]],
    styles: list[str | None],
    present: list[int],
) -> None:
    """Each row as `column: value` lines, a blank line between rows: a value too long to follow
    its name on one line starts a line of its own, so only what is wider than the terminal
    itself folds."""
    from rich.cells import cell_len
    from rich.text import Text

    if shown.title:
        console.print(Text(shown.title))
    for number, (row, style) in enumerate(zip(texts, styles, strict=True)):
        if number:
            console.print()
        for i in present:
            name, value = shown.columns[i], row[i]
            if cell_len(name) + 2 + cell_len(value) <= console.width or not value:
                console.print(Text(f"{name}: {value}", style=style or ""), overflow="fold")
            else:
                console.print(Text(f"{name}:", style=style or ""))
                console.print(Text(value, style=style or ""), overflow="fold")
