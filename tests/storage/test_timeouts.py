"""A bucket that does not answer: a clear error within a bounded, configurable time.

Three kinds of unreachable endpoint on 127.0.0.1, each in a background thread of the test:

* a black hole: accepts TCP connections and never answers (read timeout);
* a full backlog: a listening socket that never accepts, its one-slot queue already taken, so
  new connections hang in the handshake (connect timeout);
* a port with nothing listening (connection refused).

Every command is a real `python -m lancens_cli` subprocess; it must exit 1 with one line on
stderr that names the storage problem, no traceback, nothing on stdout, and within a bound
derived from the timeout. Measured with pylance 14.0.2 / s3fs: a black-hole run makes three
requests that each wait the full timeout, so `timeout=T` takes about 3*T plus 1-3 s of start-up
(T=1s: 4-6 s, T=3s: about 11 s, T=5s: about 18 s). The bound allows 4*T + 15 s.
Bad values of the option are usage errors (exit 2) that name it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from helpers import Root

ROOT = "s3://b/ns"


def bound(timeout_seconds: float) -> float:
    """Longest acceptable run against an endpoint that never answers."""
    return 4 * timeout_seconds + 15


@dataclass
class Run:
    argv: list[str]
    exit_code: int | None  # None: killed after the cap (a hang)
    stdout: str
    stderr: str
    seconds: float


def run(argv: list[str], env: dict[str, str] | None = None, cap: float = 60) -> Run:
    """`python -m lancens_cli ARGV`, killed after `cap` seconds (then exit_code is None)."""
    full_env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1", **(env or {})}
    for key in list(full_env):
        if key.startswith("LANCENS_") and key not in (env or {}):
            del full_env[key]
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )
    try:
        out, err = proc.communicate(timeout=cap)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        code = None
    return Run(argv, code, out, err, time.monotonic() - started)


def run_all(jobs: list[tuple[list[str], dict | None]], cap: float = 60) -> list[Run]:
    """Run the CLI processes three at a time (each measures its own wall time); more would
    only measure how long eight Python start-ups take on a small machine."""
    with ThreadPoolExecutor(min(3, len(jobs))) as pool:
        return list(pool.map(lambda job: run(job[0], job[1], cap), jobs))


def s3_args(port: int, *extra: str) -> list[str]:
    args = ["-r", ROOT]
    for option in (
        f"endpoint=http://127.0.0.1:{port}",
        "region=us-east-1",
        "access_key_id=x",
        "secret_access_key=y",
        "allow_http=true",
        *extra,
    ):
        args += ["-s", option]
    return args


def assert_clear_error(result: Run, *, must_mention: tuple[str, ...], limit: float) -> str:
    """Exit 1, nothing on stdout, one error line naming the problem, no traceback, in time."""
    what = f"lancens {' '.join(result.argv)}"
    assert result.exit_code is not None, f"{what}: still running after {result.seconds:.0f}s"
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, f"{what}: traceback:\n{result.stderr[-2000:]}"
    assert result.exit_code == 1, f"{what}: exit {result.exit_code}, stderr {result.stderr!r}"
    assert result.stdout == "", f"{what}: stdout {result.stdout!r}"
    assert len(lines) == 1, f"{what}: expected one line on stderr, got {lines}"
    line = lines[0]
    if "--json" in result.argv:
        error = json.loads(line)["error"]
        assert error["name"] == "ServiceUnavailable" and error["code"] == 17, error
        line = error["message"]
    else:
        assert line.startswith("lancens: error: "), line
    for word in ("storage", ROOT, *must_mention):
        assert word.lower() in line.lower(), f"{what}: {word!r} not in {line!r}"
    assert result.seconds < limit, f"{what}: took {result.seconds:.1f}s (bound {limit:.0f}s)"
    return line


# --- unreachable endpoints ------------------------------------------------------------------


class BlackHole:
    """Accepts connections and keeps them open without ever sending a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def black_hole():
    hole = BlackHole()
    yield hole
    hole.close()


@pytest.fixture
def full_backlog():
    """A port whose handshakes never complete: listen(0), never accept, the queue already full."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=5)
    probe = socket.socket()
    probe.settimeout(0.5)
    with pytest.raises(TimeoutError):  # the premise: a new connection now hangs
        probe.connect(("127.0.0.1", port))
    probe.close()
    yield port
    filler.close()
    server.close()


@pytest.fixture
def refused_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again: nothing listens there


COMMANDS = [
    ["ls"],
    ["describe"],
    ["create", "namespace", "x"],
    ["migrate-v1"],
    ["check"],
    ["ls", "-R", "--json"],
    ["describe", "t"],
    ["drop", "t", "--yes"],
]


# --- 1. a bucket that never answers: bounded, clear, configurable ----------------------------


def test_black_hole_every_command_fails_clearly_within_bound(black_hole):
    """timeout=1s: every command gives one clear line within 4*1+15 s, none hangs."""
    results = run_all(
        [(s3_args(black_hole.port, "timeout=1s") + cmd, None) for cmd in COMMANDS], cap=120
    )
    for result in results:
        assert_clear_error(result, must_mention=("timeout",), limit=bound(1))
        # It did wait for the storage: the error is not a short cut that never asked.
        assert result.seconds >= 1, f"{result.argv}: {result.seconds:.1f}s is below the timeout"
    print(
        "\n[timeouts] black hole, timeout=1s: "
        + ", ".join(
            f"{' '.join(c)} {r.seconds:.1f}s" for c, r in zip(COMMANDS, results, strict=True)
        )
        + f"; {len(black_hole.accepted)} connections for {len(results)} runs"
    )


def test_black_hole_larger_timeout_takes_longer(black_hole):
    """The wait follows the option: `-s timeout=4s` and LANCENS_STORAGE__TIMEOUT=4s are both
    at least one 3 s longer wait slower than 1s, and still inside their own bound."""
    short, long_flag, long_env = run_all(
        [
            (s3_args(black_hole.port, "timeout=1s") + ["ls"], None),
            (s3_args(black_hole.port, "timeout=4s") + ["ls"], None),
            (s3_args(black_hole.port) + ["ls"], {"LANCENS_STORAGE__TIMEOUT": "4s"}),
        ],
        cap=120,
    )
    assert_clear_error(short, must_mention=("timeout",), limit=bound(1))
    for result in (long_flag, long_env):
        assert_clear_error(result, must_mention=("timeout",), limit=bound(4))
        assert result.seconds >= short.seconds + 3, (
            f"timeout=4s took {result.seconds:.1f}s, timeout=1s {short.seconds:.1f}s: "
            "the option does not govern the wait"
        )
    print(
        f"\n[timeouts] black hole ls: timeout=1s {short.seconds:.1f}s, -s timeout=4s "
        f"{long_flag.seconds:.1f}s, LANCENS_STORAGE__TIMEOUT=4s {long_env.seconds:.1f}s"
    )


def test_connect_timeout_bounds_a_handshake_that_never_completes(full_backlog):
    """connect_timeout governs the handshake on its own, whatever the (long) read timeout."""
    results = run_all(
        [
            (s3_args(full_backlog, "timeout=60s", "connect_timeout=1s") + cmd, None)
            for cmd in (["ls"], ["create", "namespace", "x"])
        ],
        cap=120,
    )
    for result in results:
        assert_clear_error(result, must_mention=("timeout",), limit=bound(1))
    print(
        "\n[timeouts] full backlog, connect_timeout=1s (timeout=60s): "
        + ", ".join(f"{r.seconds:.1f}s" for r in results)
    )


# --- 2. nothing listening: fast ---------------------------------------------------------------


def test_connection_refused_is_fast_and_clear(refused_port):
    """No timeout given (the default is 30 s, three waits would be 90 s): a refused connection
    must not wait for it. Measured: 1.5-3 s each."""
    results = run_all([(s3_args(refused_port) + cmd, None) for cmd in COMMANDS], cap=120)
    for result in results:
        assert_clear_error(result, must_mention=(f"127.0.0.1:{refused_port}",), limit=20)
    print(
        "\n[timeouts] connection refused: "
        + ", ".join(
            f"{' '.join(c)} {r.seconds:.1f}s" for c, r in zip(COMMANDS, results, strict=True)
        )
    )


# --- 3. the option itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        "timeout=abc",
        "connect_timeout=abc",
        "timeout=",
        # A zero, negative or non-finite duration is no bound at all: 0 makes botocore wait
        # forever on a black hole, inf fails deep inside the HTTP client, nan and -1s are
        # silently taken for something else.
        "timeout=0",
        "timeout=-1s",
        "timeout=inf",
        "timeout=nan",
        "connect_timeout=0",
    ],
)
def test_bad_timeout_value_is_a_usage_error(black_hole, option):
    key, _, value = option.partition("=")
    result = run(s3_args(black_hole.port, option) + ["ls"], cap=10)
    what = f"-s {option}"
    assert result.exit_code is not None, f"{what}: hung (killed after {result.seconds:.0f}s)"
    assert result.exit_code == 2, f"{what}: exit {result.exit_code}: {result.stderr.strip()}"
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"storage.{key}" in lines[0] and repr(value) in lines[0], lines


@pytest.mark.s3
@pytest.mark.parametrize(
    "option",
    ["timeout=30s", "timeout=30", "timeout=2.5", "timeout=1m", "connect_timeout=10"],
)
def test_accepted_timeout_value_works_on_a_healthy_bucket(s3_root: Root, option):
    """A value the tool accepts must reach Lance in a form Lance accepts: a unitless number is
    documented (`30`) and `1m` is Lance's own spelling; a namespace created with it must list."""
    args = [*s3_root.args, "-s", option]
    created = run([*args, "create", "namespace", "n"], cap=60)
    assert created.exit_code == 0, f"-s {option}: create: {created.stderr.strip()}"
    listed = run([*args, "ls"], cap=60)
    assert listed.exit_code == 0, f"-s {option}: ls: {listed.stderr.strip()}"
    assert listed.stdout.split("\t")[0] == "n", listed.stdout
