#!/usr/bin/env python3
"""Cold-process `lancens ls --json` and `lancens --help` against the reference's list_tables.

    python bench/bench_ls.py [--sizes 1000 10000] [--runs 5] [--workdir DIR]

For each size it builds a compatibility-mode root of that many root tables (`<name>.lance`
directories and `__manifest` rows), then times fresh processes (median of --runs, after one
untimed warm-up run):

- ours:      `lancens ls --json --root R` (the installed console script)
- ours:      the same with `--no-state` (no look inside each table directory)
- reference: `python -c` importing `lance.namespace.DirectoryNamespace`, constructing it and
             paging through `list_tables(ListTablesRequest(id=[]))`, printing JSON

Targets (from the issue): `lancens --help` < 0.3 s; `ls --json` <= 0.6 x the reference at 1,000
tables. Prints figures and ratios; always exits 0.
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

HELP_TARGET_S = 0.3
LS_TARGET_RATIO = 0.6

REFERENCE_LS = r"""
import json, sys
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
ns = DirectoryNamespace(root=sys.argv[1])
tables, token = [], None
while True:
    response = ns.list_tables(ln.ListTablesRequest(id=[], page_token=token))
    tables.extend(response.tables)
    token = response.page_token
    if not token:
        break
print(json.dumps({"tables": tables}))
"""


def expect_entries(n: int, key: str):
    def check(stdout: str) -> None:
        found = len(json.loads(stdout)[key])
        if found != n:
            raise SystemExit(f"expected {n} {key}, got {found}")

    return check


def row(label, timing, ref=None, target=""):
    ratio_wall = f"{timing.wall_s / ref.wall_s:.2f}" if ref else ""
    ratio_cpu = f"{timing.cpu_s / ref.cpu_s:.2f}" if ref else ""
    return [label, f"{timing.wall_s:.3f}", f"{timing.cpu_s:.3f}", ratio_wall, ratio_cpu, target]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="keep the built namespaces here (reused)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="lancens-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        print(f"# bench_ls: {versions()}")
        print(f"# median of {args.runs} cold processes after 1 warm-up, interleaved")
        print(f"# {load_average()}")
        ours = lancens_cmd()

        startup = measure(
            {
                "python -c pass (floor)": [sys.executable, "-c", "pass"],
                "lancens --help": [*ours, "--help"],
                "lancens ls --help": [*ours, "ls", "--help"],
            },
            runs=args.runs,
        )
        rows = [row(label, t) for label, t in startup.items()]
        rows[1][-1] = f"wall < {HELP_TARGET_S} s"
        help_s = startup["lancens --help"].wall_s
        verdicts = [
            f"lancens --help: {help_s:.3f} s wall "
            f"({'meets' if help_s < HELP_TARGET_S else 'MISSES'} the < {HELP_TARGET_S} s target)"
        ]

        for n in args.sizes:
            root = workdir / f"ns-{n}"
            built = build_namespace(root, n, workdir)
            print(f"# built {n} tables in {root} ({built:.1f} s)")
            labels = {
                "ref": f"reference list_tables, {n}",
                "ls": f"lancens ls --json, {n}",
                "nostate": f"lancens ls --json --no-state, {n}",
            }
            timings = measure(
                {
                    labels["ref"]: [sys.executable, "-c", REFERENCE_LS, str(root)],
                    labels["ls"]: [*ours, "ls", "--json", "--root", str(root)],
                    labels["nostate"]: [*ours, "ls", "--json", "--no-state", "--root", str(root)],
                },
                runs=args.runs,
                checks={
                    labels["ref"]: expect_entries(n, "tables"),
                    labels["ls"]: expect_entries(n, "entries"),
                    labels["nostate"]: expect_entries(n, "entries"),
                },
            )
            ref = timings[labels["ref"]]
            target = f"<= {LS_TARGET_RATIO} x ref" if n == 1000 else ""
            rows += [
                row(labels["ref"], ref, ref),
                row(labels["ls"], timings[labels["ls"]], ref, target),
                row(labels["nostate"], timings[labels["nostate"]], ref),
            ]
            if n == 1000:
                ratio = timings[labels["ls"]].wall_s / ref.wall_s
                verdicts.append(
                    f"ls --json at 1000 tables: {ratio:.2f} x the reference's wall time "
                    f"({'meets' if ratio <= LS_TARGET_RATIO else 'MISSES'} the "
                    f"<= {LS_TARGET_RATIO} target)"
                )

        print()
        headers = ["measurement", "wall s", "cpu s", "wall ours/ref", "cpu ours/ref", "target"]
        print_table(headers, rows)
        print()
        for verdict in verdicts:
            print(verdict)
        print(f"# {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
