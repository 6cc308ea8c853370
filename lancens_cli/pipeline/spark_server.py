"""Starting, checking and stopping the warm Spark Connect server of `lancens spark start`.

A fresh local Spark costs each `scan`, `join` or `ingest` 15-75 s of JVM start on a small
machine; `lancens spark start` pays that once. The server is started from the pyspark package's
own `sbin/start-connect-server.sh` (SPARK_HOME = the installed package, found without importing
it) on 127.0.0.1, its Python workers on this interpreter so that the `lancens` data source
imports there, and recorded in the state directory (`server_record.py`: the record, its lock and
the liveness rule). Stopping runs `sbin/stop-connect-server.sh`, then TERM/KILL until the JVM is
gone.

The readiness probe runs a trivial Connect query in a child Python, so no pyspark is imported
here; it runs in the session of every slot (`server_sessions.py`), so that the first commands
find those sessions' Python workers already running.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lancens_cli import interrupt
from lancens_cli.config import parse_key_values
from lancens_cli.errors import ExitCode, InvalidInputError, LancensError
from lancens_cli.models import Result, to_plain
from lancens_cli.pipeline.server_record import (
    HINT,
    HOST,
    LOCK_NAME,
    SERVER_CLASS,
    SparkServer,
    installed_version,
    locked,
    made_state_dir,
    port_answers,
    process_is_server,
    recorded,
    remove_record,
    start_under_way,
    state_dir,
    write_record,
)
from lancens_cli.pipeline.server_sessions import SESSION_TIMEOUT, slots_held
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

SERVER_DIR = "spark-connect"  # its logs/ and pids/ (the SPARK_PID_DIR the stop script reads)
IDENT = "lancens"  # SPARK_IDENT_STRING: the pid and log files' names do not depend on $USER
START_TIMEOUT = 240.0
STOP_TIMEOUT = 30.0
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


# --- processes and ports -----------------------------------------------------------------------


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


def _wait_port_closed(port: int, timeout: float) -> None:
    """Wait until nothing accepts on `port`, so a `start` right after a `stop` finds it free."""
    deadline = time.monotonic() + timeout
    while port_answers(port) and time.monotonic() < deadline:
        time.sleep(0.2)


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
    base = made_state_dir() / SERVER_DIR
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
    with locked(wait=timeout + 2 * STOP_TIMEOUT + 150) as held:
        if not held:
            raise LancensError(f"another `lancens spark start` holds {state_dir() / LOCK_NAME}")
        found = recorded()
        if found.live:
            assert found.server is not None
            return ServerStarted(found.server, already_running=True)
        remove_record()
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
        write_record(server)
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
        lancens_version=installed_version(),
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
        if not port_answers(server.port):
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
    with slots_held(server) as urls:
        return subprocess.run(
            [sys.executable, "-c", _PROBE, *(urls or [server.url])],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"},
            check=False,
        )


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
        if start_under_way():
            raise under_way
        raise ServerNotRunningError(
            "no Spark Connect server of `lancens spark start` is running; `lancens spark start` "
            "starts one"
        )
    with locked(wait=0) as held:
        if not held:
            raise under_way
        found = recorded()  # again, under the lock: a start may have just finished
        if found.live:
            assert found.server is not None
            return ServerStatus(found.server, found.server.uptime_seconds())
        remove_record()
    raise ServerNotRunningError(f"{found.stale}; {HINT}")


def stop_server(timeout: float = STOP_TIMEOUT) -> ServerStopped:
    """Stop the recorded server (pyspark's stop script, then TERM/KILL until its pid is gone),
    and one a killed `start` left behind; remove the record. Nothing running is no error."""
    if not state_dir().is_dir():
        return ServerStopped(None, [])
    with locked(wait=START_TIMEOUT + 2 * STOP_TIMEOUT + 150) as held:
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
            _wait_port_closed(found.server.port, timeout)
        remove_record()
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
