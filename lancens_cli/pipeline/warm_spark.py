"""A warm Spark for every Spark command: one local Spark Connect server that outlives commands.

A fresh local Spark costs each `scan`, `join` or `ingest` 15-75 s of JVM start on a small
machine; `lancens spark start` pays that once. The server is started from the pyspark package's
own `sbin/start-connect-server.sh` (SPARK_HOME = the installed package, found without importing
it) on 127.0.0.1, its Python workers on this interpreter so that the `lancens` data source
imports there, and recorded in a JSON file in the state directory (`$LANCENS_STATE_DIR`, else
`$XDG_STATE_HOME/lancens`, else `~/.local/state/lancens`).

A record is trusted only while it is LIVE: its pid is alive, is a SparkConnectServer (not a
program that got the pid after a reboot or a kill) and its port answers. Anything else is STALE:
never used, said in words, and removed by the next `spark start`, `status` or `stop`. The check
reads a file, /proc and makes one TCP connection, so every Spark command can afford it (no
pyspark). Starting is serialised by an exclusive lock file, so two starts at once make one
server; the readiness probe runs a trivial Connect query in a child Python, so no pyspark is
imported here. Commands on the server reuse a few Connect sessions (`session_url`), whose Python
workers are then already running: a new session would start its own, seconds of every command.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lancens_cli import interrupt
from lancens_cli.config import parse_key_values
from lancens_cli.errors import ExitCode, InvalidInputError, LancensError
from lancens_cli.models import Result, to_plain
from lancens_cli.pipeline.spark_session import (
    ARROW_JAVA_OPTIONS,
    BASE_CONF,
    DEFAULT_MASTER,
    FIXED_CONF,
    SOCKET_DIR,
    SOCKET_PATH_MAX,
    UNIX_SOCKETS,
    require_java,
)
from lancens_cli.words import utc_iso

STATE_ENV = "LANCENS_STATE_DIR"
RECORD_NAME = "spark-connect.json"
LOCK_NAME = "spark-connect.lock"
SERVER_DIR = "spark-connect"  # its logs/ and pids/ (the SPARK_PID_DIR the stop script reads)
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
IDENT = "lancens"  # SPARK_IDENT_STRING: the pid and log files' names do not depend on $USER
HOST = "127.0.0.1"
START_TIMEOUT = 240.0
STOP_TIMEOUT = 30.0
CONNECT_TIMEOUT = 0.5  # the liveness check's TCP connect: a listening port accepts at once
HINT = "`lancens spark start` starts another"
# Connect gives every session its own Python worker daemons (its artifact UUID is in their
# environment), which cost a command seconds to start and to import Lance in. So commands reuse
# sessions: a few slots, each a session id a command holds (a lock) while it runs, so that two
# commands at once never share one. A slot idle longer than SESSION_REUSE gets a new id before
# the server's own idle timeout (SESSION_TIMEOUT) has closed the old one for good.
SESSION_SLOTS = 2
SESSION_REUSE = 7 * 3600.0  # a working day's pauses keep their sessions
SESSION_TIMEOUT = "8h"
_HELD_SLOTS: list[int] = []  # the slot locks this process holds until it exits
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# Settings of ours a --conf may not change: the record's port and the loopback address.
_BINDING = ("spark.connect.grpc.binding.port", "spark.connect.grpc.binding.address")
_SESSION_TIMEOUT_KEY = "spark.connect.session.manager.defaultSessionTimeout"
_SOCKET_NAME = len("/.01234567-89ab-cdef-0123-456789abcdef.sock")  # as Spark names a socket

# The readiness probe, in a child Python (no pyspark in this process): in the session of each
# slot, a Python data source whose reader imports lancens_cli, read once. It proves the server's
# Python workers import the package, and it starts the session's Python daemons (a data
# source's and the tasks'), so that the first commands find them running.
_PROBE = """
import os
import sys
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader

class Probe(DataSource):
    @classmethod
    def name(cls):
        return "lancens_probe"

    def schema(self):
        return "name string"

    def reader(self, schema):
        return ProbeReader()

class ProbeReader(DataSourceReader):
    def read(self, partition):
        import lancens_cli
        yield (lancens_cli.__name__,)

sessions = []  # kept: a client collected while another is open hangs closing its channel
try:
    for url in sys.argv[1:]:
        sessions.append(SparkSession.builder.remote(url).create())  # never stopped: kept warm
        sessions[-1].dataSource.register(Probe)
        assert sessions[-1].read.format("lancens_probe").load().first()[0] == "lancens_cli"
except BaseException as exc:
    text = str(exc).strip().splitlines()
    sys.stderr.write(f"{type(exc).__name__}: {text[0] if text else ''}\\n")
    sys.stderr.flush()
    os._exit(1)  # no channel closing at exit either
os._exit(0)
"""
PROBE_TRIES = 3  # a server that answers its port but fails the probe this often is broken


class ServerNotRunningError(LancensError):
    """No live server of `lancens spark start` (none recorded, or a stale record): exit 3."""

    exit_code, namespace_code, name = ExitCode.NOT_FOUND, 17, "ServiceUnavailable"


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


@dataclass(frozen=True)
class ServerStarted(Result):
    """`spark start`: the server now running; `replaced` says why a stale record was dropped."""

    server: SparkServer
    already_running: bool
    replaced: str | None = None

    def to_json(self) -> Any:
        return {**to_plain(self.server), "already_running": self.already_running}


@dataclass(frozen=True)
class ServerStatus(Result):
    """`spark status` of a live server."""

    server: SparkServer
    uptime: float

    def to_json(self) -> Any:
        return {"state": "running", **to_plain(self.server), "uptime_seconds": round(self.uptime)}


@dataclass(frozen=True)
class ServerStopped(Result):
    """`spark stop`: what was stopped (`server` None: nothing was running)."""

    server: SparkServer | None
    stopped_pids: list[int]
    note: str | None = None  # a stale record it removed, in words

    def to_json(self) -> Any:
        return {
            "stopped": bool(self.stopped_pids),
            "pids": self.stopped_pids,
            "url": None if self.server is None else self.server.url,
            "note": self.note,
        }


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


def _made_state_dir() -> Path:
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
    if not _listening(server.port):
        return Recorded(
            server, f"recorded server pid {server.pid} does not answer on port {server.port}"
        )
    return Recorded(server)


def mismatch(server: SparkServer) -> str | None:
    """Why this lancens should not use a live server, in words (None: it may): its Python
    workers run another interpreter, or another version of lancens, than this command."""
    if server.python != sys.executable:
        return f"its Python workers run {server.python}, this command {sys.executable}"
    if server.lancens_version != _version():
        return f"it runs lancens {server.lancens_version}, this is lancens {_version()}"
    return None


def _write_record(server: SparkServer) -> None:
    """Atomically: a reader sees the old record or the new one, never half of one."""
    directory = _made_state_dir()
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


def _remove_record() -> None:
    with contextlib.suppress(FileNotFoundError):
        record_path().unlink()


@contextlib.contextmanager
def _locked(wait: float) -> Iterator[bool]:
    """The state directory's lock, held for the block; yields False when another process holds
    it past `wait` seconds (0: do not wait). Ctrl-C ends the wait."""
    directory = _made_state_dir()
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


def session_url(server: SparkServer) -> str:
    """The server's URL with the session id of a free slot, held by this process until it exits
    (the plain URL, a fresh session, when every slot is in use)."""
    for slot in range(SESSION_SLOTS):
        try:
            fd = os.open(
                state_dir() / f"spark-connect-session-{slot}", os.O_RDWR | os.O_CREAT, 0o600
            )
        except OSError:
            return server.url
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            session = _slot_session(fd, server)
        except OSError:
            os.close(fd)
            continue
        _HELD_SLOTS.append(fd)
        return f"{server.url}/;session_id={session}"
    return server.url


def _slot_session(fd: int, server: SparkServer) -> str:
    """The slot's session id: the one it holds when it belongs to this server and was used
    within SESSION_REUSE, else a new one; the slot is marked used now."""
    owner = f"{server.pid}@{server.started_at}"
    held = os.pread(fd, 4096, 0).decode("utf-8", "replace").split()
    idle = time.time() - os.fstat(fd).st_mtime
    if len(held) == 2 and held[0] == owner and idle < SESSION_REUSE:
        session = held[1]
    else:
        session = str(uuid.uuid4())
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{owner} {session}\n".encode(), 0)
    return session


# --- processes and ports -----------------------------------------------------------------------


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
                return None  # dead, not yet reaped
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


def _listening(port: int, timeout: float = CONNECT_TIMEOUT) -> bool:
    with socket.socket() as sock:
        sock.settimeout(timeout)
        return sock.connect_ex((HOST, port)) == 0


def _free_port(port: int | None) -> int:
    """`port` when it is free on 127.0.0.1 (or any free port): one in use is refused here, in
    words, rather than by a JVM that dies."""
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port or 0))
        except OSError as exc:
            raise LancensError(f"--port {port}: {HOST}:{port} is in use ({exc.strerror})") from None
        return int(sock.getsockname()[1])


def _end_process(pid: int, timeout: float) -> bool:
    """Stop a SparkConnectServer: TERM, then KILL after `timeout`. True when it was running.
    Never signals a pid that is not a server (a reused pid is another user's program)."""
    if not process_is_server(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process_is_server(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if process_is_server(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while process_is_server(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    return True


# --- the server --------------------------------------------------------------------------------


def spark_home() -> Path:
    """The installed pyspark package's directory (its `sbin/` and jars), found without
    importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInputError(
            "`lancens spark start` runs Spark, and pyspark is not installed: "
            "python -m pip install 'lancens-cli[spark]'"
        )
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _server_dirs() -> tuple[Path, Path]:
    """The server's SPARK_LOG_DIR and SPARK_PID_DIR."""
    base = _made_state_dir() / SERVER_DIR
    logs, pids = base / "logs", base / "pids"
    for directory in (base, logs, pids):
        directory.mkdir(mode=0o700, exist_ok=True)
    return logs, pids


def _pid_file(pids: Path) -> Path:
    return pids / f"spark-{IDENT}-{SERVER_CLASS}-1.pid"


def _pid_in(pids: Path) -> int | None:
    try:
        return int(_pid_file(pids).read_text().strip())
    except (OSError, ValueError):
        return None


def _log_in(logs: Path) -> Path:
    """The log the daemon script writes: its name ends with the host name (bash's $HOSTNAME)."""
    return logs / f"spark-{IDENT}-{SERVER_CLASS}-1-{socket.gethostname()}.out"


def _server_env(home: Path, logs: Path, pids: Path) -> dict[str, str]:
    """The daemon scripts' environment: this package's Spark, the state directory's logs and
    pids, loopback only, and this interpreter for the Python workers."""
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(logs),
        "SPARK_PID_DIR": str(pids),
        "SPARK_IDENT_STRING": IDENT,
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    for key in ("SPARK_REMOTE", "SPARK_NO_DAEMONIZE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(key, None)
    return env


def check_conf(conf: dict[str, str]) -> None:
    """Refuse the settings lancens owns: the record's port, the loopback address, and the
    session timeout its reuse of sessions relies on."""
    taken = [key for key in _BINDING if key in conf]
    if taken:
        raise InvalidInputError(f"--conf {taken[0]}: the server binds {HOST}; give --port instead")
    if _SESSION_TIMEOUT_KEY in conf:
        raise InvalidInputError(
            f"--conf {_SESSION_TIMEOUT_KEY}: lancens sets it ({SESSION_TIMEOUT}), as its reuse "
            "of sessions relies on it"
        )


def server_conf(port: int, conf: dict[str, str], debug: bool) -> dict[str, str]:
    """The server's Spark settings: lancens' own session settings (UTC, no UI, Arrow's fast
    getters), the user's `--conf` over them, the loopback binding over everything."""
    check_conf(conf)
    options = ARROW_JAVA_OPTIONS if debug else f"{ARROW_JAVA_OPTIONS} {_log_option()}"
    settings = {
        **BASE_CONF,
        **FIXED_CONF,
        "spark.driver.extraJavaOptions": options,
        "spark.executor.extraJavaOptions": options,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }
    for key, value in conf.items():
        if key.endswith("extraJavaOptions") and key in settings:
            value = f"{settings[key]} {value}"  # ours first: the user's options win
        settings[key] = value
    return {
        **settings,
        _SESSION_TIMEOUT_KEY: SESSION_TIMEOUT,
        _BINDING[0]: str(port),
        _BINDING[1]: HOST,
    }


def _socket_conf(master: str, conf: dict[str, str], directory: Path) -> dict[str, str]:
    """Unix domain sockets between a local server and its Python workers, in a directory of the
    state directory (0700), as a local session has them (`spark_session.worker_socket_conf`):
    not for a cluster's master, nor when `--conf` decides, nor where the path is too long."""
    if not master.startswith("local") or not hasattr(socket, "AF_UNIX"):
        return {}
    if UNIX_SOCKETS in conf or SOCKET_DIR in conf:
        return {}
    if len(os.fsencode(directory.resolve())) + _SOCKET_NAME > SOCKET_PATH_MAX:
        return {}
    directory.mkdir(mode=0o700, exist_ok=True)
    return {UNIX_SOCKETS: "true", SOCKET_DIR: str(directory.resolve())}


def _log_option() -> str:
    return f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}"


def _run_script(home: Path, script: str, args: list[str], env: dict[str, str]) -> str:
    """One of pyspark's `sbin/` scripts, in a session of its own (the JVM it starts is no child
    of this terminal: a Ctrl-C here does not reach it); its output."""
    path = home / "sbin" / script
    for name in (script, "spark-daemon.sh"):  # some installs drop the executable bit
        with contextlib.suppress(OSError):
            target = home / "sbin" / name
            target.chmod(target.stat().st_mode | 0o111)
    done = subprocess.run(
        ["bash", str(path), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        start_new_session=True,
    )
    return (done.stdout + done.stderr).strip()


def start_server(
    master: str = DEFAULT_MASTER,
    conf: list[str] | None = None,
    port: int | None = None,
    timeout: float = START_TIMEOUT,
    *,
    debug: bool = False,
    say: Callable[[str], None] = lambda _: None,
) -> ServerStarted:
    """Start the server unless a live one is recorded (then that one, `already_running`).

    The lock makes a second `start` at once wait for the first and find its server. A stale
    record is replaced; a server a killed `start` left behind (its pid file) is stopped first.
    On any failure, what this call started is stopped before the error."""
    master = master.strip()
    if not master:
        raise InvalidInputError("--master: it is empty")
    settings = parse_key_values(conf, "--conf")
    check_conf(settings)
    home = spark_home()
    with _locked(wait=timeout + 2 * STOP_TIMEOUT + 150) as held:
        if not held:
            raise LancensError(f"another `lancens spark start` holds {state_dir() / LOCK_NAME}")
        found = recorded()
        if found.live:
            assert found.server is not None
            return ServerStarted(found.server, already_running=True)
        _remove_record()
        logs, pids = _server_dirs()
        env = _server_env(home, logs, pids)
        _stop_by_pid_file(home, env, pids)
        require_java()
        settings = {**_socket_conf(master, settings, logs.parent / "sockets"), **settings}
        chosen = _free_port(port)
        args = ["--master", master]
        for key, value in server_conf(chosen, settings, debug).items():
            args += ["--conf", f"{key}={value}"]
        url = f"sc://{HOST}:{chosen}"
        say(f"spark: starting a Spark Connect server on {url} ({master}); log: {_log_in(logs)}")
        try:
            server = _launch(home, env, args, (url, chosen, master), timeout)
        except BaseException:
            _stop_by_pid_file(home, env, pids)
            raise
        _write_record(server)
        return ServerStarted(server, already_running=False, replaced=found.stale)


def _launch(
    home: Path, env: dict[str, str], args: list[str], where: tuple[str, int, str], timeout: float
) -> SparkServer:
    """Run the start script, then wait until the server answers a query; its record."""
    url, port, master = where
    logs, pids = Path(env["SPARK_LOG_DIR"]), Path(env["SPARK_PID_DIR"])
    deadline = time.monotonic() + timeout
    said = _run_script(home, "start-connect-server.sh", args, env)
    pid = _pid_in(pids)
    log = _log_in(logs)
    if pid is None:
        detail = said.splitlines()[-1] if said else "no pid file"
        raise LancensError(f"the Spark Connect server did not start ({detail}); its log: {log}")
    server = SparkServer(
        url=url,
        port=port,
        pid=pid,
        master=master,
        spark_home=str(home),
        log=str(log),
        python=sys.executable,
        started_at=utc_iso(datetime.now(UTC)),
        lancens_version=_version(),
    )
    _wait_ready(server, deadline)
    return server


def _wait_ready(server: SparkServer, deadline: float) -> None:
    """Until the port answers and the probe runs in every slot's session; one line naming the
    log when the JVM dies or the time runs out."""
    failure = f"it did not answer in {deadline - time.monotonic():.0f} s"
    tries = 0
    while time.monotonic() < deadline and tries < PROBE_TRIES:
        interrupt.checkpoint()
        if not process_is_server(server.pid):
            failure = "its JVM exited"
            break
        if not _listening(server.port):
            time.sleep(0.5)
            continue
        try:
            probe = _probe(server, max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            said = exc.stderr if isinstance(exc.stderr, str) else (exc.stderr or b"").decode()
            failure = f"a test query did not finish in time{_last_line(said, ': ')}"
            break
        if probe.returncode == 0:
            return
        tries += 1
        failure = f"a test query failed{_last_line(probe.stderr, ': ') or f' ({probe.returncode})'}"
        time.sleep(1.0)
    interrupt.checkpoint()
    raise LancensError(f"the Spark Connect server did not start ({failure}); its log: {server.log}")


def _probe(server: SparkServer, timeout: float) -> subprocess.CompletedProcess[str]:
    """The probe in the session of each slot (held meanwhile, then released)."""
    held = []
    try:
        urls = []
        for _ in range(SESSION_SLOTS):
            url = session_url(server)
            if url == server.url:
                break  # a slot some other process holds: it gets a session of its own
            urls.append(url)
            held.append(_HELD_SLOTS.pop())
        return subprocess.run(
            [sys.executable, "-c", _PROBE, *(urls or [server.url])],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"},
            check=False,
        )
    finally:
        for fd in held:
            os.close(fd)


def _stop_by_pid_file(home: Path, env: dict[str, str], pids: Path) -> list[int]:
    """pyspark's stop script on our SPARK_PID_DIR, then TERM/KILL until the JVM is gone; the
    pids that were running."""
    pid = _pid_in(pids)
    if pid is None or not process_is_server(pid):
        with contextlib.suppress(OSError):
            _pid_file(pids).unlink()
        return []
    if (home / "sbin" / "stop-connect-server.sh").exists():
        _run_script(home, "stop-connect-server.sh", [], env)
    _end_process(pid, STOP_TIMEOUT)
    with contextlib.suppress(OSError):
        _pid_file(pids).unlink()
    return [pid]


def _version() -> str:
    try:
        return importlib.metadata.version("lancens-cli")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def server_status() -> ServerStatus:
    """The live server, or ServerNotRunningError (exit 3) saying why; a stale record is removed
    (unless a `spark start` holds the lock: it replaces the record itself)."""
    found = recorded()
    if found.live:
        assert found.server is not None
        return ServerStatus(found.server, found.server.uptime_seconds())
    under_way = ServerNotRunningError(
        "no Spark Connect server is running yet: a `lancens spark start` is under way"
    )
    if found.stale is None:
        if _start_under_way():
            raise under_way
        raise ServerNotRunningError(
            "no Spark Connect server of `lancens spark start` is running; `lancens spark start` "
            "starts one"
        )
    with _locked(wait=0) as held:
        if not held:
            raise under_way
        found = recorded()  # again, under the lock: a start may have just finished
        if found.live:
            assert found.server is not None
            return ServerStatus(found.server, found.server.uptime_seconds())
        _remove_record()
    raise ServerNotRunningError(f"{found.stale}; {HINT}")


def _start_under_way() -> bool:
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


def stop_server(timeout: float = STOP_TIMEOUT) -> ServerStopped:
    """Stop the recorded server (pyspark's stop script, then TERM/KILL until its pid is gone),
    and one a killed `start` left behind; remove the record. Nothing running is no error."""
    if not state_dir().is_dir():
        return ServerStopped(None, [])
    with _locked(wait=START_TIMEOUT + 2 * STOP_TIMEOUT + 150) as held:
        if not held:
            raise LancensError(f"a `lancens spark start` holds {state_dir() / LOCK_NAME}")
        found = recorded()
        logs, pids = _server_dirs()
        home = Path(found.server.spark_home) if found.server else _home_or_none()
        stopped = []
        if home is not None:
            stopped = _stop_by_pid_file(home, _server_env(home, logs, pids), pids)
        if found.server is not None and _end_process(found.server.pid, timeout):
            stopped.append(found.server.pid)
        _remove_record()
    server = found.server if found.live else None
    return ServerStopped(server, sorted(set(stopped)), found.stale)


def _home_or_none() -> Path | None:
    try:
        return spark_home()
    except LancensError:
        return None


def _last_line(text: str | None, prefix: str = "") -> str:
    """The last line of a child's output that says something, after `prefix` ("" for none)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return f"{prefix}{lines[-1]}" if lines else ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
