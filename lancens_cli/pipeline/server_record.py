"""The record of the warm Spark Connect server of `lancens spark start`, and whether to trust it.

Every Spark command asks whether a server of `lancens spark start` runs before it starts a Spark
of its own, so the answer lives here, apart from the starting and stopping (`spark_server.py`),
and imports no pyspark. The server is recorded in a JSON file in the state directory
(`$LANCENS_STATE_DIR`, else `$XDG_STATE_HOME/lancens`, else `~/.local/state/lancens`).

A record is trusted only while it is LIVE: its pid is alive, is a SparkConnectServer (not a
program that got the pid after a reboot or a kill) and its port answers. Anything else is STALE:
never used, said in words, and removed by the next `spark start`, `status` or `stop`. The check
reads a file, /proc and makes one TCP connection, so every Spark command can afford it (no
pyspark). Starting is serialised by an exclusive lock file of the state directory (`locked`),
so two starts at once make one server.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lancens_cli import interrupt
from lancens_cli.models import Result, to_plain

STATE_ENV = "LANCENS_STATE_DIR"
RECORD_NAME = "spark-connect.json"
LOCK_NAME = "spark-connect.lock"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"
CONNECT_TIMEOUT = 0.5  # the liveness check's TCP connect: a listening port accepts at once
HINT = "`lancens spark start` starts another"


@dataclass(frozen=True)
class SparkServer(Result):
    """The record of a running server, as `spark-connect.json` holds it."""

    url: str
    port: int
    pid: int  # the JVM's
    master: str
    spark_home: str
    log: str
    python: str
    started_at: str
    lancens_version: str

    @classmethod
    def from_json(cls, data: Any) -> SparkServer:
        """The record from its JSON document; ValueError when it is not one (or names a server
        anywhere but on 127.0.0.1 at its own port)."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        values = {}
        for f in fields(cls):
            value = data.get(f.name)
            wanted = int if f.type == "int" else str
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise ValueError(f"no valid {f.name!r}")
            values[f.name] = value
        server = cls(**values)
        if not 0 < server.port < 65536 or server.pid <= 0:
            raise ValueError("no valid 'port' or 'pid'")
        if server.url != f"sc://{HOST}:{server.port}":  # never a server elsewhere
            raise ValueError(f"'url' is not sc://{HOST}:{server.port}")
        return server

    def uptime_seconds(self) -> float:
        try:
            started = datetime.fromisoformat(self.started_at.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
        return max(0.0, (datetime.now(UTC) - started).total_seconds())


@dataclass(frozen=True)
class Recorded:
    """What the record says now: a live server, a stale record (`stale`: why, in words), or
    nothing recorded (both None)."""

    server: SparkServer | None
    stale: str | None = None

    @property
    def live(self) -> bool:
        return self.server is not None and self.stale is None


# --- the state directory and the record --------------------------------------------------------


def state_dir() -> Path:
    """Where the record, the lock and the server's logs live (`$LANCENS_STATE_DIR`, else
    `$XDG_STATE_HOME/lancens`, else `~/.local/state/lancens`; a relative XDG path is ignored,
    as the XDG specification says)."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "lancens"


def record_path() -> Path:
    return state_dir() / RECORD_NAME


def made_state_dir() -> Path:
    """The state directory, created 0700 (only this user may read the server's logs or reach its
    pid files); one that exists keeps its mode."""
    directory = state_dir()
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory.chmod(0o700)
    return directory


def recorded() -> Recorded:
    """The record and whether it is live: a pid check, /proc and one TCP connect (no pyspark),
    cheap enough for every Spark command."""
    path = record_path()
    try:
        server = SparkServer.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return Recorded(None)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return Recorded(None, f"the record {path} is unreadable ({_first_line(exc)})")
    owner = process_is_server(server.pid)
    if owner is None:
        return Recorded(server, f"recorded server pid {server.pid} is gone (a reboot or a kill)")
    if not owner:
        return Recorded(
            server, f"recorded server pid {server.pid} is now another program (the server is gone)"
        )
    if not port_answers(server.port):
        return Recorded(
            server, f"recorded server pid {server.pid} does not answer on port {server.port}"
        )
    return Recorded(server)


def mismatch(server: SparkServer) -> str | None:
    """Why this lancens should not use a live server, in words (None: it may): its Python
    workers run another interpreter, or another version of lancens, than this command."""
    if server.python != sys.executable:
        return f"its Python workers run {server.python}, this command {sys.executable}"
    if server.lancens_version != installed_version():
        return f"it runs lancens {server.lancens_version}, this is lancens {installed_version()}"
    return None


def write_record(server: SparkServer) -> None:
    """Atomically: a reader sees the old record or the new one, never half of one."""
    directory = made_state_dir()
    fd, temporary = tempfile.mkstemp(prefix=".spark-connect-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(to_plain(server), out, indent=2)
            out.write("\n")
        os.replace(temporary, directory / RECORD_NAME)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def remove_record() -> None:
    """The record removed (none: nothing to do)."""
    with contextlib.suppress(FileNotFoundError):
        record_path().unlink()


@contextlib.contextmanager
def locked(wait: float) -> Iterator[bool]:
    """The state directory's lock, held for the block; yields False when another process holds
    it past `wait` seconds (0: do not wait). Ctrl-C ends the wait."""
    directory = made_state_dir()
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                yield False
                return
            interrupt.checkpoint()
            time.sleep(0.2)
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def start_under_way() -> bool:
    """Whether a `spark start` holds the lock now (without creating anything)."""
    try:
        fd = os.open(state_dir() / LOCK_NAME, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


# --- processes and ports -----------------------------------------------------------------------


def _threads(proc: Path) -> int:
    """How many threads the process of `proc` (a /proc/<pid> folder) still has; 0 when gone."""
    for line in (proc / "status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def process_is_server(pid: int) -> bool | None:
    """Whether `pid` is a running SparkConnectServer: None when no process has it (or only a
    zombie), False when another program has it now."""
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # another user's process: not ours
        return False
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                # A zombie leader whose other threads still run is a JVM still shutting down
                # (its cmdline is empty by then, and its port may still be bound).
                return True if _threads(proc) > 1 else None
            return SERVER_CLASS.encode() in (proc / "cmdline").read_bytes()
        except (OSError, IndexError):
            return None  # gone while we looked
    shown = subprocess.run(
        ["ps", "-p", str(pid), "-o", "stat=,command="],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0 or not shown.stdout.strip():
        return None
    if shown.stdout.strip().startswith("Z"):
        return None
    return SERVER_CLASS in shown.stdout


def port_answers(port: int, timeout: float = CONNECT_TIMEOUT) -> bool:
    """Whether something listens on `port` of 127.0.0.1: one TCP connect."""
    with socket.socket() as sock:
        sock.settimeout(timeout)
        return sock.connect_ex((HOST, port)) == 0


def installed_version() -> str:
    """This lancens' version, as a server's record keeps it ("unknown" when not installed)."""
    try:
        return importlib.metadata.version("lancens-cli")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
