"""`lancens restore`: a past version back as the newest, as an operator undoes a bad write.

The oracle reads with pylance alone, never with lancens: what `__manifest` version V publishes
(each partition table row's location and ref) and the rows each published table version holds.
After every restore to V, what the newest version publishes must equal what V publishes, row
for row; `check` must be healthy; the history in between must stay readable. A writer racing
restores in another process must never lose a row silently: every write lands on what was
published when it committed, and every restore publishes exactly its version's state.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time

import lance
import pyarrow as pa
import pytest
from data import events
from helpers import cli, ok, run_cli, tree_snapshot

RESTORE_MESSAGE = "lancens restore to version "


# --------------------------------------------------------------------------- the oracle


def manifest_versions(root) -> list[int]:
    ds = lance.dataset(str(root.local_path / "__manifest"))
    return sorted(int(v["version"]) for v in ds.versions())


def published(root, version: int | None = None) -> dict[str, tuple]:
    """object id -> (location, ref, sorted ids) of every partition table `version` publishes
    (None: the newest), read with pylance only."""
    manifest = lance.dataset(str(root.local_path / "__manifest"), version=version)
    found = {}
    for row in manifest.to_table().to_pylist():
        if row["object_type"] != "table" or "$" not in row["object_id"]:
            continue
        location = str(root.local_path / row["location"])
        tag, branch, number = row.get("read_tag"), row.get("read_branch"), row.get("read_version")
        if tag is not None:
            table = lance.dataset(location, version=tag)
        elif branch is not None:
            table = lance.dataset(location).checkout_version((branch, number))
        else:
            table = lance.dataset(location, version=number)
        ids = sorted(table.to_table(columns=["id"]).column("id").to_pylist())
        found[row["object_id"]] = (row["location"], (number, branch, tag), ids)
    return found


def all_ids(state: dict[str, tuple]) -> list[int]:
    return sorted(i for _, _, ids in state.values() for i in ids)


def commit_message(root, version: int) -> str | None:
    ds = lance.dataset(str(root.local_path / "__manifest"))
    transaction = ds.read_transaction(version)
    return (transaction.transaction_properties or {}).get("__lance_commit_message")


def healthy(root) -> None:
    result = cli(root, "check")
    assert result.exit_code == 0, (result.stdout, result.stderr)


# --------------------------------------------------------------------------- a history


@pytest.fixture
def history(partitioned, files):
    """A partitioned root with every kind of commit an operator meets: appends, a tag, a write
    to a branch (published as read_branch), a schema change, a second spec, a compaction."""
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(60)))
    ok(root, "write", "--from", files("b.parquet", events(40, seed=1, start=1000)))
    ok(root, "evolve-schema", "--add", "score int64")
    ok(root, "add-partition-spec", "--field", "country")
    ok(root, "write", "--from", files("d.parquet", events(30, seed=3, start=3000)))
    ok(root, "prune", "--compact", "--yes")
    ok(root, "write", "--from", files("e.parquet", events(10, seed=4, start=4000)))
    ok(root, "tag-partitions", "nightly")
    branch = events(12, seed=2, start=2000, countries=("US",))
    ok(root, "write", "--branch", "dev", "--from", files("c.parquet", branch))
    return root


def contents(state: dict[str, tuple]) -> dict[str, tuple]:
    """What readers read of each partition table: its location and rows (not which version)."""
    return {oid: (location, ids) for oid, (location, _, ids) in state.items()}


def test_restore_to_every_version_and_back_publishes_exactly_that_version(history):
    root = history
    versions = manifest_versions(root)
    latest = versions[-1]
    expected = {v: published(root, v) for v in versions}
    for target in [*versions, latest]:
        before = manifest_versions(root)[-1]
        was = published(root, before)
        result = ok(root, "restore", "--to-version", str(target), "--yes", "--json").json()
        newest = manifest_versions(root)[-1]
        now = published(root)
        assert contents(now) == contents(expected[target]), target
        brought = {c["object_id"]: c for c in result["changes"] if c["brought_from"] is not None}
        for oid, (_, ref, _) in now.items():
            if oid in brought:  # a version of its own at N's rows (and today's schema)
                assert brought[oid]["brought_from"] == expected[target][oid][1][0]
                assert ref[0] > brought[oid]["brought_from"]
            elif oid in {c["object_id"] for c in result["changes"]}:
                assert ref == expected[target][oid][1], (target, oid)
            else:  # untouched: what it published already held N's rows (an earlier restore)
                assert ref == was[oid][1], (target, oid)
        assert result["restored_to"] == target and result["planned_on"] == before
        if now == was:
            assert result["changes"] == [] and newest == before
        else:
            assert result["new_version"] == newest == before + 1
            assert commit_message(root, newest) == f"{RESTORE_MESSAGE}{target}"
        changed = {c["object_id"] for c in result["changes"]}
        assert changed == {oid for oid in now.keys() | was.keys() if now.get(oid) != was.get(oid)}
        healthy(root)
    for version, state in expected.items():  # the history in between stays readable
        assert published(root, version) == state


def test_restore_result_says_what_changed_with_rows_before_and_after(history):
    root = history
    versions = manifest_versions(root)
    target = versions[2]  # after the first write
    now, then = published(root), published(root, target)
    before = tree_snapshot(root.local_path)
    dry = ok(root, "restore", "--to-version", str(target), "--dry-run", "--json").json()
    assert tree_snapshot(root.local_path) == before  # a dry run changes nothing
    assert dry["dry_run"] is True and dry["new_version"] is None
    by_table = {c["object_id"]: c for c in dry["changes"]}
    for object_id in now.keys() | then.keys():
        if now.get(object_id) == then.get(object_id):
            assert object_id not in by_table
            continue
        change = by_table[object_id]
        if object_id not in then:
            assert change["action"] == "unpublished" and change["after"] is None
        elif object_id not in now:
            assert change["action"] == "republished" and change["before"] is None
        else:
            assert change["action"] == "moved"
        assert change["rows_before"] == (len(now[object_id][2]) if object_id in now else None)
        assert change["rows_after"] == (len(then[object_id][2]) if object_id in then else None)
        assert isinstance(change["partition"], dict) and change["spec_version"] in (1, 2)
    assert any("schema stay" in note for note in dry["notes"])
    text = ok(root, "restore", "--to-version", str(target), "--dry-run")
    assert len(text.stdout.strip().splitlines()) == len(dry["changes"])  # a line per partition
    assert "would restore __manifest" in text.stderr


def test_after_a_restore_writes_prune_and_time_travel_keep_what_is_published(history, files):
    root = history
    versions = manifest_versions(root)
    target = versions[3]
    ok(root, "restore", "--to-version", str(target), "--yes")
    restored = published(root)
    # a write after the restore lands on the restored state
    ok(root, "write", "--from", files("f.parquet", events(8, seed=5, start=5000)))
    assert all_ids(published(root)) == sorted(all_ids(restored) + list(range(5000, 5008)))
    after_write = published(root)
    ok(root, "prune", "--yes")
    assert published(root) == after_write
    for version in manifest_versions(root):
        published(root, version)  # every kept version still reads
    healthy(root)
    lines = ok(root, "versions", "__manifest", "--json").json()["versions"]
    assert any(line["message"] == f"{RESTORE_MESSAGE}{target}" for line in lines)
    # a restore forward brings the later partitions back while their version is kept
    ok(root, "restore", "--to-version", str(versions[-1]), "--yes")
    assert contents(published(root)) == contents(published(root, versions[-1]))
    healthy(root)


def test_a_table_is_restored_with_lance_and_keeps_its_history(local_root, files):
    root = local_root
    ok(root, "create", "table", "t", "--from", files("t.parquet", pa.table({"id": range(10)})))
    location = str(root.local_path / "t.lance")
    lance.write_dataset(pa.table({"id": [99]}), location, mode="append")
    lance.dataset(location).delete("id < 5")
    assert lance.dataset(location).version == 3
    moment = lance.dataset(location).versions()[1]["timestamp"].astimezone().isoformat()
    time.sleep(0.01)
    result = ok(root, "restore", "t", "--to-timestamp", moment, "--yes", "--json").json()
    assert result["restored_to"] == 2 and result["new_version"] == 4
    assert (result["rows_before"], result["rows_after"]) == (6, 11)
    assert sorted(lance.dataset(location).to_table().column("id").to_pylist()) == [
        *range(10),
        99,
    ]
    assert lance.dataset(location, version=3).count_rows() == 6  # the history stays
    result = ok(root, "restore", "t", "--to-version", "1", "--yes", "--json").json()
    assert result["new_version"] == 5 and lance.dataset(location).count_rows() == 10


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--yes"], 2, "give exactly one of --to-version"),
        (["--to-version", "1", "--to-timestamp", "2025-01-01", "--yes"], 2, "exactly one"),
        (["--to-version", "x", "--yes"], 2, "'x' is not a whole number"),
        (["--to-timestamp", "yesterday", "--yes"], 2, "not ISO 8601"),
        (["--to-version", "999", "--yes"], 3, "readable versions are 1 to"),
        (["--to-timestamp", "2001-01-01", "--yes"], 3, "no __manifest version was committed"),
        (["--to-version", "2"], 5, "refusing to change what readers see without --yes"),
        (["nope", "--to-version", "1", "--yes"], 3, "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(history, args, code, words):
    root = history
    before = tree_snapshot(root.local_path)
    result = cli(root, "restore", *args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert tree_snapshot(root.local_path) == before


def test_a_partition_table_and_an_unpartitioned_root_are_refused(history, local_root, files):
    table = next(iter(published(history)))
    before = tree_snapshot(history.local_path)
    named = table.replace("$", ".")
    result = cli(history, "restore", named, "--to-version", "1", "--yes")
    assert result.exit_code == 2 and "restore its namespace instead" in result.stderr
    assert tree_snapshot(history.local_path) == before
    other = local_root.local_path.parent / "plain"
    other.mkdir()
    ok_root = ["--root", str(other)]
    assert run_cli(*ok_root, "init").exit_code == 0
    result = run_cli(*ok_root, "restore", "--to-version", "1", "--yes")
    assert result.exit_code == 2 and "name a table to restore" in result.stderr


def test_a_version_whose_tables_prune_removed_is_refused(partitioned, files):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(30)))
    first = manifest_versions(root)[-1]
    ok(root, "write", "--from", files("b.parquet", events(30, seed=1, start=100)))
    ok(root, "write", "--from", files("c.parquet", events(30, seed=2, start=200)))
    # prune with a policy that lets the first write's __manifest version and tables go
    ok(root, "prune", "--yes", "--older-than", "0s", "--retain", "1", "--grace", "0s", "--force")
    readable = manifest_versions(root)
    if first in readable:
        pytest.fail(f"prune kept __manifest version {first}: {readable}")
    before = tree_snapshot(root.local_path)
    result = cli(root, "restore", "--to-version", str(first), "--yes")
    assert result.exit_code == 3 and "does not exist or was pruned" in result.stderr
    assert tree_snapshot(root.local_path) == before


# --------------------------------------------------------------------------- a racing writer

WRITER = """
import sys, subprocess
root, folder, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(count):
    done = subprocess.run(
        [sys.executable, "-m", "lancens_cli", "--root", root, "write", "--from",
         f"{folder}/w{i}.parquet"], capture_output=True, text=True)
    print(i, done.returncode, done.stderr.strip().replace("\\n", " | "), flush=True)
"""


@pytest.mark.slow
def test_a_writer_racing_restores_loses_nothing_silently(partitioned, files, tmp_path):
    root = partitioned
    ok(root, "write", "--from", files("base.parquet", events(40)))
    writes = 12
    for i in range(writes):
        files(f"w{i}.parquet", events(5, seed=10 + i, start=10_000 * (i + 1)))
    env = {**os.environ, "LANCE_LOG": "error"}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root.local_path), str(tmp_path), str(writes)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    restores = []
    while writer.poll() is None:
        versions = manifest_versions(root)
        target = versions[max(0, len(versions) - 3)]
        result = run_cli(
            "--root",
            str(root.local_path),
            "restore",
            "--to-version",
            str(target),
            "--yes",
            "--json",
        )
        assert result.exit_code == 0, result.stderr
        restores.append(json.loads(result.stdout))
    out, _ = writer.communicate()
    lines = [line.split(" ", 2) for line in out.strip().splitlines()]
    assert [int(code) for _, code, _ in lines] == [0] * writes, out
    assert any(r["new_version"] for r in restores), "no restore landed while the writer wrote"

    versions = manifest_versions(root)
    states = {v: published(root, v) for v in versions}  # every version stays readable
    written = {frozenset(range(10_000 * (i + 1), 10_000 * (i + 1) + 5)) for i in range(writes)}
    written.add(frozenset(range(40)))  # the first write, before the race
    landed = set()
    for version in versions[1:]:
        message = commit_message(root, version)
        previous = states.get(version - 1)
        if message and message.startswith(RESTORE_MESSAGE):
            target = int(message.removeprefix(RESTORE_MESSAGE))
            # exactly that version's rows, each table on a version of its own made from N's
            assert contents(states[version]) == contents(published(root, target))
            continue
        if previous is None:
            continue
        before, after = all_ids(previous), all_ids(states[version])
        gained = sorted(set(after) - set(before))
        assert set(before) <= set(after), f"version {version} lost rows without a restore"
        if gained:
            assert frozenset(gained) in written, (version, gained)
            landed.add(frozenset(gained))
    assert landed == written  # every write was published at some version
    for result in restores:
        if result["new_version"] is not None:
            assert result["restored_over"] == list(
                range(result["planned_on"] + 1, result["new_version"])
            )
    healthy(root)


@pytest.mark.spark
def test_a_spark_dynamic_overwrite_is_undone_by_a_restore(partitioned, files, monkeypatch):
    """The nightly job's `ingest --mode overwrite` replaced the partitions its input touched
    with bad rows; a restore to the version before it puts every row back."""
    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(80)))
    good = manifest_versions(root)[-1]
    bad = events(6, seed=9, start=9000, countries=("DE",))
    report = ok(root, "--json", "ingest", files("bad.parquet", bad), "--mode", "overwrite")
    assert report.json()["mode"] == "overwrite"
    overwritten = published(root)
    assert all_ids(overwritten) != all_ids(published(root, good))
    result = ok(root, "restore", "--to-version", str(good), "--yes", "--json").json()
    assert contents(published(root)) == contents(published(root, good))
    assert {c["action"] for c in result["changes"]} <= {"moved", "republished", "unpublished"}
    assert all(c["rows_before"] is not None for c in result["changes"] if c["before"])
    healthy(root)
    assert published(root, manifest_versions(root)[-2]) == overwritten  # still readable


def test_a_write_whose_partition_a_restore_moved_to_another_table_lands_there(
    partitioned, files, monkeypatch
):
    """A write has committed its rows to the table that publishes partition DE; before its
    `__manifest` commit, a restore publishes an earlier table of DE. The write rebases onto
    that table: its rows are written there again (never a fragment pointing at the files of
    the other table), and every version reads."""
    from lancens_cli.store.manifest import ManifestStore

    root = partitioned
    de = {"countries": ("DE",), "first": dt.date(2025, 3, 1), "days": 5}
    ok(root, "write", "--from", files("a.parquet", events(5, **de)))
    first = manifest_versions(root)[-1]
    ok(root, "restore", "--to-version", str(first - 1), "--yes")  # DE unpublished
    ok(root, "write", "--from", files("b.parquet", events(4, seed=1, start=100, **de)))
    (table,) = published(root).values()
    assert table[0] != next(iter(published(root, first).values()))[0]  # another table now
    real = ManifestStore.mutate
    moved: list[int] = []

    def restore_first(self, plan, **kwargs):
        if not moved:
            done = run_cli(*root.args, "restore", "--to-version", str(first), "--yes")
            assert done.exit_code == 0, done.stderr
            moved.append(manifest_versions(root)[-1])
        return real(self, plan, **kwargs)

    monkeypatch.setattr(ManifestStore, "mutate", restore_first)
    ok(root, "write", "--from", files("c.parquet", events(3, seed=2, start=200, **de)))
    monkeypatch.undo()
    state = published(root)
    assert [location for location, _, _ in state.values()] == [
        location for location, _, _ in published(root, first).values()
    ]
    assert all_ids(state) == [*range(5), 200, 201, 202]
    for version in manifest_versions(root):
        published(root, version)  # every version reads: no fragment lost its file
    healthy(root)
