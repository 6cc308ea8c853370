"""A 60-column terminal never breaks a value a person copies: ids, locations, times, versions.

The columns that hold them do not wrap; prose does. Where even without the optional columns
those values cannot stand side by side, the rows are shown as blocks of `column: value` lines.
Each command below runs on a real pseudo-terminal 60 columns wide (`tests/terminal.py`), and no
line may hold a piece of an id, a location or a time that is not the whole of it.
"""

from __future__ import annotations

import re

import pytest
import terminal
from helpers import Root, ok, restored_history_root

COLUMNS = 60
TOKEN = re.compile(r"[\w.$:=/+-]+")  # the characters of ids, locations and times


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Root:
    """A root partitioned by year and country (partition table ids of 44 characters), written
    three times and restored once, with a plain table `t`. Built once: the tests only read it."""
    return restored_history_root(tmp_path_factory.mktemp("narrow"))


def _values(root: Root) -> set[str]:
    """Every id, location and version time the commands below may show."""
    entries = ok(root, "ls", "--recursive", "--json").json()["entries"]
    found = {e["id"] for e in entries} | {e["location"] for e in entries if e["location"]}
    tables = [e["id"] for e in entries if e["kind"] == "table"]
    for target in ["__manifest", *tables]:
        found |= {v["timestamp"] for v in ok(root, "versions", target, "--json").json()["versions"]}
    return found


def _broken(shown: str, values: set[str]) -> list[str]:
    """The pieces of a value a line break cut off: words of the text that are not a whole value
    but begin or end one. A cut value leaves a piece with a digit (every id, location and time
    holds one in each half; prose such as "set" only ends `...dataset` by chance); three
    characters at least, as `v1` is a whole id of its own."""
    return sorted(
        word
        for word in set(TOKEN.findall(shown))
        if len(word) >= 3
        and any(c.isdigit() for c in word)
        and word not in values
        and any(word != v and (v.startswith(word) or v.endswith(word)) for v in values)
    )


def _shown(root: Root, *args: str) -> str:
    code, out, err = terminal.on_terminal(*root.args, *args, stream="stdout", columns=COLUMNS)
    assert code == 0, err
    return terminal.shown(out)


def _partition_table(root: Root) -> str:
    entries = ok(root, "ls", "--recursive", "--json").json()["entries"]
    return next(e["id"] for e in entries if e["kind"] == "table" and e["id"] != "t")


@pytest.mark.parametrize(
    "args",
    [
        ("versions", "__manifest"),
        ("versions", "t"),
        ("versions",),
        ("versions", "PARTITION"),
        ("diff", "__manifest", "--from-version", "1"),
        ("diff", "--from-version", "3"),
        ("describe", "t", "--versions"),
        ("ls", "--recursive"),
        ("prune", "--dry-run", "--verbose", "--older-than", "0s", "--grace", "0s", "--force"),
        ("partitions",),
        ("restore", "--to-version", "3", "--dry-run"),
    ],
    ids=lambda args: " ".join(args),
)
def test_no_id_location_or_time_is_split_across_lines(root, args):
    args = tuple(_partition_table(root) if a == "PARTITION" else a for a in args)
    values = _values(root)
    shown = _shown(root, *args)
    assert _broken(shown, values) == [], shown
    assert "…" not in shown


def test_every_time_and_id_is_there_whole_at_60_columns(root):
    """Not by leaving them out: `versions __manifest` shows every version's time, `ls` every
    id, whole."""
    listed = ok(root, "versions", "__manifest", "--json").json()["versions"]
    times = [v["timestamp"] for v in listed]
    shown = _shown(root, "versions", "__manifest")
    assert all(t in shown for t in times), shown
    assert "lancens restore to version 3" in shown
    ids = [e["id"] for e in ok(root, "ls", "--recursive", "--json").json()["entries"]]
    shown = _shown(root, "ls", "--recursive")
    assert all(i in shown for i in ids), shown


def test_a_wide_terminal_still_shows_a_table(root):
    code, out, _ = terminal.on_terminal(*root.args, "versions", "__manifest", stream="stdout")
    shown = terminal.shown(out)
    assert code == 0 and "┃ version ┃ timestamp" in shown
