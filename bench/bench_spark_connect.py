#!/usr/bin/env python3
"""`lancens scan --count` through a warm Spark Connect server against a fresh local session.

    python bench/bench_spark_connect.py [--rows 1000000] [--runs 3] [--workdir DIR] [--keep]

Data (seeded): ROWS rows (id int64, country utf8 over 10 values, amount float64), written as a
partitioned namespace on `country` through `lancens add-partition-spec` + `lancens write`
(untimed). A Spark Connect server is started on 127.0.0.1 from the pyspark package's own
`sbin/start-connect-server.sh` (local[2]; its start is reported on its own) and stopped at the
end. Then, as cold `lancens` processes interleaved round-robin after one untimed warm-up round:

- a. `lancens scan --count --where "country = 'c3'" --remote sc://...` (the server stays warm:
     what a user of a shared Connect server gets);
- b. the same with `--master local[2]` (a Spark session started by the command itself).

Both counts are checked equal. Prints best and median wall seconds and b/a; exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ENV, lancens_cmd, load_average, measure, print_table, versions  # noqa: E402


def build(workdir: Path, rows: int) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    data = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "country": pa.array([f"c{i % 10}" for i in range(rows)]),
            "amount": pa.array(rng.random(rows)),
        }
    )
    source, root = workdir / "rows.parquet", workdir / "ns"
    pq.write_table(data, source)
    root.mkdir()
    base = [*lancens_cmd(), "--root", str(root)]
    for args in (["add-partition-spec", "--schema", str(source), "--field", "country"],
                 ["write", "--from", str(source)]):  # fmt: skip
        subprocess.run([*base, *args], check=True, capture_output=True, env=ENV)
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(workdir: Path) -> dict[str, str]:
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    for script in ("start-connect-server.sh", "stop-connect-server.sh", "spark-daemon.sh"):
        (home / "sbin" / script).chmod(0o755)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(workdir / "logs"),
        "SPARK_PID_DIR": str(workdir / "pids"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    env.pop("SPARK_REMOTE", None)
    return env


def start_server(env: dict[str, str], port: int) -> float:
    started = time.perf_counter()
    home = Path(env["SPARK_HOME"])
    args = [
        "--master", "local[2]",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}",
    ]  # fmt: skip
    subprocess.run([str(home / "sbin" / "start-connect-server.sh"), *args], env=env,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    deadline = time.monotonic() + 240
    while True:
        with socket.socket() as sock:
            sock.settimeout(1.0)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return time.perf_counter() - started
        if time.monotonic() > deadline:
            raise SystemExit(f"the Connect server did not listen on {port}")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-spark-connect-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"# lancens scan --count: Spark Connect (warm server) vs a fresh local session, "
          f"{args.rows:,} rows")  # fmt: skip
    print(f"# {versions()}, {load_average()}")
    env = server_env(workdir)
    try:
        root = build(workdir, args.rows)
        port = free_port()
        print(f"Connect server start (untimed): {start_server(env, port):.1f} s")
        scan = [*lancens_cmd(), "--root", str(root), "--json", "scan", "--count",
                "--where", "country = 'c3'"]  # fmt: skip
        commands = {
            "a. through Connect (warm server)": [*scan, "--remote", f"sc://127.0.0.1:{port}"],
            "b. fresh local[2] session": [*scan, "--master", "local[2]"],
        }
        counts = {}
        checks = {label: (lambda out, label=label: counts.__setitem__(label, out))
                  for label in commands}  # fmt: skip
        timings = measure(commands, runs=args.runs, checks=checks)
        same = len(set(counts.values())) == 1
        found = json.loads(next(iter(counts.values())))["count"]
        print(f"counts: {'equal' if same else 'DIFFER'} ({found:,} rows)")
        rows = [[label, f"{min(t.wall):.2f} s", f"{statistics.median(t.wall):.2f} s"]
                for label, t in timings.items()]  # fmt: skip
        print_table(["case", "best", "median"], rows)
        a, b = (statistics.median(t.wall) for t in timings.values())
        print(f"b/a: median {b / a:.2f}x (Connect saves a session start per command)")
    finally:
        home = Path(env["SPARK_HOME"])
        subprocess.run([str(home / "sbin" / "stop-connect-server.sh")], env=env,
                       capture_output=True, timeout=120, check=False)  # fmt: skip
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
