#!/usr/bin/env python3
"""Partition pruning, `lancens partitions --where ...`, on 1,000 and 100,000 partition tables.

    python bench/bench_partitions.py [--sizes 1000 100000] [--repeat 5] [--workdir DIR] [--keep]

Pruning reads only `__manifest`, so the namespaces are synthetic: the `__manifest` of a
partitioned root is written directly with `lance.write_dataset`, with the schema and table
metadata (namespace `schema`, `partition_spec_v1`, writer feature flag 1024) copied from a template
root that the real CLI made partitioned (`lancens add-partition-spec --schema small.parquet
--field 'year(event_date) as event_year' --field country --field 'bucket(16, customer_id)'`,
then `lancens write --from small.parquet`). Rows, depth-first as a write adds them: `v1`; one
namespace per year, per (year, country) and per (year, country, bucket), with random 16-character
base36 names; one `...$dataset` table per bucket namespace (location `<8 hex>_<object_id>`, a
read_version); every row carries its own and its ancestors' partition values (Appendix C).
Which columns each kind of row sets is checked against the template's rows. The table
directories do not exist: pruning never opens them.

Sizes: years x countries x 16 buckets (4 x 16 x 16 = 1,024; 25 x 250 x 16 = 100,000). Index
variants, each a copy of the same `__manifest`:

- none:              no scalar index;
- lancens default:   `ManifestStore.create_indexes()` (what `--indexes` builds after a commit:
                     object_id BTREE, object_type BITMAP, base_objects LABEL_LIST);
- + bitmap on parts: the default ones plus a BITMAP index on every `partition_field_*` column;
- + btree on parts:  the default ones plus a BTREE index on every `partition_field_*` column.

Predicates: selective (about 1 table), medium (2 countries), range (the last year). Measured:

- a. warm, in-process `select_partitions`: the same `Namespace` object (after one untimed
     call), and a new `Namespace(NamespaceConfig.from_properties({"root": R}))` per call (what
     a long-running caller that does not keep the object pays); best and median of --repeat;
- b. a cold `lancens --root R partitions --where ... --json` process (median and best of
     --repeat after one untimed warm-up, interleaved round-robin over variants and predicates).

Every answer is checked: the expected number of matches, and the same tables in every variant.
Target (from the issue): a. below 0.5 s at 100,000 partitions. Prints figures; always exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    lancens_cmd,
    load_average,
    measure,
    print_table,
    run_once,
    versions,
)

os.environ.setdefault("LANCE_LOG", "error")

TARGET_S = 0.5
TARGET_SIZE = 100_000
BUCKETS = 16
LAST_YEAR = 2025
FIELDS = ["year(event_date) as event_year", "country", f"bucket({BUCKETS}, customer_id)"]
PREDICATES = {
    "selective": "country = 'US' AND event_date = DATE '2025-03-01' AND customer_id = 42",
    "medium": "country IN ('US','DE')",
    "range": "event_date >= DATE '2025-01-01'",
}
VARIANTS = {
    "none": "none",
    "default": "lancens default",
    "bitmap": "+ bitmap on parts",
    "btree": "+ btree on parts",
}
_BASE36 = "abcdefghijklmnopqrstuvwxyz0123456789"
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# --- the synthetic namespaces -----------------------------------------------------------------


def grid(n: int) -> tuple[list[int], list[str]]:
    """Years and countries such that years x countries x 16 buckets comes close to n."""
    years = 4 if n <= 10_000 else 25
    count = max(2, round(n / (years * BUCKETS)))
    codes = [a + b for a in _LETTERS for b in _LETTERS if a + b not in ("US", "DE")]
    countries = ["US", "DE", *codes[: count - 2]]
    return list(range(LAST_YEAR - years + 1, LAST_YEAR + 1)), countries


def expected_matches(years: list[int], countries: list[str]) -> dict[str, int]:
    return {
        "selective": 1,
        "medium": 2 * len(years) * BUCKETS,
        "range": len(countries) * BUCKETS,
    }


def make_template(workdir: Path) -> Path:
    """A small root that the real CLI made partitioned and wrote 4 rows into."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = workdir / "template"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    data = workdir / "small.parquet"
    days = [dt.date(2024, 1, 5), dt.date(2025, 3, 1), dt.date(2025, 3, 1), dt.date(2024, 7, 1)]
    table = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "event_date": pa.array(days, pa.date32()),
            "country": ["US", "US", "DE", "FR"],
            "customer_id": pa.array([42, 42, 7, 9], pa.int64()),
            "amount": [1.0, 2.0, 3.0, 4.0],
        }
    )
    pq.write_table(table, data)
    cli = [*lancens_cmd(), "--root", str(root)]
    fields = [arg for field in FIELDS for arg in ("--field", field)]
    run_once([*cli, "add-partition-spec", "--schema", str(data), *fields])
    run_once([*cli, "write", "--from", str(data)])
    return root


def random_names(rng, count: int, width: int, alphabet: str) -> list[str]:
    import numpy as np

    letters = np.frombuffer(alphabet.encode(), dtype="S1")
    picks = letters[rng.integers(0, len(alphabet), (count, width))]
    return picks.view(f"S{width}").ravel().astype(str).tolist()


def synthetic_rows(years: list[int], countries: list[str], seed: int = 7) -> dict[str, list]:
    """The rows of a partitioned `__manifest`, column by column, depth-first as writes add them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    tables = len(years) * len(countries) * BUCKETS
    namespaces = len(years) * (1 + len(countries) * (1 + BUCKETS))
    names = iter(random_names(rng, namespaces + 1, 16, _BASE36))
    hexes = iter(random_names(rng, tables, 8, "0123456789abcdef"))
    read_versions = iter((1 + rng.integers(0, 5, tables)).tolist())
    columns: dict[str, list] = {
        "object_id": [],
        "object_type": [],
        "location": [],
        "read_version": [],
        "partition_field_event_year": [],
        "partition_field_country": [],
        "partition_field_customer_id_bucket": [],
    }

    def add(object_id, kind, location, version, year, country, bucket) -> None:
        for column, value in zip(
            columns, (object_id, kind, location, version, year, country, bucket), strict=True
        ):
            columns[column].append(value)

    add("v1", "namespace", None, None, None, None, None)
    for year in years:
        year_id = f"v1${next(names)}"
        add(year_id, "namespace", None, None, year, None, None)
        for country in countries:
            country_id = f"{year_id}${next(names)}"
            add(country_id, "namespace", None, None, year, country, None)
            for bucket in range(BUCKETS):
                bucket_id = f"{country_id}${next(names)}"
                add(bucket_id, "namespace", None, None, year, country, bucket)
                table_id = f"{bucket_id}$dataset"
                location = f"{next(hexes)}_{table_id}"
                add(table_id, "table", location, next(read_versions), year, country, bucket)
    return columns


def set_columns(rows: list[dict]) -> dict[tuple[str, int], frozenset[str]]:
    """(object_type, depth) -> the columns such rows set (not NULL)."""
    kinds: dict[tuple[str, int], frozenset[str]] = {}
    for row in rows:
        key = (row["object_type"], row["object_id"].count("$"))
        kinds[key] = frozenset(k for k, v in row.items() if v is not None)
    return kinds


def build_manifest(root: Path, template: Path, years: list[int], countries: list[str]) -> int:
    """Write `root/__manifest` in the template's layout; return its number of rows."""
    import lance
    import pyarrow as pa

    like = lance.dataset(str(template / "__manifest"))
    schema = like.schema
    columns = synthetic_rows(years, countries)
    count = len(columns["object_id"])
    arrays = [
        pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(count, f.type)
        for f in schema
    ]
    table = pa.Table.from_arrays(arrays, schema=schema)
    root.mkdir(parents=True)
    ds = lance.write_dataset(
        table,
        str(root / "__manifest"),
        schema=schema,
        data_storage_version=like.data_storage_version,
    )
    ds.update_metadata(dict(like.metadata))

    written = lance.dataset(str(root / "__manifest"))
    if not written.schema.equals(schema, check_metadata=True):
        raise SystemExit(f"{root}: __manifest schema differs from the template's")
    if dict(written.metadata) != dict(like.metadata):
        raise SystemExit(f"{root}: __manifest metadata differs from the template's")
    expected = set_columns(like.to_table().to_pylist())
    sample = written.to_table(limit=2 + 3 * BUCKETS).to_pylist()
    if set_columns(sample) != expected:
        raise SystemExit(f"{root}: rows set other columns than the template's rows")
    return count


def add_indexes(root: Path, variant: str) -> list[str]:
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace

    if variant == "none":
        return []
    ns = Namespace(NamespaceConfig.from_properties({"root": str(root)}))
    built = ns.manifest.create_indexes()
    if variant in ("bitmap", "btree"):
        ds = ns.manifest.open_dataset()
        for name in ds.schema.names:
            if name.startswith("partition_field_"):
                index = f"{name}_{variant}"
                ds.create_scalar_index(name, variant.upper(), name=index, replace=True)
                built.append(index)
    return built


# --- measuring --------------------------------------------------------------------------------


def timed(call: Callable[[], object]) -> tuple[float, float, object]:
    """Wall and CPU seconds (all threads of this process) of an in-process call, and its result."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    result = call()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), result


def matched(selection) -> list[str]:
    return [m.table for m in selection.matches]


def warm(root: Path, where: str, repeat: int) -> tuple[dict[str, list[float]], list[str]]:
    """In-process: the same Namespace (after one untimed call) and a new one per call."""
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.partitions import select_partitions

    def new_namespace():
        return Namespace(NamespaceConfig.from_properties({"root": str(root)}))

    same = new_namespace()
    tables = matched(select_partitions(same, where))
    times: dict[str, list[float]] = {"same": [], "new": [], "new cpu": []}
    for _ in range(repeat):
        wall, _, result = timed(lambda: select_partitions(same, where))
        times["same"].append(wall)
        if matched(result) != tables:
            raise SystemExit(f"{root}: {where!r} gave other tables on a repeat")
        wall, cpu, result = timed(lambda: select_partitions(new_namespace(), where))
        times["new"].append(wall)
        times["new cpu"].append(cpu)
        if matched(result) != tables:
            raise SystemExit(f"{root}: {where!r} gave other tables with a new Namespace")
    return times, tables


def expect_matches(n: int) -> Callable[[str], None]:
    def check(stdout: str) -> None:
        found = json.loads(stdout)["partitions_matched"]
        if found != n:
            raise SystemExit(f"lancens partitions: expected {n} matches, got {found}")

    return check


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    return path


def best_median(values: list[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(s) for s in text.split(",")],
        default=[1000, 100_000],
        help="comma-separated numbers of partition tables (default 1000,100000)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the built roots (and a temporary workdir)"
    )
    args = parser.parse_args(argv)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lancens-bench-pp-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ours = lancens_cmd()
    built_roots: list[Path] = []
    try:
        print(f"# bench_partitions: {versions()}")
        print(
            f"# a: best / median of {args.repeat} in-process calls after 1 untimed call; "
            f"b: median / best of {args.repeat} cold processes after 1 warm-up, interleaved"
        )
        print(f"# {workdir}")
        print(f"# {load_average()}")
        template = make_template(workdir)
        rows, verdicts = [], []
        for n in args.sizes:
            years, countries = grid(n)
            expected = expected_matches(years, countries)
            tables = len(years) * len(countries) * BUCKETS
            started = time.perf_counter()
            base = fresh(workdir / f"pp-{n}-none")
            built_roots.append(base)
            count = build_manifest(base, template, years, countries)
            built = time.perf_counter() - started
            print(
                f"# {tables:,} tables ({len(years)} years x {len(countries)} countries x "
                f"{BUCKETS} buckets), {count:,} __manifest rows, built in {built:.1f} s"
            )
            roots = {"none": base}
            for variant in VARIANTS:
                if variant == "none":
                    continue
                roots[variant] = fresh(workdir / f"pp-{n}-{variant}")
                built_roots.append(roots[variant])
                shutil.copytree(base, roots[variant])
                started = time.perf_counter()
                names = add_indexes(roots[variant], variant)
                print(
                    f"#   {VARIANTS[variant]}: {len(names)} indexes in "
                    f"{time.perf_counter() - started:.1f} s ({', '.join(names)})"
                )

            # a. warm, in-process
            results: dict[tuple[str, str], dict[str, list[float]]] = {}
            answers: dict[str, list[str]] = {}
            for variant, root in roots.items():
                for key, where in PREDICATES.items():
                    times, found = warm(root, where, args.repeat)
                    if len(found) != expected[key]:
                        raise SystemExit(
                            f"{root}: {where!r} matched {len(found)}, expected {expected[key]}"
                        )
                    if answers.setdefault(key, found) != found:
                        raise SystemExit(f"{root}: {where!r} matched other tables than 'none'")
                    results[variant, key] = times

            # b. cold processes
            commands, checks = {}, {}
            for variant, root in roots.items():
                for key, where in PREDICATES.items():
                    label = f"{variant}/{key}"
                    commands[label] = [
                        *ours,
                        "--root",
                        str(root),
                        "partitions",
                        "--where",
                        where,
                        "--json",
                    ]
                    checks[label] = expect_matches(expected[key])
            cold = measure(commands, runs=args.repeat, checks=checks)

            for variant in roots:
                for key in PREDICATES:
                    times = results[variant, key]
                    process = cold[f"{variant}/{key}"]
                    rows.append(
                        [
                            f"{tables:,}",
                            VARIANTS[variant],
                            key,
                            str(expected[key]),
                            best_median(times["same"]),
                            best_median(times["new"]),
                            f"{statistics.median(times['new cpu']):.3f}",
                            f"{process.wall_s:.3f} / {min(process.wall):.3f}",
                            f"{process.cpu_s:.3f}",
                        ]
                    )
                if n >= TARGET_SIZE:
                    worst_same = max(
                        statistics.median(results[variant, k]["same"]) for k in PREDICATES
                    )
                    worst_new = max(
                        statistics.median(results[variant, k]["new"]) for k in PREDICATES
                    )
                    worst = max(worst_same, worst_new)
                    verdicts.append(
                        f"{tables:,} tables, {VARIANTS[variant]}: a. slowest median "
                        f"{worst_same:.3f} s (same Namespace), {worst_new:.3f} s (new "
                        f"Namespace): {'meets' if worst < TARGET_S else 'MISSES'} the "
                        f"< {TARGET_S} s target"
                    )

        print()
        headers = [
            "tables",
            "indexes",
            "predicate",
            "matches",
            "a. same ns best/med s",
            "a. new ns best/med s",
            "a. new cpu s",
            "b. cold med/best s",
            "b. cpu s",
        ]
        print_table(headers, rows)
        print()
        for key, where in PREDICATES.items():
            print(f"{key}: {where}")
        for verdict in verdicts:
            print(verdict)
        print(f"# {load_average()}")
    finally:
        if not args.keep:
            for root in (workdir / "template", *built_roots):
                shutil.rmtree(root, ignore_errors=True)
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
