"""The multi-partition transaction of the partitioning spec: concurrent writers rebase and lose
nothing, and a writer killed half-way publishes nothing (not even through the next writer's
commit)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import lance
import pyarrow.parquet as pq
import pytest
from data import events
from helpers import SPEC1, invoke, partition_tables, published_rows


@pytest.fixture
def root(local_root, tmp_path):
    pq.write_table(events(1), tmp_path / "schema.parquet")
    result = invoke(
        *local_root.args, "add-partition-spec", "--schema", str(tmp_path / "schema.parquet"), *SPEC1
    )
    assert result.exit_code == 0, result.stderr
    return local_root


def _writer(root, path) -> subprocess.Popen:
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *root.args, "write", "--from", str(path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _partitions(root) -> Counter:
    return Counter(
        (r["partition_field_event_year"], r["partition_field_country"])
        for r in partition_tables(root)
    )


def test_concurrent_writers_into_the_same_partitions_lose_nothing(root, tmp_path):
    writers, rounds, rows = 4, 3, 400
    batches = []
    for w in range(writers):
        for r in range(rounds):
            start = (w * rounds + r) * rows
            path = tmp_path / f"w{w}r{r}.parquet"
            pq.write_table(events(rows, seed=start, start=start), path)
            batches.append(path)
    # the writers start together; each runs its rounds one after the other
    pending = [batches[w * rounds : (w + 1) * rounds] for w in range(writers)]
    running = [_writer(root, queue.pop(0)) for queue in pending]
    outcomes = []
    while any(running):
        for i, proc in enumerate(running):
            if proc is None or proc.poll() is None:
                continue
            outcomes.append((proc.returncode, proc.stderr.read(), proc.stdout.read()))
            running[i] = _writer(root, pending[i].pop(0)) if pending[i] else None
        time.sleep(0.05)
    assert all(code == 0 for code, _, _ in outcomes), outcomes
    rebases = sum(json.loads(out)["rebases"] for _, _, out in outcomes)
    print(f"{len(outcomes)} writes, {rebases} rebases")
    assert rebases > 0, "the writers must have met (else nothing was tested)"
    seen = published_rows(root)["id"].to_pylist()
    assert sorted(seen) == list(range(writers * rounds * rows)), "every row exactly once"
    assert all(n == 1 for n in _partitions(root).values()), "one table per partition"
    namespaces = [
        r["object_id"]
        for r in lance.dataset(str(root.local_path / "__manifest"))
        .to_table(filter="object_type = 'namespace'")
        .to_pylist()
        if r["object_id"].count("$") == 1
    ]
    years = {y for y, _ in _partitions(root)}
    assert len(namespaces) == len(years), "one namespace per year"
    assert invoke(*root.args, "check").exit_code == 0


def test_a_killed_write_publishes_nothing(root, tmp_path):
    first = tmp_path / "first.parquet"
    pq.write_table(events(2000, seed=1), first)
    assert invoke(*root.args, "write", "--from", str(first)).exit_code == 0
    before = sorted(published_rows(root)["id"].to_pylist())

    big = tmp_path / "big.parquet"
    pq.write_table(events(300_000, seed=2, start=10_000), big)
    started = time.monotonic()
    proc = _writer(root, big)
    proc.wait(timeout=300)
    runtime = time.monotonic() - started
    assert proc.returncode == 0
    # start again from `first` only
    published = sorted(published_rows(root)["id"].to_pylist())
    assert len(published) == 2000 + 300_000

    rng = random.Random(7)
    kills = 0
    # six trials at least, more while fewer than three were killed (a write that runs faster
    # than the timed one ends before its kill: the machine's load decides, not the code)
    for trial in range(12):
        if trial >= 6 and kills >= 3:
            break
        fresh = tmp_path / f"root{trial}"
        fresh.mkdir()
        args = ["--root", str(fresh)]
        assert invoke(*args, "add-partition-spec", "--schema", str(first), *SPEC1).exit_code == 0
        assert invoke(*args, "write", "--from", str(first)).exit_code == 0
        proc = subprocess.Popen(
            [sys.executable, "-m", "lancens_cli", *args, "write", "--from", str(big)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 0.95) * runtime)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        killed_root = type(root)(str(fresh), {}, fresh)
        seen = sorted(published_rows(killed_root)["id"].to_pylist())
        assert seen in (before, sorted(before + list(range(10_000, 310_000)))), trial
        # what the killed write left is never-published debris that check --fix clears (a kill
        # inside the `__manifest` commit leaves its staged manifest file)
        report = json.loads(invoke(*args, "check", "--json").stdout)
        debris = {"abandoned_table_write", "unreferenced_data_file", "staged_manifest_file"}
        assert {f["code"] for f in report["findings"]} <= debris, report
        fixed = invoke(*args, "check", "--fix", "--grace-minutes", "0")
        assert fixed.exit_code == 0, fixed.stdout
        assert sorted(published_rows(killed_root)["id"].to_pylist()) == seen
        # the next write must not publish what the killed one left in the tables
        extra = tmp_path / "extra.parquet"
        pq.write_table(events(500, seed=3, start=900_000), extra)
        assert invoke(*args, "write", "--from", str(extra)).exit_code == 0
        after = sorted(published_rows(killed_root)["id"].to_pylist())
        assert after == sorted(seen + list(range(900_000, 900_500))), trial
    assert kills >= 3


def test_a_check_fix_during_a_write_cannot_lose_its_new_tables(root, tmp_path, monkeypatch):
    """`check --fix` with too short a grace takes a write's not-yet-published tables for a dead
    write's and deletes them; the write notices before it publishes and writes them again."""
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned import write as partition_write

    real = partition_write._write_tables
    fixes = []

    def write_then_fix(*args):
        real(*args)
        if not fixes:
            fixes.append(invoke(*root.args, "check", "--fix", "--grace-minutes", "0"))

    monkeypatch.setattr(partition_write, "_write_tables", write_then_fix)
    ns = Namespace(NamespaceConfig.from_properties({"root": root.uri}))
    result = partition_write.write_partitioned(ns, events(500, seed=9))
    assert fixes and "abandoned_table_write" in fixes[0].stdout, "the fix did delete tables"
    assert result.rebases >= 1
    assert sorted(published_rows(root)["id"].to_pylist()) == list(range(500))
    assert invoke(*root.args, "check").exit_code == 0
