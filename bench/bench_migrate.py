"""Benchmark: `lancens migrate-v1` against one reference `register_table` per table.

For each size N (default 1,000 and 10,000) two identical local namespaces of N V1 tables are
built (one small dataset written once, its directory copied N times). On the first we time
`lancens migrate-v1` as a user runs it: a cold subprocess, wall time, interpreter start
included. On the second we time the reference approach, in-process and warm: pylance's
`DirectoryNamespace` and one `register_table(RegisterTableRequest(id=[name],
location="<name>.lance"))` per table (each call rewrites `__manifest`, one version per table).
Both results are verified (every table registered exactly once).

If the reference exceeds its time budget (`--ref-budget`, seconds per size) it is stopped and
its total is EXTRAPOLATED from the measured per-call times (a least-squares line through the
per-block means, summed over the calls not made); the output says so.

Usage:  python bench/bench_migrate.py [--sizes 1000 10000] [--ref-budget 600] [--dir DIR]
Not a test; prints figures and ratios (target: >= 20x faster at 10,000 and under 30 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCK = 250  # reference calls per timing block


def build(root: Path, seed: Path, n: int) -> None:
    root.mkdir(parents=True)
    for i in range(n):
        shutil.copytree(seed, root / f"t{i:05d}.lance")


def verify(root: Path, n: int) -> None:
    import lance

    ids = lance.dataset(str(root / "__manifest")).to_table(columns=["object_id"])
    counts = Counter(ids.column("object_id").to_pylist())
    assert len(counts) == n and max(counts.values()) == 1, (len(counts), counts.most_common(1))


def manifest_version(root: Path) -> int:
    import lance

    return lance.dataset(str(root / "__manifest")).version


def run_ours(root: Path, n: int) -> dict:
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    env.pop("LANCENS_ROOT", None)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "lancens_cli", "--root", str(root), "migrate-v1", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"lancens migrate-v1 failed ({proc.returncode}): {proc.stderr}")
    report = json.loads(proc.stdout)
    assert report["migrated"] == n, report["migrated"]
    verify(root, n)
    return {"wall": wall, "commits": report["commits"], "versions": manifest_version(root)}


def run_reference(root: Path, n: int, budget: float) -> dict:
    import lance_namespace as ln
    from lance.namespace import DirectoryNamespace

    started = time.perf_counter()
    ns = DirectoryNamespace(root=str(root))
    blocks: list[tuple[int, float]] = []  # (calls so far, mean seconds per call in the block)
    block_start = time.perf_counter()
    done = 0
    for i in range(n):
        name = f"t{i:05d}"
        ns.register_table(ln.RegisterTableRequest(id=[name], location=f"{name}.lance"))
        done += 1
        if done % BLOCK == 0 or done == n:
            now = time.perf_counter()
            size = BLOCK if done % BLOCK == 0 else done % BLOCK
            blocks.append((done, (now - block_start) / size))
            block_start = now
            if now - started > budget and done < n:
                break
    measured = time.perf_counter() - started
    result = {"calls": done, "measured": measured, "blocks": blocks, "complete": done == n}
    if done == n:
        verify(root, n)
        result["total"] = measured
        result["versions"] = manifest_version(root)
        return result
    # Extrapolate: per-call time t(k) = a + b*k fitted on the block means (k = block midpoint).
    xs = [k - BLOCK / 2 for k, _ in blocks]
    ys = [t for _, t in blocks]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = (
        sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0
    )
    slope = max(slope, 0.0)
    intercept = mean_y - slope * mean_x
    rest = sum(intercept + slope * k for k in range(done, n))
    result.update(total=measured + rest, slope=slope, intercept=intercept)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--ref-budget", type=float, default=600.0, help="seconds per size")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    args = parser.parse_args()

    import lance
    import pyarrow as pa

    work = Path(args.dir or tempfile.mkdtemp(prefix="bench_migrate_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"lancens migrate-v1 vs reference register_table; pylance {lance.__version__}; {work}")
    seed = work / "seed.lance"
    if not seed.exists():
        lance.write_dataset(pa.table({"id": list(range(100)), "v": [0.5] * 100}), str(seed))
    rows = []
    try:
        for n in args.sizes:
            ours_root, ref_root = work / f"ours_{n}", work / f"ref_{n}"
            for path in (ours_root, ref_root):
                if path.exists():
                    shutil.rmtree(path)
            started = time.perf_counter()
            build(ours_root, seed, n)
            build(ref_root, seed, n)
            print(f"\nN={n:,}: built 2 x {n:,} V1 tables in {time.perf_counter() - started:.1f} s")

            ours = run_ours(ours_root, n)
            print(
                f"  lancens migrate-v1 (cold subprocess, wall): {ours['wall']:.2f} s "
                f"({ours['commits']} commit(s), __manifest version {ours['versions']})"
            )
            ref = run_reference(ref_root, n, args.ref_budget)
            first, last = ref["blocks"][0][1], ref["blocks"][-1][1]
            growth = (
                f"per call {first * 1000:.1f} ms (first {BLOCK}) -> {last * 1000:.1f} ms "
                f"(calls {ref['blocks'][-1][0] - BLOCK + 1:,}-{ref['blocks'][-1][0]:,})"
            )
            if ref["complete"]:
                print(
                    f"  reference register_table x {n:,} (in-process, warm): MEASURED "
                    f"{ref['total']:.2f} s, __manifest version {ref['versions']}; {growth}"
                )
                label = "measured"
            else:
                print(
                    f"  reference register_table: MEASURED {ref['calls']:,} of {n:,} calls in "
                    f"{ref['measured']:.2f} s (budget {args.ref_budget:.0f} s); {growth}; "
                    f"fit per call = {ref['intercept'] * 1000:.2f} ms + "
                    f"{ref['slope'] * 1e6:.3f} us x k"
                )
                print(
                    f"  reference register_table x {n:,}: EXTRAPOLATED total {ref['total']:.1f} s "
                    f"(not measured)"
                )
                label = "extrapolated"
            ratio = ref["total"] / ours["wall"]
            print(f"  ratio reference / lancens = {ratio:.1f}x ({label} reference)")
            rows.append((n, ours["wall"], ref["total"], label, ratio))
            for path in (ours_root, ref_root):
                shutil.rmtree(path)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    print("\n     N   lancens (s)   reference (s)            ratio   target")
    for n, ours_s, ref_s, label, ratio in rows:
        target = ""
        if n >= 10000:
            ok = ratio >= 20 and ours_s < 30
            target = f"{'met' if ok else 'MISSED'} (>=20x and <30 s)"
        print(f"{n:>6,}  {ours_s:>11.2f}  {ref_s:>11.2f} {label:<12} {ratio:>7.1f}x   {target}")


if __name__ == "__main__":
    main()
