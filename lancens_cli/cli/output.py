"""Rendering results and errors (the output contract: README "Output and exit codes").

What each result shows is its view (`cli/views.py`); this module only renders views.

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
        for line in plain_lines(result):
            stream.write(line + "\n")


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
        for index, item in enumerate(value):
            line = ("," if index else "") + "\n    " + json.dumps(item, default=str)
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


def plain_lines(result: Any) -> list[str]:
    """The result as piped: its view's rows as tab-separated lines, else `key<TAB>value` lines
    of its fields."""
    shown = view_of(result)
    if shown is not None:
        return [plain_row(row) for row in shown.rows]
    plain = result.to_json()
    if isinstance(plain, dict):
        return [f"{key}\t{_cell(value)}" for key, value in _flatten("", plain)]
    return [_cell(plain)]


# --- terminal ---------------------------------------------------------------------------------


def _emit_rich(result: Any, stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream, no_color=not use_color(stream), highlight=False)
    shown = view_of(result)
    if shown is not None:
        styles = shown.styles or [None] * len(shown.rows)
        sized = {shown.columns.index(c) for c in shown.sizes}
        texts = []
        for row in shown.rows:
            cells = [
                human_bytes(v) if i in sized and isinstance(v, int) else v
                for i, v in enumerate(row)
            ]
            texts.append([_cell(v) if v is not None else "" for v in cells])
        keep, left_out = _fit(shown, texts, console.width)
        table = Table(title=shown.title, title_justify="left")
        for i in keep:  # a long cell wraps, a long word folds: a value is never cut to "…"
            table.add_column(shown.columns[i], overflow="fold", no_wrap=False)
        for row, style in zip(texts, styles, strict=True):
            table.add_row(*(row[i] for i in keep), style=style)
        console.print(table)
        for line in shown.after:
            console.print(line)
        if left_out:
            message(
                f"columns left out for width: {', '.join(left_out)} "
                "(a wider terminal, a pipe or --json shows them)"
            )
        return
    if isinstance(result, (RootDescription, NamespaceDescription, TableDescription)):
        from lancens_cli.cli.describe_view import render

        render(console, result)
        return
    console.print(to_plain(result))


def _fit(shown: View, texts: list[list[str]], width: int) -> tuple[list[int], list[str]]:
    """The columns a terminal `width` wide shows: every one when the table's widest rows fit,
    else without the view's optional columns, least important first, until they do (what still
    does not fit wraps). The indexes of the columns shown, and the names left out."""
    from rich.cells import cell_len

    widths = [
        max([cell_len(name), *(cell_len(row[i]) for row in texts)])
        for i, name in enumerate(shown.columns)
    ]
    keep = list(range(len(shown.columns)))
    left_out: list[str] = []
    for name in shown.optional:
        if sum(widths[i] + 3 for i in keep) + 1 <= width:  # padding and a rule each, one edge
            break
        if name in shown.columns and shown.columns.index(name) in keep:
            keep.remove(shown.columns.index(name))
            left_out.append(name)
    return keep, left_out
