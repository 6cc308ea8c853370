"""`ls` says what each table directory holds, however many it looks into at once.

A listing of many tables looks into their directories several at a time (a listing of a
directory on a cold disk is a wait); each entry must still carry its own directory's state.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from lancens_cli.service.catalog.listing import STATES_ALONE
from lancens_cli.store.tables import RESERVED_MARKER
from tests.helpers import ls_json


def committed(directory: Path) -> None:
    (directory / "_versions").mkdir(parents=True)
    (directory / "_versions" / "1.manifest").write_bytes(b"")


def only_files_of_its_own(directory: Path) -> None:
    directory.mkdir()
    (directory / "notes.txt").write_text("not a table")


def a_write_that_never_committed(directory: Path) -> None:
    (directory / "data").mkdir(parents=True)
    (directory / "data" / "part-0.lance").write_bytes(b"\0" * 16)


def reserved(directory: Path) -> None:
    directory.mkdir()
    (directory / RESERVED_MARKER).write_text("{}")


KINDS: dict[str, Callable[[Path], None]] = {
    "ok": committed,
    "not a Lance table": only_files_of_its_own,
    "uncommitted write": a_write_that_never_committed,
    "declared": reserved,
}


def test_each_table_of_a_long_listing_carries_its_own_state(local_root):
    count = 3 * STATES_ALONE  # looked into in threads
    chosen = random.Random(7).choices(list(KINDS), k=count)
    expected = {}
    for i, kind in enumerate(chosen):
        name = f"t{i:04d}"
        KINDS[kind](local_root.local_path / f"{name}.lance")
        expected[name] = kind
    entries = ls_json(local_root)["entries"]
    assert {e["id"]: e["state"] for e in entries} == expected
    assert len(set(expected.values())) == len(KINDS)
