"""A cold local Spark's shortcuts, as a user meets them: the class archive a first Spark command
leaves behind and the next one maps (pipeline/jvm_archive.py), the launcher that gives a local
session's Python workers pyspark's installed modules (pipeline/worker_python.py), and a JVM that
never writes to the command's stdout.

The archive's rules (a user's own choice, a failed build, a build under way, an archive cut
short) are the fast tests; one slow test runs the whole life of an archive through `lancens scan`
in fresh processes with a cache directory of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import invoke

from lancens_cli.pipeline import jvm_archive, worker_python
from lancens_cli.processes import pid_alive

# --- the launcher of a local session's Python workers -------------------------------------------

ZIPS = ["/spark home/python/lib/pyspark.zip", "/spark home/python/lib/py4j-0.10.9.9-src.zip"]
SHOW = "import os, sys; print(os.environ.get('PYTHONPATH', '<unset>')); print(sys.argv[1:])"


def launched(tmp_path: Path, pythonpath: str | None) -> list[str]:
    """What a Python started through the launcher sees: its PYTHONPATH and its arguments."""
    script = tmp_path / "python"
    script.write_text(worker_python.script_text(ZIPS, sys.executable))
    script.chmod(0o700)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [str(script), "-c", SHOW, "a b", "*", "$HOME"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=tmp_path,
    )
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    ("given", "seen"),
    [
        (f"{ZIPS[0]}:{ZIPS[1]}:/site/x", "/site/x"),
        (f"/mine:{ZIPS[1]}:/with space/*:{ZIPS[0]}", "/mine:/with space/*"),
        (f"{ZIPS[0]}:{ZIPS[1]}", "<unset>"),
        ("/mine/pyspark.zip.bak:/mine", "/mine/pyspark.zip.bak:/mine"),
        (None, "<unset>"),
    ],
)
def test_the_launcher_drops_only_the_installed_zips_and_keeps_the_arguments(tmp_path, given, seen):
    path, arguments = launched(tmp_path, given)
    assert path == seen
    assert arguments == str(["a b", "*", "$HOME"])


def test_the_zips_are_dropped_only_when_spark_home_is_the_installed_package(tmp_path):
    lib = tmp_path / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (lib / "pyspark.zip").write_bytes(b"")
    (lib / "py4j-1.2-src.zip").write_bytes(b"")
    package = str(tmp_path / "pyspark")
    assert worker_python.installed_zips(package, package, "1.2") == [
        str(lib / "pyspark.zip"),
        str(lib / "py4j-1.2-src.zip"),
    ]
    # another py4j is installed than the zip's: its zip stays
    assert worker_python.installed_zips(package, package, "1.3") == [str(lib / "pyspark.zip")]
    # a SPARK_HOME of the user's own: its Python is its own
    other = tmp_path / "spark-4"
    other.mkdir()
    assert worker_python.installed_zips(str(other), package, "1.2") == []


@pytest.mark.spark
def test_a_local_sessions_workers_import_the_installed_pyspark_not_its_zip(spark):
    def where(_):
        import pyspark

        return pyspark.__file__, os.environ.get("PYTHONPATH", "")

    found = spark.sparkContext.parallelize([0], 1).map(where).collect()
    module, path = found[0]
    assert ".zip" not in module and module.endswith("__init__.py"), module
    assert "pyspark.zip" not in path


# --- the archive's rules ------------------------------------------------------------------------

KEY = "0123456789abcdef"


def test_a_users_own_sharing_choice_turns_the_archive_off(tmp_path):
    for options in ("-Xshare:off", "-XX:SharedArchiveFile=/x.jsa", "-XX:DumpLoadedClassList=/l"):
        assert jvm_archive.launch_options(tmp_path, KEY, options) == jvm_archive.Launch()
    assert not any(tmp_path.iterdir())


def test_the_first_driver_writes_a_class_list_and_a_whole_archive_is_mapped(tmp_path):
    cache = tmp_path / "cache"
    first = jvm_archive.launch_options(cache, KEY, "-Dx=1")
    assert first.class_list is not None and first.class_list.parent == cache
    assert first.options == f"-XX:DumpLoadedClassList={first.class_list}"
    archive = cache / jvm_archive.archive_name(KEY, 5)
    archive.write_bytes(b"12345")
    mapped = jvm_archive.launch_options(cache, KEY, "")
    assert mapped == jvm_archive.Launch(f"-XX:SharedArchiveFile={archive}", KEY)


def test_an_archive_cut_short_is_removed_never_mapped(tmp_path):
    archive = tmp_path / jvm_archive.archive_name(KEY, 1_000)
    archive.write_bytes(b"x" * 999)  # a full disk, an interrupted copy
    launch = jvm_archive.launch_options(tmp_path, KEY, "")
    assert "SharedArchiveFile" not in launch.options
    assert launch.class_list is not None  # built again
    assert not archive.exists()


def test_a_failed_build_waits_a_week_and_a_running_one_is_not_repeated(tmp_path):
    failed = tmp_path / f"spark-{KEY}.failed"
    failed.write_text("the dump exited 1\n")
    assert jvm_archive.launch_options(tmp_path, KEY, "") == jvm_archive.Launch()
    week_ago = time.time() - jvm_archive.RETRY_SECONDS - 60
    os.utime(failed, (week_ago, week_ago))
    assert jvm_archive.launch_options(tmp_path, KEY, "").class_list is not None

    lock = tmp_path / f"spark-{KEY}.lock"
    lock.write_text(json.dumps({"pid": os.getpid()}))  # a build of a live process
    assert jvm_archive.launch_options(tmp_path, KEY, "") == jvm_archive.Launch()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **PIPE)
    lock.write_text(json.dumps({"pid": int(dead.stdout)}))  # its process is gone
    assert jvm_archive.launch_options(tmp_path, KEY, "").class_list is not None


def test_a_cache_path_spark_would_split_is_not_used(tmp_path):
    spaced = tmp_path / "my cache"
    assert jvm_archive.launch_options(spaced, KEY, "") == jvm_archive.Launch()
    assert not spaced.exists()


PIPE = {"capture_output": True, "text": True, "check": True}


# --- a user's cold scans, through the CLI -----------------------------------------------------


def scan(root, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    """`lancens --json scan` of rows only Spark can select, in a fresh process and JVM."""
    env = {**os.environ, "LANCE_LOG": "error", "XDG_CACHE_HOME": str(cache)}
    command = [sys.executable, "-m", "lancens_cli", *root.args, "--json", "scan"]
    command += ["--where", "id % 5 = 0", "--columns", "id", *extra]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=600, cwd=cache.parent
    )


def wait_for_archive(folder: Path, timeout: float = 420) -> Path | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        built = list(folder.glob("spark-*.*.jsa"))
        if built and not list(folder.glob("spark-*.lock")):
            return built[0]
        if list(folder.glob("spark-*.failed")):
            pytest.fail((next(folder.glob("spark-*.failed"))).read_text())
        time.sleep(1)
    return None


def ids(done: subprocess.CompletedProcess) -> list[int]:
    assert done.returncode == 0, done.stderr
    return sorted(row[0] for row in json.loads(done.stdout)["rows"])


@pytest.mark.slow
@pytest.mark.spark
def test_a_first_spark_command_leaves_an_archive_the_next_one_maps(tmp_path):
    table = events(200, seed=11)
    root = partitioned_root(tmp_path, table.schema, "country")
    pq.write_table(table, tmp_path / "events.parquet")
    assert invoke(*root.args, "write", "--from", str(tmp_path / "events.parquet")).exit_code == 0
    expected = sorted(i for i in table.column("id").to_pylist() if i % 5 == 0)
    cache = tmp_path / "cache"
    folder = cache / "lancens" / "jvm"

    first = scan(root, cache)
    assert ids(first) == expected  # the JVM wrote nothing of its own on stdout
    archive = wait_for_archive(folder)
    assert archive is not None, sorted(p.name for p in folder.iterdir())
    assert not list(folder.glob("*.classlist")) and not list(folder.glob("*.part"))

    log = tmp_path / "classes.log"
    logged = f"spark.driver.extraJavaOptions=-Xlog:class+load=info:file={log}"
    second = scan(root, cache, "--conf", logged)
    assert ids(second) == expected
    loads = log.read_text()
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in loads

    # cut short, as a full disk or a copy leaves it (a new file: the second scan's JVM, still
    # exiting, maps the old one)
    cut = archive.with_suffix(".cut")
    with archive.open("rb") as whole, cut.open("wb") as half:
        half.write(whole.read(archive.stat().st_size // 2))
    cut.replace(archive)
    third = scan(root, cache)
    assert ids(third) == expected
    assert not archive.exists()
    # and built again: a build runs (its whole course was shown above, and is not waited for
    # twice), so it is stopped here
    lock = json.loads(next(folder.glob("spark-*.lock")).read_text())
    assert pid_alive(lock["pid"])
    os.killpg(lock["pid"], signal.SIGKILL)
