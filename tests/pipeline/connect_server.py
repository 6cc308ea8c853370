"""A real Spark Connect server on 127.0.0.1, started from the pyspark package's own
`sbin/start-connect-server.sh` (the script and the `spark-connect` jar are in the wheel).

The server's Python workers run this interpreter (PYSPARK_PYTHON), whose environment has
lancens_cli installed, as a server host with the package installed would. `connect_server()`
always stops it, even when the test fails. `hide_module` makes the server's Python unable to
import a package, as on a server where it was never installed.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spark_cluster import free_ports, spark_home

START_TIMEOUT = 240.0

# A sitecustomize that makes `import <name>` fail as if the package were not installed.
_HIDE = """import sys
class _Hidden:
    def find_spec(self, name, path=None, target=None):
        if name == {name!r} or name.startswith({name!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Hidden())
"""


@dataclass
class ConnectServer:
    url: str  # sc://127.0.0.1:P
    log_dir: Path

    def env(self) -> dict[str, str]:
        """What a `lancens` subprocess needs besides `--remote` (nothing of the JVM)."""
        return {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("*.out")))


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def connect_server(work: Path, hide_module: str | None = None) -> Iterator[ConnectServer]:
    home = spark_home()
    (port,) = free_ports(1)
    log_dir, pid_dir = work / "logs", work / "pids"
    log_dir.mkdir(parents=True)
    pid_dir.mkdir()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_PID_DIR": str(pid_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    env.pop("SPARK_REMOTE", None)
    if hide_module:
        site = work / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(_HIDE.format(name=hide_module))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    for script in ("start-connect-server.sh", "stop-connect-server.sh", "spark-daemon.sh"):
        (home / "sbin" / script).chmod(0o755)
    args = [
        "--master", "local[2]",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}",
    ]  # fmt: skip
    subprocess.run(
        [str(home / "sbin" / "start-connect-server.sh"), *args],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    server = ConnectServer(f"sc://127.0.0.1:{port}", log_dir)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _listening(port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark Connect did not listen on {port}:\n{server.log()}")
            time.sleep(1.0)
        yield server
    finally:
        subprocess.run(
            [str(home / "sbin" / "stop-connect-server.sh")],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
