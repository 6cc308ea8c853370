"""Shared fixtures: a moto S3 server on 127.0.0.1, namespace roots, and ways to run the CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("LANCE_LOG", "error")
# Any Spark a test process starts (the `spark` fixture, or a command run in-process without it)
# is the same local[2] session: a second master in one process is refused.
os.environ.setdefault("LANCENS_SPARK_MASTER", "local[2]")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
S3_KEY = "testing-access-key-AKIAEXAMPLE"
S3_SECRET = "testing-secret-key-wJalrXUtnFEMI"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint():
    """A real moto S3 server over HTTP on loopback, for the whole session."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture(scope="session")
def s3_options(moto_endpoint) -> dict[str, str]:
    """Storage options (Lance spelling) for the moto server."""
    return {
        "endpoint": moto_endpoint,
        "region": "us-east-1",
        "access_key_id": S3_KEY,
        "secret_access_key": S3_SECRET,
        "allow_http": "true",
    }


def s3_client(endpoint: str):
    """A boto3 S3 client of the moto server at `endpoint`."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=S3_KEY,
        aws_secret_access_key=S3_SECRET,
    )


@pytest.fixture
def s3_bucket(moto_endpoint, s3_options) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3_client(moto_endpoint).create_bucket(Bucket=name)
    return name


@dataclass
class Root:
    """A namespace root plus the CLI arguments that reach it."""

    uri: str
    storage_options: dict[str, str]
    local_path: Path | None

    @property
    def args(self) -> list[str]:
        args = ["--root", self.uri]
        for key, value in self.storage_options.items():
            args += ["-s", f"{key}={value}"]
        return args

    @property
    def properties(self) -> dict[str, str]:
        """DirectoryNamespace / NamespaceConfig properties for this root."""
        props = {"root": self.uri}
        props.update({f"storage.{k}": v for k, v in self.storage_options.items()})
        return props


@pytest.fixture
def local_root(tmp_path) -> Root:
    path = tmp_path / "ns"
    path.mkdir()
    return Root(str(path), {}, path)


@pytest.fixture
def s3_root(s3_bucket, s3_options) -> Root:
    return Root(f"s3://{s3_bucket}/ns", dict(s3_options), None)


@pytest.fixture(params=["local", "s3"])
def any_root(request) -> Root:
    """Every test using this runs once on a local directory and once on S3 (moto)."""
    return request.getfixturevalue(f"{request.param}_root")


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def run_cli(*args: str, input: str | None = None, env: dict | None = None, cwd=None) -> Result:
    """Run `lancens` as a user does: a real subprocess."""
    full_env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1", **(env or {})}
    full_env.pop("LANCENS_ROOT", None) if env is None or "LANCENS_ROOT" not in env else None
    proc = subprocess.run(
        [sys.executable, "-m", "lancens_cli", *args],
        capture_output=True,
        text=True,
        input=input if input is not None else "",
        env=full_env,
        cwd=cwd,
        timeout=300,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def invoke(
    *args: str, input: str | None = None, env: dict[str, str | None] | None = None
) -> Result:
    """Run `lancens` in-process through the executable's entry point (fast; same code path).

    `_run_app` is what `lancens`' `main()` runs: the same handling of usage errors, failures and
    exit codes as a user's process. Each invocation builds its own session, so nothing leaks
    from one to the next. `env` changes the environment for this run only (None: unset).
    """
    from typer.testing import CliRunner

    from lancens_cli.cli.app import _run_app

    with CliRunner().isolation(input=input or "", env=env) as (out, err, _):
        try:
            code = _run_app(list(args), prog_name="lancens")
        except SystemExit as exc:  # as the process would exit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return Result(
            code,
            out.getvalue().decode("utf-8", "backslashreplace"),
            err.getvalue().decode("utf-8", "backslashreplace"),
        )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def cli_inproc():
    return invoke


def tree_snapshot(path: Path) -> dict[str, bytes]:
    """Every file below `path` with its bytes, to prove that nothing changed."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), path) + "/"] = b""
        for name in filenames:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as handle:
                found[os.path.relpath(full, path)] = handle.read()
    return found


@pytest.fixture(scope="session")
def spark():
    """One real local Spark session (local[2]) per test process, shared by every Spark test.

    In-process CLI invocations (`invoke`) reuse it, as a user's notebook session would be.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["LANCENS_SPARK_MASTER"] = "local[2]"  # in-process commands reuse this session
    from lancens_cli.pipeline.session import SparkSettings, spark_session

    session = spark_session(SparkSettings(master="local[2]"))
    yield session
    session.stop()
