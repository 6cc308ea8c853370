#!/usr/bin/env python3
"""`lancens ingest` as a user times it: whole processes against a user's own Spark job.

    python bench/bench_spark_ingest.py [--rows 8000000 2000000] [--runs 3] [--vector-dim N]
        [--csv] [--workdir DIR] [--keep]
    python bench/bench_spark_ingest.py --in-process [--rows 1000000 | --large]

Whole processes (the default), each starting its own JVM, both on `local[2]`:
- a. `lancens --root NS ingest data.parquet --master local[2]` into a partitioned namespace
     whose spec is `country` x `month(event_date)` (8 x 12 = 96 partitions), made afresh
     (untimed) before every run;
- b. a user's own job, `spark-submit --master local[2] user_job.py`: `spark.read.parquet`,
     `month(event_date)` computed by Spark, `write.partitionBy("country", "event_month")
     .parquet(...)` into a fresh directory, Spark's defaults otherwise.
The two run interleaved, `--runs` rounds after one warm-up round; medians. A run's time is from
the launch until the process exits (what `time` in a shell prints); the JVM a lancens process
started may linger a little after it, so the time until its last descendant has gone is printed
too. Input: one seeded Parquet file per `--rows` (6 columns: id int64, event_date date32 over
2024-2025, customer_id int64, country utf8 of 8, amount float64, note utf8; with
`--vector-dim N` an `embedding` fixed_size_list<float32>[N] too, which Spark reads as an array
and lancens writes back as a vector), row groups of 131,072 rows. With `--csv` the same rows as
one CSV file (pyarrow's writer) are the input of both: lancens' tasks parse it with pyarrow
(one parser on every engine), the user's job with Spark's own CSV reader given the columns'
types (no inference pass); the probed runs are left out.

Then one more run of each, untimed, says where their seconds go: the lancens process runs
under a probe (this script with `--probe`: real timers around the functions of the command,
installed by an import hook so that every import stays where it happens, plus `-X importtime`
for which packages its imports load), both with Spark's event log on (job submission, the
launch of the first task and the end of the last). The user's job notes its own steps.

`--in-process` keeps the earlier comparison in one warm Spark session (year x bucket(50) spec,
`lancens write` beside it). Prints figures; always exits 0.
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

from _common import ENV, REPO, lancens_cmd  # noqa: E402
from _probe import ProbeHook  # noqa: E402

SPEC = ["--field", "year(event_date) as event_year", "--field", "bucket(50, customer_id) as cb"]
MONTH_SPEC = ["--field", "country", "--field", "month(event_date) as event_month"]
MASTER = "local[2]"


def make_input(path: Path, rows: int, vector_dim: int = 0) -> None:
    """`rows` seeded rows; with `vector_dim`, an `embedding` column of float32 vectors too
    (`fixed_size_list<float>[vector_dim]`, as lancedb and pyarrow write embeddings)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    countries = np.array(["US", "DE", "FR", "JP", "BR", "IN", "GB", "NO"], dtype=object)
    step = 1_000_000
    writer = None
    for start in range(0, rows, step):
        n = min(step, rows - start)
        table = pa.table(
            {
                "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
                "event_date": pa.array(
                    (np.datetime64("2024-01-01") + rng.integers(0, 731, n)).astype("datetime64[D]")
                ),
                "customer_id": pa.array(rng.integers(0, 100_000, n, dtype=np.int64)),
                "country": pa.array(countries[rng.integers(0, len(countries), n)], pa.string()),
                "amount": pa.array(rng.random(n) * 1000),
                "note": pa.array(
                    np.char.add("n", rng.integers(0, 1000, n).astype(str)), pa.string()
                ),
            }
        )
        if vector_dim:
            values = pa.array(rng.standard_normal(n * vector_dim, dtype=np.float32))
            vectors = pa.FixedSizeListArray.from_arrays(values, vector_dim)
            table = table.append_column("embedding", vectors)
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=131_072)
    writer.close()


class MemoryPoller:
    """Peak RSS per role, from /proc, of this process and its descendants."""

    def __init__(self) -> None:
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> None:
        self.peaks = {}

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid, role in _processes(os.getpid()):
                rss = _rss(pid)
                if rss:
                    self.peaks[role] = max(self.peaks.get(role, 0), rss)
            time.sleep(0.1)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        tree.setdefault(parent, []).append(int(entry))
    return tree


def _processes(root: int) -> list[tuple[int, str]]:
    tree = _children()
    found = [(root, "python driver")]
    stack = list(tree.get(root, []))
    while stack:
        pid = stack.pop()
        stack += tree.get(pid, [])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmd = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "java" in cmd.split(" ", 1)[0]:
            role = "spark driver (JVM)"
        elif "pyspark.daemon" in cmd:
            role = "python worker (max, daemon and its forks)"
        elif "/bin/lancens " in cmd or "lancens_cli" in cmd:
            role = "lancens write process"
        elif "python" in cmd:
            role = "other python"
        else:
            role = "other"
        found.append((pid, role))
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def mb(value: int) -> str:
    return f"{value / 2**20:,.0f} MB"


def published_rows(root: Path) -> int:
    import lance

    manifest = lance.dataset(str(root / "__manifest"))
    rows = manifest.to_table(filter="object_type = 'table'").to_pylist()
    return sum(
        lance.dataset(str(root / r["location"]), version=r["read_version"]).count_rows()
        for r in rows
    )


# --- whole processes -----------------------------------------------------------------------------

USER_JOB = '''\
"""A user's own partitioned Parquet write, as they would run it with spark-submit."""

import json
import os
import sys
import time

marks = [("script start", time.time())]
from pyspark.sql import SparkSession, functions as F

marks.append(("import pyspark", time.time()))
spark = SparkSession.builder.appName("user-job").getOrCreate()
marks.append(("SparkSession.builder.getOrCreate()", time.time()))
if sys.argv[1].endswith(".csv"):  # the columns' types given, as a careful user gives them
    columns = "id BIGINT, event_date DATE, customer_id BIGINT, country STRING, amount DOUBLE, "
    frame = spark.read.csv(sys.argv[1], header=True, schema=columns + "note STRING")
else:
    frame = spark.read.parquet(sys.argv[1])
marks.append(("spark.read: listing, footers, schema", time.time()))
frame = frame.withColumn("event_month", F.month("event_date"))
frame.write.partitionBy("country", "event_month").mode("overwrite").parquet(sys.argv[2])
marks.append(("write.partitionBy().parquet(): plan, job, commit", time.time()))
spark.stop()
marks.append(("spark.stop()", time.time()))
if os.environ.get("BENCH_MARKS"):
    with open(os.environ["BENCH_MARKS"], "w") as handle:
        json.dump(marks, handle)
'''

# What the probe times in a lancens process: (module, attribute path, label).
PROBED = [
    ("lancens_cli.pipeline.ingest", "ingest", "ingest(): the command's work"),
    ("lancens_cli.pipeline.ingest", "resolve_sources", "planning: list the input files"),
    ("lancens_cli.pipeline.ingest", "target_schema", "planning: namespace schema (__manifest)"),
    ("lancens_cli.cli.ingest", "spark_session", "Spark session start"),
    ("lancens_cli.pipeline.spark_session", "require_java", "`java -version` probe"),
    ("pyspark.java_gateway", "launch_gateway", "JVM launch (py4j gateway)"),
    ("pyspark.context", "SparkContext._do_init", "SparkContext init (in the JVM)"),
    ("lancens_cli.pipeline.spark_session", "_register", "register the lancens data source"),
    ("lancens_cli.pipeline.ingest", "arrow_native_struct", "planning: footers #1, Spark types"),
    ("lancens_cli.pipeline.write_commit", "check_columns", "planning: schema check"),
    ("lancens_cli.pipeline.ingest", "_write_row_groups", "write: plan, job, commit"),
    ("lancens_cli.pipeline.write_commit", "LancensWriter.__init__", "planning: write plan"),
    ("lancens_cli.service.partitioned.write", "partitioned_target", "__manifest snapshot, layout"),
    (
        "lancens_cli.pipeline.arrow_ingest",
        "RowGroupFiles.units",
        "planning: footers #2, row groups",
    ),
    ("lancens_cli.pipeline.arrow_ingest", "write_row_groups", "the job and the commit"),
    ("lancens_cli.pipeline.write_commit", "LancensWriter.commit", "driver commit"),
    ("lancens_cli.service.partitioned.write", "commit_touches", "commit_touches"),
    ("lancens_cli.service.partitioned.write", "_write_tables", "partition table commits"),
    ("lancens_cli.store.manifest", "ManifestStore.mutate", "__manifest commit"),
    ("lancens_cli.pipeline.write_commit", "_forget_job", "job log removed"),
]


def probe(log: Path, args: list[str]) -> None:
    """Run `lancens ARGS` in this process with PROBED timed; the timings go to `log`."""
    started = time.time()
    calls: list = []
    here = {str(REPO), str(Path(__file__).resolve().parent)}
    sys.path[:] = [entry for entry in sys.path if entry not in here]  # as the `lancens` script
    sys.meta_path.insert(0, ProbeHook(PROBED, calls))
    from lancens_cli.cli.app import main

    imported = time.time()
    sys.argv = ["lancens", *args]
    try:
        code = main()
    finally:
        record = {"start": started, "cli": imported, "main": time.time(), "calls": calls}
        log.write_text(json.dumps(record))
    sys.exit(code)


def run_process(cmd: list[str], env: dict[str, str], log: Path) -> tuple[float, float, float]:
    """(launch epoch, seconds until the process exits, until its last descendant has gone:
    the last holder of its stdout)."""
    launched, started = time.time(), time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        drain = threading.Thread(target=proc.stdout.read)
        drain.start()
        code = proc.wait()
        exited = time.perf_counter() - started
        drain.join(timeout=300)
        gone = time.perf_counter() - started
    if code != 0:
        tail = log.read_text()[-2000:]
        raise SystemExit(f"command failed ({code}): {' '.join(cmd)}\n{tail}")
    return launched, exited, gone


def user_env() -> dict[str, str]:
    return {
        **ENV,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def prepared(
    label: str, workdir: Path, data: Path, extra: list[str], given: Path | None = None
) -> list[str]:
    """The command of one run, its target made afresh (untimed); `given`: the input file when
    it is not `data` (the CSV of its rows)."""
    given = given or data
    if label == "lancens":
        root = workdir / "ns"
        shutil.rmtree(root, ignore_errors=True)
        partitioned_root(root, data, MONTH_SPEC)
        cmd = [*lancens_cmd(), "--root", str(root), "ingest", str(given), "--master", MASTER]
        return cmd + [a for key in extra for a in ("--conf", key)]
    out = workdir / "user-out"
    shutil.rmtree(out, ignore_errors=True)
    job = workdir / "user_job.py"
    job.write_text(USER_JOB)
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    conf = [a for key in extra for a in ("--conf", key)]
    return [spark_submit, "--master", MASTER, *conf, str(job), str(given), str(out)]


def check_outputs(workdir: Path, rows: int) -> None:
    import pyarrow.dataset as ds

    theirs = ds.dataset(workdir / "user-out", format="parquet", partitioning="hive").count_rows()
    ours = published_rows(workdir / "ns")
    print(f"check: lancens published {ours:,} rows, the user's job wrote {theirs:,} ({rows:,})")


def compare(
    workdir: Path, data: Path, rows: int, runs: int, given: Path | None = None
) -> dict[str, list]:
    """Interleaved rounds, the first one a warm-up; per label [(exit s, gone s)]."""
    found: dict[str, list] = {"lancens": [], "user job": []}
    for i in range(runs + 1):
        for label in found:
            cmd = prepared(label, workdir, data, [], given)
            env = ENV if label == "lancens" else user_env()
            _, exited, gone = run_process(cmd, env, workdir / f"{label.replace(' ', '-')}.log")
            if i:
                found[label].append((exited, gone))
                print(f"  run {i}: {label}: {exited:.2f} s (descendants gone {gone:.2f} s)")
        if i == 0:
            check_outputs(workdir, rows)
    return found


# --- where the seconds go ------------------------------------------------------------------------


def event_log(folder: Path) -> list[str]:
    """Spark settings that write its event log, plain JSON lines, into `folder`."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    return [
        "spark.eventLog.enabled=true",
        f"spark.eventLog.dir={folder.as_uri()}",
        "spark.eventLog.compress=false",
        "spark.eventLog.rolling.enabled=false",
    ]


def spark_events(folder: Path) -> dict[str, Any]:
    """Spark's event log: the application start and, per job, its submission, first task
    launch, last task end and completion (epoch seconds), and its task count."""
    found: dict[str, Any] = {"jobs": {}}
    stages: dict[int, int] = {}
    for path in folder.rglob("*"):
        if not path.is_file() or path.name.startswith("."):
            continue
        for line in path.read_text().splitlines():
            _event(json.loads(line), found, stages)
    return found


def _event(event: dict[str, Any], found: dict[str, Any], stages: dict[int, int]) -> None:
    kind, jobs = event["Event"], found["jobs"]
    if kind == "SparkListenerApplicationStart":
        found["start"] = event["Timestamp"] / 1000
    elif kind == "SparkListenerJobStart":
        job = {"submitted": event["Submission Time"] / 1000, "first": None, "last": 0, "tasks": 0}
        jobs[event["Job ID"]] = job
        stages.update({stage: event["Job ID"] for stage in event["Stage IDs"]})
    elif kind == "SparkListenerTaskStart":
        job = jobs[stages[event["Stage ID"]]]
        launched = event["Task Info"]["Launch Time"] / 1000
        job["first"] = launched if job["first"] is None else min(job["first"], launched)
        job["tasks"] += 1
    elif kind == "SparkListenerTaskEnd":
        job = jobs[stages[event["Stage ID"]]]
        job["last"] = max(job["last"], event["Task Info"]["Finish Time"] / 1000)
    elif kind == "SparkListenerJobEnd":
        jobs[event["Job ID"]]["ended"] = event["Completion Time"] / 1000


def import_costs(stderr: str) -> list[tuple[str, float]]:
    """Seconds `-X importtime` says each top-level package's modules took themselves."""
    costs: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        own, _, name = line[len("import time:") :].split("|")
        if not own.strip().isdigit():
            continue
        package = name.strip().split(".")[0]
        costs[package] = costs.get(package, 0.0) + int(own) / 1e6
    return sorted(costs.items(), key=lambda item: -item[1])


def print_timeline(launched: float, rows: list[tuple[float, float, str, int]]) -> None:
    """Rows (start, end, label, depth), in order, with what each does beyond its children."""
    rows = sorted(rows, key=lambda r: (r[0], r[3], -r[1]))
    print(f"  {'at':>8}  {'took':>8}  {'itself':>8}  step")
    for i, (start, end, label, depth) in enumerate(rows):
        children = 0.0
        for other in rows[i + 1 :]:
            if other[3] <= depth:
                break
            if other[3] == depth + 1 and other[1] <= end + 0.001:
                children += other[1] - other[0]
        own = f"{end - start - children:7.2f}s" if children else ""
        print(f"  {start - launched:7.2f}s  {end - start:7.2f}s  {own:>8}  {'  ' * depth}{label}")


def gaps(rows: list[tuple[float, float, str, int]]) -> list[tuple[float, float, str, int]]:
    """The stretches between consecutive outermost rows, named by what they lie between."""
    outer = sorted((r for r in rows if r[3] == 0), key=lambda r: r[0])
    found = []
    for before, after in zip(outer, outer[1:], strict=False):
        if after[0] - before[1] > 0.005:
            found.append((before[1], after[0], f"(between: {before[2]} | {after[2]})", 0))
    return found


def job_rows(events: dict[str, Any], depth: int, where: str = "") -> list:
    """Each Spark job: submission to its first task, its tasks (`where`: " on <master>"), its
    last task to its end (the last task's time when the log holds no end)."""
    rows = []
    for number, job in sorted(events["jobs"].items()):
        if job["first"] is None:
            continue
        name = f"Spark job {number}"
        ended = job.get("ended", job["last"])
        rows.append((job["submitted"], job["first"], f"{name}: submitted -> first task", depth))
        rows.append((job["first"], job["last"], f"{name}: {job['tasks']} task(s){where}", depth))
        rows.append((job["last"], ended, f"{name}: last task -> job end", depth))
    return rows


def lancens_phases(workdir: Path, data: Path) -> tuple[float, float]:
    """One probed lancens run: its timeline; (seconds before the first task, after the last)."""
    events_dir = workdir / "events-lancens"
    log = workdir / "probe.json"
    conf = event_log(events_dir)
    cmd = prepared("lancens", workdir, data, conf)
    skip = len(lancens_cmd())
    cmd = [sys.executable, "-X", "importtime", __file__, "--probe", str(log), "--", *cmd[skip:]]
    launched, exited, gone = run_process(cmd, ENV, workdir / "probe.log")
    probed = json.loads(log.read_text())
    events = spark_events(events_dir)
    rows = [(launched, probed["start"], "Python interpreter start", 0)]
    rows.append((probed["start"], probed["cli"], "import the CLI (typer, lancens_cli.cli)", 0))
    rows += [(start, end, label, depth) for label, start, end, depth in probed["calls"]]
    job = next((r for r in rows if r[2] == "the job and the commit"), None)
    rows += job_rows(events, job[3] + 1 if job else 0, f" on {MASTER}")
    rows.append((probed["main"], launched + exited, "exit: interpreter shutdown", 0))
    rows.append((launched + exited, launched + gone, "(after exit: the JVM stops)", 0))
    rows += gaps(rows)
    print(f"a. lancens ingest, probed: exits at {exited:.2f} s, descendants gone at {gone:.2f} s")
    print_timeline(launched, rows)
    imports = import_costs((workdir / "probe.log").read_text())
    print(
        f"  imports (-X importtime, {sum(s for _, s in imports):.2f} s in all), by package: ",
        end="",
    )
    print(", ".join(f"{name} {seconds:.2f}s" for name, seconds in imports[:8]))
    return _before_after(launched, exited, events)


def _before_after(launched: float, exited: float, events: dict[str, Any]) -> tuple[float, float]:
    jobs = [job for job in events["jobs"].values() if job["first"] is not None]
    if not jobs:
        return 0.0, 0.0
    first = min(job["first"] for job in jobs)
    last = max(job["last"] for job in jobs)
    before, after = first - launched, launched + exited - last
    print(
        f"  before the first task {before:.2f} s, first task to last {last - first:.2f} s, "
        f"after the last task {after:.2f} s"
    )
    return before, after


def user_phases(workdir: Path, data: Path) -> tuple[float, float]:
    """One run of the user's job with its own marks and Spark's event log."""
    events_dir = workdir / "events-user"
    marks_file = workdir / "user-marks.json"
    conf = event_log(events_dir)
    cmd = prepared("user job", workdir, data, conf)
    env = {**user_env(), "BENCH_MARKS": str(marks_file)}
    launched, exited, gone = run_process(cmd, env, workdir / "user-phases.log")
    marks = json.loads(marks_file.read_text())
    events = spark_events(events_dir)
    rows = [(launched, marks[0][1], "spark-submit: the JVM starts, then runs Python", 0)]
    rows += [
        (start, end, label, 0) for (_, start), (label, end) in zip(marks, marks[1:], strict=False)
    ]
    rows += job_rows(events, 1, f" on {MASTER}")
    rows.append((marks[-1][1], launched + exited, "exit: Python, then the JVM", 0))
    print(f"b. the user's job, with its marks: exits at {exited:.2f} s")
    print_timeline(launched, rows)
    return _before_after(launched, exited, events)


# --- in one Spark session ---------------------------------------------------------------------


def in_process(args: argparse.Namespace) -> None:
    """The earlier comparison: one warm Spark session, `lancens write` beside it."""
    rows = 10_000_000 if args.large else args.rows[0]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-spark-ingest-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data = workdir / "data.parquet"
    print(f"input: {rows:,} rows, 6 columns, 100 partitions; workdir {workdir}")
    started = time.monotonic()
    make_input(data, rows)
    print(f"input written in {time.monotonic() - started:.1f} s ({mb(data.stat().st_size)})")
    for name in ("ingest", "write"):
        partitioned_root(workdir / name, data, SPEC)

    os.environ.setdefault("LANCE_LOG", "error")  # as the CLI does
    poller = MemoryPoller()
    poller.start()
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from lancens_cli.pipeline.ingest import ingest
    from lancens_cli.pipeline.spark_session import SparkSettings, spark_session
    from lancens_cli.service.namespace import Namespace

    started = time.monotonic()
    spark = spark_session(
        SparkSettings(master="local[2]", conf={"spark.sql.files.maxPartitionBytes": "8m"})
    )
    print(f"Spark session start: {time.monotonic() - started:.1f} s")
    after_start = dict(poller.peaks)

    poller.reset()
    ns = Namespace.from_properties({"root": str(workdir / "ingest")})
    started = time.monotonic()
    result = ingest(lambda: spark, ns, [str(data)])
    ingest_seconds = time.monotonic() - started
    ingest_peaks = dict(poller.peaks)
    print(
        f"a. lancens ingest: {ingest_seconds:.1f} s, {result.rows:,} rows, "
        f"{len(result.partitions)} partitions"
    )

    from pyspark.sql import functions as F

    poller.reset()
    out = workdir / "spark-parquet"
    started = time.monotonic()
    frame = spark.read.parquet(str(data))
    frame = frame.withColumn("event_year", F.year("event_date")).withColumn(
        "cb", F.pmod(F.xxhash64("customer_id"), F.lit(50))
    )
    frame.write.partitionBy("event_year", "cb").mode("overwrite").parquet(str(out))
    spark_seconds = time.monotonic() - started
    spark_peaks = dict(poller.peaks)
    print(f"b. Spark partitionBy().parquet(): {spark_seconds:.1f} s")

    poller.reset()
    started = time.monotonic()
    subprocess.run(
        [*lancens_cmd(), "--root", str(workdir / "write"), "write", "--from", str(data)],
        env=ENV,
        check=True,
        capture_output=True,
    )
    write_seconds = time.monotonic() - started
    write_peaks = dict(poller.peaks)
    print(f"c. lancens write (cold process, no Spark): {write_seconds:.1f} s")
    poller.stop()

    print()
    print(f"ratio a/b (goal <= 0.5): {ingest_seconds / spark_seconds:.2f}")
    print(f"ratio a/c: {ingest_seconds / write_seconds:.2f}")
    print()
    print("peak RSS:")
    for title, peaks in (
        ("Spark start", after_start),
        ("a. ingest", ingest_peaks),
        ("b. Spark parquet", spark_peaks),
        ("c. lancens write", write_peaks),
    ):
        shown = ", ".join(f"{k} {mb(v)}" for k, v in sorted(peaks.items()) if k != "other")
        print(f"  {title}: {shown}")
    checked = published_rows(workdir / "ingest"), published_rows(workdir / "write")
    print(f"check: ingest published {checked[0]:,} rows, write {checked[1]:,} (expect {rows:,})")
    spark.stop()
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


def partitioned_root(path: Path, data: Path, spec: list[str]) -> None:
    path.mkdir(parents=True)
    subprocess.run(
        [*lancens_cmd(), "--root", str(path), "add-partition-spec", "--schema", str(data), *spec],
        env=ENV,
        check=True,
        capture_output=True,
    )


def whole_processes(args: argparse.Namespace) -> None:
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-spark-ingest-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"whole processes on {MASTER}, {args.runs} runs after a warm-up; workdir {workdir}")
    print(f"lancens: {' '.join(lancens_cmd())}; user job: spark-submit; {load_average()}")
    summary = []
    for rows in args.rows:
        dim = args.vector_dim
        data = workdir / (f"data-{rows}-v{dim}.parquet" if dim else f"data-{rows}.parquet")
        if not data.exists():
            make_input(data, rows, dim)
        vectors = f", a {dim}-float vector a row" if dim else ""
        given = data.with_suffix(".csv") if args.csv else data
        if args.csv and not given.exists():
            import pyarrow.csv as pcsv
            import pyarrow.parquet as pq

            pcsv.write_csv(pq.read_table(data), given)
        print(
            f"\n{rows:,} rows ({given.name}, {mb(given.stat().st_size)}{vectors}), "
            "country x month: 96 partitions"
        )
        found = compare(workdir, data, rows, args.runs, given)
        ours = statistics.median(e for e, _ in found["lancens"])
        theirs = statistics.median(e for e, _ in found["user job"])
        gone = statistics.median(g for _, g in found["lancens"])
        summary.append((rows, ours, gone, theirs))
        if not args.no_phases and not args.csv:
            print()
            lancens_phases(workdir, data)
            print()
            user_phases(workdir, data)
    print(f"\nmedians ({load_average()}):")
    for rows, ours, gone, theirs in summary:
        print(
            f"  {rows:>10,} rows: lancens ingest {ours:6.2f} s (JVM gone {gone:6.2f} s), "
            f"user's spark-submit job {theirs:6.2f} s, ratio {ours / theirs:.2f}x "
            f"(goal <= 0.5x; JVM gone {gone / theirs:.2f}x)"
        )
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f}"


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--probe" and sys.argv[3] == "--":
        probe(Path(sys.argv[2]), sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8_000_000, 2_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--vector-dim", type=int, default=0, help="add an embedding column of N float32 values"
    )
    parser.add_argument("--no-phases", action="store_true", help="skip the probed runs")
    parser.add_argument("--csv", action="store_true", help="the input as one CSV file")
    parser.add_argument("--in-process", action="store_true", help="the one-session comparison")
    parser.add_argument("--large", action="store_true", help="--in-process with 10,000,000 rows")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.csv and (args.vector_dim or args.in_process):
        parser.error("--csv: a CSV holds no vectors, and --in-process reads Parquet")
    if args.in_process:
        in_process(args)
    else:
        whole_processes(args)


if __name__ == "__main__":
    main()
