"""A real standalone Spark cluster on 127.0.0.1: one master and one worker.

Both are started from the pyspark package's own launcher (`bin/spark-class`, SPARK_HOME = the
package directory), so the test needs nothing beyond `pip install pyspark` and a JDK. The worker
inherits this environment (PYSPARK_PYTHON = this interpreter, whose venv has lancens_cli
installed), so its executors import the package as a cluster node with the package installed
would. `standalone_cluster()` always stops both, even when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

START_TIMEOUT = 180.0


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: all bound at once, so the kernel cannot hand one out twice
    (binding one at a time did: the master's UI then moved to the next port, unwatched)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


@dataclass
class Cluster:
    master_url: str  # spark://127.0.0.1:P
    ui_url: str  # the master's web UI (its /json/ lists workers and applications)
    worker_dir: Path  # where the worker runs executors: app-*/<executor>/

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as response:
            return json.loads(response.read())

    def executor_dirs(self) -> list[Path]:
        """One directory per executor the worker launched (app-<id>/<n>)."""
        return sorted(p for p in self.worker_dir.glob("app-*/*") if p.is_dir())

    def env(self) -> dict[str, str]:
        """What a driver process (a `lancens` subprocess) needs to reach this cluster."""
        return {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """A JVM in its own process group, so stopping it also stops the executors it launched."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


_MASTER_AT = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI_AT = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")


def _bound(cluster: Cluster, master: subprocess.Popen, log: Path) -> Cluster:
    """The cluster with the master's URL and web UI as the master's log reports them bound."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if master.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{log.name} exited with {master.returncode}:\n{tail}")
        text = log.read_text(errors="replace") if log.exists() else ""
        url, ui = _MASTER_AT.search(text), _MASTER_UI_AT.search(text)
        if url and ui:
            return replace(cluster, master_url=url.group(1), ui_url=f"http://127.0.0.1:{ui[1]}")
        time.sleep(0.5)
    raise RuntimeError(f"the Spark master did not start in {START_TIMEOUT}s")


def _wait_for_worker(cluster: Cluster, procs: list[subprocess.Popen], logs: list[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for proc, log in zip(procs, logs, strict=True):
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{log.name} exited with {proc.returncode}:\n{tail}")
        with contextlib.suppress(OSError, ValueError):
            workers = cluster.state().get("workers", [])
            if any(w.get("state") == "ALIVE" for w in workers):
                return
        time.sleep(1)
    raise RuntimeError(f"no worker registered with {cluster.master_url} in {START_TIMEOUT}s")


@contextlib.contextmanager
def standalone_cluster(workdir: Path, cores: int = 2, memory: str = "2g") -> Iterator[Cluster]:
    """Start a master and one worker on 127.0.0.1; stop both on the way out, whatever happens."""
    home = spark_home()
    spark_class = str(home / "bin" / "spark-class")
    port, ui_port, worker_ui = free_ports(3)
    worker_dir = workdir / "worker"
    worker_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(worker_dir),
        "SPARK_LOG_DIR": str(workdir / "logs"),
        "SPARK_CONF_DIR": str(workdir / "conf"),  # none of the user's spark-defaults
    }
    (workdir / "conf").mkdir(exist_ok=True)
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", worker_dir)
    master_log, worker_log = workdir / "master.log", workdir / "worker.log"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            _start(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui_port),
                ],
                env,
                master_log,
            )
        )
        # the ports the master really bound: a port found free may be taken by another test
        # process before the master binds it, and the master then moves to the next one
        cluster = _bound(cluster, procs[0], master_log)
        procs.append(
            _start(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    cluster.master_url,
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(worker_dir),
                ],
                env,
                worker_log,
            )
        )
        _wait_for_worker(cluster, procs, [master_log, worker_log])
        yield cluster
    finally:
        for proc in reversed(procs):  # the worker first: it stops its executors
            _stop(proc)
