"""`lancens join` on real local Spark: storage-partitioned joins without a shuffle.

Namespaces are built through the CLI (`add-partition-spec`, `write`); every answer is compared
with a brute-force join of the source rows written in plain Python (sorted), so the check does
not share the Arrow join the tasks run. Most runs are in-process on the shared `spark` session;
one is a real subprocess with its own driver.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke, run_cli, tree_snapshot
from join_reference import (
    ON,
    brute_join,
    brute_rows,
    build,
    orders_and_customers,
    result_rows,
    write,
)

from lancens_cli.schema_json import schema_to_json

# In-process runs reuse the shared local[2] session (flags > env > local[*]).
pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("shared_master")]


# --- running joins (namespaces and reference answers: join_reference.py) ---------------------


def run_join(left: str, right: str, *args: str, cli=invoke) -> dict:
    done = cli("join", left, right, *args, "--json")
    assert done.exit_code == 0, done.stderr
    return done.json()


@pytest.fixture(scope="module")
def bucketed(tmp_path_factory):
    """orders bucket(16) and customers bucket(8) on the join key."""
    tmp = tmp_path_factory.mktemp("bucketed")
    orders, customers = orders_and_customers()
    left = build(tmp, "orders", orders, ["bucket(16, customer_id) as cb"])
    right = build(tmp, "customers", customers, ["bucket(8, customer_id) as cb"])
    return left, right, orders, customers


# --- storage-partitioned joins ----------------------------------------------------------------


@pytest.mark.parametrize("how", ["inner", "left"])
def test_bucket_16_with_bucket_8_equals_brute_force(spark, bucketed, how):
    left, right, orders, customers = bucketed

    result = run_join(left, right, *ON, "--how", how, "--limit", "0")

    assert result["storage_partitioned"] is True
    assert result["columns"] == ["order_id", "l_customer_id", "amount", "r_customer_id", "name"]
    expected = brute_join(orders, customers, ["customer_id"], ["customer_id"], how)
    assert len(expected) > 100
    assert result_rows(result) == expected
    count = run_join(left, right, *ON, "--how", how, "--count")
    assert count == {"count": len(expected), "storage_partitioned": True}


def test_the_physical_plan_has_no_exchange(spark, bucketed):
    left, right, _, _ = bucketed

    explained = run_join(left, right, *ON, "--explain")

    assert explained["storage_partitioned"] is True
    # 8 groups of key values, and the NULL key's group, which has no right partition
    assert explained["counts"]["groups"] == 9
    assert explained["counts"]["matched_groups"] == 8
    plan = explained["physical_plan"]
    assert "Exchange" not in plan
    assert "MapInArrow" in plan, plan
    # the 8 groups run in as many tasks as the session runs at once (local[2] here)
    assert explained["tasks"] == 2

    # the DataFrame the job builds, asked directly
    from lancens_cli.pipeline import join as job_module
    from lancens_cli.service.join.plan import parse_on
    from lancens_cli.service.namespace import Namespace

    job = job_module.plan_job(
        Namespace.from_properties({"root": left}),
        Namespace.from_properties({"root": right}),
        [parse_on("l.customer_id = r.customer_id")],
        "inner",
        None,
    )
    df = job.dataframe(spark)
    assert df.rdd.getNumPartitions() == 2
    executed = df._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" not in executed
    # text output of --explain: the groups, then the plan
    text = invoke("join", left, right, *ON, "--explain")
    assert text.exit_code == 0, text.stderr
    assert "storage-partitioned join (inner): 8 group(s) to run in 2 task(s)" in text.stdout
    assert "== Physical Plan ==" in text.stdout


def test_columns_where_and_rows_on_a_terminal_bound(spark, bucketed):
    left, right, orders, customers = bucketed

    result = run_join(
        left,
        right,
        *ON,
        "--columns",
        "order_id,name",
        "-c",
        "l.customer_id",
        "--where",
        "amount > 50",
        "--limit",
        "0",
    )

    assert result["columns"] == ["order_id", "name", "l_customer_id"]
    kept = orders.filter(pa.compute.greater(orders["amount"], 50))
    expected = brute_rows(kept, customers, ["customer_id"], ["customer_id"], "inner")
    names = result["columns"]
    projected = sorted(tuple(str(r[n]) for n in names) for r in expected)
    assert len(projected) > 50
    assert sorted(tuple(str(r[n]) for n in names) for r in result["rows"]) == projected
    bounded = run_join(left, right, *ON, "--limit", "5")
    assert len(bounded["rows"]) == 5 and bounded["truncated"] is True


def test_to_writes_files_and_never_over_existing_ones(spark, bucketed, tmp_path):
    left, right, orders, customers = bucketed
    target = tmp_path / "out"

    done = run_join(left, right, *ON, "--how", "left", "--to", str(target))

    expected = brute_join(orders, customers, ["customer_id"], ["customer_id"], "left")
    assert done["rows"] == len(expected) and done["files"] >= 1
    written = pq.read_table(target)
    rows = {"columns": written.column_names, "rows": written.to_pylist()}
    assert result_rows(rows) == expected
    before = tree_snapshot(target)
    again = invoke("join", left, right, *ON, "--to", str(target))
    assert again.exit_code == 4
    assert again.stderr.count("\n") == 1 and "already exists" in again.stderr
    assert tree_snapshot(target) == before
    csv = run_join(left, right, *ON, "--to", str(tmp_path / "csv"), "--format", "csv")
    assert csv["rows"] == len(
        brute_join(orders, customers, ["customer_id"], ["customer_id"], "inner")
    )


def test_an_inner_join_written_to_files_keeps_every_column_nullable(spark, bucketed, tmp_path):
    """Files get the schema Spark's own join of the same data writes (every column OPTIONAL
    in Parquet), whichever way the join ran: the keys' never-NULL declaration is for the rows
    Spark takes in memory only."""
    left, right, orders, customers = bucketed
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"

    done = run_join(left, right, *ON, "--to", str(ours))

    assert done["storage_partitioned"] is True
    l_frame = spark.createDataFrame(orders.to_pandas()).alias("l")
    r_frame = spark.createDataFrame(customers.to_pandas()).alias("r")
    joined = l_frame.join(r_frame, l_frame["customer_id"] == r_frame["customer_id"], "inner")
    joined.select(l_frame["customer_id"].alias("l_customer_id")).write.parquet(str(theirs))
    written = pq.read_schema(next(ours.glob("*.parquet")))
    spark_own = pq.read_schema(next(theirs.glob("*.parquet")))
    assert spark_own.field("l_customer_id").nullable
    assert all(field.nullable for field in written), written
    assert done["rows"] == len(
        brute_join(orders, customers, ["customer_id"], ["customer_id"], "inner")
    )


def events(n: int, seed: int, other: str) -> pa.Table:
    rng = random.Random(seed)
    start = dt.datetime(2023, 1, 1)
    times = [start + dt.timedelta(hours=rng.randrange(2 * 365 * 24)) for _ in range(n)]
    regions = [rng.choice(["eu", "us", "ap"]) for _ in range(n)]
    return pa.table(
        {
            "ts": pa.array(times, pa.timestamp("us")),
            "region": pa.array(regions),
            other: pa.array(range(n), pa.int64()),
            "e": pa.array([seed] * n, pa.int64()),
        }
    )


def test_time_parts_and_identity_layouts_join_in_place(spark, tmp_path):
    """year+month vs year on a timestamp, and identity region on both sides (two keys)."""
    left_data, right_data = events(500, 1, "a"), events(400, 2, "b")
    left = build(tmp_path, "l", left_data, ["year(ts) as y", "month(ts) as m", "region"])
    right = build(tmp_path, "r", right_data, ["year(ts) as y", "region"])
    on = ("--on", "l.ts = r.ts", "--on", "l.region = r.region")

    for how in ("inner", "left"):
        result = run_join(left, right, *on, "--how", how, "--limit", "0")
        assert result["storage_partitioned"] is True
        expected = brute_join(left_data, right_data, ["ts", "region"], ["ts", "region"], how)
        assert result_rows(result) == expected
    assert "Exchange" not in run_join(left, right, *on, "--explain")["physical_plan"]


def test_two_spec_versions_inner_in_place_and_left_falls_back(spark, tmp_path):
    """Partitions of two right spec versions: SPJ covers every pair of versions for inner;
    a left join would meet a left partition twice, so it shuffles (and says so)."""
    orders, customers = orders_and_customers(600, 300)
    left = build(tmp_path, "orders", orders, ["bucket(8, customer_id) as cb"])
    first, second = customers.slice(0, 150), customers.slice(150)
    right = build(tmp_path, "customers", first, ["bucket(4, customer_id) as cb"])
    evolved = invoke(
        "--root", right, "add-partition-spec", "--field", "bucket(2, customer_id) as cb2"
    )
    assert evolved.exit_code == 0, evolved.stderr
    write(right, second, tmp_path, "customers2")

    inner = run_join(left, right, *ON, "--limit", "0")
    assert inner["storage_partitioned"] is True
    assert result_rows(inner) == brute_join(
        orders, customers, ["customer_id"], ["customer_id"], "inner"
    )
    done = invoke("join", left, right, *ON, "--how", "left", "--limit", "0", "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["storage_partitioned"] is False
    assert result_rows(done.json()) == brute_join(
        orders, customers, ["customer_id"], ["customer_id"], "left"
    )


def test_incompatible_layouts_shuffle_and_still_answer(spark, tmp_path):
    orders, customers = orders_and_customers(800, 300)
    left = build(tmp_path, "orders", orders, ["bucket(8, customer_id) as cb"])
    right = build(tmp_path, "customers", customers, ["truncate(10, customer_id) as ct"])

    for how in ("inner", "left"):
        done = invoke("join", left, right, *ON, "--how", how, "--limit", "0")
        assert done.exit_code == 0, done.stderr
        assert "no storage-partitioned join" in done.stderr and "shuffling" in done.stderr
        payload = run_join(left, right, *ON, "--how", how, "--limit", "0")
        assert payload["storage_partitioned"] is False
        expected = brute_join(orders, customers, ["customer_id"], ["customer_id"], how)
        assert result_rows(payload) == expected
    explained = run_join(left, right, *ON, "--explain")
    assert explained["storage_partitioned"] is False
    assert "different transforms" in explained["reasons"][0]
    assert "Exchange" in explained["physical_plan"]


def test_a_join_reads_the_versions_pinned_when_it_was_planned(spark, tmp_path):
    """Writes committed after planning (new versions of the same partitions) are not seen."""
    from lancens_cli.pipeline import join as job_module
    from lancens_cli.service.join.plan import parse_on
    from lancens_cli.service.namespace import Namespace

    orders, customers = orders_and_customers(400, 200)
    left = build(tmp_path, "orders", orders, ["bucket(4, customer_id) as cb"])
    right = build(tmp_path, "customers", customers, ["bucket(4, customer_id) as cb"])
    job = job_module.plan_job(
        Namespace.from_properties({"root": left}),
        Namespace.from_properties({"root": right}),
        [parse_on("l.customer_id = r.customer_id")],
        "inner",
        None,
    )
    df = job.dataframe(spark)
    write(right, customers, tmp_path, "again")  # every customer twice from now on

    frozen = {"columns": df.columns, "rows": [r.asDict() for r in df.collect()]}

    assert result_rows(frozen) == brute_join(
        orders, customers, ["customer_id"], ["customer_id"], "inner"
    )
    doubled = pa.concat_tables([customers, customers])
    assert result_rows(run_join(left, right, *ON, "--limit", "0")) == brute_join(
        orders, doubled, ["customer_id"], ["customer_id"], "inner"
    )


@pytest.mark.s3
def test_a_join_on_s3_through_moto(spark, s3_bucket, s3_options, tmp_path):
    """Tasks open partition tables on S3 with the storage options given to the command."""
    orders, customers = orders_and_customers(300, 120)
    storage = [a for k, v in s3_options.items() for a in ("-s", f"{k}={v}")]
    roots = {}
    for name, table, field in (
        ("orders", orders, "bucket(4, customer_id) as cb"),
        ("customers", customers, "bucket(2, customer_id) as cb"),
    ):
        roots[name] = f"s3://{s3_bucket}/{name}"
        schema = tmp_path / f"{name}.schema.json"
        schema.write_text(json.dumps(schema_to_json(table.schema)))
        base = ("--root", roots[name], *storage)
        done = invoke(*base, "add-partition-spec", "--schema", str(schema), "--field", field)
        assert done.exit_code == 0, done.stderr
        data = tmp_path / f"{name}.parquet"
        pq.write_table(table, data)
        assert invoke(*base, "write", "--from", str(data)).exit_code == 0

    done = invoke("join", roots["orders"], roots["customers"], *ON, *storage, "--how", "left",
                  "--limit", "0", "--json")  # fmt: skip

    assert done.exit_code == 0, done.stderr
    assert done.json()["storage_partitioned"] is True
    assert s3_options["secret_access_key"] not in done.stdout + done.stderr
    assert result_rows(done.json()) == brute_join(
        orders, customers, ["customer_id"], ["customer_id"], "left"
    )


# --- bad input --------------------------------------------------------------------------------


def _one_line(done, code: int, words: str) -> None:
    assert done.exit_code == code, (done.exit_code, done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


def test_bad_input_is_one_line_with_its_exit_code(bucketed, tmp_path):
    left, right, _, _ = bucketed
    plain = tmp_path / "plain"
    plain.mkdir()
    assert invoke("--root", str(plain), "create", "table", "t", "--declare").exit_code == 0
    before = tree_snapshot(Path(left))

    _one_line(invoke("join", left, right, "--on", "customer_id"), 2, "expected 'l.<left")
    _one_line(invoke("join", left, right, "--on", "l.nope = r.customer_id"), 2, "nope")
    _one_line(invoke("join", left, str(tmp_path / "missing"), *ON), 3, "does not exist")
    _one_line(invoke("join", left, str(plain), *ON), 2, "not a partitioned namespace")
    _one_line(invoke("join", left, right, *ON, "--how", "full"), 2, "--how 'full'")
    _one_line(invoke("join", left, right, *ON, "--columns", "zzz"), 2, "no output column 'zzz'")
    _one_line(invoke("join", left, right, *ON, "--format", "orc", "--to", "x"), 2, "--format")
    _one_line(invoke("join", left, right, *ON, "--count", "--explain"), 2, "at most one")
    assert tree_snapshot(Path(left)) == before


_WITHOUT_PYSPARK = """
import sys

class NoPyspark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NoPyspark())
sys.argv = ["lancens", *sys.argv[1:]]
from lancens_cli.cli.app import main
main()
"""


def test_without_pyspark_it_says_how_to_install_it(bucketed):
    """Planning needs no pyspark; the Spark step then says how to get it (exit 2, one line)."""
    import subprocess
    import sys

    left, right, _, _ = bucketed
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PYSPARK, "join", left, right, *ON, "--count"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "pip install 'lancens-cli[spark]'" in done.stderr


def test_a_bad_where_is_one_line(spark, bucketed):
    left, right, _, _ = bucketed
    _one_line(invoke("join", left, right, *ON, "--where", "nope > 1"), 2, "--where: unknown column")


# --- the real entry point ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_real_subprocess_joins_with_its_own_driver(bucketed):
    left, right, orders, customers = bucketed

    done = run_cli("join", left, right, *ON, "--how", "left", "--count", "--master", "local[2]")

    assert done.exit_code == 0, done.stderr
    expected = brute_join(orders, customers, ["customer_id"], ["customer_id"], "left")
    assert done.stdout.strip() == str(len(expected))
    assert "storage-partitioned join done" in done.stderr


def test_a_failing_task_is_one_line_as_in_scan(spark, tmp_path):
    """A task that fails (a data file is gone) reaches the user of `join` as it does the user of
    `scan`: one line, exit 1, no JVM or Python trace."""
    orders, customers = orders_and_customers(200, 50)
    left = build(tmp_path, "orders", orders, ["bucket(4, customer_id) as cb"])
    right = build(tmp_path, "customers", customers, ["bucket(4, customer_id) as cb"])
    data_files = [p for p in Path(right).glob("*/data/*.lance") if p.parts[-3] != "__manifest"]
    assert data_files
    for path in data_files:
        path.unlink()

    joined = invoke("join", left, right, *ON, "--count")
    scanned = invoke("--root", right, "scan", "--count")

    for done, doing in ((joined, "join"), (scanned, "scan")):
        assert done.exit_code == 1, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("lancens: error")]
        assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
        assert errors[0].startswith(f"lancens: error: the {doing} failed in Spark: "), errors
        assert "Not found: " in errors[0] and ".lance" in errors[0], errors  # what went wrong


@pytest.mark.parametrize("how", ["inner", "left"])
def test_since_version_joins_only_the_left_rows_appended_since(spark, tmp_path, how):
    """An hourly job joins the orders that arrived since its last run with every customer:
    `--since-version A` on the left root, storage-partitioned and shuffled alike."""
    orders, customers = orders_and_customers(600, 300)
    left = build(tmp_path, "orders", orders.slice(0, 400), ["bucket(16, customer_id) as cb"])
    right = build(tmp_path, "customers", customers, ["bucket(8, customer_id) as cb"])
    mixed = build(tmp_path, "plain", customers, ["truncate(10, customer_id) as ct"])  # shuffled
    start = invoke("--root", left, "versions", "__manifest", "--json").json()["versions"][-1]
    write(left, orders.slice(400, 150), tmp_path, "orders")
    assert invoke("--root", left, "prune", "--compact", "--yes").exit_code == 0
    write(left, orders.slice(550, 50), tmp_path, "orders")
    new = orders.slice(400, 200)
    since = ("--since-version", str(start["version"]))
    for other, spj in ((right, True), (mixed, False)):
        result = run_join(left, other, *ON, "--how", how, "--limit", "0", *since)
        assert result["storage_partitioned"] is spj
        expected = brute_join(new, customers, ["customer_id"], ["customer_id"], how)
        assert result_rows(result) == expected
    refused = invoke("join", left, right, *ON, "--since-version", "999")
    assert refused.exit_code == 3 and "readable versions" in refused.stderr


def test_the_jvm_lancens_starts_reads_arrow_batches_without_per_value_checks(spark):
    """Spark turns the source's Arrow batches into rows a value at a time; the JVM lancens
    starts does it without Arrow Java's bounds and null checks, and a user's own Java options
    still come after ours (the last -D of a name wins)."""
    from lancens_cli.pipeline.spark_session import ARROW_JAVA_OPTIONS

    conf = spark.sparkContext.getConf()
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert ARROW_JAVA_OPTIONS in conf.get(key)
    system = spark.sparkContext._jvm.java.lang.System
    assert system.getProperty("arrow.enable_unsafe_memory_access") == "true"
    assert system.getProperty("arrow.enable_null_check_for_get") == "false"


@pytest.mark.parametrize("how", ["inner", "left"])
def test_an_inner_joins_keys_are_declared_never_null(spark, bucketed, how):
    """The rows of an inner join never hold a NULL key (a NULL key matches nothing), and the
    schema Spark gets says so, which spares it a null test per key and row; every other
    column, and a left join's keys, may be NULL. The data has NULL keys on the left."""
    from lancens_cli.pipeline import join as job_module
    from lancens_cli.service.join.plan import parse_on
    from lancens_cli.service.namespace import Namespace

    left, right, orders, customers = bucketed
    job = job_module.plan_job(
        Namespace.from_properties({"root": left}),
        Namespace.from_properties({"root": right}),
        [parse_on("l.customer_id = r.customer_id")],
        how,
        None,
    )
    df = job.dataframe(spark)

    declared = {f.name: f.nullable for f in df.schema.fields}
    keys = {"l_customer_id", "r_customer_id"}
    assert declared == {name: how == "left" or name not in keys for name in declared}
    rows = df.collect()
    expected = brute_join(orders, customers, ["customer_id"], ["customer_id"], how)
    assert len(rows) == len(expected)
    left_keys = [r["l_customer_id"] for r in rows]
    assert (None in left_keys) == (how == "left")
