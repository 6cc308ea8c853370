#!/usr/bin/env python3
"""`lancens evolve-schema --add` over a namespace of 1,000 partition tables.

    python bench/bench_evolve_schema.py [--partitions 1000] [--rows 20] [--workdir DIR] [--keep]

Setup (untimed): a partitioned root with `--field 'bucket(N, id)'` (N = --partitions) and one
write of N x --rows rows, which creates N partition tables in one `__manifest` commit. Timed:
one cold `lancens --root R evolve-schema --add 'score float64'` process (wall time, start-up
included). Printed: the time, the `__manifest` versions the command added (its commits) and a
check (untimed) that every partition table's published version has the new column and all its
rows. Always exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_s, lancens_cmd, load_average, print_table, run_once, versions  # noqa: E402

os.environ.setdefault("LANCE_LOG", "error")


def build(root: Path, workdir: Path, partitions: int, rows: int) -> int:
    """The partitioned root with `partitions` tables; returns the row count."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lancens_cli.partition.murmur import bucket_of, hash_array

    # ids chosen so that every bucket gets rows: draw until each bucket has `rows` of them
    candidates = pa.array(np.arange(partitions * rows * 4, dtype=np.int64))
    buckets = np.asarray(bucket_of(hash_array(candidates), partitions))
    order = np.argsort(buckets, kind="stable")
    starts = np.searchsorted(buckets[order], np.arange(partitions))
    ids = np.concatenate([order[s : s + rows] for s in starts])
    table = pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"r{i}" for i in ids])})
    data = workdir / "data.parquet"
    pq.write_table(table, data)
    root.mkdir(parents=True)
    base = [*lancens_cmd(), "--root", str(root)]
    field = f"bucket({partitions}, id)"
    for args in (
        ["add-partition-spec", "--schema", str(data), "--field", field],
        ["write", "--from", str(data)],
    ):
        _, _, proc = run_once([*base, *args])
        if proc.returncode != 0:
            sys.exit(f"setup failed: {proc.stderr}")
    return table.num_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    import lance

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_evolve_"))
    root = workdir / "root"
    total = build(root, workdir, args.partitions, args.rows)
    before = lance.dataset(str(root / "__manifest")).version
    wall, cpu, proc = run_once(
        [*lancens_cmd(), "--root", str(root), "evolve-schema", "--add", "score float64"]
    )
    if proc.returncode != 0:
        sys.exit(f"evolve-schema failed: {proc.stderr}")
    manifest = lance.dataset(str(root / "__manifest"))
    rows = manifest.to_table(filter="object_type = 'table'").to_pylist()
    seen = 0
    for row in rows:
        ds = lance.dataset(str(root / row["location"]), version=row["read_version"])
        assert ds.schema.names[-1] == "score", row["object_id"]
        seen += ds.count_rows()
    assert len(rows) == args.partitions and seen == total
    print(versions())
    print(f"load average: {load_average()}")
    print_table(
        ["partition tables", "rows", "evolve-schema wall", "cpu", "__manifest commits"],
        [[str(len(rows)), str(total), fmt_s(wall), fmt_s(cpu), str(manifest.version - before)]],
    )
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
