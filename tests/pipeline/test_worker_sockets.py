"""A local session talks to its Python workers over Unix domain sockets in a private directory
(pipeline/spark_session.worker_socket_conf); a cluster, or a user who chose, keeps Spark's TCP."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lancens_cli.pipeline import spark_session as session_module
from lancens_cli.pipeline.spark_session import (
    SOCKET_DIR,
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
    # the Python worker daemon that ran the tasks listens there, not on a TCP port
    assert [p for p in directory.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)]


def test_a_cluster_or_the_users_own_choice_keeps_spark_s_default():
    assert worker_socket_conf(SparkSettings(master="spark://127.0.0.1:7077")) == {}
    for chosen in ({UNIX_SOCKETS: "false"}, {SOCKET_DIR: "/somewhere/of/mine"}):
        assert worker_socket_conf(SparkSettings(conf=dict(chosen))) == {}
    local = worker_socket_conf(SparkSettings(master="local[2]"))
    assert local[UNIX_SOCKETS] == "true" and Path(local[SOCKET_DIR]).is_dir()


def test_a_directory_whose_socket_paths_would_be_too_long_keeps_tcp(monkeypatch, tmp_path):
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(session_module, "_socket_dirs", [str(deep)])

    assert worker_socket_conf(SparkSettings(master="local[*]")) == {}


def test_the_socket_directory_goes_when_the_process_ends():
    code = (
        "from lancens_cli.pipeline.spark_session import SparkSettings, worker_socket_conf\n"
        "print(worker_socket_conf(SparkSettings())['spark.python.unix.domain.socket.dir'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    directory = Path(done.stdout.strip())
    assert directory.name.startswith("lancens-sockets-")
    assert not directory.exists()
