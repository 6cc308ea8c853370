#!/usr/bin/env python3
"""`lancens merge` of 100,000 rows against a user's loop of Lance's `merge_insert`.

    python bench/bench_merge.py --root ROOT [--source-rows 100000] [--runs 3] [--workdir DIR]
                                [--spark]

ROOT is a partitioned namespace with columns id, customer_id, day, amount, emb and one spec
`bucket(N, customer_id)`, as `bench_delete.py` builds it (10,000,000 rows in 100 partitions):
`python bench/bench_delete.py --runs 1 --workdir DIR` leaves it at DIR/root-10000000-100. The
source is half rows already there (new amounts) and half new rows. Each run works on its own
hard-link copy of the root (Lance never changes a file in place), both sides timed as whole
processes:

- a. `lancens --root COPY merge --from source.parquet --on id`;
- b. a user's loop without lancens: each partition table opened with pylance and given
     `merge_insert("id").when_matched_update_all().when_not_matched_insert_all()` with the
     source rows of that partition (lancedb's `merge_insert` is this same Lance operation).
     The routing of rows to partitions is done for it, untimed (a user would have to compute
     the spec's murmur3 buckets first), and it publishes nothing in `__manifest`: a
     namespace reader sees none of it.

With `--spark`, a third side: c. the same merge on Spark (`--engine spark`: the source's rows
read and written by Spark tasks, local mode started by the process, as a cron job would run it;
after `lancens spark start` it is that server's).

Then both again in one Python session, every import done (lancens' merge service; the loop),
each on its own fresh copy: a whole process spends a good part of its time importing pyarrow
and Lance, which both sides pay.

Every result is checked (untimed): every source id once, with the source's amount. Prints
the medians and b/a (goal: at least 2); always exits 0.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import lancens_cmd, load_average, print_table, run_once, versions  # noqa: E402

GOAL = 2.0

LOOP = """
import sys, json, lance, pyarrow.parquet as pq
def user_loop(root, plan):
    for location, source in plan.items():
        table = lance.dataset(root + "/" + location)
        rows = pq.read_table(source)
        (table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
             .execute(rows))
"""
USER_LOOP = LOOP + "user_loop(sys.argv[1], json.loads(open(sys.argv[2]).read()))\n"

# both sides in one Python session, every import done first: the work alone
IN_ONE_SESSION = (
    LOOP
    + """
import time
from lancens_cli.config import NamespaceConfig
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.merge import merge_rows
ours, theirs, source, plan = sys.argv[1:5]
lance.dataset(ours + "/__manifest").count_rows()  # Lance's own start, paid before either side
began = time.perf_counter()
ns = Namespace(NamespaceConfig.from_properties({"root": ours}))
merge_rows(ns, pq.read_table(source), ["id"])
lancens = time.perf_counter() - began
began = time.perf_counter()
user_loop(theirs, json.loads(open(plan).read()))
print(lancens, time.perf_counter() - began)
"""
)


def make_source(root: Path, rows: int, workdir: Path) -> tuple[Path, dict[str, str]]:
    """Half existing rows with new amounts, half new ids; and, for the user's loop, each
    partition table's share of it (routed by lancens' own split, untimed)."""
    import lance
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.input_rows import conform, split_by_partition
    from lancens_cli.service.partitioned.layout import layout_of
    from lancens_cli.service.partitioned.placement import LevelIndex, prepare

    tables = lance.dataset(str(root / "__manifest")).to_table(filter="object_type = 'table'")
    listed = tables.to_pylist()
    each = max(1, rows // 2 // len(listed))
    parts = [
        lance.dataset(str(root / t["location"]), version=t["read_version"]).to_table(limit=each)
        for t in listed
    ]
    old = pa.concat_tables(parts).slice(0, rows // 2)  # rows already there, in every partition
    old = old.set_column(old.schema.get_field_index("amount"), "amount", pc.negate(old["amount"]))
    fresh = rows - old.num_rows
    top = 10**12
    new = pa.concat_tables([old] * (fresh // max(old.num_rows, 1) + 1)).slice(0, fresh)
    new = new.set_column(0, "id", pa.array(range(top, top + fresh), pa.int64()))
    source = pa.concat_tables([old, new])
    path = workdir / "source.parquet"
    pq.write_table(source, path)
    ns = Namespace(NamespaceConfig.from_properties({"root": str(root)}))
    snapshot = ns.snapshot()
    layout = layout_of(snapshot)
    spec = layout.current
    index = LevelIndex(snapshot, spec)
    plan = {}
    for i, touch in enumerate(
        split_by_partition(conform(source, layout.schema), spec, layout.schema)
    ):
        prepare(ns.storage, touch, spec, snapshot, index, {})
        share = workdir / f"share-{i}.parquet"
        pq.write_table(touch.rows, share)
        plan[touch.location] = str(share)
    return path, plan


def copy(root: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(["cp", "-al", str(root), str(target)], check=True)
    return target


def check(root: Path, source: Path, published: bool) -> None:
    import lance
    import pyarrow.parquet as pq

    wanted = {
        r["id"]: r["amount"] for r in pq.read_table(source, columns=["id", "amount"]).to_pylist()
    }
    seen: dict[int, list[float]] = {}
    rows = lance.dataset(str(root / "__manifest")).to_table(filter="object_type = 'table'")
    for row in rows.to_pylist():
        version = row.get("read_version") if published else None
        table = lance.dataset(str(root / row["location"]), version=version)
        for r in table.to_table(columns=["id", "amount"]).to_pylist():
            if r["id"] in wanted:
                seen.setdefault(r["id"], []).append(r["amount"])
    wrong = [k for k, v in wanted.items() if seen.get(k) != [v]]
    assert not wrong, f"{len(wrong)} source ids not there exactly once with their amount"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--source-rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--spark", action="store_true", help="also time `--engine spark`")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lancens-bench-merge-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"# bench_merge: {versions()}")
    source, plan = make_source(args.root, args.source_rows, workdir)
    (workdir / "plan.json").write_text(json.dumps(plan))
    commands = {
        "lancens": lambda t: [
            *lancens_cmd(),
            "--root",
            str(t),
            "merge",
            "--from",
            str(source),
            "--on",
            "id",
        ],
        "loop": lambda t: [sys.executable, "-c", USER_LOOP, str(t), str(workdir / "plan.json")],
    }
    if args.spark:
        commands["lancens on Spark"] = lambda t: [*commands["lancens"](t), "--engine", "spark"]
    timings: dict[str, list[float]] = {label: [] for label in commands}
    for run in range(args.runs):
        for label, command in commands.items():
            target = copy(args.root, workdir / f"copy-{label.replace(' ', '-')}")
            wall, _, _ = run_once(command(target))
            timings[label].append(wall)
            if run == 0:
                check(target, source, published=label != "loop")
    for _ in range(args.runs):
        ours = copy(args.root, workdir / "copy-session-lancens")
        theirs = copy(args.root, workdir / "copy-session-loop")
        session = [sys.executable, "-c", IN_ONE_SESSION, str(ours), str(theirs), str(source),
                   str(workdir / "plan.json")]  # fmt: skip
        lancens_in, loop_in = map(float, run_once(session)[2].stdout.split())
        timings.setdefault("in one session: lancens", []).append(lancens_in)
        timings.setdefault("in one session: loop", []).append(loop_in)
    medians = {k: sorted(v)[len(v) // 2] for k, v in timings.items()}
    print(f"# {args.source_rows:,} source rows into {len(plan)} partition tables")
    print_table(
        ["side", "median wall s", "runs"],
        [[k, f"{v:.2f}", str(args.runs)] for k, v in medians.items()],
    )
    ratio = medians["loop"] / medians["lancens"]
    in_session = medians["in one session: loop"] / medians["in one session: lancens"]
    print(
        f"# b/a = {ratio:.2f} whole processes, {in_session:.2f} in one session "
        f"(goal >= {GOAL}); {load_average()}"
    )
    if args.spark:
        on_spark = medians["loop"] / medians["lancens on Spark"]
        print(f"# b/c = {on_spark:.2f} (Spark's start included)")


if __name__ == "__main__":
    main()
