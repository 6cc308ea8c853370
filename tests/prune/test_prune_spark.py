"""`lancens prune --master`: the per-table work as Spark tasks gives what the local run gives.

Two namespaces are built alike (tests/prune/prune_namespace.py: a table of 20 versions with a tag, a
branch and two shallow clones, a partition table with a dead write's version, debris); one is
pruned in this process's threads, the other as Spark tasks on the session-wide local[2] session
(in-process `invoke` reuses it). The reports must agree table by table and every table must read
the same afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import country_rows
from helpers import Root, invoke, tree_snapshot
from prune_namespace import ABANDONED, assert_same, build, reachable, versions

pytestmark = pytest.mark.spark

FAST = ["--older-than", "1s", "--grace", "1s", "--force"]
SPARK = ["--master", "local[2]"]


def _root(tmp_path, name: str) -> Root:
    path = tmp_path / name
    path.mkdir()
    return Root(str(path), {}, path)


def _partition_names(path) -> dict[str, str]:
    """Partition tables have random ids: name them by the country they hold, in both roots."""
    manifest = lance.dataset(str(path / "__manifest"))
    names = {}
    for row in manifest.to_table(filter="read_version IS NOT NULL").to_pylist():
        table = lance.dataset(str(path / row["location"]), version=row["read_version"])
        names[row["object_id"]] = f"partition {table.to_table().column('country')[0]}"
    return names


def _normal(found: dict, names: dict[str, str]) -> dict:
    """`reachable()` with partition tables under their country's name."""
    return {names.get(k.removeprefix("table "), k): v for k, v in found.items()}


def _comparable(report: dict, names: dict[str, str]) -> dict:
    """What must agree between two runs over namespaces built alike."""
    tables = {}
    for t in report["tables"]:
        key = names.get(t["object_id"], t["object_id"] or t["location"])
        tables[key] = {
            "status": t["status"],
            "versions_removed": sorted(t["versions_removed"]),
            "unpublished_removed": t["unpublished_removed"],
            "unreferenced_removed": t["unreferenced_removed"],
            "files_removed": t["files_removed"],
            "protected": t["protected"],
            "notes": t["notes"],
            "error": t["error"],
        }
    manifest = report["manifest"] or {}
    return {
        "tables": tables,
        "manifest_versions_removed": len(manifest.get("versions_removed", [])),
        "debris": sorted((d["code"], d["action"]) for d in report["debris"]),
        "totals": {k: v for k, v in report["totals"].items() if k != "bytes_freed"},
    }


@pytest.fixture
def twins(tmp_path):
    local, spark_root = _root(tmp_path, "local"), _root(tmp_path, "spark")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    built_local = build(local, tmp_path / "a")
    built_spark = build(spark_root, tmp_path / "b")
    time.sleep(1.2)  # every version and file is now older than the 1 s window
    return (local, built_local), (spark_root, built_spark)


def test_spark_prune_gives_the_local_result(spark, twins):
    (local, built_local), (remote, built_spark) = twins
    local_names, spark_names = (
        _partition_names(local.local_path),
        _partition_names(remote.local_path),
    )
    assert sorted(local_names.values()) == sorted(spark_names.values())
    before = reachable(built_spark)
    # the two namespaces read alike
    assert_same(_normal(reachable(built_local), local_names), _normal(before, spark_names))

    by_threads = invoke(*local.args, "prune", *FAST, "--yes", "--json")
    assert by_threads.exit_code == 0, by_threads.stderr
    assert "Spark" not in by_threads.stderr  # LANCENS_SPARK_MASTER alone does not ask for Spark
    by_spark = invoke(*remote.args, "prune", *FAST, "--yes", "--json", *SPARK)
    assert by_spark.exit_code == 0, by_spark.stderr
    assert "Spark tasks on local[2]" in by_spark.stderr

    local_report, spark_report = by_threads.json(), by_spark.json()
    assert _comparable(spark_report, spark_names) == _comparable(local_report, local_names)
    assert spark_report["totals"]["bytes_freed"] > 0
    plain = next(t for t in spark_report["tables"] if t["object_id"] == "plain$t")
    assert sorted(plain["versions_removed"]) == built_spark.removable
    assert plain["unreferenced_removed"] >= 1

    # What each table reads afterwards: the same in both, and as before the prune.
    assert_same(before, reachable(built_spark))
    assert_same(
        _normal(reachable(built_local), local_names), _normal(reachable(built_spark), spark_names)
    )
    assert versions(built_spark.table) == versions(built_local.table) == [3, 5, 9, 20]
    assert versions(built_spark.partition) == [built_spark.published]
    assert not (built_spark.path / ABANDONED).exists()
    assert not built_spark.uncommitted.exists()
    check = invoke(*remote.args, "check")
    assert check.exit_code == 0, check.stdout + check.stderr


def test_spark_dry_run_changes_nothing_and_plans_the_local_work(spark, twins):
    _, (root, built) = twins
    snapshot = tree_snapshot(built.path)
    by_spark = invoke(*root.args, "prune", *FAST, "--dry-run", "--json", *SPARK)
    assert by_spark.exit_code == 0, by_spark.stderr
    assert tree_snapshot(built.path) == snapshot  # byte for byte, no lease either
    by_threads = invoke(*root.args, "prune", *FAST, "--dry-run", "--json")
    assert by_threads.exit_code == 0, by_threads.stderr
    assert by_spark.json() == by_threads.json()
    plain = next(t for t in by_spark.json()["tables"] if t["object_id"] == "plain$t")
    assert plain["status"] == "would prune"
    assert sorted(plain["versions_removed"]) == built.removable


def test_a_table_failing_in_a_task_exits_6_and_the_rest_is_done(spark, tmp_path):
    root = _root(tmp_path, "ns")
    built = build(root, tmp_path)
    other = next(p for p in built.path.iterdir() if p.name.endswith("more$u"))
    for i in range(3):
        lance.write_dataset(pa.table({"a": pa.array([i], pa.int64())}), other, mode="append")
    time.sleep(1.2)
    # An old version's manifest is damaged: planning (one listing, the latest version) passes,
    # the cleanup in the task, which reads the versions it removes, fails.
    oldest = sorted((other / "_versions").glob("*.manifest"))[-1]  # V2 naming: oldest last
    stat = oldest.stat()
    oldest.write_bytes(b"not a manifest")
    os.utime(oldest, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # still an old version
    result = invoke(*root.args, "prune", *FAST, "--yes", "--json", *SPARK)
    assert result.exit_code == 6, result.stderr
    assert "more.u" in result.stderr  # as every command takes it
    tables = {t["object_id"]: t for t in result.json()["tables"]}
    assert tables["more$u"]["status"] == "failed"
    assert tables["more$u"]["protected"]  # the driver planned it; it failed in the task
    assert tables["plain$t"]["status"] == "pruned"
    assert versions(built.table) == [3, 5, 9, 20]
    assert result.json()["manifest"]["status"] != "failed"  # the driver finished its part


def test_a_profiles_spark_table_sends_prune_to_spark(spark, tmp_path, monkeypatch):
    root = _root(tmp_path, "ns")
    built = build(root, tmp_path)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[profiles.big]\nroot = "{root.uri}"\n[profiles.big.spark]\nmaster = "local[2]"\n'
    )
    monkeypatch.setenv("LANCENS_CONFIG", str(config))
    time.sleep(1.2)
    result = invoke("--profile", "big", "prune", *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    assert "Spark tasks on local[2]" in result.stderr
    assert versions(built.table) == [3, 5, 9, 20]


def test_spark_compact_publishes_what_the_tasks_compacted(spark, tmp_path):
    """Tasks compact partition tables; the driver publishes them in one `__manifest` commit."""
    root = _root(tmp_path, "ns")
    data = tmp_path / "rows.parquet"
    pq.write_table(country_rows(0), data)
    spec = invoke(*root.args, "add-partition-spec", "--schema", str(data), "--field", "country")
    assert spec.exit_code == 0, spec.stderr
    for start in (0, 10, 20):
        pq.write_table(country_rows(start), data)
        assert invoke(*root.args, "write", "--from", str(data)).exit_code == 0
    before = lance.dataset(str(root.local_path / "__manifest")).version

    def published():
        manifest = lance.dataset(str(root.local_path / "__manifest"))
        found = {}
        for row in manifest.to_table(filter="object_type = 'table'").to_pylist():
            ds = lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])
            found[row["object_id"]] = (ds.to_table().sort_by("id"), len(ds.get_fragments()))
        return found

    old = published()
    assert all(fragments == 3 for _, fragments in old.values())
    result = invoke(*root.args, "prune", "--compact", "--yes", "--json", *SPARK)
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert len(report["compacted"]) == len(old)
    assert all(c["published"] for c in report["compacted"])
    assert report["compacted_published_in"] == before + 1
    new = published()
    for key, (table, _) in old.items():
        assert new[key][0].equals(table)
        assert new[key][1] == 1


@pytest.mark.s3
def test_spark_prune_on_s3(spark, s3_root, tmp_path):
    """The tasks open the tables with the root's storage options, shipped with the work."""
    opts = s3_root.storage_options
    data = tmp_path / "a.parquet"
    pq.write_table(pa.table({"a": pa.array([0], pa.int64())}), data)
    assert invoke(*s3_root.args, "create", "namespace", "n").exit_code == 0
    for name in ("n.t", "n.u"):
        assert invoke(*s3_root.args, "create", "table", name, "--from", str(data)).exit_code == 0
    manifest = lance.dataset(f"{s3_root.uri}/__manifest", storage_options=opts)
    locations = {r["object_id"]: r["location"] for r in manifest.to_table().to_pylist()}
    uris = {oid: f"{s3_root.uri}/{locations[oid]}" for oid in ("n$t", "n$u")}
    for uri in uris.values():
        for i in range(1, 5):
            lance.write_dataset(
                pa.table({"a": pa.array([i], pa.int64())}), uri, mode="append", storage_options=opts
            )
    lance.dataset(uris["n$t"], storage_options=opts).tags.create("keep", 2)
    latest = {oid: lance.dataset(u, storage_options=opts).to_table() for oid, u in uris.items()}
    time.sleep(1.2)
    result = invoke(*s3_root.args, "prune", *FAST, "--yes", "--json", *SPARK)
    assert result.exit_code == 0, result.stderr
    tables = {t["object_id"]: t for t in result.json()["tables"]}
    assert sorted(tables["n$t"]["versions_removed"]) == [1, 3, 4]
    assert sorted(tables["n$u"]["versions_removed"]) == [1, 2, 3, 4]
    for oid, uri in uris.items():
        ds = lance.dataset(uri, storage_options=opts)
        assert [v["version"] for v in ds.versions()] == ([2, 5] if oid == "n$t" else [5])
        assert ds.to_table().equals(latest[oid])
    assert invoke(*s3_root.args, "check").exit_code == 0


_WITHOUT_PYSPARK = """
import json, sys

class NoPyspark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NoPyspark())
sys.argv = ["lancens", *sys.argv[1:]]
from lancens_cli.cli.app import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stdout.flush()
print("@@" + json.dumps([code, "pyspark" in sys.modules]))
"""


def _without_pyspark(*args: str) -> tuple[int, bool, str]:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PYSPARK, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"LANCE_LOG": "error", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    import json

    code, loaded = json.loads(done.stdout.rsplit("@@", 1)[1])
    return code, loaded, done.stderr


def test_without_pyspark_master_says_how_to_install_it_and_local_prune_runs(tmp_path):
    root = _root(tmp_path, "ns")
    build(root, tmp_path)
    snapshot = tree_snapshot(root.local_path)
    code, _, stderr = _without_pyspark(*root.args, "prune", *FAST, "--yes", *SPARK)
    assert code == 2, stderr
    assert stderr.count("\n") == 1, stderr
    assert "pip install 'lancens-cli[spark]'" in stderr
    assert tree_snapshot(root.local_path) == snapshot  # refused before anything changed
    code, loaded, stderr = _without_pyspark(*root.args, "prune", *FAST, "--yes")
    assert code in (0, None), stderr
    assert not loaded
    code, loaded, stderr = _without_pyspark("prune", "--help")
    assert code in (0, None) and not loaded, stderr
