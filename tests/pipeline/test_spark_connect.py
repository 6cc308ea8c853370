"""The pipeline through a real Spark Connect server (started from pyspark's own
`sbin/start-connect-server.sh` on 127.0.0.1): `ingest`, `scan` with pruning, `join` and
`prune` with `--remote` (or PySpark's `SPARK_REMOTE`), the `lancens` data source registered on
a Connect session (reads, a write that commits, a write that fails and publishes nothing), and
a server whose Python lacks lancens_cli.

Every Connect client runs in a subprocess: a Connect session switches PySpark's functions to
Connect for the whole process, which the local sessions of the other tests must not see.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from connect_server import ConnectServer, connect_server
from helpers import Result, region_root, run_cli
from join_reference import ON, brute_join, build, orders_and_customers, result_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

N = 3000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One Connect server (local[2]) for this module; always stopped."""
    with connect_server(tmp_path_factory.mktemp("connect")) as running:
        yield running


def remote(server: ConnectServer, *args: str, env: dict[str, str] | None = None) -> Result:
    """`lancens ARGS --remote sc://...` as a user runs it."""
    return run_cli(*args, "--remote", server.url, env={**server.env(), **(env or {})})


def events() -> pa.Table:
    rng = random.Random(5)
    return pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "region": pa.array([rng.choice(["eu", "us", "ap"]) for _ in range(N)]),
            "amount": pa.array([rng.randrange(1000) for _ in range(N)], pa.int64()),
        }
    )


@pytest.fixture(scope="module")
def ingested(server, tmp_path_factory):
    """A partitioned namespace whose rows were ingested through the Connect server."""
    folder = tmp_path_factory.mktemp("connect-ns")
    source = events()
    path = folder / "events.parquet"
    pq.write_table(source, path)
    root = str(folder / "events")
    region_root(root, path)
    done = remote(server, "--root", root, "ingest", str(path), "--json")
    assert done.exit_code == 0, done.stderr
    report = done.json()
    assert report["rows"] == N and report["partitions_created"] == 12
    return root, source


def test_ingest_then_scan_prunes_and_filters_as_the_source_says(server, ingested):
    root, source = ingested
    where = "region = 'eu' AND amount < 500"
    scanned = remote(server, "--root", root, "scan", "--where", where, "--columns", "id", "--json")
    assert scanned.exit_code == 0, scanned.stderr
    cols = (source[c].to_pylist() for c in ("id", "region", "amount"))
    expected = sorted(i for i, r, a in zip(*cols, strict=True) if r == "eu" and a < 500)
    assert sorted(row[0] for row in scanned.json()["rows"]) == expected
    assert "Spark Connect server" in scanned.stderr

    # the partitions the scan prunes to, as `partitions` (no Spark) lists them
    chosen = run_cli("--root", root, "partitions", "--where", where, "--json")
    assert chosen.exit_code == 0, chosen.stderr
    assert len(chosen.json()["partitions"]) == 4  # region = 'eu' only: 4 buckets of 12
    # --explain reads the JVM's plan: through Connect it says so, in one line
    explained = remote(server, "--root", root, "scan", "--where", where, "--explain")
    assert explained.exit_code == 2
    assert "cannot reach: run it with --master" in explained.stderr.strip().splitlines()[-1]


def test_spark_remote_in_the_environment_is_honoured(server, ingested):
    root, _ = ingested
    counted = run_cli(
        "--root", root, "scan", "--count",
        env={**server.env(), "SPARK_REMOTE": server.url, "LANCENS_SPARK_MASTER": ""},
    )  # fmt: skip
    assert counted.exit_code == 0, counted.stderr
    assert int(counted.stdout) == N
    assert "Spark Connect server" in counted.stderr


def test_remote_and_master_together_are_a_usage_error(ingested):
    root, _ = ingested
    both = run_cli(
        "--root", root, "scan", "--count", "--remote", "sc://127.0.0.1:1", "--master", "local[1]"
    )  # fmt: skip
    assert both.exit_code == 2
    assert both.stderr.strip().splitlines()[-1] == (
        "lancens: error: --master and --remote: give one (a master, or a Connect URL)"
    )
    bad = run_cli("--root", root, "scan", "--count", "--remote", "http://127.0.0.1:1")
    assert bad.exit_code == 2 and "is not a Spark Connect URL" in bad.stderr


def test_join_through_connect_equals_brute_force(server, tmp_path):
    orders, customers = orders_and_customers(900, 300)
    left = build(tmp_path, "orders", orders, ["bucket(8, customer_id) as cb"], run_cli)
    right = build(tmp_path, "customers", customers, ["bucket(4, customer_id) as cb"], run_cli)
    done = remote(server, "join", left, right, *ON, "--how", "left", "--limit", "0", "--json")
    assert done.exit_code == 0, done.stderr
    payload = done.json()
    assert payload["storage_partitioned"] is True
    expected = brute_join(orders, customers, ["customer_id"], ["customer_id"], "left")
    assert result_rows(payload) == expected


def _client(server: ConnectServer, body: str) -> subprocess.CompletedProcess:
    """A user's PySpark program on a Connect session, with the lancens data source."""
    program = textwrap.dedent(
        f"""
        import json, sys
        from pyspark.sql import SparkSession
        from lancens_cli.pipeline import register
        spark = SparkSession.builder.remote({server.url!r}).getOrCreate()
        register(spark)
        """
    ) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=600,
        env={**server.env(), "PATH": "/usr/bin:/bin", "LANCE_LOG": "error"},
    )


def test_the_data_source_reads_writes_and_a_failed_write_publishes_nothing(server, tmp_path):
    root = tmp_path / "ns"
    source = events()
    pq.write_table(source, tmp_path / "events.parquet")
    assert run_cli("--root", str(root), "init").exit_code == 0
    spec = run_cli(
        "--root", str(root), "add-partition-spec", "--schema", str(tmp_path / "events.parquet"),
        "--field", "region",
    )  # fmt: skip
    assert spec.exit_code == 0, spec.stderr
    ran = _client(
        server,
        f"""
        rows = spark.read.parquet({str(tmp_path / "events.parquet")!r})
        rows.write.format("lancens").option("root", {str(root)!r}).mode("append").save()
        read = spark.read.format("lancens").option("root", {str(root)!r}).load()
        print(json.dumps({{"count": read.count(),
                           "eu": read.where("region = 'eu'").count()}}))
        sys.stdout.flush()
        failing = rows.selectExpr(
            "id", "region",
            "CASE WHEN id = 2222 THEN raise_error('boom at 2222') ELSE amount END AS amount")
        try:
            failing.write.format("lancens").option("root", {str(root)!r}).mode("append").save()
        except Exception as exc:
            print("FAILED", str(exc).splitlines()[0][:300])
        """,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    first, failed = ran.stdout.strip().splitlines()[-2:]
    counts = json.loads(first)
    assert counts == {"count": N, "eu": source["region"].to_pylist().count("eu")}
    assert failed.startswith("FAILED") and "boom at 2222" in failed
    # the failed write published nothing: __manifest is where the good write left it, and
    # every partition table reads exactly the first write's rows
    published = lance.dataset(str(root / "__manifest")).to_table(filter="object_type = 'table'")
    total = 0
    for row in published.to_pylist():
        part = lance.dataset(str(root / row["location"]), version=row["read_version"])
        total += part.count_rows()
    assert total == N
    counted = run_cli("--root", str(root), "scan", "--count", "--remote", server.url)
    assert counted.exit_code == 0 and int(counted.stdout) == N, counted.stderr


def test_prune_runs_its_table_tasks_on_the_connect_server(server, tmp_path):
    root = tmp_path / "ns"
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": pa.array([0], pa.int64())}), path)
    assert run_cli("--root", str(root), "init").exit_code == 0
    assert run_cli("--root", str(root), "create", "table", "t", "--from", str(path)).exit_code == 0
    uri = run_cli("--root", str(root), "describe", "t", "--json").json()["uri"]
    for i in range(1, 4):
        lance.write_dataset(pa.table({"a": pa.array([i], pa.int64())}), uri, mode="append")
    pruned = remote(
        server, "--root", str(root), "prune", "--older-than", "0s", "--grace", "0s", "--force",
        "--yes", "--json",
    )  # fmt: skip
    assert pruned.exit_code == 0, pruned.stderr
    assert "Spark tasks on the Spark Connect server" in pruned.stderr
    (table,) = [t for t in pruned.json()["tables"] if t["object_id"] == "t"]
    assert sorted(table["versions_removed"]) == [1, 2, 3]
    ds = lance.dataset(uri)
    assert [v["version"] for v in ds.versions()] == [4]
    assert sorted(ds.to_table()["a"].to_pylist()) == [0, 1, 2, 3]


def test_a_server_without_lancens_cli_is_one_line_saying_what_to_install(tmp_path, ingested):
    root, _ = ingested
    with connect_server(tmp_path / "bare", hide_module="lancens_cli") as bare:
        counted = remote(bare, "--root", root, "scan", "--count")
    assert counted.exit_code == 2, counted.stderr
    last = counted.stderr.strip().splitlines()[-1]
    assert "cannot import lancens_cli" in last and "pip install 'lancens-cli[spark]'" in last
    assert "Traceback" not in counted.stderr


def test_merge_through_connect_leaves_what_a_merge_in_this_process_leaves(server, tmp_path):
    """`merge --remote`: the source's keys come back as Arrow, its rows are written by the
    server's tasks (Parquet row groups by pyarrow, CSV by pyarrow too), one commit."""
    import shutil

    import pyarrow.csv as pcsv

    source = events()
    pq.write_table(source, tmp_path / "events.parquet")
    root = str(tmp_path / "ns")
    for args in (("init",), ("add-partition-spec", "--schema", str(tmp_path / "events.parquet"),
                             "--field", "region", "--field", "bucket(4, id) as b"),
                 ("write", "--from", str(tmp_path / "events.parquet"))):  # fmt: skip
        assert run_cli("--root", root, *args).exit_code == 0
    rows = source.to_pylist()
    changed = [{**r, "region": "ap", "amount": -r["amount"]} for r in rows[::9]]
    fresh = [{"id": N + i, "region": "eu", "amount": i} for i in range(40)]
    merged = pa.Table.from_pylist(changed + fresh, schema=source.schema)
    (tmp_path / "dir").mkdir()
    pq.write_table(merged.slice(0, 200), tmp_path / "dir" / "a.parquet")
    pq.write_table(merged.slice(200), tmp_path / "dir" / "b.parquet")
    pcsv.write_csv(merged, tmp_path / "merged.csv")
    pq.write_table(merged, tmp_path / "merged.parquet")
    expected = {r["id"]: r for r in rows}
    expected.update({r["id"]: r for r in changed + fresh})
    for name, given in (("parquet", tmp_path / "dir"), ("csv", tmp_path / "merged.csv")):
        copy = str(tmp_path / name)
        shutil.copytree(root, copy, symlinks=True)
        done = remote(server, "--root", copy, "--json", "merge", "--from", str(given), "--on",
                      "id", "--engine", "spark")  # fmt: skip
        assert done.exit_code == 0, done.stderr
        report = done.json()
        assert (report["rows_matched"], report["rows_inserted"]) == (len(changed), 40)
        scanned = run_cli("--root", copy, "scan", "--json", "--engine", "local")
        assert scanned.exit_code == 0, scanned.stderr
        columns = scanned.json()["columns"]
        seen = {r[0]: dict(zip(columns, r, strict=True)) for r in scanned.json()["rows"]}
        assert seen == expected, name
