"""`prune --optimize-indexes` racing a partitioned write: the writer commits its partition
table version (not yet published) right between prune's look at the table and its index
commit (a seam pauses prune there). Nothing of the writer becomes visible through prune, and
once the writer publishes, every row is there exactly once."""

from __future__ import annotations

import lance
import pyarrow.parquet as pq
from helpers import ok, partition_tables, published_rows
from index_data import rows

from lancens_cli.service.indexes import optimize
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.write import write_partitioned


def test_a_write_during_the_index_work_is_published_once_and_only_by_itself(
    three_partitions, tmp_path, monkeypatch
):
    root = three_partitions
    ok(root, "create", "index", "--column", "id", "--type", "btree")
    pq.write_table(rows(7000, 30, ("a",)), tmp_path / "late.parquet")
    ok(root, "write", "--from", str(tmp_path / "late.parquet"))  # rows the index misses
    table = next(t for t in partition_tables(root) if t["partition_field_k"] == "a")
    uri = str(root.local_path / table["location"])
    committed = {}

    def writer_commits(location: str) -> None:  # the writer's partition-table commit
        if location == table["location"] and not committed:
            written = lance.write_dataset(rows(8000, 2, ("a",)), uri, mode="append")
            committed["version"] = written.version

    monkeypatch.setattr(optimize, "before_index_work", writer_commits)
    before = sorted(published_rows(root).column("id").to_pylist())
    report = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    assert committed, "the seam did not run"
    entry = next(t for t in report["tables"] if t["object_id"] == table["object_id"])
    assert any("a writer committed" in n for n in entry["notes"]), entry
    assert all(e["object_id"] != table["object_id"] for e in report["indexed"])
    assert sorted(published_rows(root).column("id").to_pylist()) == before  # nothing early

    ns = Namespace.from_properties(root.properties)  # the writer publishes its own version
    ns.manifest.mutate(
        lambda snapshot, edit: edit.replace(table["object_id"], read_version=committed["version"])
    )
    after = published_rows(root).column("id").to_pylist()
    assert sorted(after) == sorted(before + [8000, 8001])  # once, not twice
    assert len(after) == len(set(after))
    # the next run brings the index current on the writer's version, and publishes it
    again = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    assert any(e["object_id"] == table["object_id"] and e["published"] for e in again["indexed"])
    row = next(t for t in partition_tables(root) if t["object_id"] == table["object_id"])
    ds = lance.dataset(uri, version=row["read_version"])
    assert ds.stats.index_stats("id_idx")["num_unindexed_rows"] == 0
    assert sorted(published_rows(root).column("id").to_pylist()) == sorted(after)


def test_a_write_published_during_the_run_keeps_its_version(
    three_partitions, tmp_path, monkeypatch
):
    """A writer publishes between prune's index commit and its `__manifest` commit: the
    partition keeps the writer's version (prune's stays unpublished), rows exactly once."""
    root = three_partitions
    ok(root, "create", "index", "--column", "id", "--type", "btree")
    pq.write_table(rows(7000, 30, ("b",)), tmp_path / "late.parquet")
    ok(root, "write", "--from", str(tmp_path / "late.parquet"))
    table = next(t for t in partition_tables(root) if t["partition_field_k"] == "b")
    done = {}
    real = optimize.optimize_table

    def then_a_write(*args, **kwargs):
        found = real(*args, **kwargs)
        if (
            not done and table["location"] in args[0].uri
        ):  # a writer's whole write: its table commit and its __manifest commit
            ns = Namespace.from_properties(root.properties)
            done["write"] = write_partitioned(ns, rows(9100, 3, ("b",)))
        return found

    monkeypatch.setattr(optimize, "optimize_table", then_a_write)
    before = sorted(published_rows(root).column("id").to_pylist())
    report = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    entry = next(e for e in report["indexed"] if e["object_id"] == table["object_id"])
    assert entry["published"] is False
    after = published_rows(root).column("id").to_pylist()
    assert sorted(after) == sorted(before + [9100, 9101, 9102])
    assert len(after) == len(set(after))
