"""The processes of test_prune_compact_stress: a writer and a `prune --compact` loop.

python compact_stress_roles.py writer ROOT FIRST COUNT ROWS FOLDER PARTITIONS
python compact_stress_roles.py pruner ROOT STOP_FILE

Each prints one line per CLI run: what it ran, the exit code, and what a reader needs to know.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("k", pa.string())])


def lancens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lancens_cli", *args], capture_output=True, text=True
    )


def one_line(text: str) -> str:
    return text.strip().replace("\n", " ")[:300]


def writer(root: str, first: int, count: int, rows: int, folder: str, partitions: int) -> None:
    """`count` writes, each of `rows` ids (write * 1000 + i) spread over the partitions."""
    keys = [chr(ord("a") + i % partitions) for i in range(rows)]
    for write in range(first, first + count):
        ids = list(range(write * 1000, write * 1000 + rows))
        path = f"{folder}/w{write}.parquet"
        pq.write_table(pa.table({"id": ids, "k": keys}, schema=SCHEMA), path)
        done = lancens("--root", root, "write", "--from", path)
        print(write, done.returncode, one_line(done.stderr), flush=True)


def pruner(root: str, stop: str) -> None:
    """`prune --compact` with the shortest window, again and again until `stop` exists."""
    runs = 0
    policy = ["--older-than", "1s", "--retain", "1", "--force", "--grace", "1h"]
    while not os.path.exists(stop):
        done = lancens("--root", root, "prune", "--compact", *policy, "--yes", "--json")
        runs += 1
        tables = json.loads(done.stdout)["tables"] if done.stdout else []
        errors = [t["error"] for t in tables if t.get("error")]
        compacted = done.stdout.count('"published": true')
        print(runs, done.returncode, compacted, one_line(done.stderr), errors, flush=True)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "writer":
        root, first, count, rows, folder, partitions = args
        writer(root, int(first), int(count), int(rows), folder, int(partitions))
    else:
        pruner(*args)
