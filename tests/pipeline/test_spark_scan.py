"""Reads through the `lancens` Spark data source and `lancens scan` (real local Spark).

One partitioned namespace is built with the CLI (identity, month, bucket and truncate fields,
two spec versions, four writes) and read back: random predicates against brute force over the
rows written, pruning against `partitions --where`, snapshot reads against concurrent writes,
column subsets, counts, files written, a plain table, S3 through moto, bad input, and many
scans in one session (PySpark forks its workers; Lance must never run before a fork).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Root, invoke, ok, run_cli

from lancens_cli.partition.predicate import evaluate
from lancens_cli.partition.predicate_parser import parse

# In-process runs reuse the shared local[2] session (flags > env > local[*]).
pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("shared_master")]

UTC = dt.UTC
COUNTRIES = ["US", "DE", "FR", None]
NAMES = ["ab-one", "ab-two", "cd-three", "ef-four", None]


def events(n: int, seed: int, batch: int, start: int) -> pa.Table:
    """Rows over two months, NULLs in several columns; `batch` tells the writes apart."""
    rng = random.Random(seed)
    day0 = dt.date(2025, 11, 20)
    rows = []
    for i in range(n):
        day = day0 + dt.timedelta(days=rng.randrange(20))
        rows.append(
            {
                "id": start + i,
                "batch": batch,
                "country": rng.choice(COUNTRIES),
                "event_date": day,
                "ts": dt.datetime.combine(
                    day, dt.time(rng.randrange(24), rng.randrange(60))
                ).replace(tzinfo=UTC),
                "amount": None if rng.random() < 0.1 else Decimal(rng.randrange(-5000, 5000)) / 100,
                "score": rng.choice([None, -0.0, 0.0, 1.5, rng.uniform(-10, 10)]),
                "name": rng.choice(NAMES),
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("batch", pa.int32()),
        ("country", pa.string()),
        ("event_date", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("score", pa.float64()),
        ("name", pa.string()),
    ]
)


def write_batch(root: Root, folder: Path, batch: int, n: int = 150) -> pa.Table:
    table = events(n, seed=batch, batch=batch, start=batch * 100_000)
    path = folder / f"batch{batch}.parquet"
    pq.write_table(table, path)
    ok(root, "write", "--from", str(path))
    return table


def build(root: Root, folder: Path) -> pa.Table:
    """Spec v1 (country, month), two writes; spec v2 (bucket, truncate), two writes."""
    schema_file = folder / "schema.parquet"
    pq.write_table(SCHEMA.empty_table(), schema_file)
    ok(
        root,
        "add-partition-spec",
        "--schema",
        str(schema_file),
        "--field",
        "country",
        "--field",
        "month(event_date)",
    )
    written = [write_batch(root, folder, 1), write_batch(root, folder, 2)]
    ok(root, "add-partition-spec", "--field", "bucket(4, id)", "--field", "truncate(2, name)")
    written += [write_batch(root, folder, 3), write_batch(root, folder, 4)]
    return pa.concat_tables(written)


@pytest.fixture(scope="module")
def namespace(tmp_path_factory, spark):
    folder = tmp_path_factory.mktemp("scan")
    root = Root(str(folder / "ns"), {}, folder / "ns")
    root.local_path.mkdir()
    data = build(root, folder)
    return root, data, folder


def scan_json(root: Root, *args: str) -> dict:
    result = invoke(*root.args, "scan", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def brute_force(data: pa.Table, where: str | None) -> list[int]:
    """Ids of the rows the predicate keeps, by the Python evaluator over what was written."""
    if where is None:
        return sorted(data.column("id").to_pylist())
    node = parse(where, SCHEMA)
    return sorted(r["id"] for r in data.to_pylist() if evaluate(node, r) is True)


def scanned_ids(root: Root, where: str | None) -> list[int]:
    args = ["--columns", "id"] + (["--where", where] if where else [])
    return sorted(row[0] for row in scan_json(root, *args)["rows"])


def explained(root: Root, where: str | None) -> dict:
    return scan_json(root, "--explain", *(["--where", where] if where else []))


def pruned(root: Root, where: str) -> set[str]:
    out = ok(root, "partitions", "--where", where, "--json").json()
    return {p["location"] for p in out["partitions"]}


# --------------------------------------------------------------------------- predicates

ATOMS = [
    "country = 'US'",
    "country IN ('DE', 'FR')",
    "country IS NULL",
    "country IS NOT NULL",
    "country != 'US'",
    "event_date = DATE '2025-11-25'",
    "event_date >= DATE '2025-12-01'",
    "event_date < DATE '2025-11-28'",
    "event_date BETWEEN DATE '2025-11-29' AND DATE '2025-12-03'",
    "id = 100007",
    "id IN (100003, 300011, 400020)",
    "id > 300050",
    "id NOT IN (100001, 100002)",
    "name = 'ab-one'",
    "name >= 'cd'",
    "name IS NULL",
    "amount > 10.5",
    "amount <= -20",
    "score > 0",
    "score = 0",
    "ts >= TIMESTAMP '2025-12-05 12:00:00'",
    "batch = 3",
]


def random_predicates(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = rng.sample(ATOMS, rng.randint(1, 3))
        if rng.random() < 0.25:
            parts = [f"NOT ({parts[0]})", *parts[1:]]
        out.append(" AND ".join(parts))
    return out


def test_full_read_has_every_row_in_the_namespace_schema(namespace, spark):
    root, data, _ = namespace
    df = spark.read.format("lancens").option("root", root.uri).load()
    assert df.schema.fieldNames() == SCHEMA.names
    assert not df.schema["id"].nullable and df.schema["country"].nullable
    got = df.toArrow().sort_by("id")
    assert got.num_rows == data.num_rows
    assert got.column("id").to_pylist() == sorted(data.column("id").to_pylist())
    expected = {r["id"]: r for r in data.to_pylist()}
    for row in got.to_pylist():
        assert row == expected[row["id"]]


@pytest.mark.parametrize("where", random_predicates(10, seed=7) + ["country = 'US' OR id < 100010"])
def test_random_predicates_equal_brute_force(namespace, where):
    root, data, _ = namespace
    assert scanned_ids(root, where) == brute_force(data, where)


@pytest.mark.parametrize(
    "where",
    [
        "country = 'US'",
        "event_date = DATE '2025-11-25'",
        "country = 'DE' AND event_date >= DATE '2025-12-01'",
        "id = 300007",
        "id IN (300003, 400011) AND name = 'ab-two'",
        "country IS NULL",
    ],
)
def test_pruning_opens_only_the_tables_partitions_where_names(namespace, where):
    root, data, _ = namespace
    plan = explained(root, where)
    opened = {t["location"] for t in plan["tables"]}
    assert opened == pruned(root, where)
    assert plan["tables_read"] < plan["partitions_total"]
    assert plan["pushed_to_lancens"], plan
    assert "BatchScan" in plan["physical_plan"]
    assert scanned_ids(root, where) == brute_force(data, where)


def test_or_prunes_through_the_where_option_and_not_through_spark_filters(namespace, spark):
    """Spark pushes no OR to a Python data source; `scan` also hands the data source the whole
    predicate (the `where` option), which prunes like `partitions --where`."""
    root, data, _ = namespace
    where = "country = 'US' OR country = 'DE'"
    plan = explained(root, where)
    assert {t["location"] for t in plan["tables"]} == pruned(root, where)
    assert scanned_ids(root, where) == brute_force(data, where)
    plain = spark.read.format("lancens").option("root", root.uri).load()
    only_spark = plain.filter("country = 'US' OR country = 'DE'")
    assert len(tables_of(only_spark)) > len(pruned(root, where))
    assert only_spark.count() == len(brute_force(data, where))
    option = spark.read.format("lancens").option("root", root.uri).option("where", where).load()
    assert sorted(r.id for r in option.select("id").collect()) == brute_force(data, where)


def tables_of(df) -> set[str]:
    from lancens_cli.pipeline.scan import planned_slices

    return {p.location for s in planned_slices(df) for p in s.pieces}


def test_explain_prints_tables_per_spec_version_and_the_plan(namespace):
    root, _, _ = namespace
    result = invoke(*root.args, "scan", "--where", "country = 'FR'", "--explain")
    assert result.exit_code == 0, result.stderr
    assert "v1" in result.stdout and "v2" in result.stdout
    pushed = [line for line in result.stderr.splitlines() if line.startswith("pushed to")]
    assert pushed and "country = 'FR'" in pushed[0], result.stderr
    assert "BatchScan" in result.stderr


def test_columns_subset_count_and_limit(namespace):
    root, data, _ = namespace
    out = scan_json(root, "--columns", "name,id", "--where", "batch = 2", "--limit", "5")
    assert out["columns"] == ["name", "id"] and len(out["rows"]) == 5 and out["truncated"]
    ids = set(brute_force(data, "batch = 2"))
    assert all(row[1] in ids for row in out["rows"])
    count = invoke(*root.args, "scan", "--count", "--where", "country = 'US'")
    assert count.exit_code == 0, count.stderr
    assert int(count.stdout) == len(brute_force(data, "country = 'US'"))
    assert scan_json(root, "--count")["count"] == data.num_rows


def test_limited_rows_print_as_text_lines_with_the_json_values(namespace):
    root, _, _ = namespace
    asked = ("--columns", "id,name", "--where", "batch = 2", "--limit", "3")
    shown = invoke(*root.args, "scan", *asked)
    assert shown.exit_code == 0, shown.stderr
    lines = [line.split("\t") for line in shown.stdout.splitlines()]
    as_json = scan_json(root, *asked)
    assert lines == [["-" if v is None else str(v) for v in row] for row in as_json["rows"]]
    assert "first 3 rows shown" in shown.stderr


@pytest.mark.parametrize("where", [None, "country = 'DE'"])
def test_a_limit_plans_only_the_tables_that_hold_its_rows(namespace, where):
    """`--limit N` with nothing left for Spark to filter plans the first fragments that hold N
    rows, not every table; the rows are still the source's."""
    root, data, _ = namespace
    asked = ("--where", where) if where else ()
    whole = scan_json(root, *asked, "--explain")
    limited = scan_json(root, *asked, "--limit", "3", "--explain")
    assert 1 <= limited["tables_read"] < whole["tables_read"]
    assert sum(t["rows"] for t in limited["tables"]) >= 4  # 3 and one more (truncated?)
    rows = scan_json(root, *asked, "--columns", "id", "--limit", "3")
    assert len(rows["rows"]) == 3 and rows["truncated"]
    expected = set(brute_force(data, where)) if where else set(data["id"].to_pylist())
    assert {r[0] for r in rows["rows"]} <= expected


def test_a_limit_with_a_row_filter_plans_every_matching_table(namespace):
    """A filter on rows (not on partitions) may drop any row: the limit cannot trim the plan."""
    root, data, _ = namespace
    where = "name = 'ab-one' AND country = 'US'"
    whole = scan_json(root, "--where", where, "--explain")
    limited = scan_json(root, "--where", where, "--limit", "1", "--explain")
    assert limited["tables_read"] == whole["tables_read"]
    rows = scan_json(root, "--where", where, "--columns", "id", "--limit", "2")
    assert {r[0] for r in rows["rows"]} <= set(brute_force(data, where))


def test_to_parquet_then_read_back(namespace, tmp_path):
    root, data, _ = namespace
    target = tmp_path / "out"
    where = "event_date < DATE '2025-11-28'"
    out = scan_json(root, "--where", where, "--to", str(target), "--columns", "id,amount")
    assert out["format"] == "parquet"
    back = pq.read_table(target)
    assert back.column_names == ["id", "amount"]
    assert sorted(back.column("id").to_pylist()) == brute_force(data, where)
    again = invoke(*root.args, "scan", "--to", str(target))
    assert again.exit_code == 4 and "already exists" in again.stderr


def test_snapshot_read_planned_before_a_write_returns_the_old_rows(tmp_path, spark):
    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    root.local_path.mkdir()
    schema_file = tmp_path / "schema.parquet"
    pq.write_table(SCHEMA.empty_table(), schema_file)
    ok(root, "add-partition-spec", "--schema", str(schema_file), "--field", "country")
    first = write_batch(root, tmp_path, 1, n=60)
    df = spark.read.format("lancens").option("root", root.uri).load().select("id")
    planned = df.rdd  # plans the read: the tables' versions are fixed in its partitions here
    write_batch(root, tmp_path, 2, n=60)  # appends to the same partition tables
    manifest = root.local_path / "__manifest"
    manifest.rename(root.local_path / "elsewhere")  # tasks never read __manifest
    assert sorted(r.id for r in planned.collect()) == sorted(first.column("id").to_pylist())
    (root.local_path / "elsewhere").rename(manifest)
    fresh = spark.read.format("lancens").option("root", root.uri).load()
    assert fresh.count() == 120


@pytest.mark.slow
def test_reads_concurrent_with_writes_see_whole_writes(tmp_path, spark):
    """Writes of 80 rows each into every partition; every read sees 0 or 80 of each."""
    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    root.local_path.mkdir()
    schema_file = tmp_path / "schema.parquet"
    pq.write_table(SCHEMA.empty_table(), schema_file)
    ok(root, "add-partition-spec", "--schema", str(schema_file), "--field", "country")
    files = []
    for batch in range(1, 7):
        path = tmp_path / f"w{batch}.parquet"
        pq.write_table(events(80, seed=batch, batch=batch, start=batch * 1000), path)
        files.append(path)

    def writer() -> None:
        for path in files:
            result = run_cli(*root.args, "write", "--from", str(path))
            assert result.exit_code == 0, result.stderr

    thread = threading.Thread(target=writer)
    thread.start()
    seen = []
    while thread.is_alive() or not seen:
        rows = spark.read.format("lancens").option("root", root.uri).load().select("batch")
        counts = {r["batch"]: r["count"] for r in rows.groupBy("batch").count().collect()}
        assert all(c == 80 for c in counts.values()), counts
        seen.append(len(counts))
    thread.join()
    final = spark.read.format("lancens").option("root", root.uri).load()
    assert final.count() == 480
    assert len(seen) >= 2


def test_plain_table_by_identifier(tmp_path, spark):
    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    root.local_path.mkdir()
    data = events(40, seed=9, batch=9, start=0)
    path = tmp_path / "t.parquet"
    pq.write_table(data, path)
    ok(root, "create", "namespace", "sales")
    ok(root, "create", "table", "sales.orders", "--from", str(path))
    where = "amount > 0 AND country IN ('US', 'FR')"
    out = scan_json(root, "sales.orders", "--where", where, "--columns", "id")
    assert sorted(r[0] for r in out["rows"]) == brute_force(data, where)
    df = spark.read.format("lancens").option("root", root.uri).load("sales.orders")
    assert df.count() == 40
    no_id = invoke(*root.args, "scan")
    assert no_id.exit_code == 2
    assert no_id.stderr.splitlines()[-1].startswith("lancens: error: the root is not a partit")
    assert no_id.stderr.count("lancens: error") == 1


@pytest.mark.parametrize(
    "store", [pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs)]
)
def test_scan_on_an_object_store(store, tmp_path, spark, request):
    """The same scan on S3 (moto) and on GCS (fake-gcs-server behind the write proxy), through
    the CLI and through the data source with the root's storage options."""
    root = request.getfixturevalue(f"{store}_root")
    data = build(root, tmp_path)
    where = "country = 'DE' AND id > 200000"
    assert scanned_ids(root, where) == brute_force(data, where)
    plan = explained(root, where)
    assert {t["location"] for t in plan["tables"]} == pruned(root, where)
    df = spark.read.format("lancens").option("root", root.uri)
    for key, value in root.storage_options.items():
        df = df.option(f"storage.{key}", value)
    assert df.load().count() == data.num_rows


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--where", "nope = 1"], 2, "unknown column 'nope'"),
        (["--where", "country = "], 2, "cannot parse"),
        (["--where", "country = 5"], 2, "CAST_INVALID_INPUT"),  # Spark casts 'US' to a number
        (["--where", "lower(nope) = 'a'"], 2, "unknown column 'nope'"),
        (["--where", "country"], 2, "not a boolean"),
        (["--where", "id + 1"], 2, "not a condition"),
        (["--columns", "id,nope"], 2, "unknown column(s) nope"),
        (["--format", "avro", "--to", "x"], 2, "avro"),
        (["--count", "--explain"], 2, "exclude"),
        (["missing.table"], 3, "does not exist"),
    ],
)
def test_bad_input_is_one_line_with_its_exit_code(namespace, args, code, words):
    root, _, _ = namespace
    result = invoke(*root.args, "scan", *args)
    assert result.exit_code == code, result.stderr
    assert words in result.stderr and len(result.stderr.strip().splitlines()) <= 3
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("lancens: error:")


def test_missing_root_is_not_found(tmp_path, spark):
    result = invoke("--root", str(tmp_path / "absent"), "scan")
    assert result.exit_code == 3 and "does not exist" in result.stderr
    assert not (tmp_path / "absent").exists()


@pytest.mark.slow
def test_real_entry_point_scans(namespace):
    root, data, _ = namespace
    result = run_cli(
        *root.args, "scan", "--where", "country = 'US'", "--columns", "id", "--master", "local[1]"
    )
    assert result.exit_code == 0, result.stderr
    ids = sorted(int(line) for line in result.stdout.split())
    assert ids == brute_force(data, "country = 'US'")
    bad = run_cli(*root.args, "scan", "--where", "nope = 1", "--master", "local[1]")
    assert bad.exit_code == 2 and bad.stderr.strip().splitlines()[-1].startswith("lancens: error")


def test_repeated_scans_in_one_session_never_crash_or_hang(namespace, spark):
    """PySpark forks Python workers from its daemon; Lance runs only after the fork."""
    root, data, _ = namespace
    expected = len(brute_force(data, "country = 'FR'"))
    for _ in range(20):
        df = spark.read.format("lancens").option("root", root.uri).load()
        assert df.filter("country = 'FR'").count() == expected


@pytest.mark.parametrize("argv", [["--help"], ["ls", "--root", "."]])
def test_light_commands_do_not_import_pyspark(argv, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lancens_cli", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert "pyspark" not in proc.stderr
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_partition_published_by_tag_is_read_at_the_tagged_version(tmp_path, spark):
    """`read_tag` is resolved to its version number while planning; tasks open that number."""
    import lance

    from lancens_cli.service.namespace import Namespace

    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    root.local_path.mkdir()
    schema_file = tmp_path / "schema.parquet"
    pq.write_table(SCHEMA.empty_table(), schema_file)
    ok(root, "add-partition-spec", "--schema", str(schema_file), "--field", "country")
    first = write_batch(root, tmp_path, 1, n=60)
    write_batch(root, tmp_path, 2, n=60)
    ns = Namespace.from_properties(root.properties)
    row = next(
        r
        for r in ns.snapshot().rows
        if r["object_type"] == "table" and r.get("partition_field_country") == "US"
    )
    first_us = sorted(r["id"] for r in first.to_pylist() if r["country"] == "US")
    dataset = lance.dataset(ns.storage.uri(row["location"]))
    tagged = next(
        v["version"]
        for v in dataset.versions()
        if dataset.checkout_version(v["version"]).count_rows() == len(first_us)
    )
    dataset.tags.create("first", tagged)
    ns.manifest.mutate(lambda snap, edit: edit.replace(row["object_id"], read_tag="first"))
    df = (
        spark.read.format("lancens")
        .option("root", root.uri)
        .option("prune", "country = 'US'")
        .load()
        .filter("country = 'US'")
    )
    assert sorted(r.id for r in df.select("id").collect()) == first_us
    assert {(p.location, p.version) for s in planned_slices_of(df) for p in s.pieces} == {
        (row["location"], tagged)
    }


def test_a_big_partition_table_is_read_by_several_tasks():
    """One slice per fragment once fragments are big; small ones share a slice."""
    from lancens_cli.pipeline.read_plan import ROWS_PER_SLICE, Piece, slice_groups

    def piece(table: str, fragment: int, rows: int) -> Piece:
        return Piece(table, table, 3, None, (fragment,), rows, None, 1)

    big = [piece("big", i, ROWS_PER_SLICE) for i in range(3)]
    small = [piece(f"t{i}", 0, 1000) for i in range(50)]
    slices = slice_groups(big + small)
    assert sum(1 for s in slices if any(p.table == "big" for p in s)) == 3
    assert len(slices) == 4  # the 50 small tables travel together
    assert sum(p.rows for s in slices for p in s) == 3 * ROWS_PER_SLICE + 50_000


def planned_slices_of(df):
    from lancens_cli.pipeline.scan import planned_slices

    return planned_slices(df)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_to_csv_and_json(namespace, tmp_path, fmt):
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson

    root, data, _ = namespace
    target = tmp_path / fmt
    where = "country = 'DE' AND amount > 0"
    out = scan_json(root, "--where", where, "--to", str(target), "--format", fmt, "--columns", "id")
    assert out == {"path": str(target), "format": fmt, "columns": ["id"]}
    parts = sorted(target.glob(f"part-*.{fmt}"))
    read = pcsv.read_csv if fmt == "csv" else pjson.read_json
    ids = [i for p in parts for i in read(p).column("id").to_pylist()]
    assert sorted(ids) == brute_force(data, where)
