"""`prune --compact` racing a partitioned write never publishes the write's rows early, nor
twice: a writer commits its partition table version (not yet published) right between
prune's look at the table and its compaction (a seam pauses prune there)."""

from __future__ import annotations

import json
import os

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke

from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune import compact as prune_compact

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("k", pa.string())])


def published_ids(ns: Namespace) -> list[int]:
    ids = []
    for row in ns.snapshot().rows:
        if row["object_type"] == "table" and row.get("read_version"):
            dataset = lance.dataset(ns.storage.uri(row["location"]), version=row["read_version"])
            ids += dataset.to_table().column("id").to_pylist()
    return sorted(ids)


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "ns"
    path.mkdir()
    pq.write_table(SCHEMA.empty_table(), tmp_path / "schema.parquet")
    args = ("--root", str(path))
    assert (
        invoke(
            *args,
            "add-partition-spec",
            "--schema",
            str(tmp_path / "schema.parquet"),
            "--field",
            "k",
        ).exit_code
        == 0
    )
    for start in (0, 10, 20):  # three fragments in the one partition: worth compacting
        pq.write_table(
            pa.table({"id": list(range(start, start + 10)), "k": ["a"] * 10}, schema=SCHEMA),
            tmp_path / f"w{start}.parquet",
        )
        assert invoke(*args, "write", "--from", str(tmp_path / f"w{start}.parquet")).exit_code == 0
    return path


def test_a_write_committed_during_compaction_is_published_once_and_only_by_itself(
    root, monkeypatch
):
    ns = Namespace.from_properties({"root": str(root)})
    table = next(r for r in ns.snapshot().rows if r["object_type"] == "table")
    uri = ns.storage.uri(table["location"])
    writer_rows = pa.table({"id": [100, 101], "k": ["a", "a"]}, schema=SCHEMA)
    committed = {}

    def writer_commits(location: str) -> None:  # the writer's partition-table commit
        if location == table["location"] and not committed:
            committed["version"] = lance.write_dataset(writer_rows, uri, mode="append").version

    monkeypatch.setattr(prune_compact, "before_compaction", writer_commits)
    before = published_ids(ns)
    result = invoke("--root", str(root), "prune", "--compact", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    assert committed, "the seam did not run"
    assert published_ids(ns) == before  # nothing of the writer is visible yet

    # the writer now publishes its version in its own __manifest commit
    ns.manifest.mutate(
        lambda snapshot, edit: edit.replace(table["object_id"], read_version=committed["version"])
    )
    assert published_ids(ns) == sorted(before + [100, 101])  # once, not twice
    assert invoke("--root", str(root), "check").exit_code == 0


def test_a_compaction_a_writer_beat_leaves_no_file_behind(root, monkeypatch):
    """A commit the compaction cannot rebase over (a partitioned write first restores the
    published version) lands between prune's plan and its commit: the writer wins, the files
    the compaction wrote are gone at once, and the report says the next run compacts."""
    ns = Namespace.from_properties({"root": str(root)})
    table = next(r for r in ns.snapshot().rows if r["object_type"] == "table")
    uri = ns.storage.uri(table["location"])
    data = f"{root}/{table['location']}/data"

    def writer_restores(location: str) -> None:
        if location == table["location"]:
            lance.dataset(uri, version=lance.dataset(uri).version).restore()

    monkeypatch.setattr(prune_compact, "before_compaction", writer_restores)
    files_before = set(os.listdir(data))
    result = invoke("--root", str(root), "prune", "--compact", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    notes = [n for t in report["tables"] for n in t["notes"]]
    assert any("a writer committed to it meanwhile" in n for n in notes), report
    assert set(os.listdir(data)) == files_before
    assert invoke("--root", str(root), "check").exit_code == 0
