"""Rendering results and errors (the output contract: README "Output and exit codes").

stdout carries only the result: a rich table on a terminal, tab-separated lines when piped,
exactly one JSON document with --json. Messages and errors go to stderr; in JSON mode an error is
one `{"error": {"name", "code", "message"}}` object there.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from lancens_cli.errors import LancensError
from lancens_cli.models import (
    ChangeSet,
    Listing,
    NamespaceDescription,
    RootDescription,
    TableDescription,
    to_plain,
)


def use_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def emit(result: Any, *, json_mode: bool, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    if json_mode:
        plain = result.to_json() if hasattr(result, "to_json") else to_plain(result)
        stream.write(json.dumps(plain, indent=2, default=str) + "\n")
        return
    if stream.isatty():
        _emit_rich(result, stream)
    else:
        for line in plain_lines(result):
            stream.write(line + "\n")


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


def plain_lines(result: Any) -> list[str]:
    if hasattr(result, "table_rows"):
        _, rows = result.table_rows()
        return ["\t".join(_cell(v) for v in row) for row in rows]
    if isinstance(result, Listing):
        return [
            "\t".join(_cell(v) for v in (e.id, e.kind, e.location, e.source, e.state))
            for e in result.entries
        ]
    if isinstance(result, ChangeSet):
        return [
            "\t".join(
                _cell(v)
                for v in (
                    ("would " if c.dry_run else "") + c.action,
                    c.kind,
                    c.id,
                    c.location,
                    c.detail,
                )
            )
            for c in result.changes
        ]
    plain = to_plain(result)
    if isinstance(plain, dict):
        return [f"{key}\t{_cell(value)}" for key, value in _flatten("", plain)]
    return [_cell(plain)]


# --- terminal ---------------------------------------------------------------------------------


def _emit_rich(result: Any, stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream, no_color=not use_color(stream), highlight=False)
    if hasattr(result, "table_rows"):
        columns, rows = result.table_rows()
        table = Table(title=getattr(result, "title", None), title_justify="left")
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(_cell(v) if v is not None else "" for v in row))
        console.print(table)
        return
    if isinstance(result, Listing):
        table = Table(title=f"namespace {result.namespace or '(root)'}", title_justify="left")
        for column in ("id", "kind", "location", "source", "state"):
            table.add_column(column)
        for e in result.entries:
            style = None if e.state in ("ok", "") else "yellow"
            cells = (e.id, e.kind, e.location or "", e.source, e.state)
            table.add_row(*(printable(c) for c in cells), style=style)
        console.print(table)
        if result.next_page_token:
            console.print(f"next page: --page-token {result.next_page_token}")
        return
    if isinstance(result, ChangeSet):
        table = Table(title="dry run: nothing changed" if result.dry_run else None)
        for column in ("action", "kind", "id", "location", "detail"):
            table.add_column(column)
        for c in result.changes:
            action = ("would " if c.dry_run else "") + c.action
            cells = (action, c.kind, c.id, c.location or "", c.detail or "")
            table.add_row(*(printable(c) for c in cells))
        console.print(table)
        if result.message:
            console.print(result.message)
        return
    if isinstance(result, (RootDescription, NamespaceDescription, TableDescription)):
        from lancens_cli.describe_view import render

        render(console, result)
        return
    console.print(to_plain(result))
