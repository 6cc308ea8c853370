#!/usr/bin/env python3
"""`lancens join` (storage-partitioned, no shuffle) against Spark's sort-merge and bucketed joins.

    python bench/bench_spark_join.py [--large] [--left N] [--right M] [--repeat 3]
                                     [--master local[2]] [--workdir DIR] [--keep]

Data (seeded): left N rows (id int64, key int64 uniform over [0, M), amount float64, tag utf8),
right M rows (key int64 = 0..M-1, name utf8, score float64). Default 500,000 x 100,000;
`--large` is 5,000,000 x 1,000,000. Untimed set-up: the left side becomes a partitioned
namespace bucketed 16 ways on key, the right one bucketed 8 ways (`lancens add-partition-spec`
+ `lancens write`), both are written as Parquet files too, and both as Spark bucketed tables
(`repartition(16, key)` then `bucketBy(16, key).sortBy(key).saveAsTable`: one sorted file a
bucket) in a warehouse inside the work directory (`spark.sql.warehouse.dir`, in-memory catalog).

In one Spark session (its start-up reported on its own; broadcast joins off,
`spark.sql.autoBroadcastJoinThreshold=-1`), after one untimed warm-up run of each (Python
workers started, JIT, file cache; the physical plans are checked there: no Exchange in ours, a
SortMergeJoin in b., no Exchange in c., whose plan is printed if it has one), interleaved
round-robin:

- a. `lancens join`'s job: plan (both `__manifest`s, versions pinned) + the groups packed into
     one task per core, each joining its groups in Arrow;
- b. Spark reading both Parquet files and joining them (sort-merge join: two shuffles, sorts);
- c. Spark's own bucketed join of the two bucketed tables (what a Spark user who joins the same
     two tables every day runs: no Exchange).

All produce every column of the inner join and hand every row to Spark's `noop` sink, so all
columns are materialised (a `count()` would let Parquet skip columns). The row counts are
checked equal. Prints best and median seconds, b/a and c/a (goals: b/a >= 3x and c/a >= 2x at
500,000 x 100,000; b/a >= 5x and c/a >= 2.5x with --large).

Then where the time of a. goes, per phase, from `--repeat` more runs of the same job with
timers around the real code paths (a hook in this script only, nothing in the product): in the
driver, `plan_job` (join_plan: both `__manifest`s), `groups_work` (pinning versions) and the
rest of `dataframe()` (building the DataFrame); in each task (its Python worker appends its
times to a file in the work directory), `read_side` (the Lance reads of a group's tables),
`hash_join`, the rest of making the batches, and the hand-off (the time the task waits while
Spark takes each Arrow batch: the worker's CPU writing Arrow IPC, and the rest, the wait while
the JVM turns the batch into rows); and the action's time before the first task starts (scheduling,
Python workers) and after the last one ends (collecting the results, ending the job). Wall times
of tasks that share the cores also count the time a task waited for one, so last comes who used
the cores during the action, in CPU seconds: the tasks' Python workers by phase (their process
time, Lance's and DataFusion's threads included) and the JVM's threads by kind (task threads,
which turn the Arrow batches into rows; JIT compilers; garbage collector; the rest), read from
Linux's /proc. Exits 0.
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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import lancens_cmd, load_average, print_table, versions  # noqa: E402

os.environ.setdefault("LANCE_LOG", "error")
TARGET = {False: (3.0, 2.0), True: (5.0, 2.5)}  # (b/a, c/a) by --large
BUCKETS = 16
# what the timed tasks wrap in their Python worker: (phase, function of pipeline/join_tasks)
TASK_HOOKS = (("read", "read_side"), ("join", "hash_join"))


def generate(workdir: Path, left_rows: int, right_rows: int) -> tuple[Path, Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(42)
    left = pa.table(
        {
            "id": pa.array(np.arange(left_rows, dtype=np.int64)),
            "key": pa.array(rng.integers(0, right_rows, left_rows, dtype=np.int64)),
            "amount": pa.array(rng.random(left_rows) * 100),
            "tag": pa.array([f"t{i % 1000}" for i in range(left_rows)]),
        }
    )
    right = pa.table(
        {
            "key": pa.array(np.arange(right_rows, dtype=np.int64)),
            "name": pa.array([f"customer {i}" for i in range(right_rows)]),
            "score": pa.array(rng.random(right_rows)),
        }
    )
    paths = workdir / "left.parquet", workdir / "right.parquet"
    pq.write_table(left, paths[0])
    pq.write_table(right, paths[1])
    return paths


def build(root: Path, data: Path, field: str) -> float:
    """A partitioned namespace from a Parquet file through the CLI (set-up, untimed)."""
    started = time.perf_counter()
    root.mkdir()
    base = [*lancens_cmd(), "--root", str(root)]
    subprocess.run([*base, "add-partition-spec", "--schema", str(data), "--field", field],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run([*base, "write", "--from", str(data)], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--large", action="store_true", help="5,000,000 x 1,000,000 rows")
    parser.add_argument("--left", type=int, default=None)
    parser.add_argument("--right", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    left_rows = args.left or (5_000_000 if args.large else 500_000)
    right_rows = args.right or (1_000_000 if args.large else 100_000)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-spark-join-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(
        f"# lancens join vs Spark's sort-merge and bucketed joins: {left_rows:,} x {right_rows:,}"
    )
    print(f"# {versions()}, master {args.master}, {load_average()}")
    try:
        target = TARGET[left_rows >= 5_000_000]
        run(workdir, left_rows, right_rows, args.repeat, args.master, target)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def bucketed_tables(spark, files: dict[str, Path]) -> float:
    """Each Parquet file as a Spark table bucketed and sorted on key, one file a bucket."""
    started = time.perf_counter()
    for name, path in files.items():
        data = spark.read.parquet(str(path)).repartition(BUCKETS, "key")
        writer = data.write.bucketBy(BUCKETS, "key").sortBy("key").mode("overwrite")
        writer.saveAsTable(name)
    return time.perf_counter() - started


def run(
    workdir: Path, left_rows: int, right_rows: int, repeat: int, master: str, target: tuple
) -> None:
    left_file, right_file = generate(workdir, left_rows, right_rows)
    left_root, right_root = workdir / "left-ns", workdir / "right-ns"
    setup = build(left_root, left_file, "bucket(16, key) as kb")
    setup += build(right_root, right_file, "bucket(8, key) as kb")
    print(f"set-up (untimed): two namespaces through lancens write in {setup:.1f} s")

    from lancens_cli.pipeline import join as job_module
    from lancens_cli.pipeline.spark_session import SparkSettings, spark_session
    from lancens_cli.service.join.plan import parse_on
    from lancens_cli.service.namespace import Namespace

    started = time.perf_counter()
    conf = {
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
        "spark.sql.sources.bucketing.enabled": "true",
    }
    spark = spark_session(SparkSettings(master=master, conf=conf))
    print(f"Spark session start: {time.perf_counter() - started:.1f} s")
    setup = bucketed_tables(spark, {"left_b": left_file, "right_b": right_file})
    print(f"set-up (untimed): two bucketed tables through saveAsTable in {setup:.1f} s")

    def plan():
        return job_module.plan_job(
            Namespace.from_properties({"root": str(left_root)}),
            Namespace.from_properties({"root": str(right_root)}),
            [parse_on("l.key = r.key")],
            "inner",
            None,
        )

    def lancens_join():
        job = plan()
        assert job.spj, job.fallback_reasons
        df = job.dataframe(spark)
        df.write.format("noop").mode("overwrite").save()
        return df

    def spark_join(left, right):
        df = left.alias("l").join(right.alias("r"), left["key"] == right["key"], "inner")
        df.write.format("noop").mode("overwrite").save()
        return df

    def parquet_join():
        return spark_join(spark.read.parquet(str(left_file)), spark.read.parquet(str(right_file)))

    def bucketed_join():
        return spark_join(spark.table("left_b"), spark.table("right_b"))

    cases = {
        "a. lancens join (SPJ, Arrow)": lancens_join,
        "b. Spark sort-merge join": parquet_join,
        "c. Spark bucketed join": bucketed_join,
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    # warm-up, untimed: Python workers, JIT, file cache; the plans are what they claim
    assert "Exchange" not in job_module.physical_plan(lancens_join())
    assert "SortMergeJoin" in job_module.physical_plan(parquet_join())
    check_bucketed_plan(job_module.physical_plan(bucketed_join()))
    for _ in range(repeat):
        for name, case in cases.items():
            t0 = time.perf_counter()
            case()
            times[name].append(time.perf_counter() - t0)

    check_rows(spark, plan(), left_file, right_file)
    report(times, target)
    where_time_goes(spark, job_module, plan, workdir / "phases.jsonl", repeat)
    spark.stop()


def check_bucketed_plan(text: str) -> None:
    """c. is Spark's bucketed join only if neither side is shuffled."""
    if "Exchange" in text:
        print("c.'s plan has an Exchange (not a bucketed join):")
        print(text)
    else:
        sort = "with" if "Sort [" in text else "without"
        print(f"c.'s plan: no Exchange, {sort} a Sort (SortMergeJoin of the bucketed scans)")


def check_rows(spark, job, left_file: Path, right_file: Path) -> None:
    ours = job.dataframe(spark).count()
    theirs = (
        spark.read.parquet(str(left_file)).join(spark.read.parquet(str(right_file)), "key").count()
    )
    bucketed = spark.table("left_b").join(spark.table("right_b"), "key").count()
    same = "equal" if ours == theirs == bucketed else "DIFFER"
    print(f"rows joined: lancens {ours:,}, Spark {theirs:,}, bucketed {bucketed:,} ({same})")


def report(times: dict[str, list[float]], target: tuple) -> None:
    rows = []
    for name, values in times.items():
        rows.append([name, f"{min(values):.2f} s", f"{statistics.median(values):.2f} s"])
    print_table(["case", "best", "median"], rows)
    a, b, c = (statistics.median(v) for v in times.values())
    a_best, b_best, c_best = (min(v) for v in times.values())
    for label, peer, peer_best, goal in (
        ("b/a", b, b_best, target[0]),
        ("c/a", c, c_best, target[1]),
    ):
        verdict = "met" if peer / a >= goal else "missed"
        print(
            f"{label}: median {peer / a:.2f}x, best {peer_best / a_best:.2f}x "
            f"(goal >= {goal}x: {verdict})"
        )


# --- where a.'s time goes -----------------------------------------------------------------------


def _wrap_task_hooks(tasks, times: dict[str, float]):
    """In a Python worker: time the functions of TASK_HOOKS; returns what undoes it."""
    import time as clock

    saved = {}

    def timed(phase, func):
        def call(*args, **kwargs):
            t0, c0 = clock.perf_counter(), clock.process_time()
            try:
                return func(*args, **kwargs)
            finally:
                times[phase] = times.get(phase, 0.0) + clock.perf_counter() - t0
                cpu = f"{phase} cpu"
                times[cpu] = times.get(cpu, 0.0) + clock.process_time() - c0

        return call

    for phase, name in TASK_HOOKS:
        if hasattr(tasks, name):
            saved[name] = getattr(tasks, name)
            setattr(tasks, name, timed(phase, saved[name]))
    return lambda: [setattr(tasks, n, f) for n, f in saved.items()]


def timed_task_function(real, log: str):
    """`join_tasks.task_function` whose tasks time their phases and append them to `log`."""

    def make(job, packed):
        run = real(job, packed)

        def timed(batches):
            import json
            import time as clock

            from lancens_cli.pipeline import join_tasks as tasks

            times = {
                "produce": 0.0,
                "handoff": 0.0,
                "handoff cpu": 0.0,
                "batches": 0,
                "rows": 0,
                "start": clock.time(),
                "cpu": clock.process_time(),
            }
            undo = _wrap_task_hooks(tasks, times)
            produced = iter(run(batches))
            try:
                while True:
                    t0 = clock.perf_counter()
                    batch = next(produced, None)
                    times["produce"] += clock.perf_counter() - t0
                    if batch is None:
                        break
                    times["batches"] += 1
                    times["rows"] += batch.num_rows
                    t0, c0 = clock.perf_counter(), clock.process_time()
                    yield batch
                    times["handoff"] += clock.perf_counter() - t0
                    times["handoff cpu"] += clock.process_time() - c0
            finally:
                undo()
                times["end"] = clock.time()
                times["cpu"] = clock.process_time() - times["cpu"]
                with open(log, "a") as out:
                    out.write(json.dumps(times) + "\n")

        return timed

    return make


def one_timed_job(spark, job_module, plan, log: Path) -> dict[str, float]:
    """One run of a. with the driver's phases timed and the tasks' phases read from `log`."""
    log.unlink(missing_ok=True)
    cls = job_module.JoinJob
    real_groups_work = cls.groups_work
    pin = [0.0]

    def groups_work(self):
        t0 = time.perf_counter()
        try:
            return real_groups_work(self)
        finally:
            pin[0] += time.perf_counter() - t0

    real_task_function = job_module.task_function
    cls.groups_work = groups_work
    job_module.task_function = timed_task_function(real_task_function, str(log))
    try:
        t0 = time.perf_counter()
        job = plan()
        t1 = time.perf_counter()
        df = job.dataframe(spark)
        jvm_before = jvm_cpu(spark)
        t2, w2 = time.perf_counter(), time.time()
        df.write.format("noop").mode("overwrite").save()
        t3, w3 = time.perf_counter(), time.time()
        jvm_after = jvm_cpu(spark)
    finally:
        cls.groups_work = real_groups_work
        job_module.task_function = real_task_function
    tasks = [json.loads(line) for line in log.read_text().splitlines()]
    phases = {
        "total": t3 - t0,
        "action": t3 - t2,
        "plan": t1 - t0,
        "pin": pin[0],
        "dataframe": t2 - t1 - pin[0],
        "before tasks": min(t["start"] for t in tasks) - w2,
        "tasks": max(t["end"] for t in tasks) - min(t["start"] for t in tasks),
        "after tasks": w3 - max(t["end"] for t in tasks),
        "count": len(tasks),
        "batches": sum(t["batches"] for t in tasks),
    }
    for key in ("read", "join", "produce", "handoff", "handoff cpu", "read cpu", "join cpu"):
        phases[key] = sum(t.get(key, 0.0) for t in tasks)
    phases["batches out"] = phases.pop("produce") - phases["read"] - phases["join"]
    phases["python cpu"] = sum(t["cpu"] for t in tasks)
    for group in [*JVM_THREADS, "jvm other"]:
        phases[group] = jvm_after.get(group, 0.0) - jvm_before.get(group, 0.0)
    return phases


# the JVM's threads by what they do: (label, name prefixes as Linux shows them, 15 characters)
JVM_THREADS = {
    "jvm tasks": ("Executor task",),
    "jvm jit": ("C1 CompilerThre", "C2 CompilerThre"),
    "jvm gc": ("GC Thread", "G1 ", "VM Thread"),
}


def jvm_cpu(spark) -> dict[str, float]:
    """CPU seconds each group of JVM_THREADS (and "jvm other") has used so far, read from
    Linux's /proc for the local JVM; empty where that cannot be read."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        tick = os.sysconf("SC_CLK_TCK")
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except (AttributeError, OSError, ValueError):
        return {}
    used: dict[str, float] = {}
    for thread in threads:
        try:
            stat = (thread / "stat").read_text()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        group = next(
            (g for g, prefixes in JVM_THREADS.items() if name.startswith(prefixes)), "jvm other"
        )
        used[group] = used.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return used


def where_time_goes(spark, job_module, plan, log: Path, repeat: int) -> None:
    """The median of each phase of a. over `repeat` timed runs (see the module docstring)."""
    runs = [one_timed_job(spark, job_module, plan, log) for _ in range(repeat)]
    m = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    n = int(m["count"])
    wait = m["handoff"] - m["handoff cpu"]
    print(f"where a.'s time goes (medians of {repeat} timed runs, {m['total']:.3f} s a run):")
    rows = [
        ["driver: plan_job (join_plan, both __manifests)", f"{m['plan']:.3f} s", ""],
        ["driver: groups_work (pinning versions)", f"{m['pin']:.3f} s", ""],
        ["driver: building the DataFrame (rest of dataframe())", f"{m['dataframe']:.3f} s", ""],
        ["action: until the first task starts", f"{m['before tasks']:.3f} s", ""],
        [f"action: the {n} tasks, first start to last end", f"{m['tasks']:.3f} s", ""],
        ["  tasks: read_side (Lance reads of the groups)", "", f"{m['read']:.3f} s"],
        ["  tasks: hash_join", "", f"{m['join']:.3f} s"],
        ["  tasks: the rest of making the batches", "", f"{m['batches out']:.3f} s"],
        [f"  tasks: hand-off of {int(m['batches'])} Arrow batches", "", f"{m['handoff']:.3f} s"],
        ["    of which the worker's CPU (Arrow IPC to the JVM)", "", f"{m['handoff cpu']:.3f} s"],
        ["    the rest: waiting while the JVM makes rows", "", f"{wait:.3f} s"],
        ["action: after the last task ends (collecting)", f"{m['after tasks']:.3f} s", ""],
    ]
    print_table(["phase", "wall", f"summed over {n} tasks"], rows)
    cpu_by_consumer(m, n)


def cpu_by_consumer(m: dict[str, float], tasks: int) -> None:
    """Who used the cores during the action: the tasks' Python workers (all their threads,
    Lance's and DataFusion's included) and the JVM's threads by kind. The wall times above
    count a task's time off the cores too; these do not."""
    if "jvm tasks" not in m or not m["python cpu"]:
        return
    python, jvm = m["python cpu"], sum(m[g] for g in [*JVM_THREADS, "jvm other"])
    rest = python - m["read cpu"] - m["join cpu"] - m["handoff cpu"]
    cores = os.cpu_count() or 1
    print(
        f"CPU during the action ({m['action']:.3f} s on {cores} cores, "
        f"{m['action'] * cores:.2f} core-seconds): {python + jvm:.3f} s"
    )
    rows = [
        [f"Python workers of the {tasks} tasks", f"{python:.3f} s"],
        ["  read_side (Lance)", f"{m['read cpu']:.3f} s"],
        ["  hash_join (DataFusion)", f"{m['join cpu']:.3f} s"],
        ["  Arrow IPC to the JVM", f"{m['handoff cpu']:.3f} s"],
        ["  the rest (batches, the worker's own loop)", f"{rest:.3f} s"],
        ["JVM: task threads (rows of the Arrow batches, the noop sink)", f"{m['jvm tasks']:.3f} s"],
        ["JVM: JIT compilers", f"{m['jvm jit']:.3f} s"],
        ["JVM: garbage collector", f"{m['jvm gc']:.3f} s"],
        ["JVM: the rest (scheduler, RPC, gateway)", f"{m['jvm other']:.3f} s"],
    ]
    print_table(["who", "CPU"], rows)


if __name__ == "__main__":
    main()
