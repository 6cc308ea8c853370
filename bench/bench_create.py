#!/usr/bin/env python3
"""Cold-process `lancens create table --schema` against the reference's create_table.

    python bench/bench_create.py [--sizes 10000] [--runs 5] [--workdir DIR]

For each size it builds two identical compatibility-mode roots of that many root tables
(`<name>.lance` directories and `__manifest` rows), one per tool, then times fresh processes
that each create one new, empty root table (two int64/utf8 columns), interleaved:

- ours:      `lancens create table NAME --schema schema.json --root R` (installed console script)
- reference: `python -c` importing `lance.namespace.DirectoryNamespace`, constructing it and
             calling `create_table(CreateTableRequest(id=[NAME]), <Arrow IPC: one empty batch>)`

Each round creates a new name, so both namespaces grow by one table per round. Median of --runs
after one warm-up round. Prints figures and ratios; always exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    build_namespace,
    lancens_cmd,
    load_average,
    measure,
    print_table,
    versions,
)

SCHEMA = {"fields": [{"name": "id", "type": "int64"}, {"name": "city", "type": "utf8"}]}

REFERENCE_CREATE = r"""
import sys
import pyarrow as pa
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
schema = pa.schema([("id", pa.int64()), ("city", pa.string())])
sink = pa.BufferOutputStream()
with pa.ipc.new_stream(sink, schema) as writer:
    writer.write_batch(pa.RecordBatch.from_pylist([], schema=schema))
ns = DirectoryNamespace(root=sys.argv[1])
response = ns.create_table(ln.CreateTableRequest(id=[sys.argv[2]]), sink.getvalue().to_pybytes())
print(response.location)
"""


def manifest_table_count(root: Path) -> int:
    import lance

    ds = lance.dataset(str(root / "__manifest"))
    return ds.count_rows(filter="object_type = 'table'")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="keep the built namespaces here")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="lancens-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        print(f"# bench_create: {versions()}")
        print(f"# median of {args.runs} cold processes after 1 warm-up, interleaved")
        print(f"# {load_average()}")
        schema_file = workdir / "schema.json"
        schema_file.write_text(json.dumps(SCHEMA))
        ours = lancens_cmd()
        rows = []
        for n in args.sizes:
            roots = {"ours": workdir / f"create-ours-{n}", "ref": workdir / f"create-ref-{n}"}
            for root in roots.values():
                built = build_namespace(root, n, workdir)
                print(f"# built {n} tables in {root} ({built:.1f} s)")
            before = {k: manifest_table_count(r) for k, r in roots.items()}
            # names unique across reruns with the same --workdir
            prefix = f"new{before['ours']}_"
            labels = {
                "ref": f"reference create_table, {before['ref']}",
                "ours": f"lancens create table --schema, {before['ours']}",
            }

            def command(label: str, i: int, labels=labels, roots=roots, prefix=prefix):
                name = f"{prefix}{i:03d}"
                if label == labels["ours"]:
                    return [
                        *ours,
                        "create",
                        "table",
                        name,
                        "--schema",
                        str(schema_file),
                        "--root",
                        str(roots["ours"]),
                    ]
                return [sys.executable, "-c", REFERENCE_CREATE, str(roots["ref"]), name]

            timings = measure(
                {label: [] for label in labels.values()},
                runs=args.runs,
                before_each=command,
            )
            after = {k: manifest_table_count(r) for k, r in roots.items()}
            for key in roots:
                created = after[key] - before[key]
                if created != args.runs + 1:
                    raise SystemExit(f"{key}: {created} tables created, expected {args.runs + 1}")
            ref = timings[labels["ref"]]
            mine = timings[labels["ours"]]
            rows += [
                [labels["ref"], f"{ref.wall_s:.3f}", f"{ref.cpu_s:.3f}", "1.00", "1.00"],
                [
                    labels["ours"],
                    f"{mine.wall_s:.3f}",
                    f"{mine.cpu_s:.3f}",
                    f"{mine.wall_s / ref.wall_s:.2f}",
                    f"{mine.cpu_s / ref.cpu_s:.2f}",
                ],
            ]
        print()
        print_table(["measurement", "wall s", "cpu s", "wall ours/ref", "cpu ours/ref"], rows)
        print(f"# {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
