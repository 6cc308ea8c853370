"""A rename of a root V1 table killed at random moments: never two live copies, never none, and
a rerun of the same command completes it."""

from __future__ import annotations

import json
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
from helpers import Root, run_cli

pytestmark = pytest.mark.slow  # kill loops: hundreds of processes

ROWS_PER_VERSION = 100
VERSIONS = 30


def _build_table(root: Root, name: str = "old") -> None:
    """A root V1 table with many versions and files, registered in the manifest."""
    uri = f"{root.uri}/{name}.lance"
    for version in range(VERSIONS):
        table = pa.table({"v": [version] * ROWS_PER_VERSION, "x": list(range(ROWS_PER_VERSION))})
        lance.write_dataset(
            table, uri, mode="append" if version else "create", storage_options=root.storage_options
        )
    assert run_cli(*root.args, "migrate-v1").exit_code == 0


def _live_tables(root: Root) -> dict[str, int]:
    """Name -> rows of every table in {old, new} that a user can read right now."""
    listing = run_cli(*root.args, "ls", "--json")
    assert listing.exit_code == 0, listing.stderr
    live = {}
    for entry in json.loads(listing.stdout)["entries"]:
        if entry["id"] in ("old", "new") and entry["state"] == "ok":
            described = run_cli(*root.args, "describe", entry["id"], "--json")
            assert described.exit_code == 0, described.stderr
            live[entry["id"]] = described.json()["details"]["rows"]
    return live


def _kill_after(args: list[str], delay: float) -> int | None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "LANCE_LOG": "error"},
    )
    try:
        return proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return None


def _kill_and_rerun(root: Root, delays: list[float]) -> list[str]:
    outcomes = []
    for delay in delays:
        code = _kill_after([*root.args, "rename", "old", "new"], delay)
        outcomes.append("finished" if code == 0 else f"killed at {delay:.2f}s")
        live = _live_tables(root)
        # Exactly one name holds the data at every moment a process can be stopped.
        assert len(live) == 1, (delay, live)
        assert list(live.values()) == [ROWS_PER_VERSION * VERSIONS]
        if "new" in live:
            break
    rerun = run_cli(*root.args, "rename", "old", "new")
    if rerun.exit_code != 0:  # the killed run had already finished the last step
        assert rerun.exit_code == 3 and "old" in rerun.stderr, rerun.stderr
    assert _live_tables(root) == {"new": ROWS_PER_VERSION * VERSIONS}
    checked = run_cli(*root.args, "check", "--json")
    codes = {f["code"] for f in checked.json()["findings"]}
    assert codes <= {"staged_manifest_file"}, checked.stdout
    return outcomes


def _timed_rename(root: Root, old: str = "old", new: str = "new") -> float:
    start = time.monotonic()
    assert run_cli(*root.args, "rename", old, new).exit_code == 0
    return time.monotonic() - start


def test_kill_rename_local(tmp_path):
    template = tmp_path / "template"
    template.mkdir()
    _build_table(Root(str(template), {}, template))
    timing = tmp_path / "timing"
    shutil.copytree(template, timing)
    runtime = _timed_rename(Root(str(timing), {}, timing))
    rng = random.Random(7)
    outcomes = []
    for round_number in range(8):
        work = tmp_path / f"round{round_number}"
        shutil.copytree(template, work)
        root = Root(str(work), {}, work)
        delays = sorted(rng.uniform(0.3, 1.2) * runtime for _ in range(2))
        outcomes += _kill_and_rerun(root, delays)
        assert not (work / "old.lance").exists()
    print(outcomes)
    assert any(o.startswith("killed") for o in outcomes), outcomes


@pytest.mark.s3
def test_kill_rename_s3(s3_root, tmp_path):
    _build_table(s3_root, "timing")
    runtime = _timed_rename(s3_root, "timing", "timed")  # same size, same store, same load
    rng = random.Random(11)
    delays = sorted(rng.uniform(0.25, 0.9) * runtime for _ in range(3))
    for _attempt in range(3):  # a loaded machine may finish faster than the timed run did
        _build_table(s3_root)
        outcomes = _kill_and_rerun(s3_root, delays)
        print(outcomes)
        if any(o.startswith("killed") for o in outcomes):
            break
        assert run_cli(*s3_root.args, "drop", "new", "--yes").exit_code == 0
        delays = [d * 0.5 for d in delays]
    assert any(o.startswith("killed") for o in outcomes), outcomes
