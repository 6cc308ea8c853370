"""A failed write through the `lancens` data source leaves nothing behind (real local Spark).

A user's job that fails (NULLs into a non-nullable column, a value of another type, a task
that raises) while other tasks are writing or done: nothing is published, and `check` is clean,
no `unreferenced_data_file`, no directory of the job. A concurrent writer's files survive.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import partitioned_root
from helpers import Root, invoke, tree_snapshot

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("country", pa.string()), ("n", pa.int32())]
)


@pytest.fixture
def root(tmp_path, spark) -> Root:
    """A partitioned namespace (country, bucket(4, id)) holding one write already."""
    root = partitioned_root(tmp_path, SCHEMA, "country", "bucket(4, id)")
    first = pa.table(
        {"id": list(range(40)), "country": ["US", "DE"] * 20, "n": [1] * 40}, schema=SCHEMA
    )
    pq.write_table(first, tmp_path / "first.parquet")
    assert invoke(*root.args, "write", "--from", str(tmp_path / "first.parquet")).exit_code == 0
    return root


def files_below(path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), path)
        for d, _, names in os.walk(path)
        for n in names
        if "/_versions/" not in os.path.join(d, n) and "__manifest" not in d
    }


def published_ids(spark, root: Root) -> list[int]:
    df = spark.read.format("lancens").option("root", root.uri).load()
    return sorted(r.id for r in df.select("id").collect())


def failing_frame(spark, kind: str):
    """200 rows over many partitions and 8 Spark tasks, of which one fails."""
    from pyspark.sql import functions as F

    base = spark.range(1000, 1200, numPartitions=8).select(
        F.col("id"),
        F.when(F.col("id") % 3 == 0, "US")
        .when(F.col("id") % 3 == 1, "DE")
        .otherwise("FR")
        .alias("country"),
        F.lit(2).cast("int").alias("n"),
    )
    if kind == "null":
        return base.withColumn("id", F.when(F.col("id") == 1190, None).otherwise(F.col("id")))
    if kind == "raise":
        return base.withColumn(
            "n", F.when(F.col("id") == 1190, F.raise_error("boom")).otherwise(F.col("n"))
        )
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["null", "raise"])
def test_a_failed_job_publishes_nothing_and_leaves_no_file(root, spark, kind):
    before = files_below(root.local_path)
    ids = published_ids(spark, root)
    with pytest.raises(Exception, match="not nullable|boom"):
        failing_frame(spark, kind).write.format("lancens").option("root", root.uri).mode(
            "append"
        ).save()
    assert published_ids(spark, root) == ids
    checked = json.loads(invoke(*root.args, "check", "--json").stdout)
    assert checked["findings"] == [], checked["findings"]
    assert files_below(root.local_path) == before


def test_a_failed_ingest_is_exit_2_and_leaves_no_file(root, spark, tmp_path):
    rows = pa.table(
        {"id": [5000, None, 5002], "country": ["US", "DE", "FR"], "n": [1, 2, 3]},
        schema=pa.schema([("id", pa.int64()), ("country", pa.string()), ("n", pa.int32())]),
    )
    pq.write_table(rows, tmp_path / "nulls.parquet")
    before = files_below(root.local_path)
    result = invoke(*root.args, "ingest", str(tmp_path / "nulls.parquet"))
    assert result.exit_code == 2, result.stderr
    assert "id" in result.stderr
    assert invoke(*root.args, "check").exit_code == 0
    assert files_below(root.local_path) == before


def test_a_committed_job_leaves_no_log_behind(root, spark):
    from pyspark.sql import functions as F

    frame = spark.range(2000, 2050, numPartitions=4).select(
        "id", F.lit("US").alias("country"), F.lit(1).cast("int").alias("n")
    )
    frame.write.format("lancens").option("root", root.uri).mode("append").save()
    assert not (root.local_path / ".lancens-jobs").exists() or not any(
        (root.local_path / ".lancens-jobs").iterdir()
    )
    assert invoke(*root.args, "check").exit_code == 0
    assert len(published_ids(spark, root)) == 90


def test_a_partition_row_pointing_outside_the_root_is_never_written(root, spark, tmp_path):
    """A catalog row another writer pointed out of the root (through a symlink): the job's
    rows for that partition never reach it, the commit refuses (exit 5), nothing published."""
    import lance

    from lancens_cli.service.namespace import Namespace

    outside = tmp_path / "victim.lance"
    lance.write_dataset(
        pa.table({"id": [1], "country": ["US"], "n": [1]}, schema=SCHEMA), str(outside)
    )
    os.symlink(tmp_path, root.local_path / "lnk")
    ns = Namespace.from_properties({"root": root.uri})
    row = next(
        r
        for r in ns.snapshot().rows
        if r["object_type"] == "table" and r.get("partition_field_country") == "US"
    )
    ns.manifest.mutate(lambda s, e: e.replace(row["object_id"], location="lnk/victim.lance"))
    victim = tree_snapshot(outside)
    rows = pa.table({"id": [7000, 7001], "country": ["US", "US"], "n": [1, 2]}, schema=SCHEMA)
    pq.write_table(rows, tmp_path / "us.parquet")
    result = invoke(*root.args, "ingest", str(tmp_path / "us.parquet"))
    assert result.exit_code == 5, result.stderr
    assert tree_snapshot(outside) == victim
    # a read that would open the refused partition refuses too, rather than skip its rows
    refused = invoke(*root.args, "scan", "--count")
    assert refused.exit_code == 5, refused.stderr


def test_a_frame_lacking_a_partition_source_column_is_refused_unless_allowed(root, spark):
    """As `write` and `ingest` refuse such input: every row would land in the NULL partition."""
    from pyspark.sql import functions as F

    frame = spark.range(3000, 3010, numPartitions=2).select(
        "id", F.lit(1).cast("int").alias("n")
    )  # no country
    before = tree_snapshot(root.local_path)
    ids = published_ids(spark, root)

    def save(*options: tuple[str, str]) -> None:
        writer = frame.write.format("lancens").option("root", root.uri).mode("append")
        for key, value in options:
            writer = writer.option(key, value)
        writer.save()

    with pytest.raises(Exception, match="lacks country.*allowMissingColumns"):
        save()
    with pytest.raises(Exception, match="option allowMissingColumns: 'yes' is not true or false"):
        save(("allowMissingColumns", "yes"))
    assert tree_snapshot(root.local_path) == before
    save(("allowMissingColumns", "true"))
    assert published_ids(spark, root) == sorted(ids + list(range(3000, 3010)))
    rows = spark.read.format("lancens").option("root", root.uri).load()
    assert rows.where("id >= 3000 AND country IS NULL").count() == 10
    assert invoke(*root.args, "check").exit_code == 0
