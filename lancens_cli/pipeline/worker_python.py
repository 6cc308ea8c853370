"""The Python a local session's workers start: pyspark from the installed package, not a zip.

Spark starts every Python process of a job (the daemons that look up data sources, create the
source, plan the read, run the tasks) with PYTHONPATH = SPARK_HOME/python/lib/pyspark.zip and
py4j-*-src.zip ahead of site-packages. Python keeps no bytecode for modules it imports from a zip,
so each of those processes compiles pyspark's modules again: `import pyspark.worker` takes 1.4 s
from the zip and 0.24 s from the installed package on a 2-core machine, and a cold `scan` starts
three or four such processes before its first row.

When SPARK_HOME is the pip-installed pyspark itself (its zip holds the very modules the package
has, compiled), a local session names as its Python a small POSIX shell script that drops those
zips from PYTHONPATH and execs this interpreter with the same arguments; `python -m
pyspark.daemon ...` then imports the package's compiled modules. The py4j zip is dropped only
when the installed py4j is the zip's version. The script lives in the session's private
directory (mode 0700, removed at exit). Anything else keeps Spark's default: a SPARK_HOME of its
own, a cluster (its executors run elsewhere), Windows, a directory that does not execute.
pyspark and py4j are imported inside `worker_python`, so that this module imports without them.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

SCRIPT_NAME = "python"
_PY4J_ZIP = "py4j-{}-src.zip"

_SCRIPT = """#!/bin/sh
# Spark's Python workers, pyspark from the installed package (pipeline/worker_python.py)
set -f
kept=
IFS=:
for entry in $PYTHONPATH; do
  case $entry in
    {patterns}) ;;
    *) kept=${{kept:+$kept:}}$entry ;;
  esac
done
unset IFS
if [ -n "$kept" ]; then PYTHONPATH=$kept; export PYTHONPATH; else unset PYTHONPATH; fi
exec {python} "$@"
"""


def installed_zips(spark_home: str, pyspark_dir: str, py4j_version: str | None) -> list[str]:
    """The zips of SPARK_HOME/python/lib that the installed packages replace: none unless
    SPARK_HOME is the installed pyspark package."""
    if os.path.realpath(spark_home) != os.path.realpath(pyspark_dir):
        return []
    lib = Path(spark_home) / "python" / "lib"
    names = ["pyspark.zip"]
    if py4j_version:
        names.append(_PY4J_ZIP.format(py4j_version))
    return [str(lib / name) for name in names if (lib / name).is_file()]


def script_text(zips: list[str], python: str) -> str:
    """The launcher's text: `zips` dropped from PYTHONPATH, then `python` with the arguments."""
    patterns = "|".join(shlex.quote(z) for z in zips)
    return _SCRIPT.format(patterns=patterns, python=shlex.quote(python))


def worker_python(directory: str | None) -> str | None:
    """The launcher for a local session's workers, written in `directory` (None: keep Spark's
    default, with the reason above)."""
    if os.name != "posix" or directory is None:
        return None
    import py4j.version
    import pyspark

    pyspark_dir = os.path.dirname(pyspark.__file__)
    spark_home = os.environ.get("SPARK_HOME") or pyspark_dir
    zips = installed_zips(spark_home, pyspark_dir, py4j.version.__version__)
    if not zips or not _executes_in(directory):
        return None
    path = os.path.join(directory, SCRIPT_NAME)
    if not os.path.exists(path):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700), "w") as out:
            out.write(script_text(zips, sys.executable))
    return path


def _executes_in(directory: str) -> bool:
    """Whether files in `directory` may run (not a noexec mount)."""
    noexec = getattr(os, "ST_NOEXEC", 0)
    try:
        return not (noexec and os.statvfs(directory).f_flag & noexec)
    except OSError:
        return False
