"""`scan --count` answered from Lance's manifests, without Spark: the same number Spark counts
and DuckDB counts over the rows written, across a history a namespace lives through (appends
into the same partitions, a compaction, a second spec, evolve-schema, a write that died before
it published, time travel, incremental counts), and a plain table with deleted rows.

Which conditions the partitions decide whole (and so need no row read) is the selection's
rule; `tests/partitioned/test_partition_selection.py` proves on generated predicates that such
a selection keeps exactly the matching rows. Here it is shown end to end, through the CLI.
"""

from __future__ import annotations

import duckdb
import lance
import pyarrow as pa
import pytest
from data import events
from helpers import SPEC1, cli, ok

from lancens_cli.pipeline.scan import ScanRequest, count_from_manifests

pytestmark = pytest.mark.spark

# decided by the partitions of either spec (country is identity in both): no row is read
DECIDED = [
    None,
    "country = 'US'",
    "country IS NULL",
    "country IS NOT NULL",
    "country IN ('US', 'FR')",
    "country <> 'DE'",
    "NOT (country = 'FR')",
    "country = 'US' OR country IS NULL",
    "country = 'nowhere'",
]
# rows inside partitions must be filtered: Spark reads them
READ = ["id < 100", "country = 'US' AND customer_id % 3 = 0", "event_date >= DATE '2025-01-15'"]


def _manifest_version(root) -> int:
    return int(lance.dataset(str(root.local_path / "__manifest")).version)


def _oracle(tables: list[pa.Table], where: str | None) -> int:
    """DuckDB's count over the rows written, under the same condition."""
    rows = pa.concat_tables(
        [t.select(["id", "event_date", "country", "customer_id"]) for t in tables]
    )
    con = duckdb.connect()
    con.register("rows", rows)
    sql = "SELECT count(*) FROM rows" + (f" WHERE {where}" if where else "")
    return int(con.execute(sql).fetchone()[0])


def _request(root, where: str | None) -> ScanRequest:
    return ScanRequest(root=root.uri, storage=dict(root.storage_options), where=where, count=True)


def _count(root, where: str | None, *extra: str) -> tuple[int, str]:
    args = ["scan", "--count", *extra] + (["--where", where] if where else [])
    result = ok(root, *args)
    return int(result.stdout.strip()), result.stderr


SPARK = ("--master", "local[2]")


@pytest.fixture(autouse=True)
def no_spark_named(monkeypatch):
    """No Spark named in the environment (the suite names local[2] for in-process commands):
    counts the manifests answer never start one; the others name `--master local[2]`."""
    monkeypatch.delenv("LANCENS_SPARK_MASTER", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)


@pytest.fixture
def lived(local_root, files):
    """A partitioned root after a history of writes: returns the root, the tables written in
    order and the `__manifest` version after the first write."""
    root = local_root
    a, b, c = events(300, seed=1), events(200, seed=2, start=1000), events(150, seed=3, start=5000)
    ok(root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    ok(root, "write", "--from", files("a.parquet", a))
    after_a = _manifest_version(root)
    ok(root, "write", "--from", files("b.parquet", b))
    return root, [a, b, c], after_a, files


def test_counts_from_manifests_equal_spark_and_duckdb_through_a_history(lived):
    root, (a, b, c), after_a, files = lived
    # time travel and incremental counts, from the manifests alone
    past, words = _count(root, None, "--version-as-of", str(after_a))
    assert past == len(a) and "Lance's manifests" in words and "Spark" not in words
    since, words = _count(root, "country = 'US'", "--since-version", str(after_a))
    assert since == _oracle([b], "country = 'US'") and "Lance's manifests" in words
    # a compaction, a second spec, a schema change, then a write under the new spec
    ok(root, "prune", "--compact", "--yes")
    ok(root, "add-partition-spec", "--field", "country", "--field", "bucket(4, customer_id)")
    ok(root, "evolve-schema", "--add", "note string")
    ok(root, "write", "--from", files("c.parquet", c))
    # a write that died before it published: its rows are in a table, readers never see them
    table = next((root.local_path).glob("*_v1$*$dataset"))
    lance.write_dataset(events(40, seed=9, start=90_000), str(table), mode="append")
    for where in DECIDED:
        counted, words = _count(root, where)
        assert counted == _oracle([a, b, c], where), where
        assert "Lance's manifests" in words and "starting Spark" not in words, where
    for where in [None, "country IN ('US', 'FR')"]:
        counted, words = _count(root, where, "--engine", "spark", *SPARK)
        assert counted == _oracle([a, b, c], where) and "starting Spark" in words
    counted, words = _count(root, None, *SPARK)  # a Spark named is a Spark used
    assert counted == _oracle([a, b, c], None) and "starting Spark" in words
    for where in READ:
        counted, words = _count(root, where, *SPARK)
        assert counted == _oracle([a, b, c], where), where
        assert "starting Spark" in words, where
        assert count_from_manifests(_request(root, where)) is None, where  # rows must be read


def test_a_table_with_deleted_rows_is_counted_from_its_manifest(local_root):
    path = local_root.local_path / "t.lance"
    lance.write_dataset(events(500, seed=4), str(path), max_rows_per_file=120)
    dataset = lance.dataset(str(path))
    dataset.delete("id % 7 = 0 OR country IS NULL")
    result = ok(local_root, "scan", "t", "--count")
    assert int(result.stdout) == _oracle(
        [events(500, seed=4)], "NOT (id % 7 = 0 OR country IS NULL)"
    )
    assert "Lance's manifests" in result.stderr


def test_a_wrong_engine_is_refused_before_anything_runs(local_root):
    result = cli(local_root, "scan", "--engine", "fast")
    assert result.exit_code == 2
    assert result.stderr.strip() == "lancens: error: --engine 'fast': auto, local or spark"


@pytest.mark.s3
def test_counts_on_object_storage_need_no_spark(s3_root, files):
    """On S3 (a moto server) as on disk: the manifests answer, through the root's storage
    options, and a count over an incremental window is the rows the second write added."""
    root = s3_root
    a, b = events(120, seed=5), events(80, seed=6, start=2000)
    ok(root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    ok(root, "write", "--from", files("a.parquet", a))
    first = ok(root, "versions", "__manifest", "--json").json()
    after_a = max(v["version"] for v in first["versions"])
    ok(root, "write", "--from", files("b.parquet", b))
    for where in (None, "country = 'DE'", "country IS NULL"):
        counted, words = _count(root, where)
        assert counted == _oracle([a, b], where), where
        assert "Lance's manifests" in words, where
    since, _ = _count(root, None, "--since-version", str(after_a))
    assert since == len(b)


@pytest.mark.s3
def test_small_reads_on_object_storage_are_read_in_this_process_as_spark_reads_them(
    s3_root, files, spark
):
    """On S3 (a moto server): rows read in this process through the root's storage options,
    the new rows of an incremental read too, print as Spark prints them."""
    root = s3_root
    a, b = events(60, seed=7), events(40, seed=8, start=3000)
    ok(root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    ok(root, "write", "--from", files("a.parquet", a))
    first = ok(root, "versions", "__manifest", "--json").json()
    after_a = max(v["version"] for v in first["versions"])
    ok(root, "write", "--from", files("b.parquet", b))
    for args in (
        ("--where", "country = 'DE' AND id > 10"),
        ("--since-version", str(after_a), "--columns", "id,country"),
    ):
        local = cli(root, "--json", "scan", *args, "--engine", "local")
        spark_read = cli(root, "--json", "scan", *args, "--engine", "spark", *SPARK)
        assert local.exit_code == 0 and "(in this process)" in local.stderr, local.stderr
        assert spark_read.exit_code == 0, spark_read.stderr
        assert local.stdout == spark_read.stdout and local.json()["rows"], args
    since = cli(root, "--json", "scan", "--since-version", str(after_a), "--engine", "local")
    assert sorted(r[0] for r in since.json()["rows"]) == sorted(b.column("id").to_pylist())
