"""Spark session setup shared by every Spark command (`ingest`, `scan`, `join`, `prune --master`).

One place decides how lancens talks to Spark: local mode (`local[*]`) unless a master is given
(flag, `LANCENS_SPARK_MASTER`, a profile's `spark` table) or a Spark Connect server (`--remote`,
`SPARK_REMOTE` as PySpark reads it, a profile's `spark.remote`), the session time zone UTC, the UI
and the console progress bar off, Spark's own logging quiet unless `--debug`, Python workers on the
running interpreter (reached over Unix domain sockets in local mode), and the `lancens` data
source registered (or left to a command that registers it only when it uses it). A session
already running in this process (tests, a user's notebook) is reused rather than started twice.
A local driver that runs no rows itself (the `scheduler_only()` of `ingest` of Parquet and ORC)
starts with C1 compilation only. Ctrl-C stays the command's (`cancelled_on_interrupt`): a session
started here does not keep PySpark's own SIGINT handler.

What a fresh JVM costs before a command's first task is cut here (bench/bench_cold_start.py): the
driver maps the class archive of `jvm_archive.py` (built once, in the background), a local
session's Python workers import pyspark's compiled modules rather than its zip
(`worker_python.py`), Spark does not start a Python process to look up installed data sources
(NO_LOOKUP_PYTHON) nor `spark-submit` one to find SPARK_HOME, the driver's own warnings go to its
stderr, its C2 compiles wait for hot code (DRIVER_JIT_OPTIONS), and its stdout is not ours (a
reader of a command's rows is not kept waiting while the JVM stops).

Nothing Lance-native runs here: PySpark forks its Python workers from a daemon, and Lance is not
fork-safe, so Lance is imported only inside the functions that tasks call. pyspark is imported
inside functions too, so that this module imports without it and `require_pyspark` can say
how to install it.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lancens_cli import interrupt
from lancens_cli.config import parse_key_values
from lancens_cli.errors import InvalidInputError, LancensError
from lancens_cli.pipeline import register
from lancens_cli.pipeline.connect_probe import DEFAULT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from lancens_cli.pipeline.connect_probe import await_server, connect_timeout
from lancens_cli.pipeline.jvm_archive import (
    Launch,
    archive_key,
    build_after_exit,
    cache_dir,
    launch_options,
)
from lancens_cli.pipeline.worker_python import worker_python

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "LANCENS_SPARK_MASTER"
REMOTE_ENV = "SPARK_REMOTE"  # PySpark's own: a Spark Connect URL
GRPC_VERBOSITY = "GRPC_VERBOSITY"  # gRPC's own: how much of its log reaches stderr
MIN_JAVA = 17
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

# Settings every lancens session has; a user's --conf may override all but the time zone.
BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}
FIXED_CONF: dict[str, str] = {"spark.sql.session.timeZone": "UTC"}
# A local driver that only schedules Python tasks (no rows in the JVM) compiles with C1 alone:
# it starts sooner on few cores, and it has no hot loop that C2 would speed up.
SCHEDULER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
_SCHEDULER_ONLY = contextvars.ContextVar("lancens_scheduler_only", default=False)
# Our data source hands Spark Arrow batches, which Spark reads a value at a time through Arrow
# Java's getters: without their bounds and null checks (Spark asks `isNullAt` before every
# get), the JVM takes lancens join's 5M rows 31% sooner (bench/bench_spark_join.py --large:
# 0.86 s to 0.59 s of hand-off). The user's own options come after, and win.
ARROW_JAVA_OPTIONS = (
    "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"
)
# The driver's own warnings (class sharing, GC) go to its stderr: the JVM's default for them is
# stdout, which carries a command's rows.
DRIVER_LOG_OPTIONS = "-Xlog:disable -Xlog:all=warning:stderr"
# The driver's C2 compiles wait for ten times the calls and loops they wait for by default: the
# code Spark runs while it starts stays with C1 (a cold `scan` 12% sooner on 2 cores at a load of
# 2, 30% at 5: C2 compiles compete with the start for a core), a loop over rows still reaches C2
# within the first batches (5M rows counted, collected, written to Parquet: as fast, cold or
# warm). C1 alone started sooner still, but wrote Parquet three times slower.
DRIVER_JIT_OPTIONS = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
)
# Spark looks up Python data sources installed as `pyspark_*` packages the first time a session
# registers one, in a Python process of its own (2 to 3.5 s of a cold `scan` on 2 cores), unless
# the Python it would use is no command (DataSourceManager.shouldLoadPythonDataSources reads
# PYSPARK_DRIVER_PYTHON as the JVM started). lancens registers its own source and reads no other,
# so the JVM starts with this name there; nothing else of a driver reads it.
NO_LOOKUP_PYTHON = "lancens-registers-its-own-data-sources"


# Spark talks to its Python workers over loopback TCP, where a task's first input reaches its
# worker about 40 ms late (the JVM's small writes wait for the worker's delayed acknowledgement);
# over a Unix domain socket it does not. A local session uses one, in a directory only this user
# can enter (Spark's sockets take no password).
UNIX_SOCKETS = "spark.python.unix.domain.socket.enabled"
SOCKET_DIR = "spark.python.unix.domain.socket.dir"
SOCKET_PATH_MAX = 103  # bytes in a socket's path: macOS allows 103, Linux 107
# What a socket's path adds to the temporary directory's: ours, then a name as Spark gives it.
_SOCKET_DIR_PREFIX = "lancens-sockets-"
_SOCKET_TAIL = len(f"/{_SOCKET_DIR_PREFIX}12345678/.01234567-89ab-cdef-0123-456789abcdef.sock")


class SparkSetupError(InvalidInputError):
    """Spark cannot start here (no pyspark, no suitable Java): exit 2, one line."""


@dataclass
class SparkSettings:
    """Where the job runs (a master, or a Spark Connect server) and with which configuration."""

    master: str = DEFAULT_MASTER
    conf: dict[str, str] = field(default_factory=dict)
    debug: bool = False
    remote: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @classmethod
    def resolve(
        cls,
        master: str | None,
        conf_pairs: list[str] | None,
        profile: Mapping[str, Any] | None = None,
        debug: bool = False,
        environ: Mapping[str, str] | None = None,
        remote: str | None = None,
    ) -> SparkSettings:
        """Flags > environment (LANCENS_SPARK_MASTER, then SPARK_REMOTE) > the profile's `spark`
        table > local mode. `--master` and `--remote` together are a usage error."""
        environ = os.environ if environ is None else environ
        profile = profile or {}
        conf = {str(k): str(v) for k, v in dict(profile.get("conf") or {}).items()}
        conf.update(parse_key_values(conf_pairs, "--conf"))
        for key in FIXED_CONF:
            if key in conf and conf[key] != FIXED_CONF[key]:
                raise InvalidInputError(f"--conf {key}: lancens runs Spark in UTC only")
        if master is not None and remote is not None:
            raise InvalidInputError("--master and --remote: give one (a master, or a Connect URL)")
        chosen_remote = remote
        if master is None and remote is None and not environ.get(MASTER_ENV):
            chosen_remote = environ.get(REMOTE_ENV) or None
            if chosen_remote is None and not profile.get("master"):
                chosen_remote = profile.get("remote") or None
        if chosen_remote is not None:
            return cls(
                conf=conf,
                debug=debug,
                remote=_connect_url(str(chosen_remote)),
                connect_timeout=connect_timeout(environ),
            )
        chosen = master or environ.get(MASTER_ENV) or profile.get("master") or DEFAULT_MASTER
        chosen = str(chosen).strip()
        if not chosen:
            raise InvalidInputError("--master: it is empty")
        return cls(master=chosen, conf=conf, debug=debug)


def _connect_url(url: str) -> str:
    url = url.strip()
    if not re.fullmatch(r"sc://[^\s/:]+(:\d+)?(/[^\s]*)?", url):
        raise InvalidInputError(f"--remote: {url!r} is not a Spark Connect URL (sc://HOST:PORT)")
    return url


def is_connect(spark: Any) -> bool:
    """A Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


CONNECT_SLOTS = 8  # tasks at once on a Connect server that does not say its parallelism


def task_slots(spark: Any) -> int:
    """How many tasks run at once: the session's default parallelism (a Connect session says it
    only when the server's configuration sets it)."""
    if is_connect(spark):
        return int(spark.conf.get("spark.default.parallelism", None) or CONNECT_SLOTS)
    return int(spark.sparkContext.defaultParallelism)


def runs_on(spark: Any) -> str:
    """Where a session's work runs, for messages: its master, or the Connect server."""
    if is_connect(spark):
        return f"the Spark Connect server {spark.client.host}"
    return str(spark.sparkContext.master)


def require_pyspark() -> None:
    """One line that says how to install Spark support, instead of an ImportError."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkSetupError(
            "this command runs Spark, and pyspark is not installed: "
            "python -m pip install 'lancens-cli[spark]'"
        ) from None


@functools.cache  # one probe a process: a JVM start
def java_banner(java: str) -> str | None:
    """What `java -version` prints (None: it did not run)."""
    try:
        probe = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return probe.stderr + probe.stdout


def java_version(java: str) -> int | None:
    """The major version `java -version` reports, or None when it cannot be read."""
    banner = java_banner(java)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', banner or "")
    if not found:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major  # "1.8" is Java 8


def find_java(environ: Mapping[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    home = environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return shutil.which("java")


def require_java(environ: Mapping[str, str] | None = None) -> None:
    """Spark 4 needs Java 17 or newer; say so in one line rather than with a JVM trace."""
    java = find_java(environ)
    if java is None:
        raise SparkSetupError(
            f"Spark needs Java {MIN_JAVA} or newer, and no java was found "
            "(install a JDK or set JAVA_HOME)"
        )
    major = java_version(java)
    if major is None or major < MIN_JAVA:
        seen = "an unreadable version" if major is None else f"Java {major}"
        raise SparkSetupError(f"Spark needs Java {MIN_JAVA} or newer; {java} is {seen}")


def _prepare_environment(settings: SparkSettings) -> None:
    """This interpreter for Spark's Python; a local session's workers through the launcher of
    `worker_python.py` (pyspark's compiled modules, not its zip's)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if settings.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        launcher = worker_python(_socket_dir())
        if launcher is not None:
            os.environ["PYSPARK_PYTHON"] = launcher


def worker_socket_conf(settings: SparkSettings) -> dict[str, str]:
    """Unix domain sockets between a local JVM and its Python workers (see UNIX_SOCKETS).

    Not for a cluster (the directory is on this machine only), nor where the user turned them
    off or named a directory (`--conf`, a profile). A user who only turned them on gets the
    private directory too: Spark's default, the shared temporary directory, would leave the
    sockets to the umask."""
    if not settings.master.startswith("local") or not hasattr(socket, "AF_UNIX"):
        return {}
    if settings.conf.get(UNIX_SOCKETS, "true").strip().lower() != "true":
        return {}
    if SOCKET_DIR in settings.conf:
        return {}
    directory = _socket_dir()
    return {UNIX_SOCKETS: "true", SOCKET_DIR: directory} if directory else {}


@functools.cache  # one directory a process
def _socket_dir() -> str | None:
    """This process's directory for the sockets (mode 0700, removed at exit), in the temporary
    directory or, where that is too deep for a socket's path (macOS's is), in /tmp; None when
    neither will do."""
    for base in (tempfile.gettempdir(), "/tmp"):
        base = os.path.abspath(base)
        if len(os.fsencode(base)) + _SOCKET_TAIL > SOCKET_PATH_MAX:
            continue
        with contextlib.suppress(OSError):
            made = tempfile.mkdtemp(prefix=_SOCKET_DIR_PREFIX, dir=base)
            atexit.register(shutil.rmtree, made, ignore_errors=True)
            return made
    return None


@contextlib.contextmanager
def scheduler_only() -> Iterator[None]:
    """A local JVM started inside runs no rows itself: start it with SCHEDULER_JAVA_OPTIONS
    (before the user's `spark.driver.extraJavaOptions`, which win)."""
    token = _SCHEDULER_ONLY.set(True)
    try:
        yield
    finally:
        _SCHEDULER_ONLY.reset(token)


def _java_options(debug: bool) -> str:
    return "" if debug else f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}"


def spark_session(settings: SparkSettings, *, data_source: bool = True) -> Any:
    """The SparkSession for a lancens job, started on first use and reused in this process.

    `data_source=False` leaves the `lancens` data source unregistered, for a caller that
    registers it only when it needs it (registering costs a fresh JVM seconds)."""
    require_pyspark()
    if settings.remote is not None:
        return _connect_session(settings, data_source)
    os.environ.pop(REMOTE_ENV, None)  # PySpark would take it over the master we chose
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if running != settings.master:
            raise InvalidInputError(
                f"a Spark session on {running} already runs in this process; "
                f"cannot start one on {settings.master}"
            )
        _apply_runtime_conf(active, settings)
        _quiet_python_loggers(settings.debug)
        if data_source:
            _register(active)
        return active
    require_java()
    _prepare_environment(settings)
    builder = SparkSession.builder.master(settings.master).appName("lancens")
    conf = _session_conf(settings)
    archive = _hotspot_options(settings, conf)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with warnings.catch_warnings():
            # Lance warns on any fork once imported; the JVM gateway is forked and exec'd at
            # once and never runs Lance (Python workers come from Spark's own daemon).
            warnings.filterwarnings("ignore", message="lance is not fork-safe")
            with _jvm_output(settings.debug), _sigint_kept(), _launch_environment():
                spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not start: one line, the trace only with --debug
        raise LancensError(f"Spark did not start on {settings.master}: {_first_line(exc)}") from exc
    with contextlib.suppress(Exception):  # the archive only ever saves time
        build_after_exit(archive, spark.sparkContext._jvm)
    spark.sparkContext.setLogLevel("INFO" if settings.debug else "ERROR")
    _quiet_python_loggers(settings.debug)
    if data_source:
        _register(spark)
    return spark


def _session_conf(settings: SparkSettings) -> dict[str, str]:
    """The configuration of a JVM started here: ours, the user's over it (but the time zone),
    and the JVM options in the order that lets the user's win."""
    driver, executor = "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"
    conf = {**BASE_CONF, **worker_socket_conf(settings), **settings.conf, **FIXED_CONF}
    for key in (driver, executor):
        conf[key] = f"{ARROW_JAVA_OPTIONS} {conf.get(key, '')}".strip()
    if _SCHEDULER_ONLY.get() and settings.master.startswith("local"):
        conf[driver] = f"{SCHEDULER_JAVA_OPTIONS} {conf[driver]}"
    options = _java_options(settings.debug)
    if options:
        for key in (driver, executor):
            conf[key] = f"{conf[key]} {options}"
    conf.setdefault("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    return conf


def _hotspot_options(settings: SparkSettings, conf: dict[str, str]) -> Launch:
    """A HotSpot driver's options of ours, before the user's: its warnings to stderr
    (DRIVER_LOG_OPTIONS), DRIVER_JIT_OPTIONS and the class-data-sharing archive of
    `jvm_archive.py` (mapped when built, else the class list it is built from). Another JVM
    (OpenJ9) gets none of them."""
    java = find_java()
    banner = java_banner(java) if java else None
    if java is None or banner is None or "OpenJ9" in banner or "Server VM" not in banner:
        return Launch()
    driver = "spark.driver.extraJavaOptions"
    key = archive_key(
        java, banner, _spark_home(), conf.get("spark.driver.extraClassPath", ""), os.environ
    )
    launch = launch_options(cache_dir(), key, settings.conf.get(driver, ""))
    ours = f"{launch.options} {DRIVER_LOG_OPTIONS} {DRIVER_JIT_OPTIONS}".strip()
    conf[driver] = f"{ours} {conf[driver]}"
    return launch


def _spark_home() -> str:
    """The Spark PySpark starts (SPARK_HOME, else the installed pyspark package), as it finds it."""
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


@contextlib.contextmanager
def _launch_environment() -> Iterator[None]:
    """The environment the JVM starts with (ours is restored at once): SPARK_HOME named, so that
    `spark-submit` does not start a Python to find it, and PYSPARK_DRIVER_PYTHON naming no
    command (NO_LOOKUP_PYTHON), which is how Spark decides that there are no Python data
    sources to look up."""
    saved = {name: os.environ.get(name) for name in ("SPARK_HOME", "PYSPARK_DRIVER_PYTHON")}
    os.environ["SPARK_HOME"] = _spark_home()
    os.environ["PYSPARK_DRIVER_PYTHON"] = NO_LOOKUP_PYTHON
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _connect_session(settings: SparkSettings, data_source: bool = True) -> Any:
    """A session on a Spark Connect server: nothing starts here but a gRPC client."""
    if not settings.debug:  # gRPC's own log lines (a failed TLS handshake) before our one line
        os.environ.setdefault(GRPC_VERBOSITY, "NONE")
    try:
        import pyspark.sql.connect.session  # noqa: F401  (what pyspark[connect] brings)
        from pyspark.sql import SparkSession
    except ImportError as exc:  # grpcio, zstandard, ... of pyspark[connect]
        raise SparkSetupError(
            f"--remote needs PySpark's Spark Connect client ({exc}): "
            "python -m pip install 'lancens-cli[spark]'"
        ) from None
    # PySpark's client would retry an unreachable server for ten minutes: ask it first, briefly
    await_server(settings.remote, settings.connect_timeout)
    try:
        # PySpark's own builder, which also switches pyspark.sql.functions to Connect
        spark = SparkSession.builder.remote(settings.remote).getOrCreate()
        # the first call to the server: an unreachable one fails here, in one line
        spark.conf.set("spark.sql.session.timeZone", FIXED_CONF["spark.sql.session.timeZone"])
        _apply_runtime_conf(spark, settings)
    except LancensError:
        raise
    except Exception as exc:  # no server there, or it refused us
        raise LancensError(
            f"Spark Connect server {settings.remote} did not answer: {_first_line(exc)}"
        ) from exc
    _quiet_python_loggers(settings.debug)
    if data_source:
        _register(spark)
    return spark


@contextlib.contextmanager
def _jvm_output(debug: bool) -> Iterator[None]:
    """The JVM started inside writes its stderr to an unnamed temporary file, not ours, and its
    stdout there too (with --debug: to our stderr), never to our stdout.

    The JVM prints lines of its own at start ("Using incubator modules", log4j notices) and
    Spark's task failures later; a command reports what matters in one line of its own, so
    they reach the terminal only with --debug. Our stdout carries the command's output alone,
    and a reader of it (`lancens scan | head`) sees its end when lancens exits, not when the
    JVM has stopped after it. The JVM inherits the descriptors while it is started; ours are
    restored at once.
    """
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    with contextlib.ExitStack() as stack:
        if debug:
            target = 2
        else:
            target = stack.enter_context(tempfile.TemporaryFile(prefix="lancens-spark-")).fileno()
        saved: list[tuple[int, int]] = []
        try:
            for fd in (1,) if debug else (1, 2):
                with contextlib.suppress(OSError):  # a closed descriptor stays closed
                    saved.append((fd, os.dup(fd)))
                    os.dup2(target, fd)
            yield
        finally:
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)


@contextlib.contextmanager
def _sigint_kept() -> Iterator[None]:
    """The SIGINT handler of the caller, kept across the start of a SparkContext.

    PySpark's own handler cancels the jobs from inside the signal handler, a py4j call that
    re-enters the connection the main thread waits on: py4j then prints four tracebacks before
    the KeyboardInterrupt. Ctrl-C stays the command's (`cancelled_on_interrupt`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)


CANCEL_EVERY = 0.25  # seconds between cancels after a Ctrl-C: a job started since is cancelled too


@contextlib.contextmanager
def cancelled_on_interrupt() -> Iterator[None]:
    """Spark calls that a Ctrl-C ends: the session's jobs are cancelled and the call waiting on
    them fails, for the caller to stop as interrupted (`task_failures.stop_if_interrupted`).

    The handler only starts a thread that cancels every job of the session until the block ends
    (one started after the Ctrl-C too), then does what the handler before it does (lancens: it
    notes the Ctrl-C; a second one stops at once). A Ctrl-C that came while the session started
    stops the command here, before any job."""
    cancel = _canceller()
    if cancel is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupt.checkpoint()
    before = signal.getsignal(signal.SIGINT)
    done = threading.Event()
    threads: list[threading.Thread] = []

    def handler(signum: int, frame: Any) -> None:
        if not threads:
            threads.append(threading.Thread(target=_keep_cancelling, args=(cancel, done)))
            threads[0].daemon = True
            threads[0].start()
        if callable(before):
            before(signum, frame)
        elif before != signal.SIG_IGN:
            signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)
        done.set()
        for thread in threads:
            thread.join(timeout=5)


def _canceller() -> Callable[[], Any] | None:
    """What cancels every job of the session this process runs (None: no session runs).

    Found without a call to the JVM (a signal may come while the main thread is in one)."""
    if "pyspark" not in sys.modules:
        return None
    connect = sys.modules.get("pyspark.sql.connect.session")
    if connect is not None:
        session = connect.SparkSession.getActiveSession()
        if session is not None:
            return session.interruptAll
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    return None if context is None else context.cancelAllJobs


def _keep_cancelling(cancel: Callable[[], Any], done: threading.Event) -> None:
    while True:
        with contextlib.suppress(Exception):  # the session is stopping: nothing left to cancel
            cancel()
        if done.wait(CANCEL_EVERY):
            return


# PySpark logs every error of a query as a JSON document with its JVM trace on stderr, before
# the exception reaches us; the command reports the error in one line of its own.
_PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _quiet_python_loggers(debug: bool) -> None:
    for name in _PYSPARK_ERROR_LOGGERS:
        logging.getLogger(name).disabled = not debug


def _apply_runtime_conf(spark: SparkSession, settings: SparkSettings) -> None:
    for key, value in {**settings.conf, **FIXED_CONF}.items():
        try:
            spark.conf.set(key, value)
        except Exception:  # a static setting of a running session: it keeps its value
            continue


def _register(spark: SparkSession) -> None:
    register(spark)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
