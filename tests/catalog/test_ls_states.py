"""`ls` says what each table directory holds, however many it looks into at once.

A listing of many tables whose directories the disk must be asked for (a wait each) looks
into them several at a time; each entry must still carry its own directory's state. Here the
directories are in the kernel's cache, so the threads are asked for by taking every wait as
long enough.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from lancens_cli.service.catalog import listing
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


@pytest.mark.parametrize("threads", [False, True], ids=["cached", "waiting"])
def test_each_table_of_a_long_listing_carries_its_own_state(local_root, monkeypatch, threads):
    if threads:
        monkeypatch.setattr(listing, "WAITED_PER_TABLE_S", 0.0)
    count = 3 * STATES_ALONE + 5  # the first looked into alone, the rest in shares
    chosen = random.Random(7).choices(list(KINDS), k=count)
    expected = {}
    for i, kind in enumerate(chosen):
        name = f"t{i:04d}"
        KINDS[kind](local_root.local_path / f"{name}.lance")
        expected[name] = kind
    entries = ls_json(local_root)["entries"]
    assert {e["id"]: e["state"] for e in entries} == expected
    assert len(set(expected.values())) == len(KINDS)
