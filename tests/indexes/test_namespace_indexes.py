"""`create index` over a partitioned namespace, a write that adds a partition and rows to two
others, then `prune --optimize-indexes`: every published partition table has every index with
no row missing, and readers of earlier `__manifest` versions read as before."""

from __future__ import annotations

import lance
import pyarrow as pa
import pyarrow.parquet as pq
from helpers import manifest, ok, partition_tables, published_rows
from index_data import rows

INDEXES = (
    ("--column", "id", "--type", "btree"),
    ("--column", "text", "--type", "fts"),
    ("--column", "vec", "--type", "ivf_pq", "--num-partitions", "2", "--num-sub-vectors", "4"),
)
NAMES = {"id_idx", "text_idx", "vec_idx"}


def index_state(root, row) -> dict[str, int]:
    ds = lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])
    return {
        i.name: ds.stats.index_stats(i.name)["num_unindexed_rows"] for i in ds.describe_indices()
    }


def readings(root, manifest_version: int) -> dict[str, list[int]]:
    """What a reader of `__manifest` at that version reads: each table at its read_version."""
    at = lance.dataset(str(root.local_path / "__manifest"), version=manifest_version)
    found = {}
    for row in at.to_table(filter="object_type = 'table'").to_pylist():
        ds = lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])
        found[row["object_id"]] = sorted(ds.to_table(columns=["id"]).column("id").to_pylist())
    return found


def test_indexes_follow_the_namespace(three_partitions, tmp_path):
    root = three_partitions
    created = [ok(root, "create", "index", *args, "--json").json() for args in INDEXES]
    for result in created:
        assert result["definition_stored"] and len(result["tables"]) == 3
        assert all(t["published"] for t in result["tables"])
    for row in partition_tables(root):
        assert set(index_state(root, row)) == NAMES
    history = {v["version"]: readings(root, v["version"]) for v in manifest(root).versions()}

    more = pa.concat_tables([rows(5000, 300, ("d",)), rows(6000, 60, ("a", "b"))])
    pq.write_table(more, tmp_path / "more.parquet")  # a new partition (enough rows to train PQ)
    ok(root, "write", "--from", str(tmp_path / "more.parquet"))
    tables = partition_tables(root)
    assert len(tables) == 4
    new = next(t for t in tables if t["partition_field_k"] == "d")
    assert set(index_state(root, new)) == NAMES  # built at its first write
    stale = [t for t in tables if any(index_state(root, t).values())]
    assert {t["partition_field_k"] for t in stale} >= {"a", "b"}
    history.update({v["version"]: readings(root, v["version"]) for v in manifest(root).versions()})
    expected = sorted(published_rows(root).column("id").to_pylist())

    report = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    assert report["indexes_published_in"] is not None
    assert all(entry["published"] for entry in report["indexed"])
    for row in partition_tables(root):
        assert index_state(root, row) == dict.fromkeys(NAMES, 0), row["partition_field_k"]
    assert sorted(published_rows(root).column("id").to_pylist()) == expected
    for version, seen in history.items():  # time travel reads as it did
        assert readings(root, version) == seen, version

    described = ok(root, "describe", "--json").json()["manifest"]["partitioning"]["indexes"]
    assert {(d["name"], d["lacking"], d["missing_rows"]) for d in described} == {
        (name, 0, 0) for name in NAMES
    }


def test_a_table_with_a_write_in_flight_is_left_alone_and_listed(three_partitions):
    """A writer's unpublished version: `create index` and `prune --optimize-indexes` leave the
    table as published (its next write, or a later run, brings the index)."""
    root = three_partitions
    first = partition_tables(root)[0]
    lance.write_dataset(
        rows(9000, 5, ("a",)), str(root.local_path / first["location"]), mode="append"
    )
    before = sorted(published_rows(root).column("id").to_pylist())
    result = ok(root, "create", "index", "--column", "id", "--type", "btree", "--json").json()
    held = next(t for t in result["tables"] if t["location"] == first["location"])
    assert held["version_after"] is None and "in flight" in held["note"]
    report = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    entry = next(t for t in report["tables"] if t["object_id"] == first["object_id"])
    assert any("in flight" in n for n in entry["notes"])
    row = next(t for t in partition_tables(root) if t["object_id"] == first["object_id"])
    assert row["read_version"] == first["read_version"]
    assert sorted(published_rows(root).column("id").to_pylist()) == before
