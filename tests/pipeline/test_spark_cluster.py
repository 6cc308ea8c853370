"""The pipeline on a real standalone Spark cluster (a master and a worker on 127.0.0.1).

Every `lancens` run here is a real subprocess with its own driver and `--master spark://...`;
its tasks run in executors the worker launched, so nothing relies on the driver's process or
its in-memory state. That is the run that shows the jobs are cluster-ready.
"""

from __future__ import annotations

import random
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Result, region_root, run_cli
from join_reference import ON, brute_join, build, orders_and_customers, result_rows
from spark_cluster import Cluster, standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """One master and one worker (2 cores, 2 GB) for this module; always stopped."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


def events(n: int, rng: random.Random) -> pa.Table:
    """Rows of ids 0..n-1, each in a random region with a random amount."""
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "region": pa.array([rng.choice(["eu", "us", "ap"]) for _ in range(n)]),
            "amount": pa.array([rng.randrange(1000) for _ in range(n)], pa.int64()),
        }
    )


def on_cluster(cluster: Cluster, *args: str) -> Result:
    """`lancens ARGS --master spark://...` as a user runs it, its driver a fresh process."""
    return run_cli(*args, "--master", cluster.master_url, env=cluster.env())


def test_join_on_a_standalone_cluster(spark_cluster, tmp_path):
    orders, customers = orders_and_customers(1200, 500)
    left = build(tmp_path, "orders", orders, ["bucket(16, customer_id) as cb"], run_cli)
    right = build(tmp_path, "customers", customers, ["bucket(8, customer_id) as cb"], run_cli)
    assert spark_cluster.executor_dirs() == []

    done = on_cluster(
        spark_cluster, "join", left, right, *ON, "--how", "left", "--limit", "0", "--json"
    )

    assert done.exit_code == 0, done.stderr
    payload = done.json()
    assert payload["storage_partitioned"] is True
    expected = brute_join(orders, customers, ["customer_id"], ["customer_id"], "left")
    assert result_rows(payload) == expected
    # the rows were joined by executors the worker launched, not by the driver
    assert spark_cluster.executor_dirs(), "no executor ran on the worker"
    # the master marks the application completed when the driver's JVM has told it so, which
    # may be a moment after the command's process has exited
    deadline = time.monotonic() + 60
    while True:
        finished = spark_cluster.state().get("completedapps", [])
        if any(app.get("name") == "lancens" for app in finished) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert any(app.get("name") == "lancens" for app in finished)


def test_ingest_and_scan_on_a_standalone_cluster(spark_cluster, tmp_path):
    """Executors write the fragments and the driver (a fresh process) commits; then a scan on
    the cluster prunes and filters as brute force over the source says."""
    n = 3000
    source = events(n, random.Random(11))
    path = tmp_path / "events.parquet"
    pq.write_table(source, path)
    root = str(tmp_path / "events")
    region_root(root, path)

    ingested = on_cluster(spark_cluster, "--root", root, "ingest", str(path), "--json")
    assert ingested.exit_code == 0, ingested.stderr
    report = ingested.json()
    assert report["rows"] == n and report["partitions_created"] == 12

    scanned = on_cluster(
        spark_cluster, "--root", root, "scan", "--where", "region = 'eu' AND amount < 500",
        "--columns", "id", "--json",
    )  # fmt: skip
    assert scanned.exit_code == 0, scanned.stderr
    expected = sorted(
        i
        for i, r, a in zip(
            *(source[c].to_pylist() for c in ("id", "region", "amount")), strict=True
        )
        if r == "eu" and a < 500
    )
    assert sorted(row[0] for row in scanned.json()["rows"]) == expected


def test_merge_on_a_standalone_cluster_leaves_what_a_merge_in_this_process_leaves(
    spark_cluster, tmp_path
):
    """The source's rows are read and written by executors on the worker; the driver (a fresh
    process) matches the keys and publishes in one `__manifest` commit. Rows that change region
    move partitions; new keys are inserted."""
    rng = random.Random(12)
    n = 2000
    seed = tmp_path / "existing.parquet"
    pq.write_table(events(n, rng), seed)
    there = tmp_path / "there"
    region_root(str(there), seed)
    assert run_cli("--root", str(there), "write", "--from", str(seed)).exit_code == 0
    here = tmp_path / "here"
    shutil.copytree(there, here, symlinks=True)

    keys = sorted(rng.sample(range(n), 300)) + list(range(n, n + 100))  # 300 matched, 100 new
    corrections = pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "region": pa.array([rng.choice(["eu", "us", "ap", "sa"]) for _ in keys]),
            "amount": pa.array([-k for k in keys], pa.int64()),
        }
    )
    folder = tmp_path / "corrections"
    folder.mkdir()
    for part in range(4):  # a directory of files, as a job's output lands
        pq.write_table(corrections.slice(part * 100, 100), folder / f"part-{part}.parquet")
    single = tmp_path / "corrections.parquet"
    pq.write_table(corrections, single)
    mine = run_cli("--root", str(here), "--json", "merge", "--from", str(single), "--on", "id")
    assert mine.exit_code == 0, mine.stderr

    before = set(spark_cluster.executor_dirs())
    merged = on_cluster(
        spark_cluster, "--root", str(there), "--json", "merge", "--from", str(folder), "--on", "id"
    )
    assert set(spark_cluster.executor_dirs()) - before, "no executor ran the merge's tasks"

    assert merged.exit_code == 0, merged.stderr
    for key in ("rows_matched", "rows_updated", "rows_inserted"):
        assert merged.json()[key] == mine.json()[key], key
    assert merged.json()["rows_matched"] == 300 and merged.json()["rows_inserted"] == 100
    assert published(there) == published(here)
    assert run_cli("--root", str(there), "check").exit_code == 0


def published(root) -> list[tuple]:
    """Every row the partitioned root publishes, as pylance reads it."""
    done = run_cli(
        "--root", str(root), "scan", "--columns", "id,region,amount", "--limit", "0", "--json"
    )
    assert done.exit_code == 0, done.stderr
    return sorted(tuple(row) for row in done.json()["rows"])
