#!/usr/bin/env python3
"""`lancens prune --optimize-indexes` against a loop of lancedb's `table.optimize()`.

    python bench/optimize_indexes.py [--tables 200] [--rows 2000] [--appended 5] [--dim 32]
    python bench/optimize_indexes.py --tables 20  # small

1. N tables made by lancedb, each with a btree (id), an FTS (text) and an IVF_PQ (vec) index
   and `--appended` percent of its rows appended since; built once, copied twice. Cold
   processes, same machine, one run each:
   - ours: `lancens prune --optimize-indexes --yes --json` (the whole root; the default
     retention removes no version, the tables are all younger than 7 days)
   - loop: `python -c` opening each table with lancedb and calling `table.optimize()` (Lance's
     compaction, index optimisation and cleanup), one after the other
   Both must leave no index with unindexed rows.
2. The work scales with the unindexed rows, not the table size: `--scale-tables` tables of
   `--rows` and of 8x `--rows` rows with the same rows appended, then twice those appended
   rows; `lancens prune --optimize-indexes` timed on each.

Prints figures; always exits 0. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_s, lancens_cmd, print_table, run_once, versions  # noqa: E402

os.environ.setdefault("LANCE_LOG", "error")
os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
WORDS = ["apple", "banana", "cherry", "delta", "echo", "falcon", "garnet", "harbor", "island"]

LOOP = """
import sys, lancedb
db = lancedb.connect(sys.argv[1])
for name in db.table_names(limit=1_000_000):
    db.open_table(name).optimize()
"""


def rows(start: int, n: int, dim: int, seed: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ids = range(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "text": [f"{WORDS[i % 9]} {WORDS[(i // 9) % 9]} {WORDS[(i // 81) % 9]}" for i in ids],
            "vec": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.standard_normal(n * dim).astype("float32")), dim
            ),
        }
    )


def build(root: Path, tables: int, size: int, appended: int, dim: int) -> None:
    """`tables` lancedb tables of `size` rows, indexed, then `appended` rows added to each."""
    import warnings

    import lancedb

    warnings.simplefilter("ignore")
    db = lancedb.connect(str(root))
    for i in range(tables):
        table = db.create_table(f"t{i:05d}", rows(0, size, dim, i))
        table.create_scalar_index("id")
        table.create_fts_index("text")
        table.create_index(
            vector_column_name="vec",
            index_type="IVF_PQ",
            num_partitions=max(1, min(16, size // 512)),
            num_sub_vectors=dim // 8,
        )
        if appended:
            table.add(rows(size, appended, dim, 10_000 + i))


def unindexed(root: Path) -> int:
    """Rows any index of any table of `root` misses."""
    import lance

    total = 0
    for path in sorted(root.glob("*.lance")):
        ds = lance.dataset(str(path))
        for index in ds.describe_indices():
            total += ds.stats.index_stats(index.name)["num_unindexed_rows"]
    return total


def ours(root: Path) -> tuple[float, float, int]:
    cmd = [*lancens_cmd(), "--root", str(root), "prune", "--optimize-indexes", "--yes", "--json"]
    wall, cpu, proc = run_once(cmd)
    return wall, cpu, json.loads(proc.stdout)["totals"]["rows_indexed"]


def compare(args: argparse.Namespace, work: Path) -> None:
    appended = args.rows * args.appended // 100
    template = work / "template"
    print(f"building {args.tables} tables of {args.rows} rows (+{appended} appended) ...")
    build(template, args.tables, args.rows, appended, args.dim)
    shutil.copytree(template, work / "ours")
    shutil.copytree(template, work / "loop")
    before = unindexed(template)
    wall, cpu, indexed = ours(work / "ours")
    loop_wall, loop_cpu, _ = run_once([sys.executable, "-c", LOOP, str(work / "loop")])
    left_ours, left_loop = unindexed(work / "ours"), unindexed(work / "loop")
    print(f"\n1. {args.tables} tables, {before:,} unindexed index rows before")
    print_table(
        ["run", "wall", "cpu", "unindexed after"],
        [
            ["lancens prune --optimize-indexes", fmt_s(wall), fmt_s(cpu), f"{left_ours:,}"],
            [
                "loop of lancedb table.optimize()",
                fmt_s(loop_wall),
                fmt_s(loop_cpu),
                f"{left_loop:,}",
            ],
        ],
    )
    print(f"rows indexed (lancens' report): {indexed:,}")
    print(f"ratio loop / lancens (wall): {loop_wall / wall:.2f}x")


def scaling(args: argparse.Namespace, work: Path) -> None:
    appended = max(1, args.rows * args.appended // 100)
    cases = [
        (args.rows, appended),
        (args.rows * 8, appended),
        (args.rows, appended * 4),
        (args.rows * 8, appended * 4),
    ]
    results = []
    for size, added in cases:
        root = work / f"scale-{size}-{added}"
        build(root, args.scale_tables, size, added, args.dim)
        wall, cpu, indexed = ours(root)
        results.append([f"{size:,}", f"{added:,}", f"{indexed:,}", fmt_s(wall), fmt_s(cpu)])
    print(f"\n2. {args.scale_tables} tables per case: time against table size and appended rows")
    print_table(["rows per table", "appended per table", "rows indexed", "wall", "cpu"], results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--rows", type=int, default=2000, help="rows per table before appending")
    parser.add_argument("--appended", type=int, default=5, help="percent of rows appended")
    parser.add_argument("--dim", type=int, default=32, help="vector dimension (a multiple of 8)")
    parser.add_argument("--scale-tables", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    print(versions())
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-indexes-"))
    try:
        compare(args, work)
        scaling(args, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
