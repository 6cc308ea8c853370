"""A Spark Connect URL where no Connect server answers: one line within a bounded time, never
PySpark's ten minutes of retries.

Two kinds of endpoint on 127.0.0.1, as a mistyped URL or a dead server gives them: a port with
nothing listening (refused at once), and a black hole that accepts TCP connections and never
speaks (the gRPC handshake times out after `LANCENS_SPARK_CONNECT_TIMEOUT` seconds). Every
command is a real subprocess; a prune that cannot reach its server leaves the root as it was.
No Java is started: the client fails before any Spark.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import lance
import pyarrow as pa
import pytest
from helpers import run_cli


@pytest.fixture
def table_root(tmp_path) -> str:
    root = tmp_path / "ns"
    assert run_cli("--root", str(root), "init").exit_code == 0
    for n in range(3):  # three versions: something for a prune to remove
        lance.write_dataset(pa.table({"id": [n]}), str(root / "t.lance"), mode="append")
    return str(root)


@pytest.fixture
def refused_port() -> int:
    """A port that nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A port on 127.0.0.1 whose every accepted connection is given to `handle`, in a thread;
    the connections it kept (`handle` may return them open) closed at the end."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue
            handle(accepted[-1])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A port that accepts every connection and never sends a byte."""
    with serving(lambda conn: None) as port:
        yield port


@pytest.fixture
def plain_server() -> Iterator[int]:
    """A port whose server speaks plain HTTP/1.1: a TLS client's handshake fails there."""

    def answer(conn: socket.socket) -> None:
        conn.settimeout(1)
        try:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        conn.close()

    with serving(answer) as port:
        yield port


def timed(*args: str, env: dict[str, str] | None = None):
    started = time.monotonic()
    result = run_cli(*args, env={"LANCENS_SPARK_MASTER": "", **(env or {})})
    return result, time.monotonic() - started


def files(root: str) -> dict[str, int]:
    from pathlib import Path

    return {str(p): p.stat().st_mtime_ns for p in Path(root).rglob("*")}


def test_a_port_with_nothing_listening_fails_at_once_in_one_line(table_root, refused_port):
    url = f"sc://127.0.0.1:{refused_port}"
    result, seconds = timed("--root", table_root, "scan", "t", "--count", "--remote", url)
    assert result.exit_code == 1, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"lancens: error: Spark Connect server {url} did not answer: Connection refused"
    )
    assert seconds < 20, f"{seconds:.1f} s for a refused connection"


def test_a_server_that_never_answers_fails_after_the_timeout(table_root, black_hole):
    url = f"sc://127.0.0.1:{black_hole}"
    result, seconds = timed(
        "--root", table_root, "scan", "t", "--count", "--remote", url,
        env={"LANCENS_SPARK_CONNECT_TIMEOUT": "2"},
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"lancens: error: Spark Connect server {url} did not answer within 2 s (it accepted a "
        "connection but no gRPC handshake); LANCENS_SPARK_CONNECT_TIMEOUT sets how long to wait"
    )
    assert 2 <= seconds < 2 + 20, f"{seconds:.1f} s against a 2 s timeout"


def test_tls_to_a_plain_server_is_our_one_line_without_grpcs_log(
    table_root, plain_server, monkeypatch
):
    """gRPC logs each failed TLS handshake on stderr itself; only `--debug` shows those."""
    monkeypatch.delenv("GRPC_VERBOSITY", raising=False)  # gRPC's default, as a user has it
    url = f"sc://127.0.0.1:{plain_server}/;use_ssl=true"
    args = ("--root", table_root, "scan", "t", "--count", "--remote", url)
    wait = {"LANCENS_SPARK_CONNECT_TIMEOUT": "3"}
    result, seconds = timed(*args, env=wait)
    assert result.exit_code == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"lancens: error: Spark Connect server {url} did not answer")
    assert all(line.startswith(("lancens:", "scan:")) for line in lines), result.stderr
    assert seconds < 3 + 20
    debugged, _ = timed(*args, "--debug", env=wait)  # the premise: gRPC does log the handshakes
    assert debugged.exit_code == 1 and "SSL_ERROR" in debugged.stderr


def test_spark_remote_from_the_environment_is_probed_too(table_root, black_hole):
    url = f"sc://127.0.0.1:{black_hole}"
    result, seconds = timed(
        "--root", table_root, "scan", "t", "--count", "--conf", "spark.sql.shuffle.partitions=2",
        env={"SPARK_REMOTE": url, "LANCENS_SPARK_CONNECT_TIMEOUT": "1.5"},
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert "did not answer within 1.5 s" in result.stderr
    assert seconds < 1.5 + 20


def test_a_prune_that_cannot_reach_its_server_changes_nothing(table_root, refused_port):
    before = files(table_root)
    result, _ = timed(
        "--root", table_root, "prune", "--older-than", "0s", "--force", "--yes",
        "--remote", f"sc://127.0.0.1:{refused_port}",
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert "did not answer" in result.stderr.strip().splitlines()[-1]
    assert files(table_root) == before
    assert len(lance.dataset(f"{table_root}/t.lance").versions()) == 3


@pytest.mark.parametrize("value", ["abc", "0", "-3", "nan", "inf", "1e10"])
def test_a_bad_timeout_is_a_usage_error_naming_the_variable(table_root, refused_port, value):
    result, _ = timed(
        "--root", table_root, "scan", "t", "--count", "--remote", f"sc://127.0.0.1:{refused_port}",
        env={"LANCENS_SPARK_CONNECT_TIMEOUT": value},
    )  # fmt: skip
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"lancens: error: LANCENS_SPARK_CONNECT_TIMEOUT={value!r}: give a number of seconds "
        "above 0, at most 86400"
    )
