"""Queries through the `lancens` data source as users write them (real local Spark).

A DataFrame reused across queries, literals at the edges of their types, a read schema
narrower than the table's, the `where` and `prune` options, and `scan --where` taking any
Spark SQL condition: each answer is compared with DuckDB over the same source rows.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import partitioned_root
from helpers import Root, invoke, run_cli

pytestmark = pytest.mark.spark

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("s", pa.string()),
        ("i64", pa.int64()),
        ("i16", pa.int16()),
        ("dec", pa.decimal128(38, 10)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("note", pa.string()),
    ]
)


def rows(n: int = 240) -> pa.Table:
    rng = random.Random(7)
    notes = ["alpha", "Alpha", "beta", "it's", "back\\slash", "ünï", "", None]
    out = []
    for i in range(n):
        out.append(
            {
                "id": i,
                "s": rng.choice(["a", "b", "c", None]),
                "i64": rng.choice([INT64_MIN, INT64_MAX, 0, -1, None, rng.randrange(-99, 99)]),
                "i16": rng.choice([-32768, 32767, 1000, -1000, 3, None]),
                "dec": rng.choice(
                    [
                        Decimal("1234567890123456789012345678.0123456789"),
                        Decimal("-0.0000000001"),
                        Decimal("0"),
                        None,
                    ]
                ),
                "ts": rng.choice(
                    [
                        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
                        dt.datetime(2025, 3, 9, 7, 0, 0, 1, tzinfo=dt.UTC),
                        None,
                    ]
                ),
                "d": rng.choice([dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2025, 1, 1)]),
                "note": rng.choice(notes),
            }
        )
    return pa.Table.from_pylist(out, schema=SCHEMA)


@pytest.fixture(scope="module")
def namespace(tmp_path_factory, spark):
    """A namespace partitioned by `s` and bucket(4, id), written with the CLI."""
    folder = tmp_path_factory.mktemp("queries")
    root = partitioned_root(folder, SCHEMA, "s", "bucket(4, id)")
    data = rows()
    pq.write_table(data, folder / "rows.parquet")
    result = invoke(*root.args, "write", "--from", str(folder / "rows.parquet"))
    assert result.exit_code == 0, result.stderr
    return root, data


def oracle(data: pa.Table, where: str | None) -> list[int]:
    """Ids of the rows DuckDB keeps for `where` over the same rows."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", data)
    sql = "SELECT id FROM t" + (f" WHERE {where}" if where else "")
    return sorted(r[0] for r in con.execute(sql).fetchall())


def ids(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


def test_a_reused_dataframe_answers_each_query_from_its_own_filters(namespace, spark):
    root, data = namespace
    events = spark.read.format("lancens").option("root", root.uri).load()
    assert events.filter("s = 'a'").count() == len(oracle(data, "s = 'a'"))
    assert events.count() == data.num_rows
    assert ids(events.filter("id % 7 = 3")) == oracle(data, "id % 7 = 3")
    assert ids(events.filter("s = 'b'")) == oracle(data, "s = 'b'")
    grouped = {r.s: r["count"] for r in events.groupBy("s").count().collect()}
    con = duckdb.connect()
    con.register("t", data)
    expected = dict(con.execute("SELECT s, count(*) FROM t GROUP BY s").fetchall())
    assert grouped == expected
    # two filters of one DataFrame in one plan (a self-join) each keep their own rows
    left = events.filter("s = 'a'").select("id")
    right = events.filter("s = 'b'").select("id")
    assert left.union(right).count() == len(oracle(data, "s IN ('a', 'b')"))


@pytest.mark.parametrize(
    "where",
    [
        f"i64 = {INT64_MIN}",
        f"i64 = {INT64_MAX}",
        f"i64 IN ({INT64_MIN}, 0)",
        f"i64 <= {INT64_MIN}",
        "dec = 1234567890123456789012345678.0123456789",
        "dec < 0",
        "ts = '1969-12-31 23:59:59.999999'",
        "ts > TIMESTAMP '2025-03-09 07:00:00'",
        "d = DATE '0001-01-01'",
        "d >= '9999-12-31'",
        "note = 'it\\'s'",
        "note = 'back\\\\slash'",
        "note = 'ünï'",
        "note = ''",
        "i16 = -32768",
    ],
)
def test_literals_at_the_edges_of_their_types_are_exact(namespace, spark, where):
    """Pushed into Lance when they round-trip, left to Spark otherwise: never wrong."""
    root, data = namespace
    duck = (
        where.replace("\\'", "''")
        .replace("\\\\", "\\")
        .replace("'1969-12-31 23:59:59.999999'", "TIMESTAMPTZ '1969-12-31 23:59:59.999999+00'")
        .replace("TIMESTAMP '2025", "TIMESTAMPTZ '2025")
    )
    expected = oracle(data, duck)
    found = sorted(r[0] for r in scan(root, "--where", where, "--columns", "id")["rows"])
    assert found == expected
    # the session zone in which a timestamp literal without an offset names an instant
    zoned = source(spark, root).option("timeZone", "UTC")
    assert ids(zoned.option("where", where).load()) == expected


def scan(root: Root, *args: str) -> dict:
    result = invoke(*root.args, "scan", *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "where",
    [
        "id % 5 = 0",
        "lower(note) = 'alpha'",
        "s = 'a' AND lower(note) = 'alpha'",
        "length(note) > 3 OR s IS NULL",
        "abs(CAST(i16 AS INT)) >= 1000 AND s IN ('b', 'c')",
        "coalesce(s, 'z') = 'z'",
        "note LIKE 'a%' OR note LIKE '%slash'",
        "CASE WHEN s = 'a' THEN id < 50 ELSE id > 200 END",
        "CAST(i16 AS INT) BETWEEN -1000 AND 1000",
        "NOT (s = 'a' OR s = 'b')",
        "year(d) = 2025 AND id BETWEEN 10 AND 100",
    ],
)
def test_scan_where_takes_any_spark_sql(namespace, where):
    root, data = namespace
    found = sorted(r[0] for r in scan(root, "--where", where, "--columns", "id")["rows"])
    assert found == oracle(data, where)


def test_explain_says_what_was_pushed_and_what_was_left_to_spark(namespace):
    root, data = namespace
    plan = scan(root, "--where", "s = 'a' AND lower(note) = 'alpha'", "--explain")
    assert plan["pushed_to_lancens"] == ["s = 'a'"]
    assert plan["left_to_spark"] == "LOWER(note) = 'alpha'"
    assert plan["not_pushed"][0]["reason"]
    # only the partition tables of s = 'a' are opened, though the rest is Spark's to apply
    assert plan["tables_read"] == 4 and plan["partitions_total"] == 16


def test_partitions_where_names_what_it_could_not_use(namespace):
    root, _ = namespace
    result = invoke(*root.args, "partitions", "--where", "s = 'a' AND id % 2 = 0", "--json")
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["exact"] is False and found["partitions_matched"] == 4
    assert [p["condition"] for p in found["not_used"]] == ["id % 2 = 0"]


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("nosuch = 1", "unknown column 'nosuch'"),
        ("lower(nosuch) = 'a'", "unknown column 'nosuch'"),
        ("s = = 1", "cannot parse"),
        ("id + 1", "not a condition"),
    ],
)
def test_a_bad_condition_is_exit_2_before_spark_starts(namespace, tmp_path, where, words):
    """Found with sqlglot's Spark dialect: no JVM is started (run as a user does)."""
    root, _ = namespace
    result = run_cli(*root.args, "scan", "--where", where, "--master", "local[1]")
    assert result.exit_code == 2, result.stderr
    assert words in result.stderr and "starting Spark" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def source(spark, root: Root):
    """A new reader each time: Spark's DataFrameReader keeps every option set on it."""
    return spark.read.format("lancens").option("root", root.uri)


def test_the_where_option_is_exact_or_refused(namespace, spark):
    root, data = namespace
    exact = source(spark, root).option("where", "s = 'c' AND id < 100").load()
    assert ids(exact) == oracle(data, "s = 'c' AND id < 100")
    with pytest.raises(Exception, match="cannot apply 'id % 2 = 0' exactly"):
        source(spark, root).option("where", "s = 'c' AND id % 2 = 0").load().count()
    # prune: a hint, the caller filters again
    hinted = source(spark, root).option("prune", "s = 'c' AND id % 2 = 0").load()
    found = ids(hinted.filter("s = 'c' AND id % 2 = 0"))
    assert found == oracle(data, "s = 'c' AND id % 2 = 0")


def test_a_narrower_read_schema_is_exact_or_an_error(namespace, spark):
    root, data = namespace
    small = source(spark, root).schema("id long, i16 short").option("where", "i16 = 3").load()
    assert {r.i16 for r in small.collect()} == {3}
    narrow = source(spark, root).schema("id long, i16 byte").load()
    with pytest.raises(Exception, match="'i16' holds int16 values that int8 cannot hold"):
        narrow.collect()
    fits = source(spark, root).schema("id long, i16 byte").option("where", "i16 = 3").load()
    assert {r.i16 for r in fits.collect()} == {3}


@pytest.mark.slow
def test_no_jvm_lines_on_stderr_unless_debug(namespace):
    root, _ = namespace
    quiet = run_cli(*root.args, "scan", "--count", "--master", "local[1]")
    assert quiet.exit_code == 0, quiet.stderr
    assert "WARNING" not in quiet.stderr and "log4j" not in quiet.stderr.lower()
    assert [line.split(":")[0] for line in quiet.stderr.splitlines()] == ["scan"] * 3
    failed = run_cli(*root.args, "scan", "--where", "s = 5", "--count", "--master", "local[1]")
    assert failed.exit_code == 2
    assert failed.stderr.strip().splitlines()[-1].startswith("lancens: error:")
    assert '"level"' not in failed.stderr and "\tat " not in failed.stderr
