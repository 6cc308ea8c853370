"""Scan of 1 partition out of ~100 through the `lancens` data source vs Spark on Parquet.

The same rows are written once as a partitioned namespace (`lancens write`, identity field
`part`, 100 partitions) and once as Hive-partitioned Parquet (`part=<n>/`), then read in one
local Spark session with the same filter: a count and the rows of one partition, the median
of a few runs each after a warm-up. The session start is reported on its own. A benchmark, not
a test: it prints figures and always exits 0.

    python bench/bench_spark_scan.py [ROWS] [RUNS]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PARTITIONS = 100


def make_rows(n: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(0)
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "part": pa.array(rng.integers(0, PARTITIONS, n).astype(np.int32)),
            "v": pa.array(rng.random(n)),
            "k": pa.array(rng.integers(0, 1000, n).astype(np.int64)),
            "s": pa.array([f"name-{i % 977}" for i in range(n)]),
            "d": pa.array(rng.integers(19000, 20000, n).astype(np.int32)).cast(pa.date32()),
        }
    )


def timed(func, runs: int) -> tuple[float, object]:
    func()  # warm-up (Python workers started, files cached)
    seconds, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = func()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    os.environ.setdefault("LANCE_LOG", "error")
    work = Path(tempfile.mkdtemp(prefix="bench-spark-scan-"))
    start = time.perf_counter()
    from pyspark.sql import functions as F  # noqa: N812

    from lancens_cli.pipeline.spark_session import SparkSettings, spark_session

    spark = spark_session(SparkSettings(master="local[2]"))
    print(f"spark session start: {time.perf_counter() - start:.1f}s")

    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    from lancens_cli.partition.field_syntax import parse_field
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.spec_change import add_partition_spec
    from lancens_cli.service.partitioned.write import write_partitioned

    table = make_rows(rows)
    root = work / "ns"
    root.mkdir()
    ns = Namespace.from_properties({"root": str(root)})
    add_partition_spec(ns, requests=[parse_field("part")], schema=table.schema)
    start = time.perf_counter()
    write_partitioned(ns, table)
    print(
        f"lancens write of {rows} rows into {PARTITIONS} partitions: "
        f"{time.perf_counter() - start:.1f}s"
    )
    parquet = work / "parquet"
    pads.write_dataset(
        table, parquet, format="parquet", partitioning=["part"], partitioning_flavor="hive"
    )
    del table

    condition = (F.col("part") == 42) & (F.col("k") < 500)
    condition_sql = "part = 42 AND k < 500"  # the same, as the source's prune option

    from lancens_cli.pipeline.read import arrow_schema, spark_schema
    from lancens_cli.pipeline.source_options import SourceOptions

    source = arrow_schema(SourceOptions.parse({"root": str(root)}))

    def lancens_df(columns=None, where=True):
        reader = spark.read.format("lancens").option("root", str(root))
        if where:  # what `lancens scan --where` hands the source; Spark filters again
            reader = reader.option("prune", condition_sql)
        if columns is not None:  # what `lancens scan --columns` / `--count` declares
            reader = reader.schema(spark_schema(_only(source, columns)))
        df = reader.load()
        return df.filter(condition) if where else df

    def parquet_df():
        return spark.read.parquet(str(parquet)).filter(condition)

    cases = {
        "count, 1 of 100 partitions": (
            lambda: lancens_df(["part", "k"]).count(),
            lambda: parquet_df().count(),
        ),
        "rows of 1 of 100 partitions (toArrow)": (
            lambda: lancens_df().toArrow().num_rows,
            lambda: parquet_df().toArrow().num_rows,
        ),
        "full count (no filter)": (
            lambda: lancens_df(["part"], where=False).count(),
            lambda: spark.read.parquet(str(parquet)).count(),
        ),
    }
    print(f"rows: {rows}; median of {runs} runs after a warm-up; local[2]")
    for name, (ours, theirs) in cases.items():
        t_ours, n_ours = timed(ours, runs)
        t_theirs, n_theirs = timed(theirs, runs)
        same = "same result" if n_ours == n_theirs else f"DIFFERENT: {n_ours} vs {n_theirs}"
        print(
            f"{name}: lancens {t_ours:.2f}s, parquet {t_theirs:.2f}s, "
            f"ratio {t_ours / t_theirs:.2f}x ({same})"
        )
    _ = pq
    spark.stop()


def _only(schema, names):
    import pyarrow as pa

    return pa.schema([f for f in schema if f.name in names])


if __name__ == "__main__":
    main()
