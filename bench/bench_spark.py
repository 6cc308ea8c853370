"""All Spark pipeline figures in one go: ingest, scan and join, each against what a Spark user
would pick instead, measured in the same Spark session as its baseline; and `scan --count`
through a warm Spark Connect server against a fresh local session.

    python bench/bench_spark.py            # default sizes (a few minutes on 2 cores)
    python bench/bench_spark.py --large    # the issue's sizes: 10,000,000-row ingest,
                                           # 5,000,000 x 1,000,000 join

Each part is its own script (bench_spark_ingest.py, bench_spark_scan.py, bench_spark_join.py,
bench_spark_connect.py) and runs in its own process, so a part's Spark session start and memory
are its own; the figures are printed as each part prints them. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def parts(large: bool) -> list[list[str]]:
    return [
        ["bench_spark_ingest.py", *(["--large"] if large else [])],
        ["bench_spark_scan.py", "10000000" if large else "2000000", "3"],
        ["bench_spark_join.py", *(["--large"] if large else [])],
        ["bench_spark_connect.py"],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="the issue's full sizes")
    args = parser.parse_args()
    failed = 0
    for script, *options in parts(args.large):
        print(f"\n=== {script} {' '.join(options)}", flush=True)
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(HERE / script), *options], check=False)
        print(f"=== {script}: exit {done.returncode}, {time.monotonic() - started:.0f} s")
        failed += done.returncode != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
