"""Fixtures every test folder uses: a moto S3 server and a GCS emulator on 127.0.0.1, namespace
roots, the shared Spark session and Parquet files. Non-fixture helpers are in helpers.py;
fixtures only one folder uses are in that folder's conftest.py."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gcs_emulator import fake_gcs_server, service_account_key
from gcs_proxy import GcsWriteProxy
from helpers import S3_KEY, S3_SECRET, Root, free_port, s3_client

os.environ.setdefault("LANCE_LOG", "error")
# Any Spark a test process starts (the `spark` fixture, or a command run in-process without it)
# is the same local[2] session: a second master in one process is refused.
os.environ.setdefault("LANCENS_SPARK_MASTER", "local[2]")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The record of `lancens spark start` that every Spark command consults is this test process's
# own (empty) state directory: a developer's running server is never used by a test. Through
# XDG_STATE_HOME rather than LANCENS_STATE_DIR, which a command not yet knowing the variable
# would warn about on stderr.
os.environ.pop("LANCENS_STATE_DIR", None)
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="lancens-test-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], ignore_errors=True)
# The JVM class archive a Spark driver builds after its first start (pipeline/jvm_archive.py) is
# one for the whole run, shared by pytest-xdist's workers (they inherit the controller's
# environment), and never written to the user's home; the process that made it removes it.
if os.environ.get("TEST_CACHE_OWNER_PID") is None:
    os.environ["TEST_CACHE_OWNER_PID"] = str(os.getpid())
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="lancens-test-cache-")
if os.environ["TEST_CACHE_OWNER_PID"] == str(os.getpid()):
    atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)


@pytest.fixture(scope="session")
def moto_endpoint():
    """A real moto S3 server over HTTP on loopback, for the whole session."""
    from moto.server import ThreadedMotoServer

    port = free_port()
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


@pytest.fixture
def s3_bucket(moto_endpoint, s3_options) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3_client(moto_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
def local_root(tmp_path) -> Root:
    path = tmp_path / "ns"
    path.mkdir()
    return Root(str(path), {}, path)


@pytest.fixture
def s3_root(s3_bucket, s3_options) -> Root:
    return Root(f"s3://{s3_bucket}/ns", dict(s3_options), None)


@pytest.fixture(scope="session")
def gcs_endpoint(tmp_path_factory):
    """fake-gcs-server (gcs_emulator.py) on 127.0.0.1 for the whole session."""
    with fake_gcs_server(tmp_path_factory.mktemp("gcs") / "fake-gcs-server.log") as url:
        yield url


@pytest.fixture(scope="session")
def gcs_proxy(gcs_endpoint):
    """The write proxy (gcs_proxy.py) in front of the emulator: Lance's base URL."""
    with GcsWriteProxy(gcs_endpoint) as running:
        yield running


@pytest.fixture(scope="session")
def gcs_lance_options(gcs_proxy) -> dict[str, str]:
    """What pylance needs to reach a gs:// root here: the proxy as base URL, over HTTP."""
    return {"service_account_key": service_account_key(gcs_proxy.url), "allow_http": "true"}


@pytest.fixture(scope="session")
def gcs_options(gcs_endpoint, gcs_lance_options) -> dict[str, str]:
    """The CLI's options (Lance spelling): Lance at the proxy, gcsfs at the emulator itself
    (`endpoint`, anonymous), as a user with an emulator would write them."""
    return {
        "endpoint": gcs_endpoint,
        "service_account_key": gcs_lance_options["service_account_key"],
        "skip_signature": "true",
        "allow_http": "true",
    }


@pytest.fixture(scope="session")
def gcs_fs(gcs_endpoint):
    """A plain gcsfs client for making buckets and looking at objects from outside."""
    import gcsfs.core

    return gcsfs.core.GCSFileSystem(
        endpoint_url=gcs_endpoint, token="anon", project="test", skip_instance_cache=True
    )


@pytest.fixture
def gcs_root(gcs_fs, gcs_options) -> Root:
    """`gs://<fresh bucket>/ns`."""
    bucket = f"g-{uuid.uuid4().hex[:12]}"
    gcs_fs.mkdir(bucket)
    return Root(f"gs://{bucket}/ns", dict(gcs_options), None)


@pytest.fixture(
    params=[
        "local",
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("gcs", marks=pytest.mark.gcs),
    ]
)
def any_root(request) -> Root:
    """Every test using this runs on a local directory, on S3 (moto) and on GCS
    (fake-gcs-server behind the write proxy)."""
    return request.getfixturevalue(f"{request.param}_root")


@pytest.fixture
def new_objects():
    """`new_objects(kind)` counts the objects of `kind` alive and made since the fixture
    started, after a collection. What was alive before is frozen out of the collector's
    generations, so a count stays cheap however long the test process has run (a full count
    of a late pytest worker's heap took seconds, and tests count once a table)."""
    gc.collect()
    gc.freeze()

    def count(kind: type) -> int:
        gc.collect()
        return sum(isinstance(o, kind) for g in range(3) for o in gc.get_objects(g))

    yield count
    gc.unfreeze()


@pytest.fixture
def files(tmp_path):
    """`files(name, table)` writes `table` as Parquet to tmp_path/name and returns the path."""

    def write(name: str, table: pa.Table) -> str:
        path = tmp_path / name
        pq.write_table(table, path)
        return str(path)

    return write


@pytest.fixture(scope="session")
def spark():
    """One real local Spark session (local[2]) per test process, shared by every Spark test.

    In-process CLI invocations (`invoke`) reuse it, as a user's notebook session would be.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["LANCENS_SPARK_MASTER"] = "local[2]"  # in-process commands reuse this session
    from lancens_cli.pipeline.spark_session import SparkSettings, spark_session

    session = spark_session(SparkSettings(master="local[2]"))
    yield session
    session.stop()
