"""SIGKILL of `prune` at random moments: every kept version stays readable, and a rerun
completes the work (a killed run's lease does not block it).

By default as many kills as fit in about 60 s; `LANCENS_PRUNE_KILLS=30` (or more) asks for a
fixed number.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import lance
import pyarrow as pa
import pytest
from data import country_rows
from helpers import run_cli
from prune_namespace import assert_same, build, reachable

FAST = ["--older-than", "1s", "--grace", "1s", "--force", "--yes"]
KILLS = int(os.environ.get("LANCENS_PRUNE_KILLS", "0"))
BUDGET_SECONDS = 60


def _more_work(built, n: int) -> None:
    """New versions to expire, a new dead partition write and new debris."""
    for i in range(3):
        mode = "overwrite" if i == 1 else "append"
        value = pa.table({"a": pa.array([n * 10 + i], pa.int64())})
        lance.write_dataset(value, built.table, mode=mode)
    manifest = lance.dataset(str(built.path / "__manifest"))
    for row in manifest.to_table(filter="read_version IS NOT NULL").to_pylist():
        path = built.path / row["location"]
        if lance.dataset(path).latest_version == row["read_version"]:
            lance.write_dataset(country_rows(10_000 + n * 10, 2), path, mode="append")
            break
    lance.fragment.write_fragments(pa.table({"a": pa.array([n], pa.int64())}), built.table)
    ghost = built.path / f"0badc0{n % 256:02x}_plain$ghost{n}" / "data"
    ghost.mkdir(parents=True)
    source = next((built.table / "data").iterdir())
    shutil.copy(source, ghost / source.name)
    staged_source = next((built.path / "__manifest" / "data").iterdir())
    # Lance names data files with 0s and 1s: a leading 9 never names the source itself
    shutil.copy(staged_source, staged_source.with_name(f"9{n:07d}" + staged_source.name[8:]))


def _prune(root) -> subprocess.Popen:
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *root.args, "prune", *FAST],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


@pytest.mark.slow
def test_sigkill_at_random_moments_keeps_every_kept_version_readable(local_root, tmp_path):
    built = build(local_root, tmp_path)
    rng = random.Random(int(os.environ.get("LANCENS_PRUNE_KILL_SEED", "11")))
    time.sleep(1.1)
    started = time.monotonic()
    full = run_cli(*local_root.args, "prune", *FAST)  # how long a whole run takes
    duration = time.monotonic() - started
    assert full.exit_code == 0, full.stderr
    kills = 0
    deadline = time.monotonic() + BUDGET_SECONDS
    n = 0
    while (kills < KILLS) if KILLS else (time.monotonic() < deadline or kills < 5):
        n += 1
        _more_work(built, n)
        time.sleep(1.1)
        expected = reachable(built)
        proc = _prune(local_root)
        time.sleep(rng.uniform(0.2, duration + 0.3))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        assert_same(expected, reachable(built))  # whatever the moment, nothing kept is lost
        if n % 3 == 0:
            rerun = run_cli(*local_root.args, "prune", *FAST)
            assert rerun.exit_code == 0, rerun.stderr
            assert_same(expected, reachable(built))
    final = run_cli(*local_root.args, "prune", *FAST, "--json")
    assert final.exit_code == 0, final.stderr
    assert_same(expected, reachable(built))
    check = run_cli(*local_root.args, "check")
    assert check.exit_code == 0, check.stdout + check.stderr
    assert not [p for p in built.path.iterdir() if "ghost" in p.name]
    print(f"{kills} SIGKILLs of prune; a full run takes {duration:.1f} s")
