"""Writers and `prune --compact` loops at once, in separate processes, checked by exact row
multisets.

Two writer processes each run `lancens write` again and again, every write spreading its own
ids over twelve partitions; a third process runs `prune --compact --older-than 1s --retain 1
--force` in a loop. Meanwhile this process reads the namespace as a reader following the spec
would (a pinned `__manifest` version, each partition table at the `read_version` it publishes)
and checks that a write is seen whole or not at all, and never twice. At the end the published
rows are exactly the rows of the writes that reported success, each once.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("k", pa.string())])
WRITERS = 2
WRITES_PER_WRITER = 12
PARTITIONS = 12  # a write commits 12 tables before publishing them: a wide window
ROWS_PER_WRITE = 2 * PARTITIONS
ENV = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}

ROLES = str(Path(__file__).with_name("compact_stress_roles.py"))


def published_ids(root) -> list[int] | None:
    """The ids a spec-following reader sees at the current `__manifest` version; None when a
    version it was sent to expired under it (prune's window is 1s here), so read again."""
    try:
        manifest = lance.dataset(str(root / "__manifest"))
        ids: list[int] = []
        for row in manifest.to_table(filter="read_version IS NOT NULL").to_pylist():
            table = lance.dataset(str(root / row["location"]), version=row["read_version"])
            ids += table.to_table(columns=["id"]).column("id").to_pylist()
        return ids
    except (OSError, ValueError):  # lance raises these for a version removed meanwhile
        return None


def check_whole_writes(ids: list[int]) -> None:
    counts = collections.Counter(ids)
    twice = [i for i, n in counts.items() if n > 1]
    assert not twice, f"rows published twice: {twice[:10]}"
    per_write = collections.Counter(i // 1000 for i in ids)
    partial = {w: n for w, n in per_write.items() if n != ROWS_PER_WRITE}
    assert not partial, f"writes seen in part: {partial}"


@pytest.mark.slow
def test_writers_and_compaction_loops_never_publish_early_twice_or_in_part(tmp_path):
    root = tmp_path / "ns"
    root.mkdir()
    pq.write_table(SCHEMA.empty_table(), tmp_path / "schema.parquet")
    spec = ("add-partition-spec", "--schema", str(tmp_path / "schema.parquet"), "--field", "k")
    assert invoke("--root", str(root), *spec).exit_code == 0
    stop = tmp_path / "stop"
    writers = [
        subprocess.Popen(
            [sys.executable, ROLES, "writer", str(root), str(1 + n * WRITES_PER_WRITER)]
            + [str(WRITES_PER_WRITER), str(ROWS_PER_WRITE), str(tmp_path), str(PARTITIONS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for n in range(WRITERS)
    ]
    pruner = subprocess.Popen(
        [sys.executable, ROLES, "pruner", str(root), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    looks = 0
    try:
        while any(w.poll() is None for w in writers):
            ids = published_ids(root)
            if ids is not None:
                check_whole_writes(ids)
                looks += 1
            time.sleep(0.05)
    finally:
        stop.touch()
        outputs = [w.communicate(timeout=300) for w in writers]
        prune_out, prune_err = pruner.communicate(timeout=300)
    reports = [line.split(" ", 2) for out, _ in outputs for line in out.splitlines()]
    succeeded = {int(write) for write, code, _ in reports if code == "0"}
    failed = {int(write): why for write, code, why in reports if code != "0"}
    assert len(reports) == WRITERS * WRITES_PER_WRITER, outputs
    assert all(code in ("0", "4") for _, code, _ in reports), reports  # 4: a conflict, retried
    prune_runs = [line.split(" ", 3) for line in prune_out.splitlines()]
    failed_runs = [run for run in prune_runs if run[1] != "0"]
    assert prune_runs and not failed_runs, failed_runs
    compactions = sum(int(run[2]) for run in prune_runs)
    print(f"{len(prune_runs)} prune runs published {compactions} compactions; {looks} looks")
    final = published_ids(root)
    assert final is not None
    check_whole_writes(final)
    assert set(i // 1000 for i in final) == succeeded, failed
    assert len(succeeded) >= WRITES_PER_WRITER  # the writers did get through
    assert looks > 10
    assert invoke("--root", str(root), "check").exit_code == 0
