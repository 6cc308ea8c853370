#!/usr/bin/env python3
"""What the rails of `rename` and `drop` cost: the dependents scan and the base-path rewrite.

    python bench/bench_move_safety.py [--sizes 100 1000] [--versions 200] [--runs 3]

- For each size, a compatibility-mode root of that many root tables; cold processes time
  `drop t000000 --dry-run --json` (plans the drop and scans every table's manifests for base
  paths pointing into it) next to `ls --json` (one listing, no manifest read per table).
- A root table whose branch has --versions versions: cold `rename` (copy, rewrite of every
  branch manifest, swap, delete) next to `rename --keep-location` of the same table (one
  manifest commit).

Prints figures; always exits 0.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    build_namespace,
    fmt_s,
    lancens_cmd,
    load_average,
    measure,
    print_table,
    run_once,
    versions,
)


def scan_figures(workdir: Path, sizes: list[int], runs: int) -> list[list[str]]:
    rows = []
    for n in sizes:
        root = workdir / f"ns{n}"
        build_namespace(root, n, workdir)
        base = [*lancens_cmd(), "--root", str(root), "--json"]
        timings = measure(
            {"ls": [*base, "ls"], "drop --dry-run": [*base, "drop", "t000000", "--dry-run"]},
            runs=runs,
        )
        ls, drop = timings["ls"].wall_s, timings["drop --dry-run"].wall_s
        rows.append([str(n), fmt_s(ls), fmt_s(drop), f"{(drop - ls) / n * 1000:.2f} ms"])
    return rows


def branch_table(root: Path, count: int) -> None:
    import lance
    import pyarrow as pa

    uri = str(root / "b.lance")
    ds = lance.write_dataset(pa.table({"id": list(range(100))}), uri)
    branch = ds.create_branch("dev", 1)
    for i in range(count - 1):
        branch.insert(pa.table({"id": [1000 + i]}))
        branch = lance.dataset(uri).checkout_version(("dev", None))


def rename_figures(workdir: Path, count: int, runs: int) -> list[list[str]]:
    template = workdir / "branch-template"
    rows = []
    moved, kept = [], []
    for i in range(runs):
        for label, extra, sink in (("move", [], moved), ("keep", ["--keep-location"], kept)):
            root = workdir / f"rename-{label}-{i}"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            branch_table(root, count)  # fresh: a copy would point at the template's files
            cmd = [*lancens_cmd(), "--root", str(root), "rename", "b", "b2", *extra]
            wall, _cpu, _proc = run_once(cmd)
            sink.append(wall)
    shutil.rmtree(template, ignore_errors=True)
    moved.sort()
    kept.sort()
    rows.append([str(count), fmt_s(moved[len(moved) // 2]), fmt_s(kept[len(kept) // 2])])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--versions", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lancens-bench-move-"))
    print(versions(), load_average(), sep="\n")
    print_table(
        ["tables", "ls --json", "drop --dry-run", "scan per table"],
        scan_figures(workdir, args.sizes, args.runs),
    )
    print_table(
        ["branch versions", "rename (moves)", "rename --keep-location"],
        rename_figures(workdir, args.versions, args.runs),
    )


if __name__ == "__main__":
    main()
