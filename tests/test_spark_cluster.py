"""The pipeline on a real standalone Spark cluster (a master and a worker on 127.0.0.1).

Every `lancens` run here is a real subprocess with its own driver and `--master spark://...`;
its tasks run in executors the worker launched, so nothing relies on the driver's process or
its in-memory state. That is the run that shows the jobs are cluster-ready.
"""

from __future__ import annotations

import pytest
from conftest import Result, run_cli
from spark_cluster import Cluster, standalone_cluster
from test_spark_join import ON, brute_join, build, orders_and_customers, result_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """One master and one worker (2 cores, 2 GB) for this module; always stopped."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


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
    finished = spark_cluster.state().get("completedapps", [])
    assert any(app.get("name") == "lancens" for app in finished)

    # ingest + scan on the cluster go here once `lancens ingest` / `lancens scan` exist:
    #   on_cluster(spark_cluster, "--root", root, "ingest", str(source), "--json")
    #   on_cluster(spark_cluster, "--root", root, "scan", "--where", "...", "--json")
