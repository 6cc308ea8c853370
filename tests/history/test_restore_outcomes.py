"""`restore` says what will and did happen: a dry run reports what the real run publishes, in
the same fields; a rerun is `nothing to restore` (exit 0, no new version) for a partitioned root
and a table alike; the result and the y/N question carry the rows before and after.

Each through the CLI as a user runs it: piped text, `--json`, and a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import lance
import pyarrow as pa
import pytest
import terminal
from data import events
from helpers import cli, ok, tree_snapshot


def manifest_versions(root) -> list[int]:
    ds = lance.dataset(str(root.local_path / "__manifest"))
    return sorted(int(v["version"]) for v in ds.versions())


@pytest.fixture
def rewritten(partitioned, files):
    """Two writes into the same partitions: restoring the first one's `__manifest` version
    gives every partition table a version of its own built on its first (a later one came
    after it). Returns the root and that version."""
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(60)))
    first = manifest_versions(root)[-1]
    ok(root, "write", "--from", files("b.parquet", events(40, seed=1, start=1000)))
    return root, first


def _changes(result: dict) -> dict[str, dict]:
    return {c["object_id"]: c for c in result["changes"]}


def test_a_dry_run_reports_what_the_real_run_publishes(rewritten):
    root, first = rewritten
    dry = ok(root, "restore", "--to-version", str(first), "--dry-run", "--json").json()
    piped = ok(root, "restore", "--to-version", str(first), "--dry-run")
    real = ok(root, "restore", "--to-version", str(first), "--yes", "--json").json()
    assert (dry["status"], real["status"]) == ("would restore", "restored")
    planned, done = _changes(dry), _changes(real)
    assert planned.keys() == done.keys() and planned
    for table, change in planned.items():
        made = done[table]
        # the real run publishes a version of its own, built on version N's
        assert made["brought_from"] is not None and made["after"]["read_version"] > 1
        assert change["brought_from"] == made["brought_from"]
        assert change["will_make_version"] is True and made["will_make_version"] is True
        assert change["after"]["read_version"] is None  # its number exists once it is made
        assert change["after"] | {"read_version": 0} == made["after"] | {"read_version": 0}
        assert (change["rows_before"], change["rows_after"]) == (
            made["rows_before"],
            made["rows_after"],
        )
    # the totals are the changed partitions' rows, summed
    for result in (dry, real):
        assert result["rows_before"] == sum(c["rows_before"] for c in result["changes"]) == 100
        assert result["rows_after"] == sum(c["rows_after"] for c in result["changes"]) == 60
    # piped text: the dry run's `after` says a new version, the real run's its number
    lines = piped.stdout.strip().splitlines()
    assert len(lines) == len(planned)
    for change in planned.values():
        (line,) = [line for line in lines if f"\t{change['table']}\t" in line]  # dotted
        assert f"\tnew version (made from v{change['brought_from']})\t" in line
    assert "latest" not in piped.stdout
    count = len(planned)
    assert f"{count} partitions, 100 rows now -> 60 rows" in piped.stderr
    assert f"{count} would get a new table version made from the restored one" in piped.stderr


def test_the_real_run_says_which_version_it_made(rewritten):
    root, first = rewritten
    result = ok(root, "restore", "--to-version", str(first), "--yes")
    lines = result.stdout.strip().splitlines()
    assert lines and all("(made from v1)" in line for line in lines)
    assert all("new version" not in line for line in lines)
    assert "100 rows before -> 60 rows" in result.stderr
    assert "got a new table version made from the restored one" in result.stderr


def test_a_rerun_is_nothing_to_restore(rewritten):
    root, first = rewritten
    ok(root, "restore", "--to-version", str(first), "--yes")
    versions = manifest_versions(root)
    before = tree_snapshot(root.local_path)
    # without --yes off a terminal too: nothing to ask, exit 0
    for extra in ((), ("--yes",)):
        text = cli(root, "restore", "--to-version", str(first), *extra)
        assert text.exit_code == 0, text.stderr
        assert text.stderr.startswith("nothing to restore: __manifest version")
        assert f"already publishes what version {first} published" in text.stderr
        assert "would restore" not in text.stderr and text.stdout.strip() == ""
        answer = ok(root, "restore", "--to-version", str(first), *extra, "--json").json()
        assert answer["dry_run"] is False and answer["status"] == "nothing to restore"
        assert answer["changes"] == [] and answer["new_version"] is None
        assert (answer["rows_before"], answer["rows_after"]) == (0, 0)
    dry = ok(root, "restore", "--to-version", str(first), "--dry-run", "--json").json()
    assert dry["dry_run"] is True and dry["status"] == "nothing to restore"
    assert manifest_versions(root) == versions
    assert tree_snapshot(root.local_path) == before
    # the newest version itself: nothing to restore either
    newest = ok(root, "restore", "--to-version", str(versions[-1]), "--json").json()
    assert newest["status"] == "nothing to restore" and newest["dry_run"] is False


def test_a_table_rerun_adds_no_version(local_root, files):
    root = local_root
    ok(root, "create", "table", "t", "--from", files("t.parquet", pa.table({"id": range(10)})))
    location = str(root.local_path / "t.lance")
    lance.write_dataset(pa.table({"id": [99]}), location, mode="append")
    restored = ok(root, "restore", "t", "--to-version", "1", "--yes", "--json").json()
    assert restored["status"] == "restored" and restored["new_version"] == 3
    assert (restored["rows_before"], restored["rows_after"]) == (11, 10)
    # the newest version (3) is a restore of 1: the same data, so nothing to restore
    for extra in ((), ("--yes",), ("--dry-run",)):
        again = cli(root, "restore", "t", "--to-version", "1", *extra, "--json")
        assert again.exit_code == 0, again.stderr
        answer = again.json()
        assert answer["status"] == "nothing to restore" and answer["new_version"] is None
        assert answer["dry_run"] is (extra == ("--dry-run",))
        text = cli(root, "restore", "t", "--to-version", "1", *extra)
        assert text.exit_code == 0
        assert "nothing to restore: t's newest version 3 already holds version 1's data" in (
            text.stderr
        )
    latest = ok(root, "restore", "t", "--to-version", "3", "--json").json()
    assert latest["status"] == "nothing to restore"
    assert lance.dataset(location).version == 3  # no version added by any rerun
    # another version is still restored
    back = ok(root, "restore", "t", "--to-version", "2", "--yes", "--json").json()
    assert back["status"] == "restored" and lance.dataset(location).count_rows() == 11


def test_the_question_names_partitions_and_rows(rewritten):
    root, first = rewritten
    dry = ok(root, "restore", "--to-version", str(first), "--dry-run", "--json").json()
    count = len(dry["changes"])
    question = f"restore __manifest to version {first}: {count} partitions, 100 rows now -> 60 rows"
    before = tree_snapshot(root.local_path)
    refused = cli(root, "restore", "--to-version", str(first))
    assert refused.exit_code == 5 and question in refused.stderr
    code, asked = _answered(*root.args, "restore", "--to-version", str(first), answer="n")
    assert code == 5, asked
    assert f"{question}? [y/N]" in asked
    assert tree_snapshot(root.local_path) == before


def test_a_dry_run_on_a_terminal_says_a_new_version(rewritten):
    root, first = rewritten
    code, stdout, stderr = terminal.on_terminal(
        *root.args, "restore", "--to-version", str(first), "--dry-run", stream="stdout",
        columns=250,
    )  # fmt: skip
    assert code == 0, stderr
    shown = terminal.shown(stdout)
    assert "dry run: nothing changed" in shown
    assert "new version (made from v1)" in shown and "latest" not in shown


def _answered(*args: str, answer: str) -> tuple[int, str]:
    """Run `lancens` with stdin and stderr on a pseudo-terminal, answering its question."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "200", "LANCE_LOG": "error"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *args],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    seen = b""
    while b"[y/N]" not in seen:
        chunk = os.read(master, 65536)
        if not chunk:
            break
        seen += chunk
    os.write(master, answer.encode() + b"\n")
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    proc.stdout.read()
    return proc.wait(timeout=120), terminal.shown(seen.decode(errors="replace"))


def test_a_version_that_only_added_an_index_is_still_restored(local_root, files):
    """The same rows but an index N lacks: not what a restore of N makes, so it is restored
    (its indexes are N's again), and only then is a rerun nothing to restore."""
    root = local_root
    ok(root, "create", "table", "t", "--from", files("t.parquet", pa.table({"id": range(10)})))
    ok(root, "create", "index", "t", "--column", "id", "--type", "btree")
    location = str(root.local_path / "t.lance")
    assert lance.dataset(location).version == 2
    restored = ok(root, "restore", "t", "--to-version", "1", "--yes", "--json").json()
    assert restored["status"] == "restored" and restored["new_version"] == 3
    assert lance.dataset(location).describe_indices() == []
    again = ok(root, "restore", "t", "--to-version", "1", "--json").json()
    assert again["status"] == "nothing to restore" and lance.dataset(location).version == 3
