"""Ctrl-C during a Spark command, as a user's terminal sends it (SIGINT to the process group):
the jobs are cancelled, nothing is published, and the command says so in one line, exit 130.

PySpark's own SIGINT handler cancels the jobs from inside the signal handler, a py4j call that
re-enters the connection the main thread waits on: py4j then printed four tracebacks (~50
lines) before the exit. Real subprocesses, each with its own JVM.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import data
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import SPEC1, Root, ok, tree_snapshot

pytestmark = pytest.mark.spark

events = functools.partial(data.events, first=dt.date(2023, 6, 1), days=700)
ENV = {"LANCENS_SPARK_MASTER": "local[2]", "LANCE_LOG": "error", "NO_COLOR": "1"}


@pytest.fixture
def root(local_root: Root, tmp_path: Path) -> Root:
    schema = tmp_path / "schema.parquet"
    pq.write_table(pa.Table.from_batches([], events(1).schema), schema)
    ok(local_root, "add-partition-spec", "--schema", str(schema), *SPEC1)
    return local_root


def _start(*args: str, marker: str) -> subprocess.Popen:
    """`lancens ARGS` in a session of its own, as a terminal's foreground job."""
    return subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *args],
        env={**os.environ, **ENV, "INTERRUPT_TEST_JOB": marker},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _ctrl_c(process: subprocess.Popen) -> None:
    """What a terminal's Ctrl-C does: SIGINT to every process of the foreground job."""
    os.killpg(process.pid, signal.SIGINT)


def _read_stderr_until(process: subprocess.Popen, words: str, timeout: float = 120) -> bytes:
    os.set_blocking(process.stderr.fileno(), False)
    seen = b""
    deadline = time.monotonic() + timeout
    while words.encode() not in seen:
        assert process.poll() is None, seen.decode()
        assert time.monotonic() < deadline, seen.decode()
        seen += process.stderr.read() or b""
        time.sleep(0.02)
    os.set_blocking(process.stderr.fileno(), True)
    return seen


def _files(root: Path) -> set[str]:
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names}


def _manifest_version(root: Root) -> int:
    return lance.dataset(str(root.local_path / "__manifest")).version


def _wait_until_no_process_has(marker: str, timeout: float = 60) -> None:
    """The job's Python workers outlive the driver by a moment: wait until none runs."""
    needle = f"INTERRUPT_TEST_JOB={marker}".encode()
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0"):
                    alive.append(entry.name)
            except OSError:
                continue
        if not alive:
            return
        assert time.monotonic() < deadline, f"processes of the job still run: {alive}"
        time.sleep(0.1)


def _interrupted(
    process: subprocess.Popen, marker: str, running: Callable[[], bytes]
) -> tuple[bytes, bytes]:
    """Ctrl-C `process` once `running()` returned (what stderr said so far); its stdout and
    whole stderr after it exits, every process of its job gone."""
    try:
        seen = running()
        _ctrl_c(process)
        out, rest = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    _wait_until_no_process_has(marker)
    return out, seen + rest


def _once_started(
    process: subprocess.Popen, words: str, ready: Callable[[], bool]
) -> Callable[[], bytes]:
    """Wait for `words` on stderr, then until `ready()` (the job runs)."""

    def wait() -> bytes:
        seen = _read_stderr_until(process, words)
        deadline = time.monotonic() + 120
        while not ready():
            assert process.poll() is None and time.monotonic() < deadline, seen
            time.sleep(0.01)
        return seen

    return wait


def test_ctrl_c_during_ingest_is_one_line_exit_130_and_publishes_nothing(root, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(40):
        pq.write_table(events(10_000, seed=i, start=i * 10_000), inputs / f"{i}.parquet")
    ok(root, "write", "--from", str(inputs / "0.parquet"))
    version = _manifest_version(root)
    before = tree_snapshot(root.local_path)
    known = _files(root.local_path)
    marker = f"lancens-interrupted-ingest-{uuid.uuid4().hex}"

    process = _start("--root", root.uri, "ingest", str(inputs), marker=marker)

    def writing() -> bool:  # the tasks are writing: the job runs
        return bool(_files(root.local_path) - known)

    started = _once_started(process, "ingest: starting Spark", writing)
    out, err = _interrupted(process, marker, started)

    stderr = err.decode()
    assert process.returncode == 130, stderr
    assert stderr.splitlines() == ["ingest: starting Spark", "lancens: interrupted"], stderr
    assert "Traceback" not in stderr and out == b""
    assert _manifest_version(root) == version  # nothing published
    ok(root, "check", "--fix", "--grace-minutes", "0")
    assert tree_snapshot(root.local_path) == before


@pytest.fixture(scope="module")
def rows_root(tmp_path_factory) -> Root:
    """A partitioned root holding 400,000 rows, for scans long enough to interrupt."""
    folder = tmp_path_factory.mktemp("interrupted-scans")
    made = Root(str(folder / "ns"), {}, folder / "ns")
    made.local_path.mkdir()
    schema = folder / "schema.parquet"
    pq.write_table(pa.Table.from_batches([], events(1).schema), schema)
    ok(made, "add-partition-spec", "--schema", str(schema), *SPEC1)
    for i in range(2):
        path = folder / f"rows{i}.parquet"
        pq.write_table(events(200_000, seed=i, start=i * 200_000), path)
        ok(made, "write", "--from", str(path))
    return made


def test_ctrl_c_while_scan_writes_files_is_one_line_exit_130(rows_root, tmp_path):
    """The job is running (Spark made the output directory) when Ctrl-C comes."""
    out = tmp_path / "out"
    marker = f"lancens-interrupted-scan-{uuid.uuid4().hex}"

    process = _start("--root", rows_root.uri, "scan", "--to", str(out), marker=marker)
    stdout, err = _interrupted(process, marker, _once_started(process, "scan: reading", out.exists))

    stderr = err.decode()
    assert process.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "lancens: interrupted", stderr
    assert len(stderr.splitlines()) == 3 and "Traceback" not in stderr  # starting, reading
    assert stdout == b"" and not (out / "_SUCCESS").exists()


def test_ctrl_c_during_a_streamed_scan_stops_at_the_next_row(rows_root):
    """An unbounded scan into a pipe (rows streamed), stopped while it writes rows: the rows
    already fetched from Spark are not all printed first."""
    marker = f"lancens-interrupted-stream-{uuid.uuid4().hex}"

    process = _start("--root", rows_root.uri, "scan", marker=marker)

    def flowing() -> bytes:
        first = process.stdout.readline()  # rows flow; the pipe, unread, holds the rest back
        assert first.count(b"\t") == 3
        return b""

    out, err = _interrupted(process, marker, flowing)

    stderr = err.decode()
    assert process.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "lancens: interrupted", stderr
    assert len(stderr.splitlines()) == 3 and "Traceback" not in stderr  # starting, reading
    assert 1 + out.count(b"\n") < 400_000  # it stopped before the last row
