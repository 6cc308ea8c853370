#!/usr/bin/env python3
"""`lancens ingest` (Spark, local[2]) against Spark's own partitioned Parquet write.

    python bench/bench_spark_ingest.py [--rows 1000000 | --large] [--workdir DIR] [--keep]

One seeded Parquet file of --rows rows (default 1,000,000; --large: 10,000,000), 6 columns:
id int64, event_date date32 over 2024-2025, customer_id int64, country utf8, amount float64,
note utf8. Row groups of 131,072 rows and `spark.sql.files.maxPartitionBytes=8m`, so Spark
splits the file into many tasks. The namespace's spec is `year(event_date)` x
`bucket(50, customer_id)`: 2 x 50 = 100 partitions.

Timed, one run each, in this order, in one Spark session (its start is reported apart):
- a. `lancens ingest` of the file (in-process, the same job the command runs);
- b. Spark's own `df.write.partitionBy("event_year", "cb").parquet(...)` of the same DataFrame
     with the two partition columns computed by Spark (`year`, `pmod(xxhash64(...), 50)`);
- c. a cold `lancens write --from data.parquet` process (in-process Arrow, no Spark).
Peak memory is sampled from /proc every 0.1 s: the Spark driver (the JVM), the Python driver
(this process), the largest Python worker (pyspark.daemon's children), and the `lancens write`
process. Rows are checked afterwards (untimed). Prints figures; always exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ENV, lancens_cmd  # noqa: E402

SPEC = ["--field", "year(event_date) as event_year", "--field", "bucket(50, customer_id) as cb"]


def make_input(path: Path, rows: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    countries = np.array(["US", "DE", "FR", "JP", "BR", "IN", "GB", "NO"], dtype=object)
    step = 1_000_000
    writer = None
    for start in range(0, rows, step):
        n = min(step, rows - start)
        table = pa.table(
            {
                "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
                "event_date": pa.array(
                    (np.datetime64("2024-01-01") + rng.integers(0, 731, n)).astype("datetime64[D]")
                ),
                "customer_id": pa.array(rng.integers(0, 100_000, n, dtype=np.int64)),
                "country": pa.array(countries[rng.integers(0, len(countries), n)], pa.string()),
                "amount": pa.array(rng.random(n) * 1000),
                "note": pa.array(
                    np.char.add("n", rng.integers(0, 1000, n).astype(str)), pa.string()
                ),
            }
        )
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=131_072)
    writer.close()


class MemoryPoller:
    """Peak RSS per role, from /proc, of this process and its descendants."""

    def __init__(self) -> None:
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> None:
        self.peaks = {}

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid, role in _processes(os.getpid()):
                rss = _rss(pid)
                if rss:
                    self.peaks[role] = max(self.peaks.get(role, 0), rss)
            time.sleep(0.1)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        tree.setdefault(parent, []).append(int(entry))
    return tree


def _processes(root: int) -> list[tuple[int, str]]:
    tree = _children()
    found = [(root, "python driver")]
    stack = list(tree.get(root, []))
    while stack:
        pid = stack.pop()
        stack += tree.get(pid, [])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmd = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "java" in cmd.split(" ", 1)[0]:
            role = "spark driver (JVM)"
        elif "pyspark.daemon" in cmd:
            role = "python worker (max, daemon and its forks)"
        elif "/bin/lancens " in cmd or "lancens_cli" in cmd:
            role = "lancens write process"
        elif "python" in cmd:
            role = "other python"
        else:
            role = "other"
        found.append((pid, role))
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def mb(value: int) -> str:
    return f"{value / 2**20:,.0f} MB"


def published_rows(root: Path) -> int:
    import lance

    manifest = lance.dataset(str(root / "__manifest"))
    rows = manifest.to_table(filter="object_type = 'table'").to_pylist()
    return sum(
        lance.dataset(str(root / r["location"]), version=r["read_version"]).count_rows()
        for r in rows
    )


def partitioned_root(path: Path, data: Path) -> None:
    path.mkdir(parents=True)
    subprocess.run(
        [*lancens_cmd(), "--root", str(path), "add-partition-spec", "--schema", str(data), *SPEC],
        env=ENV,
        check=True,
        capture_output=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--large", action="store_true", help="10,000,000 rows")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    rows = 10_000_000 if args.large else args.rows
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-spark-ingest-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data = workdir / "data.parquet"
    print(f"input: {rows:,} rows, 6 columns, 100 partitions; workdir {workdir}")
    started = time.monotonic()
    make_input(data, rows)
    print(f"input written in {time.monotonic() - started:.1f} s ({mb(data.stat().st_size)})")
    for name in ("ingest", "write"):
        partitioned_root(workdir / name, data)

    os.environ.setdefault("LANCE_LOG", "error")  # as the CLI does
    poller = MemoryPoller()
    poller.start()
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from lancens_cli.pipeline.ingest import ingest
    from lancens_cli.pipeline.spark_session import SparkSettings, spark_session
    from lancens_cli.service.namespace import Namespace

    started = time.monotonic()
    spark = spark_session(
        SparkSettings(master="local[2]", conf={"spark.sql.files.maxPartitionBytes": "8m"})
    )
    print(f"Spark session start: {time.monotonic() - started:.1f} s")
    after_start = dict(poller.peaks)

    poller.reset()
    ns = Namespace.from_properties({"root": str(workdir / "ingest")})
    started = time.monotonic()
    result = ingest(lambda: spark, ns, [str(data)])
    ingest_seconds = time.monotonic() - started
    ingest_peaks = dict(poller.peaks)
    print(
        f"a. lancens ingest: {ingest_seconds:.1f} s, {result.rows:,} rows, "
        f"{len(result.partitions)} partitions"
    )

    from pyspark.sql import functions as F

    poller.reset()
    out = workdir / "spark-parquet"
    started = time.monotonic()
    frame = spark.read.parquet(str(data))
    frame = frame.withColumn("event_year", F.year("event_date")).withColumn(
        "cb", F.pmod(F.xxhash64("customer_id"), F.lit(50))
    )
    frame.write.partitionBy("event_year", "cb").mode("overwrite").parquet(str(out))
    spark_seconds = time.monotonic() - started
    spark_peaks = dict(poller.peaks)
    print(f"b. Spark partitionBy().parquet(): {spark_seconds:.1f} s")

    poller.reset()
    started = time.monotonic()
    subprocess.run(
        [*lancens_cmd(), "--root", str(workdir / "write"), "write", "--from", str(data)],
        env=ENV,
        check=True,
        capture_output=True,
    )
    write_seconds = time.monotonic() - started
    write_peaks = dict(poller.peaks)
    print(f"c. lancens write (cold process, no Spark): {write_seconds:.1f} s")
    poller.stop()

    print()
    print(f"ratio a/b (goal <= 0.5): {ingest_seconds / spark_seconds:.2f}")
    print(f"ratio a/c: {ingest_seconds / write_seconds:.2f}")
    print()
    print("peak RSS:")
    for title, peaks in (
        ("Spark start", after_start),
        ("a. ingest", ingest_peaks),
        ("b. Spark parquet", spark_peaks),
        ("c. lancens write", write_peaks),
    ):
        shown = ", ".join(f"{k} {mb(v)}" for k, v in sorted(peaks.items()) if k != "other")
        print(f"  {title}: {shown}")
    checked = published_rows(workdir / "ingest"), published_rows(workdir / "write")
    print(f"check: ingest published {checked[0]:,} rows, write {checked[1]:,} (expect {rows:,})")
    spark.stop()
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
