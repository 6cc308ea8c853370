#!/usr/bin/env python3
"""`lancens join` (storage-partitioned, no shuffle) against Spark's sort-merge join.

    python bench/bench_spark_join.py [--large] [--left N] [--right M] [--repeat 3]
                                     [--master local[2]] [--workdir DIR] [--keep]

Data (seeded): left N rows (id int64, key int64 uniform over [0, M), amount float64, tag utf8),
right M rows (key int64 = 0..M-1, name utf8, score float64). Default 500,000 x 100,000;
`--large` is 5,000,000 x 1,000,000. Untimed set-up: the left side becomes a partitioned
namespace bucketed 16 ways on key, the right one bucketed 8 ways (`lancens add-partition-spec`
+ `lancens write`), and both are written as Parquet files too.

In one Spark session (its start-up reported on its own; broadcast joins off,
`spark.sql.autoBroadcastJoinThreshold=-1`), after one untimed warm-up run of each (Python
workers started, JIT, file cache; the physical plans are checked there: no Exchange in ours, a
SortMergeJoin in Spark's), interleaved round-robin:

- a. `lancens join`'s job: plan (both `__manifest`s, versions pinned) + the groups packed into
     one task per core, each joining its groups with DataFusion's hash join;
- b. Spark reading both Parquet files and joining them (sort-merge join: two shuffles, sorts).

Both produce every column of the inner join and hand every row to Spark's `noop` sink, so all
columns are materialised on both sides (a `count()` would let Parquet skip columns). The row
counts are checked equal. Then where the time of a. goes: planning and pinning in the driver,
the groups read and joined alone (in this process, one thread), and the rest (Spark's tasks,
the Python worker hand-off, Arrow to Spark rows). Prints best and median seconds and b/a
(goals: >= 3x at 500,000 x 100,000, >= 5x with --large); exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import lancens_cmd, load_average, print_table, versions  # noqa: E402

os.environ.setdefault("LANCE_LOG", "error")
TARGET = {False: 3.0, True: 5.0}  # by --large


def generate(workdir: Path, left_rows: int, right_rows: int) -> tuple[Path, Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(42)
    left = pa.table(
        {
            "id": pa.array(np.arange(left_rows, dtype=np.int64)),
            "key": pa.array(rng.integers(0, right_rows, left_rows, dtype=np.int64)),
            "amount": pa.array(rng.random(left_rows) * 100),
            "tag": pa.array([f"t{i % 1000}" for i in range(left_rows)]),
        }
    )
    right = pa.table(
        {
            "key": pa.array(np.arange(right_rows, dtype=np.int64)),
            "name": pa.array([f"customer {i}" for i in range(right_rows)]),
            "score": pa.array(rng.random(right_rows)),
        }
    )
    paths = workdir / "left.parquet", workdir / "right.parquet"
    pq.write_table(left, paths[0])
    pq.write_table(right, paths[1])
    return paths


def build(root: Path, data: Path, field: str) -> float:
    """A partitioned namespace from a Parquet file through the CLI (set-up, untimed)."""
    started = time.perf_counter()
    root.mkdir()
    base = [*lancens_cmd(), "--root", str(root)]
    subprocess.run([*base, "add-partition-spec", "--schema", str(data), "--field", field],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run([*base, "write", "--from", str(data)], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--large", action="store_true", help="5,000,000 x 1,000,000 rows")
    parser.add_argument("--left", type=int, default=None)
    parser.add_argument("--right", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    left_rows = args.left or (5_000_000 if args.large else 500_000)
    right_rows = args.right or (1_000_000 if args.large else 100_000)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-spark-join-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"# lancens join vs Spark sort-merge join: {left_rows:,} x {right_rows:,} rows")
    print(f"# {versions()}, master {args.master}, {load_average()}")
    try:
        target = TARGET[left_rows >= 5_000_000]
        run(workdir, left_rows, right_rows, args.repeat, args.master, target)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run(
    workdir: Path, left_rows: int, right_rows: int, repeat: int, master: str, target: float
) -> None:
    left_file, right_file = generate(workdir, left_rows, right_rows)
    left_root, right_root = workdir / "left-ns", workdir / "right-ns"
    setup = build(left_root, left_file, "bucket(16, key) as kb")
    setup += build(right_root, right_file, "bucket(8, key) as kb")
    print(f"set-up (untimed): two namespaces through lancens write in {setup:.1f} s")

    from lancens_cli.pipeline import join as job_module
    from lancens_cli.pipeline.spark_session import SparkSettings, spark_session
    from lancens_cli.service.join.plan import parse_on
    from lancens_cli.service.namespace import Namespace

    started = time.perf_counter()
    settings = SparkSettings(master=master, conf={"spark.sql.autoBroadcastJoinThreshold": "-1"})
    spark = spark_session(settings)
    print(f"Spark session start: {time.perf_counter() - started:.1f} s")

    def plan():
        return job_module.plan_job(
            Namespace.from_properties({"root": str(left_root)}),
            Namespace.from_properties({"root": str(right_root)}),
            [parse_on("l.key = r.key")],
            "inner",
            None,
        )

    def lancens_join():
        job = plan()
        assert job.spj, job.fallback_reasons
        df = job.dataframe(spark)
        df.write.format("noop").mode("overwrite").save()
        return df

    def spark_join():
        left = spark.read.parquet(str(left_file)).alias("l")
        right = spark.read.parquet(str(right_file)).alias("r")
        df = left.join(right, left["key"] == right["key"], "inner")
        df.write.format("noop").mode("overwrite").save()
        return df

    cases = {
        "a. lancens join (SPJ, DataFusion)": lancens_join,
        "b. Spark sort-merge join": spark_join,
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    # warm-up, untimed: Python workers, JIT, file cache; the plans are what they claim
    assert "Exchange" not in job_module.physical_plan(lancens_join())
    assert "SortMergeJoin" in job_module.physical_plan(spark_join())
    for _ in range(repeat):
        for name, case in cases.items():
            t0 = time.perf_counter()
            case()
            times[name].append(time.perf_counter() - t0)

    check = plan()
    ours = check.dataframe(spark).count()
    theirs = (
        spark.read.parquet(str(left_file)).join(spark.read.parquet(str(right_file)), "key").count()
    )
    same = "equal" if ours == theirs else "DIFFER"
    print(f"rows joined: lancens {ours:,}, Spark {theirs:,} ({same})")
    rows = []
    for name, values in times.items():
        rows.append([name, f"{min(values):.2f} s", f"{statistics.median(values):.2f} s"])
    print_table(["case", "best", "median"], rows)
    a, b = (statistics.median(v) for v in times.values())
    a_best, b_best = (min(v) for v in times.values())
    verdict = "met" if b / a >= target else "missed"
    print(f"b/a: median {b / a:.2f}x, best {b_best / a_best:.2f}x (goal >= {target}x: {verdict})")
    where_time_goes(plan, a)
    spark.stop()


def where_time_goes(plan, total: float) -> None:
    """The median job split: planning and pinning in the driver, the joins alone (each
    group in this process, one thread: what the tasks compute), and Spark's share (tasks, the
    Python worker hand-off, Arrow batches to Spark rows, the sink)."""
    from lancens_cli.pipeline.join_tasks import join_group

    started = time.perf_counter()
    job = plan()
    units = job.groups_work()
    spec = job.join_spec()
    planning = time.perf_counter() - started
    started = time.perf_counter()
    for unit in units:
        join_group(spec, unit)
    joins = time.perf_counter() - started
    rest = max(total - planning - joins / 2, 0.0)
    print(
        f"where a.'s median {total:.2f} s goes: planning and pinning {planning:.2f} s; "
        f"reading and joining {joins:.2f} s on one core ({len(units)} groups, about "
        f"{joins / 2:.2f} s on two); Spark's tasks, hand-off and rows about {rest:.2f} s"
    )


if __name__ == "__main__":
    main()
