"""A class-data-sharing archive of Spark's classes: a Spark driver started here starts sooner.

A fresh driver loads and links some 15,000 classes before its first task: on a 2-core machine
most of the seconds until `getOrCreate` returns, and more while the data source is registered
and the first query compiles. A JDK maps classes from an archive instead (class data sharing,
`-XX:SharedArchiveFile`): with it a cold `scan` in one process took 11.4 s instead of 20.3 s
on 2 busy cores (bench/bench_cold_start.py has the whole-process figures).

The archive is built once per JDK and Spark install without slowing any command: a driver that
starts while there is none writes the names of the classes it loads (`-XX:DumpLoadedClassList`,
no measurable cost), and when the command ends it hands them to a detached, low-priority process
(`python -m lancens_cli.pipeline.jvm_archive`) that waits for that JVM to exit, loads those
classes in a JVM of the driver's class path and options that archives them as it exits
(`-XX:ArchiveClassesAtExit`, a dynamic archive: half a minute of CPU, about 165 MB; the loader
is LOADER, run as a source file, so it needs a JDK's compiler), checks that a JVM starts with
it, and only then renames it into the cache directory (`$XDG_CACHE_HOME/lancens/jvm`, else
`~/.cache/lancens/jvm`). Not a static archive (`-Xshare:dump`): on JDK 17 the JVM that mapped
one crashed as soon as anything hooked class loading (a Java agent, Java Flight Recorder); the
dynamic one ran with both. Not the command's own JVM dumping at its exit: that JVM ran 50%
slower. A half-written archive is never named, and an archive's name holds its size, so one cut
short later is removed rather than mapped (a truncated archive crashes the JVM that maps it); a
build that fails is tried again only after a week for the same JDK, Spark jars and class path
(the archive's key); one build runs at a time (a lock file naming its process); the two
archives used last are kept. A JVM given an archive that no longer fits it ignores it. A user's
own `-Xshare`, archive or class-list option in `spark.driver.extraJavaOptions` turns all of
this off.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lancens_cli.processes import pid_alive
from lancens_cli.user_dirs import cache_home

_USER_CHOICES = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "ClassList")
# What else decides the driver's class path (Spark's launcher adds these), besides the JDK and jars
_CLASS_PATH_ENV = (
    "SPARK_CLASSPATH",
    "SPARK_DIST_CLASSPATH",
    "HADOOP_CONF_DIR",
    "YARN_CONF_DIR",
    "SPARK_CONF_DIR",
)
# The driver's JVM options a dump must share with the JVMs that map the archive
_DUMP_ARGS = ("--add-modules", "--limit-modules", "-XX:+Use", "-XX:-Use")
STALE_SECONDS = 3600.0  # a lock or a part older than this, with its process gone, is debris
WAIT_FOR_JVM_SECONDS = 6 * 3600.0
DUMP_TIMEOUT = 1800.0
FORMAT = 2  # of the archive this module builds: a dynamic one (the static one of 1 crashed)
RETRY_SECONDS = 7 * 86400.0  # a failed build is tried again after a week
KEEP = 2  # archives kept: the ones used last (a JDK or Spark upgrade makes a new key)
# Loads (without initialising) every class of a class list, in a JVM that archives them at exit.
LOADER = """public class Loader {
  public static void main(String[] args) throws Exception {
    ClassLoader app = ClassLoader.getSystemClassLoader();
    for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of(args[0]))) {
      if (line.isEmpty() || line.startsWith("#") || line.startsWith("@")) continue;
      try {
        Class.forName(line.split(" ", 2)[0].replace('/', '.'), false, app);
      } catch (Throwable skipped) {
      }
    }
  }
}
"""


@dataclass
class Launch:
    """What a driver about to start adds to its JVM options, and the class list it writes when
    it is the one whose classes make the archive."""

    options: str = ""
    key: str = ""
    class_list: Path | None = None


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    home = cache_home(environ)
    return (home if home is not None else Path(os.path.expanduser("~/.cache/lancens"))) / "jvm"


def archive_key(java: str, banner: str, spark_home: str, class_path: str, environ: Any) -> str:
    """What an archive fits: the JDK (its path and `java -version`), Spark's jars (names, sizes,
    times) and whatever else goes on the class path."""
    jars = Path(spark_home) / "jars"
    listing = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(jars):
            stat = entry.stat()
            listing.append((entry.name, stat.st_size, int(stat.st_mtime)))
    facts = {
        "format": FORMAT,
        "java": os.path.realpath(java),
        "banner": banner,
        "jars": sorted(listing),
        "class_path": class_path,
        "env": {k: environ.get(k, "") for k in _CLASS_PATH_ENV},
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def _paths(directory: Path, key: str) -> dict[str, Path]:
    stem = f"spark-{key}"
    return {
        "lock": directory / f"{stem}.lock",
        "failed": directory / f"{stem}.failed",
    }


def archive_name(key: str, size: int) -> str:
    """An archive's file name holds its size: a JVM that maps a truncated archive crashes, so
    one whose size is not its name's is never given to a JVM."""
    return f"spark-{key}.{size}.jsa"


def whole_archive(directory: Path, key: str) -> Path | None:
    """The archive of `key` whose size is the one its name records; others of `key` (cut short
    by a full disk or a copy, or written by another version) are removed."""
    found = None
    for path in directory.glob(f"spark-{key}.*.jsa"):
        try:
            whole = path.stat().st_size == int(path.name.split(".")[1])
        except (OSError, ValueError):
            whole = False
        if whole and found is None:
            found = path
        else:
            path.unlink(missing_ok=True)
    return found


def launch_options(directory: Path, key: str, user_options: str) -> Launch:
    """The archive to map when there is one; else the class list to write, unless a build runs,
    failed before, or the user chose for themselves."""
    if any(choice in user_options for choice in _USER_CHOICES):
        return Launch()
    if any(c.isspace() or c in "\"'\\" for c in str(directory)):
        return Launch()  # Spark splits the JVM options at spaces
    paths = _paths(directory, key)
    archive = whole_archive(directory, key) if directory.is_dir() else None
    if archive is not None:
        with contextlib.suppress(OSError):
            os.utime(archive)  # used: kept over older ones
        return Launch(f"-XX:SharedArchiveFile={archive}", key)
    if _recent(paths["failed"], RETRY_SECONDS) or _live_lock(paths["lock"]):
        return Launch()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Launch()
    class_list = directory / f"spark-{key}.{secrets.token_hex(4)}.classlist"
    return Launch(f"-XX:DumpLoadedClassList={class_list}", key, class_list)


def build_after_exit(launch: Launch, jvm: Any) -> None:
    """When this process exits, hand the class list of its driver (`jvm`: the session's py4j
    view) to a detached build of the archive."""
    if launch.class_list is None:
        return
    system = jvm.java.lang.System
    runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = str(jvm.java.lang.String.join("\n", runtime.getInputArguments())).splitlines()
    job = {
        "key": launch.key,
        "class_list": str(launch.class_list),
        "jvm_pid": int(jvm.java.lang.ProcessHandle.current().pid()),
        "java": os.path.join(str(system.getProperty("java.home")), "bin", "java"),
        "class_path": str(system.getProperty("java.class.path")),
        "arguments": [a for a in arguments if a.startswith(_DUMP_ARGS)],
    }
    atexit.register(_start_build, job)


def _start_build(job: dict[str, Any]) -> None:
    class_list = Path(job["class_list"])
    paths = _paths(class_list.parent, job["key"])
    lock = paths["lock"]
    # another driver's build came first
    if whole_archive(class_list.parent, job["key"]) or not _take_lock(lock):
        class_list.unlink(missing_ok=True)
        return
    environ = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH", "LANG")}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, json.dumps(job)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=class_list.parent,
            env=environ,
            start_new_session=True,
        )
    except OSError:
        lock.unlink(missing_ok=True)
        return
    lock.write_text(json.dumps({"pid": process.pid}))


def _take_lock(lock: Path) -> bool:
    for _ in range(2):
        try:
            os.close(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return True
        except FileExistsError:
            if _live_lock(lock):
                return False
            lock.unlink(missing_ok=True)
        except OSError:
            return False
    return False


def _recent(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except OSError:
        return False


def _live_lock(lock: Path) -> bool:
    """A lock whose build still runs (a lock just taken counts, for a minute, before it names
    its process)."""
    try:
        age = time.time() - lock.stat().st_mtime
        pid = json.loads(lock.read_text() or "{}").get("pid")
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    if pid is None:
        return age < 60
    return age < STALE_SECONDS * 6 and pid_alive(int(pid))


def build(job: dict[str, Any]) -> str | None:
    """Dump the archive once the driver that wrote the class list has exited; None when it is in
    place, else why not."""
    class_list = Path(job["class_list"])
    paths = _paths(class_list.parent, job["key"])
    part = class_list.with_suffix(".part")
    deadline = time.monotonic() + WAIT_FOR_JVM_SECONDS
    while pid_alive(job["jvm_pid"]):
        if time.monotonic() > deadline:
            return "the driver did not exit"
        time.sleep(0.5)
    if whole_archive(class_list.parent, job["key"]):
        return None
    base = [job["java"], "-Xlog:disable", "-cp", job["class_path"], *job["arguments"]]
    loader = class_list.with_suffix(".java")
    try:
        loader.write_text(LOADER)
        dump = [*base, f"-XX:ArchiveClassesAtExit={part}", str(loader), str(class_list)]
        _run(dump, "the dump")
        _run([*base, "-Xshare:on", f"-XX:SharedArchiveFile={part}", "-version"], "a JVM on it")
        archive = archive_name(job["key"], part.stat().st_size)
        os.replace(part, class_list.parent / archive)
    except RuntimeError as exc:
        paths["failed"].write_text(f"{exc}\n")
        return str(exc)
    finally:
        part.unlink(missing_ok=True)
        loader.unlink(missing_ok=True)
    _keep_used_last(class_list.parent)
    return None


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, timeout=DUMP_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{what}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{what} exited {done.returncode}: {' / '.join(tail)}")


def _keep_used_last(directory: Path) -> None:
    """The KEEP archives used last stay; older ones and old debris of killed builds go."""
    archives = sorted(directory.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime)
    for old in archives[:-KEEP]:
        old.unlink(missing_ok=True)
    for debris in [*directory.glob("spark-*.classlist"), *directory.glob("spark-*.part")]:
        with contextlib.suppress(OSError):
            if time.time() - debris.stat().st_mtime > STALE_SECONDS * 24:
                debris.unlink()


def main(argv: list[str]) -> int:
    """The detached build: `python -m lancens_cli.pipeline.jvm_archive JOB`."""
    job = json.loads(argv[0])
    with contextlib.suppress(OSError):
        os.nice(10)  # after whatever the user runs next
    class_list = Path(job["class_list"])
    try:
        return 0 if build(job) is None else 1
    finally:
        class_list.unlink(missing_ok=True)
        _paths(class_list.parent, job["key"])["lock"].unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
