#!/usr/bin/env python3
"""`lancens scan --changes` at 1% changed against a full read of both versions.

    python bench/bench_changes.py [--rows 10000000] [--partitions 100] [--dim 8] [--runs 3]
                                  [--workdir DIR]

The namespace of `bench_delete.py` (untimed): --rows rows partitioned by
`bucket(--partitions, customer_id)`, with an embedding of --dim floats a row (8: narrow rows;
768, as a text model gives, shows where the feed's cost, set by the rows that changed, parts
from a full read's, set by every row's bytes). Then, untimed, 1% of it changes: 5 customers
are deleted (0.5% of the rows) and 0.5% new rows are written, two `__manifest` commits after
version A.
Both sides are timed as whole processes, and the feed's own time (stderr's `scan: wrote ... in`,
what a warm session pays: no Python start, no imports) is shown too; then both again in one
Python session, imports done (c: the feed planned and read into Arrow, as `scan`'s in-process
engine reads it, after a feed of nothing has loaded its modules; d: every partition table at
both versions read into Arrow; e: a plain pylance program that finds only the same rows, each
changed table opened at both versions, its fragments compared, the fragments added read and the
rows deleted taken by address, with none of the feed's columns, conditions or schema history,
for changes like these (appends and deletes on tables that stay published): where d/e is short
of the goal, Lance's per-table costs, not the feed's own work, set the ratio):

- a. `lancens --root R scan --changes --since-version A --to DIR` (every column of every change,
     as Parquet files; read in this process);
- b. what a user does without a change feed: a Python process that reads every partition table
     at the versions `__manifest` A and the newest publish (pylance, every column), the two
     reads a diff needs before it even starts.

The changes are checked (untimed): as many deletes and inserts as were made. Prints the medians
and b/a (goal: at least 20 without Spark's start); always exits 0.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ENV,
    fmt_s,
    lancens_cmd,
    load_average,
    print_table,
    run_once,
    versions,
)
from bench_delete import CUSTOMERS, build  # noqa: E402

GOAL = 20.0
GONE = list(range(3, CUSTOMERS, CUSTOMERS // 5))  # 5 customers: 0.5% of the rows

# every partition table at __manifest versions `start` and the newest, read whole with pylance
FULL_READ = """
import sys, lance
root, start = sys.argv[1], int(sys.argv[2])
manifest = lance.dataset(root + "/__manifest")
full = 0
for version in (start, manifest.version):
    at = manifest.checkout_version(version).to_table(filter="object_type = 'table'")
    for row in at.to_pylist():
        table = lance.dataset(root + "/" + row["location"], version=row["read_version"])
        full += table.to_table().num_rows
"""

BOTH_READS = FULL_READ + "print(full)\n"

# A plain pylance program finding the same changes, rows and nothing else: each table a
# `__manifest` version changed opened at both table versions, fragments and deletion files
# compared, the fragments added read, the rows deleted taken by address (two threads, as the
# feed reads); no change columns, no conditions, no schema history. Appends and deletes on
# tables that stay published, as the bench makes them: a dropped fragment or table is not read.
LEAST_PYLANCE = """
import numpy as np
from concurrent.futures import ThreadPoolExecutor

def _tables(version):
    at = manifest.checkout_version(version).to_table(filter="object_type = 'table'")
    return {row["object_id"]: row for row in at.to_pylist()}

def _one(pair):
    old, new = (lance.dataset(root + "/" + r["location"], version=r["read_version"]) for r in pair)
    was = {f.fragment_id: f for f in old.get_fragments()}
    now = {f.fragment_id: f for f in new.get_fragments()}
    rows = 0
    added = [f for i, f in now.items() if i not in was]
    if added:
        rows += new.scanner(fragments=added, with_row_id=True).to_table().num_rows
    moved = [i for i in now if i in was and
             was[i].metadata.deletion_file != now[i].metadata.deletion_file]
    if moved:
        def alive(dataset, frags):
            scan = dataset.scanner(columns=[], with_row_address=True, fragments=frags)
            return scan.to_table().column("_rowaddr").to_numpy()
        before = alive(old, [was[i] for i in moved])
        after = alive(new, [now[i] for i in moved])
        rows += old._take_rows(before[~np.isin(before, after)].tolist()).num_rows
    return rows

def least_pylance(start):
    pairs = []
    older = _tables(start)
    for version in range(start + 1, manifest.version + 1):
        newer = _tables(version)
        pairs += [(older[k], row) for k, row in newer.items()
                  if k in older and older[k]["read_version"] != row["read_version"]]
        older = newer
    with ThreadPoolExecutor(2) as pool:
        return sum(pool.map(_one, pairs))
"""

IN_ONE_SESSION = (
    """
import time
from lancens_cli.pipeline.local_read import plan_local
from lancens_cli.pipeline.scan import ScanRequest
began = time.perf_counter()
"""
    + FULL_READ
    + """
both = time.perf_counter() - began

def change_rows(since):
    request = ScanRequest(root=root, storage={}, since_version=since, changes=True)
    local = plan_local(request, 1 << 62)
    return sum(b.num_rows for b in local.batches(list(local.schema.names)))

change_rows(manifest.version)  # imports done: a feed of nothing opens no partition table
began = time.perf_counter()
changed = change_rows(start)
feed = time.perf_counter() - began
"""
    + LEAST_PYLANCE
    + """
began = time.perf_counter()
least = least_pylance(start)
floor = time.perf_counter() - began
assert least == changed, (least, changed)
print(feed, both, floor, changed, full)
"""
)


def changed(root: Path, rows: int, workdir: Path) -> tuple[int, int, int]:
    """Apply 1% of changes; (__manifest version before them, rows deleted, rows inserted)."""
    import lance
    import pyarrow.parquet as pq

    start = lance.dataset(str(root / "__manifest")).version
    cmd = [*lancens_cmd(), "--root", str(root)]
    where = f"customer_id IN ({', '.join(map(str, GONE))})"
    done = subprocess.run(
        [*cmd, "--json", "delete", "--where", where, "--yes"],
        check=True, env=ENV, capture_output=True, text=True,
    )  # fmt: skip
    deleted = int(re.search(r'"rows_deleted": (\d+)', done.stdout).group(1))
    source = pq.read_table(workdir / "part.parquet")
    fresh = source.slice(0, rows // 200)
    fresh = fresh.set_column(0, "id", [[rows + i for i in range(fresh.num_rows)]])
    pq.write_table(fresh, workdir / "fresh.parquet")
    subprocess.run(
        [*cmd, "write", "--from", str(workdir / "fresh.parquet")],
        check=True, env=ENV, capture_output=True,
    )  # fmt: skip
    return start, deleted, fresh.num_rows


def _what_changed(root: Path) -> tuple[int, int, int]:
    """The version before the two changing commits, and the rows they deleted and inserted
    (as `__manifest`'s last two versions publish them: a built root is reused)."""
    import lance

    newest = lance.dataset(str(root / "__manifest")).version
    start = newest - 2
    counts = []
    for version in (start, newest - 1, newest):
        rows = lance.dataset(str(root / "__manifest"), version=version).to_table(
            filter="object_type = 'table'"
        )
        counts.append(
            sum(
                lance.dataset(str(root / r["location"]), version=r["read_version"]).count_rows()
                for r in rows.to_pylist()
            )
        )
    return start, counts[0] - counts[1], counts[2] - counts[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lancens-bench-changes-"))
    workdir.mkdir(parents=True, exist_ok=True)
    root = workdir / f"changes-{args.rows}-{args.partitions}-{args.dim}"
    print(f"# bench_changes: {versions()}")
    if not (root / "__manifest").exists():
        print(f"# building {args.rows:,} rows in {args.partitions} partitions under {root}")
        build(root, args.rows, args.partitions, workdir, args.dim)
        changed(root, args.rows, workdir)
    start, deleted, inserted = _what_changed(root)
    out = workdir / "feed"
    feed = [*lancens_cmd(), "--root", str(root), "scan", "--changes", "--since-version", str(start)]
    timings: dict[str, list[float]] = {"feed": [], "inner": [], "both": []}
    for _ in range(args.runs):
        if out.exists():
            shutil.rmtree(out)
        wall, _, done = run_once([*feed, "--to", str(out)])
        timings["feed"].append(wall)
        timings["inner"].append(float(re.search(r" in ([\d.]+)s \(", done.stderr).group(1)))
        wall, _, _ = run_once([sys.executable, "-c", BOTH_READS, str(root), str(start)])
        timings["both"].append(wall)
    one_session = [sys.executable, "-c", IN_ONE_SESSION, str(root), str(start)]
    session = [run_once(one_session)[2].stdout.split() for _ in range(args.runs)]
    timings["session feed"] = [float(out[0]) for out in session]
    timings["session both"] = [float(out[1]) for out in session]
    timings["session floor"] = [float(out[2]) for out in session]
    import pyarrow.parquet as pq

    kinds = pq.read_table(out).column("_change_type").value_counts().to_pylist()
    counts = {k["values"]: k["counts"] for k in kinds}
    assert counts == {"delete": deleted, "insert": inserted}, counts
    med = {k: sorted(v)[len(v) // 2] for k, v in timings.items()}
    runs = str(args.runs)
    print(f"# {deleted:,} rows deleted and {inserted:,} inserted of {args.rows:,}")
    print_table(
        ["side", "median wall s", "runs"],
        [
            ["a. lancens scan --changes --to (a whole process)", fmt_s(med["feed"]), runs],
            ["a'. the same, in-process time (stderr)", fmt_s(med["inner"]), runs],
            ["b. pylance full read of both versions", fmt_s(med["both"]), runs],
            ["c. in one session: the feed, planned and read to Arrow", fmt_s(med["session feed"]),
             runs],
            ["d. in one session: both versions read whole", fmt_s(med["session both"]), runs],
            ["e. in one session: plain pylance finding only these rows",
             fmt_s(med["session floor"]), runs],
        ],
    )  # fmt: skip
    print(
        f"# b/a = {med['both'] / med['feed']:.1f} whole processes, "
        f"b/a' = {med['both'] / med['inner']:.1f} against the scan's own time, "
        f"d/c = {med['session both'] / med['session feed']:.1f} in one session "
        f"(goal >= {GOAL}); d/e = {med['session both'] / med['session floor']:.1f} for plain "
        f"pylance, the feed at {med['session feed'] / med['session floor']:.2f}x its time; "
        f"{load_average()}"
    )


if __name__ == "__main__":
    main()
