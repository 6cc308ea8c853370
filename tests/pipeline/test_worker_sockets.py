"""A local session talks to its Python workers over Unix domain sockets in a private directory
(pipeline/spark_session.worker_socket_conf); a cluster, or a user who chose, keeps Spark's TCP."""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lancens_cli.pipeline import spark_session as session_module
from lancens_cli.pipeline.spark_session import (
    SOCKET_DIR,
    SOCKET_PATH_MAX,
    UNIX_SOCKETS,
    SparkSettings,
    worker_socket_conf,
)


@pytest.mark.spark
def test_a_local_sessions_workers_listen_in_a_directory_only_its_user_enters(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get(UNIX_SOCKETS) == "true"
    directory = Path(conf.get(SOCKET_DIR))
    mode = directory.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o700 and mode.st_uid == os.getuid()

    def double(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in batches:
            yield pa.record_batch([pc.multiply(batch.column(0), 2)], names=["id"])

    rows = spark.range(0, 6, 1, 2).mapInArrow(double, "id long").collect()

    assert sorted(r.id for r in rows) == [0, 2, 4, 6, 8, 10]
    # the Python worker daemon that ran the tasks listens there, not on a TCP port (beside the
    # driver's accumulator server, which listens there from the session's start)
    accumulators = Path(spark.sparkContext._accumulatorServer.server_address)
    assert _sockets_in(directory) - {accumulators}


def _sockets_in(directory: Path) -> set[Path]:
    """The sockets there now; a task's own socket may go between the listing and its stat."""
    found = set()
    for entry in directory.iterdir():
        try:
            if stat.S_ISSOCK(entry.lstat().st_mode):
                found.add(entry)
        except FileNotFoundError:
            continue
    return found


def test_a_cluster_or_the_users_own_choice_keeps_spark_s_default():
    assert worker_socket_conf(SparkSettings(master="spark://127.0.0.1:7077")) == {}
    for chosen in ({UNIX_SOCKETS: "false"}, {SOCKET_DIR: "/somewhere/of/mine"}):
        assert worker_socket_conf(SparkSettings(conf=dict(chosen))) == {}
    local = worker_socket_conf(SparkSettings(master="local[2]"))
    assert local[UNIX_SOCKETS] == "true" and Path(local[SOCKET_DIR]).is_dir()
    # turned on without a directory: still ours, not the shared temporary directory
    only_on = worker_socket_conf(SparkSettings(conf={UNIX_SOCKETS: "true"}))
    assert only_on == local


def _fresh_socket_dir(monkeypatch) -> None:
    """A test's own choice of directory, undone after it (the session's stays as it was)."""
    fresh = functools.cache(session_module._socket_dir.__wrapped__)
    monkeypatch.setattr(session_module, "_socket_dir", fresh)


def test_a_temporary_directory_too_deep_for_a_socket_falls_back_to_tmp(monkeypatch, tmp_path):
    deep = tmp_path / ("d" * 60)  # as deep as macOS's /var/folders/.../T/ and more
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    _fresh_socket_dir(monkeypatch)

    chosen = Path(worker_socket_conf(SparkSettings(master="local[*]"))[SOCKET_DIR])

    assert chosen.parent == Path("/tmp") and not list(deep.iterdir())
    longest = f"{chosen}/.01234567-89ab-cdef-0123-456789abcdef.sock"
    assert len(longest.encode()) <= SOCKET_PATH_MAX


def test_where_no_directory_is_short_enough_the_session_keeps_tcp(monkeypatch):
    _fresh_socket_dir(monkeypatch)
    monkeypatch.setattr(session_module, "SOCKET_PATH_MAX", 20)

    assert worker_socket_conf(SparkSettings(master="local[*]")) == {}


def test_the_socket_directory_is_private_and_goes_when_the_process_ends():
    code = (
        "import os, stat\n"
        "from lancens_cli.pipeline.spark_session import SparkSettings, worker_socket_conf\n"
        "d = worker_socket_conf(SparkSettings())['spark.python.unix.domain.socket.dir']\n"
        "print(d, os.path.isdir(d), oct(stat.S_IMODE(os.stat(d).st_mode)), os.stat(d).st_uid)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    path, existed, mode, owner = done.stdout.split()
    assert (existed, mode, int(owner)) == ("True", "0o700", os.getuid())
    assert Path(path).name.startswith("lancens-sockets-")
    assert not Path(path).exists()
