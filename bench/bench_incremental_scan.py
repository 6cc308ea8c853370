#!/usr/bin/env python3
"""Incremental read (`scan --since-version A --count`) against a whole read and a small namespace.

    python bench/bench_incremental_scan.py [--rows 10000000] [--partitions 100] [--runs 3]
                                           [--keep DIR] [--no-warm]

Data (seeded): ROWS rows (id int64, part int32 over PARTITIONS values, v float64, k int64,
s utf8), made a partitioned namespace by `lancens add-partition-spec --field part` and one
`lancens write` (identity on `part`: PARTITIONS partition tables); `__manifest` version A is
noted; then 1% of ROWS more rows, over 10 partitions only, by a second `lancens write`. A second
namespace of the same spec holds only the appended rows. Built untimed; `--keep DIR` builds into
DIR once and reuses it on later runs with the same sizes.

Measured:

- planning without Spark, in this process: the data source's reader,
  `LancensReader(opts, source_schema(opts)).partitions()`, with and without `sinceVersion`
  (the first call on its own, then the median of RUNS), and the rows it plans;
- reading without Spark, in this process: that plan, then `reader.read(slice)` of every slice
  (what the Spark tasks run), the rows counted;
- cold `lancens --root R scan ... --count --master local[2]` processes, interleaved round-robin
  after one untimed round, median (and best) wall seconds: (1) `--since-version A`, (2) the whole
  namespace, (3) the namespace of the appended rows only; and (0) a floor, a cold Python process
  starting the same Spark session and running a one-row job through a Python worker. The
  `scan: done in` seconds the command reports (Spark session start + the job) are shown too;
- the same (1) and (2) as cold processes with no `--master`, as a user runs them: Lance's
  manifests answer them and Spark never starts (goal: <= 1 s as a whole process), beside the
  Spark processes' times;
- unless --no-warm: the same three counts through the data source in one warm Spark session
  (its start, and its first data source read, which starts the Python workers, timed on their
  own), each the first call then the median of RUNS.

Counts are checked ((1) = the appended rows = (3); (2) = all rows). Prints the ratios (2)/(1)
(goal >= 20) and (1)/(3) (goal <= 2). A benchmark, not a test: always exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    lancens_cmd,
    load_average,
    print_table,
    run_once,
    versions,
)

os.environ.setdefault("LANCE_LOG", "error")

MASTER = "local[2]"
APPEND_SHARE = 100  # the append is 1/100 of the rows
APPEND_PARTITIONS = 10
GOAL_WHOLE_OVER_SINCE = 20.0
GOAL_MANIFEST_COUNT_S = 1.0  # a count Lance's manifests answer, as a whole process
GOAL_SINCE_OVER_SMALL = 2.0
NAMES = 977  # distinct values of `s`

FLOOR = f"""
import sys, time
started = time.perf_counter()
from lancens_cli.pipeline.spark_session import SparkSettings, spark_session
spark = spark_session(SparkSettings(master={MASTER!r}))
session = time.perf_counter() - started
started = time.perf_counter()
spark.sparkContext.parallelize([1], 1).map(lambda x: x).count()
job = time.perf_counter() - started
print(f"session={{session:.3f}} job={{job:.3f}}")
spark.stop()
"""


# --- data and namespaces ----------------------------------------------------------------------


def make_rows(first_id: int, rows: int, partitions: int, seed: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    names = pa.array([f"name-{i}" for i in range(NAMES)])
    return pa.table(
        {
            "id": pa.array(np.arange(first_id, first_id + rows, dtype=np.int64)),
            "part": pa.array(rng.integers(0, partitions, rows).astype(np.int32)),
            "v": pa.array(rng.random(rows)),
            "k": pa.array(rng.integers(0, 1000, rows).astype(np.int64)),
            "s": names.take(pa.array(rng.integers(0, NAMES, rows))),
        }
    )


def lancens(root: Path, *args: str) -> subprocess.CompletedProcess:
    return run_once([*lancens_cmd(), "--root", str(root), *args])[2]


def manifest_version(root: Path) -> int:
    import lance

    return int(lance.dataset(str(root / "__manifest")).version)


def published(root: Path) -> int:
    """How many partition tables `__manifest` publishes."""
    import lance

    return lance.dataset(str(root / "__manifest")).count_rows(filter="object_type = 'table'")


def build(workdir: Path, rows: int, partitions: int) -> dict:
    """The two namespaces and what is known of them (reused from workdir/meta.json if it
    describes the same sizes)."""
    import pyarrow.parquet as pq

    meta_path = workdir / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if (
            meta.get("rows") == rows
            and meta.get("partitions") == partitions
            and (workdir / "ns").exists()
            and manifest_version(workdir / "ns") == meta["version_b"]
        ):
            print(f"# reusing the namespaces in {workdir} (built in {meta['build_s']:.1f} s)")
            return meta
        print(f"# {workdir} holds other sizes or changed namespaces: building again")
    for name in ("ns", "small", "base.parquet", "append.parquet", "meta.json"):
        path = workdir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    started = time.perf_counter()
    appended = max(rows // APPEND_SHARE, 1)
    spread = min(APPEND_PARTITIONS, partitions)
    base, extra = workdir / "base.parquet", workdir / "append.parquet"
    pq.write_table(make_rows(0, rows, partitions, seed=1), base)
    pq.write_table(make_rows(rows, appended, spread, seed=2), extra)
    generated = time.perf_counter() - started

    ns, small = workdir / "ns", workdir / "small"
    for root in (ns, small):
        root.mkdir()
        lancens(root, "add-partition-spec", "--schema", str(base), "--field", "part")
    mark = time.perf_counter()
    lancens(ns, "write", "--from", str(base))
    base_s = time.perf_counter() - mark
    version_a = manifest_version(ns)
    mark = time.perf_counter()
    lancens(ns, "write", "--from", str(extra))
    append_s = time.perf_counter() - mark
    version_b = manifest_version(ns)
    mark = time.perf_counter()
    lancens(small, "write", "--from", str(extra))
    small_s = time.perf_counter() - mark

    meta = {
        "rows": rows,
        "partitions": partitions,
        "appended": appended,
        "append_partitions": spread,
        "version_a": version_a,
        "version_b": version_b,
        "tables_ns": published(ns),
        "tables_small": published(small),
        "generate_s": generated,
        "write_base_s": base_s,
        "write_append_s": append_s,
        "write_small_s": small_s,
        "build_s": time.perf_counter() - started,
    }
    meta_path.write_text(json.dumps(meta, indent=2))
    return meta


# --- without Spark ----------------------------------------------------------------------------


def reader_for(root: Path, since: int | None, columns: list[str] | None = None):
    """The data source's reader as Spark would make it (all columns, or a declared subset)."""
    import pyarrow as pa

    from lancens_cli.pipeline.read import LancensReader, source_schema, spark_schema
    from lancens_cli.pipeline.read_plan import READ_OPTIONS, arrow_schema
    from lancens_cli.pipeline.source_options import SourceOptions

    options = {"root": str(root)}
    if since is not None:
        options["sinceVersion"] = str(since)
    opts = SourceOptions.parse(options, READ_OPTIONS)
    if columns is None:
        return LancensReader(opts, source_schema(opts))
    full = arrow_schema(opts)
    return LancensReader(opts, spark_schema(pa.schema([f for f in full if f.name in columns])))


def plan(root: Path, since: int | None) -> tuple[int, int, int]:
    """(slices, pieces, rows planned) of one planning, as `DataSourceReader.partitions()`."""
    slices = reader_for(root, since).partitions()
    pieces = [p for s in slices for p in s.pieces]
    return len(slices), len(pieces), sum(p.rows for p in pieces)


def plan_and_read(root: Path, since: int | None) -> int:
    """Planning, then every slice read as a task reads it (the count's one column)."""
    reader = reader_for(root, since, columns=["part"])
    return sum(b.num_rows for s in reader.partitions() for b in reader.read(s))


def timed(call: Callable[[], object], runs: int) -> tuple[float, list[float], object]:
    """(first call's seconds, the next `runs` calls' seconds, the last result)."""
    started = time.perf_counter()
    result = call()
    first = time.perf_counter() - started
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - started)
    return first, seconds, result


# --- cold processes ---------------------------------------------------------------------------

DONE = re.compile(r"scan: done in ([0-9.]+)s")


def cold_processes(commands: dict[str, list[str]], runs: int) -> dict[str, dict]:
    """Round-robin, one untimed round first: wall seconds, what the process printed."""
    found = {label: {"wall": [], "inner": [], "out": None} for label in commands}
    for i in range(1 + runs):
        for label, cmd in commands.items():
            wall, _, proc = run_once(cmd)
            out = proc.stdout.strip()
            found[label]["out"] = out
            if i == 0:
                continue
            found[label]["wall"].append(wall)
            done = DONE.search(proc.stderr)
            if done:
                found[label]["inner"].append(float(done.group(1)))
            elif out.startswith("session="):
                parts = dict(kv.split("=") for kv in out.split())
                found[label]["inner"].append(float(parts["session"]) + float(parts["job"]))
                found[label].setdefault("session", []).append(float(parts["session"]))
        print(
            f"# round {i + 1}/{1 + runs}{' (untimed)' if i == 0 else ''}: "
            + ", ".join(f"{label} {found[label]['out']!r}" for label in commands),
            flush=True,
        )
    return found


# --- one warm Spark session -------------------------------------------------------------------


def warm_session(roots: dict[str, tuple[Path, int | None]], runs: int) -> dict[str, Any]:
    """The same counts through the data source in one Spark session: the session start, the
    first read (workers starting), then per label what `timed` gives."""
    from lancens_cli.pipeline.read import spark_schema
    from lancens_cli.pipeline.read_plan import READ_OPTIONS, arrow_schema
    from lancens_cli.pipeline.source_options import SourceOptions
    from lancens_cli.pipeline.spark_session import SparkSettings, spark_session

    started = time.perf_counter()
    spark = spark_session(SparkSettings(master=MASTER))
    start_s = time.perf_counter() - started
    import pyarrow as pa

    results: dict[str, object] = {}
    try:
        # the session's first data source read starts its Python workers: timed on its own
        started = time.perf_counter()
        spark.read.format("lancens").option("root", str(roots["(3)"][0])).load().count()
        results["first"] = time.perf_counter() - started
        for label, (root, since) in roots.items():
            full = arrow_schema(SourceOptions.parse({"root": str(root)}, READ_OPTIONS))
            declared = spark_schema(pa.schema([full.field("part")]))  # what scan --count declares

            def count(root=root, since=since, declared=declared) -> int:
                reader = spark.read.format("lancens").schema(declared).option("root", str(root))
                if since is not None:
                    reader = reader.option("sinceVersion", str(since))
                return int(reader.load().count())

            results[label] = timed(count, runs)
    finally:
        spark.stop()
    return {"start": start_s, **results}


# --- report -----------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="build the namespaces in DIR, reuse them later"
    )
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-session counts")
    args = parser.parse_args(argv)

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="lancens-bench-inc-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        print(f"# bench_incremental_scan: {versions()}")
        print(f"# {load_average()}; work directory {workdir}", flush=True)
        meta = build(workdir, args.rows, args.partitions)
        ns, small = workdir / "ns", workdir / "small"
        rows, appended, version_a = meta["rows"], meta["appended"], meta["version_a"]
        total = rows + appended
        if "write_base_s" in meta:
            print(
                f"# built in {meta['build_s']:.1f} s: Parquet inputs {meta['generate_s']:.1f} s; "
                f"lancens write of {rows:,} rows {meta['write_base_s']:.1f} s "
                f"({meta['tables_ns']} partitions, __manifest v{version_a}); append of "
                f"{appended:,} rows into {meta['append_partitions']} partitions "
                f"{meta['write_append_s']:.1f} s (v{meta['version_b']}); the appended rows alone "
                f"{meta['write_small_s']:.1f} s ({meta['tables_small']} partitions)",
                flush=True,
            )

        # planning and reading without Spark
        print()
        print(f"without Spark, in this process (first call, then median of {args.runs}):")
        rows_out = []
        cases = {
            "(1) since A": (ns, version_a, appended),
            "(2) whole": (ns, None, total),
            "(3) appended only": (small, None, appended),
        }
        planned: dict[str, tuple] = {}
        import lancens_cli.pipeline.read  # noqa: F401 - imports are not what is timed

        for label, (root, since, expect) in cases.items():
            first, seconds, (slices, pieces, planned_rows) = timed(
                lambda root=root, since=since: plan(root, since), args.runs
            )
            read_first, read_s, counted = timed(
                lambda root=root, since=since: plan_and_read(root, since), args.runs
            )
            planned[label] = (med(seconds), med(read_s))
            ok = planned_rows == expect and counted == expect
            rows_out.append(
                [
                    label,
                    f"{slices} / {pieces}",
                    f"{planned_rows:,}",
                    f"{first:.3f}",
                    f"{med(seconds):.3f}",
                    f"{read_first:.3f}",
                    f"{med(read_s):.3f}",
                    f"{counted:,}" + ("" if ok else f" (EXPECTED {expect:,})"),
                ]
            )
        print_table(
            [
                "read",
                "slices / pieces",
                "rows planned",
                "plan 1st s",
                "plan s",
                "plan+read 1st s",
                "plan+read s",
                "rows read",
            ],
            rows_out,
        )
        p1, p2, p3 = (planned[k] for k in ("(1) since A", "(2) whole", "(3) appended only"))
        print(
            f"planning (2)/(1) = {p2[0] / p1[0]:.2f}x, (1)/(3) = {p1[0] / p3[0]:.2f}x; "
            f"plan+read (2)/(1) = {p2[1] / p1[1]:.2f}x, (1)/(3) = {p1[1] / p3[1]:.2f}x",
            flush=True,
        )

        # cold processes
        print()
        print(
            f"cold processes, {MASTER}, median of {args.runs} after 1 untimed round, "
            f"interleaved; {load_average()}",
            flush=True,
        )
        scan = [*lancens_cmd(), "--root"]
        tail = ["scan", "--count", "--master", MASTER]
        commands = {
            "(1)": [*scan, str(ns), *tail, "--since-version", str(version_a)],
            "(2)": [*scan, str(ns), *tail],
            "(3)": [*scan, str(small), *tail],
            "(0)": [sys.executable, "-c", FLOOR],
        }
        found = cold_processes(commands, args.runs)
        titles = {
            "(1)": f"(1) scan --since-version {version_a} --count",
            "(2)": "(2) scan --count (whole namespace)",
            "(3)": "(3) scan --count (appended rows only)",
            "(0)": "(0) floor: Spark session + 1-row Python job",
        }
        expected = {"(1)": appended, "(2)": total, "(3)": appended}
        table = []
        for label, title in titles.items():
            f = found[label]
            out = f["out"]
            if label in expected:
                shown = (
                    out if out == str(expected[label]) else f"{out} (EXPECTED {expected[label]})"
                )
            else:
                shown = f"session {med(f.get('session', [])):.1f} s"
            wall, inner = med(f["wall"]), med(f["inner"])
            table.append(
                [
                    title,
                    shown,
                    f"{wall:.2f}",
                    f"{min(f['wall']):.2f}",
                    f"{inner:.2f}",
                    f"{wall - inner:.2f}",
                ]
            )
        print_table(
            ["command", "count", "median s", "best s", "Spark part s", "rest s"],
            table,
        )
        print(
            "# Spark part: the `scan: done in` the command reports (session start + the job); "
            "rest: interpreter, imports, checks before Spark, exit"
        )
        w1, w2, w3, w0 = (med(found[k]["wall"]) for k in ("(1)", "(2)", "(3)", "(0)"))
        ratio_a, ratio_b = w2 / w1, w1 / w3
        print(
            f"(2)/(1) = {ratio_a:.2f}x (goal >= {GOAL_WHOLE_OVER_SINCE:.0f}x: "
            f"{verdict(ratio_a >= GOAL_WHOLE_OVER_SINCE)}); "
            f"(1)/(3) = {ratio_b:.2f}x (goal <= {GOAL_SINCE_OVER_SMALL:.0f}x: "
            f"{verdict(ratio_b <= GOAL_SINCE_OVER_SMALL)})"
        )
        above = {k: med(found[k]["wall"]) - w0 for k in ("(1)", "(2)", "(3)")}
        if above["(1)"] > 0 and above["(3)"] > 0:
            print(
                f"above the floor (0) = {w0:.2f} s: (1) {above['(1)']:.2f} s, "
                f"(2) {above['(2)']:.2f} s, (3) {above['(3)']:.2f} s; "
                f"(2)/(1) = {above['(2)'] / above['(1)']:.2f}x, "
                f"(1)/(3) = {above['(1)'] / above['(3)']:.2f}x",
                flush=True,
            )

        # the same counts as a user runs them with no --master: Lance's manifests answer them
        print()
        print(
            f"cold processes, no --master (counted from Lance's manifests, no Spark), median "
            f"of {args.runs} after 1 untimed round; {load_average()}",
            flush=True,
        )
        plain = {
            "(1m)": [*scan, str(ns), "scan", "--count", "--since-version", str(version_a)],
            "(2m)": [*scan, str(ns), "scan", "--count"],
        }
        counted = cold_processes(plain, args.runs)
        table = []
        for label, title, spark_label in (
            ("(1m)", f"scan --since-version {version_a} --count", "(1)"),
            ("(2m)", "scan --count (whole namespace)", "(2)"),
        ):
            f, want = counted[label], expected[spark_label]
            shown = f["out"] if f["out"] == str(want) else f"{f['out']} (EXPECTED {want})"
            wall, with_spark = med(f["wall"]), med(found[spark_label]["wall"])
            table.append(
                [
                    title,
                    shown,
                    f"{wall:.2f}",
                    f"{min(f['wall']):.2f}",
                    f"{with_spark:.2f}",
                    f"{with_spark / wall:.1f}x",
                ]
            )
        print_table(
            ["command", "count", "median s", "best s", "with Spark s", "Spark / manifests"],
            table,
        )
        best = max(med(counted[k]["wall"]) for k in plain)
        print(
            f"slowest manifest count {best:.2f} s (goal <= {GOAL_MANIFEST_COUNT_S:.0f} s: "
            f"{verdict(best <= GOAL_MANIFEST_COUNT_S)})",
            flush=True,
        )

        # one warm session
        if not args.no_warm:
            print()
            print(
                f"one warm Spark session ({MASTER}), data source .count(), median of {args.runs}:"
            )
            warm = warm_session(
                {
                    "(1)": (ns, version_a),
                    "(2)": (ns, None),
                    "(3)": (small, None),
                },
                args.runs,
            )
            print(
                f"session start {warm['start']:.2f} s, then the first data source read "
                f"(Python workers start; untimed below) {warm['first']:.2f} s: paid once"
            )
            warm_titles = {
                "(1)": f"(1) sinceVersion {version_a}",
                "(2)": "(2) whole namespace",
                "(3)": "(3) appended rows only",
            }
            table = []
            for label, title in warm_titles.items():
                first, seconds, count = warm[label]
                ok = count == expected[label]
                table.append(
                    [
                        title,
                        f"{count:,}" + ("" if ok else f" (EXPECTED {expected[label]:,})"),
                        f"{first:.2f}",
                        f"{med(seconds):.2f}",
                    ]
                )
            print_table(["read", "count", "1st s", "median s"], table)
            m1, m2, m3 = (med(warm[k][1]) for k in ("(1)", "(2)", "(3)"))
            print(f"warm (2)/(1) = {m2 / m1:.2f}x; (1)/(3) = {m1 / m3:.2f}x")
        print(f"# {load_average()}")
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
