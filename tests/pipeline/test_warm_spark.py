"""`lancens spark start|status|stop` and the Spark commands that use its server, as a user runs
them: real subprocesses, a real Spark Connect server started from pyspark's own
`sbin/start-connect-server.sh`, the record in a state directory of the test's own.

One server serves the module (a start costs 30-60 s here); the tests after the first ones kill
it, start it again (twice at once: one server) and stop it, so they run in file order. The
record's rules without a server (no record, garbage, a pid that is another program's) are the
fast tests at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import Result, invoke

from lancens_cli.pipeline import server_record

pytestmark = pytest.mark.spark

USING = "using the Spark Connect server of 'lancens spark start'"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
N = 600


@dataclass
class Warm:
    """A state directory of the test's own, and the namespace the scans read."""

    xdg: Path  # XDG_STATE_HOME of the children: the state directory is xdg/lancens
    root: str
    table: pa.Table

    @property
    def state(self) -> Path:
        return self.xdg / "lancens"

    def env(self) -> dict[str, str]:
        """A user's environment: nothing names a Spark, the record is ours."""
        env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1", "XDG_STATE_HOME": str(self.xdg)}
        for key in ("LANCENS_SPARK_MASTER", "SPARK_REMOTE", "LANCENS_PROFILE", "LANCENS_STATE_DIR"):
            env.pop(key, None)
        return env

    def run(self, *args: str, timeout: float = 600) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "lancens_cli", *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "lancens_cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self.env(),
        )

    def record(self) -> dict | None:
        path = self.state / "spark-connect.json"
        return json.loads(path.read_text()) if path.exists() else None

    def count(self, where: str) -> int:
        """`scan --where WHERE --count` as the scan answers it (stderr checked by the caller)."""
        done = self.run("--root", self.root, *scan(where))
        assert done.exit_code == 0, done.stderr
        return int(done.stdout)

    def servers(self) -> list[int]:
        """The pids of the running SparkConnectServer JVMs of this state directory."""
        pid_dir = f"SPARK_PID_DIR={self.state / 'spark-connect' / 'pids'}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                running = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
                ours = pid_dir in (proc / "environ").read_bytes().split(b"\0")
                if running and ours and SERVER_CLASS.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except (OSError, IndexError):
                continue
        return found


def scan(where: str, *more: str) -> list[str]:
    """`scan --where WHERE --count` read by Spark (`--engine spark`: never answered from Lance's
    manifests or in the command's own process, whatever the predicate)."""
    return ["scan", "--where", where, "--count", "--engine", "spark", *more]


def expected(table: pa.Table, keep) -> int:
    """How many rows `keep(row)` keeps, counted in Python."""
    return sum(1 for row in table.to_pylist() if keep(row))


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def gone(pid: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while server_record.process_is_server(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not server_record.process_is_server(pid)


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> Iterator[Warm]:
    """A partitioned namespace and a started server; every server of it stopped at the end."""
    folder = tmp_path_factory.mktemp("warm")
    table = events(N, seed=3)
    root = partitioned_root(folder, table.schema, "country")
    pq.write_table(table, folder / "events.parquet")
    written = invoke(*root.args, "write", "--from", str(folder / "events.parquet"))
    assert written.exit_code == 0, written.stderr
    # short: a Unix socket's path (the server's Python workers') must fit in about 100 bytes
    xdg = Path(tempfile.mkdtemp(prefix="lw-", dir="/tmp"))
    state = Warm(xdg, root.uri, table)
    try:
        started = state.run("spark", "start", "--json")
        assert started.exit_code == 0, started.stderr
        yield state
    finally:
        state.run("spark", "stop", timeout=300)
        for pid in state.servers():
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(xdg, ignore_errors=True)


@pytest.mark.slow
def test_start_records_the_server_and_status_reports_it(warm):
    record = warm.record()
    assert record is not None
    assert record["url"] == f"sc://127.0.0.1:{record['port']}"
    assert record["python"] == sys.executable and record["master"] == "local[*]"
    assert Path(record["log"]).is_file() and Path(record["log"]).parent.is_relative_to(warm.state)
    assert warm.servers() == [record["pid"]]
    assert listening(record["port"])
    assert (warm.state.stat().st_mode & 0o777) == 0o700

    status = warm.run("spark", "status", "--json")
    assert status.exit_code == 0, status.stderr
    shown = status.json()
    assert shown["state"] == "running" and shown["pid"] == record["pid"]
    assert shown["url"] == record["url"] and shown["uptime_seconds"] >= 0
    text = warm.run("spark", "status")
    assert text.exit_code == 0 and text.stdout.split("\t")[:3] == [
        "running",
        record["url"],
        str(record["pid"]),
    ]


@pytest.mark.slow
def test_status_with_a_live_server_imports_no_pyspark(warm):
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lancens_cli", "spark", "status"],
        capture_output=True,
        text=True,
        env=warm.env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pyspark" not in proc.stderr


@pytest.mark.slow
def test_scans_in_a_row_use_the_server_and_count_right(warm):
    url = warm.record()["url"]
    for where, keep in [
        ("id % 5 = 0", lambda r: r["id"] % 5 == 0),
        ("id % 7 = 3", lambda r: r["id"] % 7 == 3),
        ("country = 'DE' AND id > 100", lambda r: r["country"] == "DE" and r["id"] > 100),
        ("id % 5 = 0", lambda r: r["id"] % 5 == 0),
    ]:
        done = warm.run("--root", warm.root, *scan(where))
        assert done.exit_code == 0, done.stderr
        assert int(done.stdout) == expected(warm.table, keep), where
        assert f"lancens: {USING} ({url}); --master 'local[*]' for a fresh local Spark" in (
            done.stderr.splitlines()
        )
        assert "Spark Connect server" in done.stderr


@pytest.mark.slow
def test_two_scans_at_once_are_both_right(warm):
    asked = {
        "country = 'US' AND id % 2 = 0": lambda r: r["country"] == "US" and r["id"] % 2 == 0,
        "id % 3 = 1": lambda r: r["id"] % 3 == 1,
    }
    running = {where: warm.start("--root", warm.root, *scan(where)) for where in asked}
    for where, proc in running.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        assert USING in err
        assert int(out) == expected(warm.table, asked[where]), where


@pytest.mark.slow
def test_start_again_says_so_and_starts_no_second_server(warm):
    record = warm.record()
    again = warm.run("spark", "start")
    assert again.exit_code == 0, again.stderr
    assert again.stdout.strip() == record["url"]
    assert "already running" in again.stderr
    assert warm.record() == record
    assert warm.servers() == [record["pid"]]


@pytest.mark.slow
def test_a_named_master_does_not_use_the_server(warm):
    done = warm.run("--root", warm.root, *scan("id % 5 = 0", "--master", "local[1]"))
    assert done.exit_code == 0, done.stderr
    assert int(done.stdout) == N // 5
    assert "Spark Connect server" not in done.stderr


@pytest.mark.slow
def test_small_reads_skip_the_server_and_explain_plans_on_a_local_spark(warm):
    """With the server up: a read nothing is left to Spark in is still read in the command's
    own process; `--explain`, which needs the JVM's plan, runs a local Spark, not the server."""
    small = warm.run("--root", warm.root, "scan", "--where", "country = 'DE'", "--count")
    assert small.exit_code == 0 and "Spark Connect server" not in small.stderr, small.stderr
    assert int(small.stdout) == expected(warm.table, lambda r: r["country"] == "DE")
    plan = warm.run("--root", warm.root, "--json", "scan", "--where", "id % 5 = 0", "--explain")
    assert plan.exit_code == 0, plan.stderr
    assert "Spark Connect server" not in plan.stderr
    shown = json.loads(plan.stdout)
    assert shown["engine"] == "spark" and "BatchScan" in shown["physical_plan"]


@pytest.mark.slow
def test_a_killed_server_is_stale_and_a_scan_falls_back_to_local_spark(warm):
    record = warm.record()
    assert record is not None and warm.servers() == [record["pid"]]
    os.kill(record["pid"], signal.SIGKILL)
    assert gone(record["pid"])

    scanned = warm.run("--root", warm.root, *scan("id % 5 = 0"))
    assert scanned.exit_code == 0, scanned.stderr
    assert int(scanned.stdout) == N // 5
    gone_line = f"recorded server pid {record['pid']} is gone (a reboot or a kill)"
    assert (
        f"lancens: {gone_line}; running a fresh local Spark instead "
        "(`lancens spark start` starts another)"
    ) in scanned.stderr.splitlines()
    assert USING not in scanned.stderr
    assert warm.record() == record  # a reader never removes it: start, status and stop do

    status = warm.run("spark", "status")
    assert status.exit_code == 3
    assert status.stderr.splitlines() == [
        f"lancens: error: {gone_line}; `lancens spark start` starts another"
    ]
    assert warm.record() is None
    again = warm.run("spark", "status")
    assert again.exit_code == 3 and "is running" in again.stderr


@pytest.mark.slow
def test_two_starts_at_once_make_one_server(warm):
    starts = [warm.start("spark", "start") for _ in range(2)]
    outs = [proc.communicate(timeout=900) for proc in starts]
    assert [proc.returncode for proc in starts] == [0, 0], [err for _, err in outs]
    record = warm.record()
    assert record is not None
    assert [out.strip() for out, _ in outs] == [record["url"]] * 2
    assert sum("already running" in err for _, err in outs) >= 1
    assert warm.servers() == [record["pid"]]
    assert warm.count("id % 5 = 0") == N // 5


@pytest.mark.slow
def test_stop_leaves_nothing_running_and_twice_is_fine(warm):
    record = warm.record()
    assert record is not None
    stopped = warm.run("spark", "stop", timeout=300)
    assert stopped.exit_code == 0, stopped.stderr
    assert "stopped the Spark Connect server" in stopped.stderr
    assert gone(record["pid"], timeout=10)
    assert warm.servers() == []
    assert not listening(record["port"])
    assert warm.record() is None

    again = warm.run("spark", "stop")
    assert again.exit_code == 0, again.stderr
    assert "was running" in again.stderr
    assert warm.run("spark", "status").exit_code == 3


# --- the record's rules, without a server -------------------------------------------------------


@pytest.fixture
def state(tmp_path) -> Warm:
    """A state directory of its own and no server (the namespace is never read)."""
    return Warm(tmp_path / "xdg", str(tmp_path / "ns"), pa.table({"id": [0]}))


def write_record(state: Warm, text: str | bytes) -> None:
    state.state.mkdir(parents=True, exist_ok=True)
    data = text if isinstance(text, bytes) else text.encode()
    (state.state / "spark-connect.json").write_bytes(data)


def a_record(pid: int, port: int) -> str:
    return json.dumps(
        {
            "url": f"sc://127.0.0.1:{port}",
            "port": port,
            "pid": pid,
            "master": "local[*]",
            "spark_home": "/nowhere",
            "log": "/nowhere/log",
            "python": sys.executable,
            "started_at": "2026-01-01T00:00:00.000000Z",
            "lancens_version": "0",
        }
    )


def test_status_without_a_record_is_exit_3_and_stop_is_exit_0(state):
    status = state.run("spark", "status")
    assert status.exit_code == 3
    assert status.stderr.splitlines() == [
        "lancens: error: no Spark Connect server of `lancens spark start` is running; "
        "`lancens spark start` starts one"
    ]
    as_json = state.run("spark", "status", "--json")
    assert as_json.exit_code == 3
    assert json.loads(as_json.stderr)["error"]["name"] == "ServiceUnavailable"
    for _ in range(2):
        stopped = state.run("spark", "stop")
        assert stopped.exit_code == 0, stopped.stderr
        assert "was running" in stopped.stderr


def test_a_record_whose_pid_is_another_program_is_stale(state):
    with socket.socket() as listener:  # its port answers: only the pid tells it is not ours
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        write_record(state, a_record(os.getpid(), port))
        status = state.run("spark", "status")
        assert status.exit_code == 3
        assert status.stderr.splitlines() == [
            f"lancens: error: recorded server pid {os.getpid()} is now another program "
            "(the server is gone); `lancens spark start` starts another"
        ]
        assert state.record() is None
        write_record(state, a_record(os.getpid(), port))
        stopped = state.run("spark", "stop")  # never signals a pid that is not a server
        assert stopped.exit_code == 0, stopped.stderr
        assert "is now another program" in stopped.stderr and state.record() is None


def test_a_record_whose_pid_is_gone_is_stale(state):
    child = subprocess.Popen(["true"])
    child.wait()
    write_record(state, a_record(child.pid, 1))
    status = state.run("spark", "status")
    assert status.exit_code == 3
    assert f"recorded server pid {child.pid} is gone (a reboot or a kill)" in status.stderr


GARBAGE = [
    "{not json",
    "[]",
    '{"url": "sc://x", "pid": "12"}',
    b"\xff",
    json.dumps({**json.loads(a_record(1, 1)), "port": 99999999}),
    json.dumps({**json.loads(a_record(1, 1)), "url": "sc://elsewhere:1"}),
]


@pytest.mark.parametrize("text", GARBAGE)
def test_a_garbage_record_is_one_line_and_stale(state, text):
    write_record(state, text)
    status = state.run("spark", "status")
    assert status.exit_code == 3
    (line,) = status.stderr.splitlines()
    assert "spark-connect.json is unreadable" in line and "Traceback" not in status.stderr
    assert state.record() is None
    write_record(state, text)
    stopped = state.run("spark", "stop")
    assert stopped.exit_code == 0 and "Traceback" not in stopped.stderr


def test_the_record_never_names_a_server_for_another_lancens():
    """A live record of another interpreter is not used (its workers import another lancens)."""
    server = server_record.SparkServer.from_json(json.loads(a_record(os.getpid(), 1)))
    assert server_record.mismatch(server) is not None  # lancens_version "0"
    other = dataclasses.replace(server, python="/other/python")
    assert "/other/python" in (server_record.mismatch(other) or "")


@pytest.mark.parametrize("argv", [["spark", "status"], ["spark", "stop"]])
def test_status_and_stop_import_no_pyspark(state, argv):
    write_record(state, a_record(os.getpid(), 1))
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lancens_cli", *argv],
        capture_output=True,
        text=True,
        env=state.env(),
        timeout=120,
    )
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    assert "pyspark" not in proc.stderr


def test_the_state_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("LANCENS_STATE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert server_record.state_dir() == tmp_path / "explicit"
    monkeypatch.delenv("LANCENS_STATE_DIR")
    assert server_record.state_dir() == tmp_path / "xdg" / "lancens"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # not absolute: ignored, as XDG says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert server_record.state_dir() == tmp_path / "home" / ".local" / "state" / "lancens"


def test_start_refuses_what_lancens_owns_before_starting_anything(state):
    for conf in (
        "spark.connect.grpc.binding.port=1",
        "spark.connect.session.manager.defaultSessionTimeout=1m",
    ):
        refused = state.run("spark", "start", "--conf", conf)
        assert refused.exit_code == 2
        assert refused.stderr.startswith(f"lancens: error: --conf {conf.split('=')[0]}: ")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        busy = state.run("spark", "start", "--port", str(port))
    assert busy.exit_code == 1 and f"127.0.0.1:{port} is in use" in busy.stderr
    assert state.record() is None
    assert not list((state.state / "spark-connect" / "pids").glob("*.pid"))
