#!/usr/bin/env python3
"""A Spark command's cold start, every second of it: `lancens scan` on the quick start's root.

    python bench/bench_cold_start.py [--runs 5] [--baseline DIR] [--first-run] [--no-phases]
        [--workdir DIR] [--keep]

The root is README's quick start (1,000 rows, `city` x `bucket(4, id)`: 8 partition tables),
built with the CLI. The commands: `scan --where "id % 5 = 0"` (a condition only Spark
evaluates, so Spark reads the rows; in a pipe, so the rows stream) and `scan --count --where
"id % 5 = 0"`, each a fresh process with a fresh local Spark, as `python -m lancens_cli` of
this checkout and, with `--baseline DIR`, of another one (`git worktree add /tmp/old HEAD`):
its PYTHONPATH is DIR, for the command and Spark's Python workers alike.

1. Whole processes, A B A B (interleaved, so that load from elsewhere hits both alike), after one
   warm-up round: medians and the ratio to the baseline, and the load average around them. A
   run ends when its process exits; "gone" is when the last holder of its stdout has closed it
   (a JVM that kept it: a reader of the rows waits for that).
2. Where the seconds go: one more run of each under a probe (this script with `--probe`: timers
   around the functions below, installed by an import hook, and a watch of the processes Spark
   starts), with Spark's own event log on (the application start, each job's submission, first
   task launch, last task end): a timeline, and the seconds before the first task and after
   the last.

Before timing, the class-data-sharing archive a Spark driver of this checkout builds after its
first run (`pipeline/jvm_archive.py`) is waited for; `--first-run` times a run with an empty
cache too (the one that writes the class list) and how long the detached build takes. Prints
figures; always exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ENV, REPO, load_average, print_table  # noqa: E402
from _probe import ProbeHook  # noqa: E402
from bench_spark_ingest import (  # noqa: E402
    event_log,
    gaps,
    job_rows,
    print_timeline,
    run_process,
    spark_events,
)

WHERE = "id % 5 = 0"
COMMANDS = {
    "scan --where": ["scan", "--where", WHERE],
    "scan --count": ["scan", "--count", "--where", WHERE],
}

# What the probe times: (module, attribute path, label); a name a checkout lacks is skipped.
PROBED = [
    ("lancens_cli.cli.scan", "_request", "the request (flags, root)"),
    ("lancens_cli.pipeline.scan", "count_from_manifests", "--count from Lance's manifests?"),
    ("lancens_cli.pipeline.scan", "check_request", "checks before Spark (schema, --where)"),
    ("lancens_cli.cli.spark_options", "spark_session", "Spark session"),
    ("lancens_cli.pipeline.spark_session", "require_java", "`java -version`"),
    ("pyspark.java_gateway", "launch_gateway", "JVM start: spark-submit until py4j answers"),
    ("pyspark.core.context", "SparkContext._do_init", "SparkContext (the JVM's side)"),
    ("pyspark.sql.session", "SparkSession.__init__", "SparkSession"),
    ("lancens_cli.pipeline.spark_session", "_register", "register the lancens data source"),
    ("lancens_cli.pipeline.scan", "run_scan", "run_scan"),
    ("lancens_cli.pipeline.scan", "prepare", ".load(): Spark creates the source (a worker)"),
    ("pyspark.sql.classic.dataframe", "DataFrame.collect", "collect(): plan, job, rows back"),
    ("pyspark.sql.classic.dataframe", "DataFrame.count", "count(): plan, job"),
    ("pyspark.sql.classic.dataframe", "DataFrame.toLocalIterator", "toLocalIterator(): plan"),
    ("lancens_cli.cli.scan", "_report", "the result printed (a stream: its jobs run here)"),
]


# --- the probe: runs in the measured process ---------------------------------------------------


def _process_name(pid: str) -> str | None:
    """What a process Spark started is, from its command line (None: not one of those)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    if "pyspark.daemon" in argv:
        at = argv.index("pyspark.daemon")
        return f"python -m pyspark.daemon {argv[at + 1] if at + 1 < len(argv) else ''}".strip()
    if any("find_spark_home" in a for a in argv):
        return "python find_spark_home.py (spark-submit looks for SPARK_HOME)"
    if "org.apache.spark.launcher.Main" in argv:
        return "java: Spark's launcher (builds the driver's command line)"
    if "org.apache.spark.deploy.SparkSubmit" in argv:
        return "java: the driver JVM"
    return None


def _parent(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return ""


def _watch(seen: list, stop: threading.Event) -> None:
    """Each process Spark starts under this one, when first seen (a fork of a daemon is its
    worker)."""
    ours, names = {str(os.getpid())}, {}
    looked: set[str] = set()
    while not stop.wait(0.02):
        try:
            pids = sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int)
        except OSError:
            return
        for pid in pids:
            if pid in looked:
                continue
            looked.add(pid)  # a parent comes before its children (lower pids first)
            parent = _parent(pid)
            if parent not in ours:
                continue
            ours.add(pid)
            names[pid] = name = _process_name(pid)
            if name is None:
                continue
            if name.startswith("python -m") and names.get(parent) == name:
                name = f"  its worker (forked): {name.split()[-1]}"
            seen.append((time.time(), name))


def probe(log: Path, checkout: Path, args: list[str]) -> None:
    """Run `lancens ARGS` of `checkout` in this process, timed; the timings go to `log`."""
    started = time.time()
    calls: list = []
    processes: list = []
    here = {str(REPO), str(Path(__file__).resolve().parent)}
    sys.path[:] = [str(checkout)] + [entry for entry in sys.path if entry not in here]
    sys.meta_path.insert(0, ProbeHook(PROBED, calls))
    stop = threading.Event()
    threading.Thread(target=_watch, args=(processes, stop), daemon=True).start()
    from lancens_cli.cli.app import main

    imported = time.time()
    sys.argv = ["lancens", *args]
    code: Any = 0
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    finally:
        stop.set()
        record = {
            "start": started,
            "cli": imported,
            "main": time.time(),
            "calls": calls,
            "processes": processes,
        }
        log.write_text(json.dumps(record))
    sys.exit(code)


# --- the bench ---------------------------------------------------------------------------------


def quick_start_root(workdir: Path) -> Path:
    """README's quick-start root, through the CLI: 1,000 rows in 8 partition tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data, root = workdir / "orders.parquet", workdir / "events"
    pq.write_table(pa.table({"id": list(range(1000)), "city": ["Oslo", "Lima"] * 500}), data)
    spec = ["--field", "city", "--field", "bucket(4, id) as b"]
    for step in (
        ["init"],
        ["add-partition-spec", "--schema", str(data), *spec],
        ["write", "--from", str(data)],
    ):
        cmd = [sys.executable, "-m", "lancens_cli", "--root", str(root), *step]
        subprocess.run(cmd, env=ENV, check=True, capture_output=True, cwd=workdir)
    return root


def environment(checkout: Path, workdir: Path, cache: Path | None = None) -> dict[str, str]:
    """A cold process's environment: `checkout` first on the path (Spark's workers inherit it),
    no `lancens spark start` server (an empty state directory), the class archive cache."""
    env = {**ENV, "PYTHONPATH": str(checkout), "XDG_STATE_HOME": str(workdir / "state")}
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    return env


def command(root: Path, args: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "lancens_cli", "--root", str(root), *args, *extra]


def archive_cache(env: dict[str, str]) -> Path:
    """Where this checkout's Spark drivers keep the class archive (pipeline/jvm_archive.py)."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lancens" / "jvm"


def wait_for_archive_build(env: dict[str, str], limit: float = 900.0) -> float:
    """Seconds until no class archive build runs (a lock file names a running one)."""
    started = time.monotonic()
    folder = archive_cache(env)
    while any(folder.glob("spark-*.lock")) and time.monotonic() - started < limit:
        time.sleep(1)
    return time.monotonic() - started


def whole_processes(
    root: Path, checkouts: dict[str, Path], workdir: Path, runs: int
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Interleaved rounds, the first a warm-up (after which a class archive build is waited
    for); per (command, checkout) [(exit s, gone s)]."""
    found: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for i in range(runs + 1):
        for name, args in COMMANDS.items():
            for label, checkout in checkouts.items():
                env = environment(checkout, workdir)
                log = workdir / f"{label}.log"
                _, exited, gone = run_process(command(root, args), env, log)
                if i:
                    found.setdefault((name, label), []).append((exited, gone))
                    print(f"  run {i}: {name}, {label}: {exited:.2f} s (gone {gone:.2f} s)")
        if i == 0:
            waited = max(
                wait_for_archive_build(environment(c, workdir)) for c in checkouts.values()
            )
            if waited > 1:
                print(f"  (waited {waited:.0f} s for the class archive build after the warm-up)")
    return found


def print_whole(found: dict[tuple[str, str], list[tuple[float, float]]], base: str | None) -> None:
    rows = []
    for (name, label), times in found.items():
        exited = statistics.median(t[0] for t in times)
        gone = statistics.median(t[1] for t in times)
        ratio = ""
        if base and label != base and (name, base) in found:
            theirs = statistics.median(t[0] for t in found[(name, base)])
            ratio = f"{exited / theirs:.2f}"
        spread = f"{min(t[0] for t in times):.1f}-{max(t[0] for t in times):.1f}"
        rows.append([name, label, f"{exited:.2f} s", spread, f"{gone:.2f} s", ratio])
    print_table(["command", "checkout", "exit (median)", "min-max", "gone", "vs baseline"], rows)


def probed_run(root: Path, name: str, label: str, checkout: Path, workdir: Path) -> dict[str, Any]:
    """One probed run: its timeline printed; the seconds of each step and of the three parts."""
    events_dir = workdir / f"events-{label}"
    log = workdir / f"probe-{label}.json"
    conf = tuple(a for setting in event_log(events_dir) for a in ("--conf", setting))
    args = command(root, COMMANDS[name], conf)[3:]
    cmd = [sys.executable, __file__, "--probe", str(log), "--checkout", str(checkout), "--", *args]
    launched, exited, gone = run_process(cmd, environment(checkout, workdir), workdir / "probe.log")
    probed = json.loads(log.read_text())
    events = spark_events(events_dir)
    rows = [(launched, probed["start"], "Python interpreter start", 0)]
    rows.append((probed["start"], probed["cli"], "import the CLI (typer, lancens_cli.cli)", 0))
    rows += [(start, end, step, depth) for step, start, end, depth in probed["calls"]]
    rows += job_rows(events, 0)
    rows.append((probed["main"], launched + exited, "exit: interpreter shutdown", 0))
    rows.append((launched + exited, launched + gone, "(after exit: until stdout is closed)", 0))
    rows += gaps(rows)
    print(f"{name}, {label}: exits at {exited:.2f} s, stdout closed at {gone:.2f} s")
    print_timeline(launched, rows)
    for at, process in probed["processes"]:
        print(f"  {at - launched:7.2f}s  started: {process}")
    steps: dict[str, float] = {}
    for step, start, end, _ in probed["calls"]:
        steps[step] = steps.get(step, 0.0) + end - start
    steps.update(_parts(launched, exited, gone, events))
    return steps


def _parts(launched: float, exited: float, gone: float, events: dict[str, Any]) -> dict[str, float]:
    jobs = [job for job in events["jobs"].values() if job["first"] is not None]
    if not jobs:
        return {}
    first = min(job["first"] for job in jobs)
    last = max(job["last"] for job in jobs)
    parts = {
        "= before the first task": first - launched,
        "= first task to last": last - first,
        "= after the last task, until exit": launched + exited - last,
        "= after the last task, until stdout closed": launched + gone - last,
    }
    print("  " + ", ".join(f"{k[2:]} {v:.2f} s" for k, v in parts.items()))
    return parts


def print_steps(steps: dict[str, dict[str, float]], base: str | None) -> None:
    """Each step's seconds per checkout, and this checkout's over the baseline's."""
    labels = list(steps)
    names: list[str] = []
    for found in steps.values():
        names += [n for n in found if n not in names]
    rows = []
    for name in names:
        row = [name] + [f"{steps[c][name]:.2f}" if name in steps[c] else "-" for c in labels]
        if base is not None:
            theirs, ours = steps[base].get(name, 0.0), steps["this"].get(name)
            row.append(f"{ours / theirs:.2f}" if ours is not None and theirs > 0.05 else "")
        rows.append(row)
    print_table(["step (seconds)", *labels] + (["ratio"] if base else []), rows)


def first_run(root: Path, checkout: Path, workdir: Path) -> None:
    """A run with an empty class archive cache, and how long the detached build takes after it."""
    cache = workdir / "fresh-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = environment(checkout, workdir, cache)
    _, exited, gone = run_process(
        command(root, COMMANDS["scan --where"]), env, workdir / "first.log"
    )
    waited = wait_for_archive_build(env)
    built = sorted(p.name for p in archive_cache(env).glob("spark-*.jsa"))
    size = sum(p.stat().st_size for p in archive_cache(env).glob("spark-*.jsa")) / 2**20
    print(
        f"first run, empty cache: exits at {exited:.2f} s (gone {gone:.2f} s); the archive "
        f"build ended {waited:.0f} s after it: {', '.join(built) or 'none'} ({size:.0f} MiB)"
    )
    shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--first-run", action="store_true", help="a run with an empty cache too")
    parser.add_argument("--no-phases", action="store_true", help="skip the probed runs")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(args.probe, args.checkout, args.rest)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-cold-start-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)  # `python -m` puts the working directory before PYTHONPATH
    checkouts = {"this": REPO}
    if args.baseline:
        checkouts["baseline"] = args.baseline.resolve()
    base = "baseline" if args.baseline else None
    root = quick_start_root(workdir)
    print(
        f"quick-start root {root}; checkouts: "
        + ", ".join(f"{k} {v}" for k, v in checkouts.items())
    )
    if args.first_run:
        first_run(root, REPO, workdir)
    print(f"whole processes, {args.runs} runs each after a warm-up; {load_average()}")
    found = whole_processes(root, checkouts, workdir, args.runs)
    print(f"({load_average()})")
    print_whole(found, base)
    if not args.no_phases:
        for name in COMMANDS:
            print()
            steps = {
                label: probed_run(root, name, label, checkout, workdir)
                for label, checkout in checkouts.items()
            }
            print()
            print(f"{name}: the steps side by side ({load_average()})")
            print_steps(steps, base)
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
