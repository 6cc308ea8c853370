"""Differential: the `lancens` data source and `scan --where` against DuckDB (real local Spark).

A user's PySpark job, in a session whose time zone is not UTC, writes rows of every common type
(all integer widths at their extremes, floats with NaN, +-0.0 and infinities, decimal(38,10),
strings with quotes, backslashes and unicode, binary, booleans, far dates, timestamps and
timestamp_ntz before 1970, a struct) with NULLs everywhere into a partitioned namespace of two
spec versions (bucket, year, truncate, month, identity). They read back exactly, and generated
predicates (hypothesis) give exactly DuckDB's rows over the same source rows: on one DataFrame
reused for every predicate, on fresh ones, and through `lancens scan --where`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from data import partitioned_root
from helpers import Root, invoke, ok
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.spark

ZONE = "Asia/Kolkata"
I64 = (-(2**63), 2**63 - 1)
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(38, 10)),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("flag", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
    ]
)
SPARK_DDL = (
    "id long, i8 byte, i16 short, i32 int, i64 long, f32 float, f64 double, "
    "dec decimal(38,10), s string, b binary, flag boolean, d date, ts timestamp, "
    "ntz timestamp_ntz, st struct<x:int,y:string>"
)
STRINGS = ["", "a", "ab", "abc", "it's", "back\\slash", "ünï", "日本", "A", "zz", None]
DATES = [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(2020, 2, 29), dt.date(9999, 12, 31)]
STAMPS = [
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1900, 1, 1, 0, 0, 0, 1),
    dt.datetime(2020, 6, 1, 12, 30),
    dt.datetime(2025, 3, 9, 2, 30),
]
DECIMALS = [
    Decimal("1234567890123456789012345678.0123456789"),
    Decimal("-9999999999999999999999999999.9999999999"),
    Decimal("0E-10"),
    Decimal("0.0000000001"),
    Decimal("-1.5000000000"),
]
FLOATS = [0.0, -0.0, 1.5, -1.5, math.inf, -math.inf, math.nan, 3.4e38]


def make_rows(n: int, seed: int, start: int) -> pa.Table:
    rng = random.Random(seed)

    def maybe(values):
        return None if rng.random() < 0.15 else rng.choice(values)

    rows = []
    for i in range(n):
        stamp = maybe(STAMPS)
        rows.append(
            {
                "id": start + i,
                "i8": maybe([-128, 127, 0, 5]),
                "i16": maybe([-32768, 32767, 0, 300]),
                "i32": maybe([-(2**31), 2**31 - 1, 0, 7, -7]),
                "i64": maybe([*I64, 0, 42, -42]),
                "f32": maybe([0.0, -0.0, 1.5, math.inf, math.nan]),
                "f64": maybe(FLOATS),
                "dec": maybe(DECIMALS),
                "s": maybe(STRINGS),
                "b": maybe([b"", b"\x00\xff", b"abc"]),
                "flag": maybe([True, False]),
                "d": maybe(DATES),
                "ts": None if stamp is None else stamp.replace(tzinfo=dt.UTC),
                "ntz": maybe(STAMPS),
                "st": None if rng.random() < 0.15 else {"x": maybe([1, 2]), "y": maybe(STRINGS)},
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@pytest.fixture(scope="module")
def world(tmp_path_factory, spark):
    """The namespace written by a user's job in a Kolkata session, and the source rows."""
    folder = tmp_path_factory.mktemp("differential")
    root = partitioned_root(folder, SCHEMA, "bucket(4, id)", "year(d)")

    first, second = make_rows(160, 1, 0), make_rows(160, 2, 1000)
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    try:
        user_job(spark, first, root)
        ok(
            root,
            "add-partition-spec",
            "--field",
            "truncate(2, s)",
            "--field",
            "month(ts)",
            "--field",
            "flag",
        )
        spark.conf.set("spark.sql.session.timeZone", ZONE)  # the CLI ran in UTC
        user_job(spark, second, root)
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    data = pa.concat_tables([first, second])
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", data)
    return root, data, con


def user_job(spark, table: pa.Table, root: Root) -> None:
    """What a user writes: a DataFrame built in their session, saved through the source."""
    frame = spark.createDataFrame(table.to_pylist(), SPARK_DDL)
    frame.write.format("lancens").option("root", root.uri).mode("append").save()


def key(row: dict) -> tuple:
    """A row comparable across engines: NaN equal to NaN, -0.0 as Spark reads it back."""
    out = []
    for name in SCHEMA.names:
        value = row[name]
        if isinstance(value, float) and math.isnan(value):
            value = "NaN"
        elif isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        elif isinstance(value, dict):
            value = (value.get("x"), value.get("y"))
        elif hasattr(value, "asDict"):
            value = (value["x"], value["y"])
        out.append(value)
    return tuple(repr(v) for v in out)


def spark_rows(df) -> list[dict]:
    """Rows of a DataFrame as Python values, instants in UTC (read through Arrow)."""
    table = df.toArrow()
    rows = table.to_pylist()
    return rows


def test_every_type_reads_back_exactly_in_a_non_utc_session(world, spark):
    root, data, _ = world
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    try:
        read = spark.read.format("lancens").option("root", root.uri).load()
        ours = sorted(key(r) for r in spark_rows(read))
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert ours == sorted(key(r) for r in data.to_pylist())


# --- generated predicates ------------------------------------------------------------------------


def _lit(kind: str, value):
    """(Spark SQL, DuckDB SQL) of a literal."""
    if kind == "str":
        spark = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return spark, "'" + value.replace("'", "''") + "'"
    if kind == "date":
        return f"DATE '{value.isoformat()}'", f"DATE '{value.isoformat()}'"
    if kind == "ts":
        text = value.isoformat(sep=" ")
        return f"TIMESTAMP '{text}+00:00'", f"TIMESTAMPTZ '{text}+00'"
    if kind == "ntz":
        text = value.isoformat(sep=" ")
        return f"TIMESTAMP_NTZ '{text}'", f"TIMESTAMP '{text}'"
    if kind == "dec":
        return f"{value}BD", f"{value}::DECIMAL(38,10)"
    if kind == "float":
        if math.isnan(value):
            return "double('NaN')", "'NaN'::DOUBLE"
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return f"double('{sign}Infinity')", f"'{sign}Infinity'::DOUBLE"
        return f"CAST({value!r} AS DOUBLE)", f"CAST({value!r} AS DOUBLE)"
    return str(value), str(value)


COLUMNS = {
    "id": ("int", st.integers(-5, 1200)),
    "i8": ("int", st.sampled_from([-128, 127, 0, 5, 6])),
    "i16": ("int", st.sampled_from([-32768, 32767, 0, 300])),
    "i32": ("int", st.sampled_from([-(2**31), 2**31 - 1, 0, 7])),
    "i64": ("int", st.sampled_from([*I64, 0, 42, 43])),
    "f64": ("float", st.sampled_from(FLOATS)),
    "dec": ("dec", st.sampled_from(DECIMALS)),
    "s": ("str", st.sampled_from([s for s in STRINGS if s is not None])),
    "d": ("date", st.sampled_from(DATES)),
    "ts": ("ts", st.sampled_from(STAMPS)),
    "ntz": ("ntz", st.sampled_from(STAMPS)),
    "flag": ("bool", st.booleans()),
}
OPS = ["=", "<>", "<", "<=", ">", ">="]


@st.composite
def atoms(draw):
    column = draw(st.sampled_from(sorted(COLUMNS)))
    kind, values = COLUMNS[column]
    shape = draw(st.sampled_from(["cmp", "cmp", "in", "between", "null", "func"]))
    if shape == "null":
        word = draw(st.sampled_from(["IS NULL", "IS NOT NULL"]))
        return f"{column} {word}", f"{column} {word}"
    if kind == "bool":
        value = draw(values)
        text = "true" if value else "false"
        return f"{column} = {text}", f"{column} = {text}"
    if shape == "in":
        items = [_lit(kind, draw(values)) for _ in range(draw(st.integers(1, 3)))]
        return (
            f"{column} IN ({', '.join(a for a, _ in items)})",
            f"{column} IN ({', '.join(b for _, b in items)})",
        )
    if shape == "between":
        low, high = sorted([draw(values), draw(values)], key=_order)
        (a1, b1), (a2, b2) = _lit(kind, low), _lit(kind, high)
        return f"{column} BETWEEN {a1} AND {a2}", f"{column} BETWEEN {b1} AND {b2}"
    if shape == "func":
        return draw(st.sampled_from(FUNCTIONS))
    op = draw(st.sampled_from(OPS))
    spark_lit, duck_lit = _lit(kind, draw(values))
    return f"{column} {op} {spark_lit}", f"{column} {op} {duck_lit}"


def _order(value):
    if isinstance(value, float) and math.isnan(value):
        return math.inf, 1
    return value, 0


FUNCTIONS = [
    ("id % 7 = 3", "id % 7 = 3"),
    ("lower(s) = 'a'", "lower(s) = 'a'"),
    ("length(s) > 2", "length(s) > 2"),
    ("s LIKE 'a%'", "s LIKE 'a%'"),
    ("coalesce(i16, 0) > 0", "coalesce(i16, 0) > 0"),
    ("abs(CAST(i32 AS BIGINT)) > 5", "abs(CAST(i32 AS BIGINT)) > 5"),
    ("year(d) = 2020", "year(d) = 2020"),
    (
        "CASE WHEN flag THEN id < 500 ELSE id >= 500 END",
        "CASE WHEN flag THEN id < 500 ELSE id >= 500 END",
    ),
    ("CAST(i8 AS INT) + 1 = 6", "CAST(i8 AS INT) + 1 = 6"),
    ("st.x = 1", "st.x = 1"),
]


@st.composite
def predicates(draw, depth=0):
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        return draw(atoms())
    word = draw(st.sampled_from(["AND", "OR"]))
    parts = [draw(predicates(depth + 1)) for _ in range(draw(st.integers(2, 3)))]
    spark = f" {word} ".join(f"({a})" for a, _ in parts)
    duck = f" {word} ".join(f"({b})" for _, b in parts)
    if draw(st.booleans()):
        return f"NOT ({spark})", f"NOT ({duck})"
    return spark, duck


def oracle_ids(con, duck: str) -> list[int]:
    return sorted(r[0] for r in con.execute(f"SELECT id FROM t WHERE {duck}").fetchall())


SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.slow
def test_generated_predicates_on_a_reused_dataframe_equal_duckdb(world, spark):
    root, _, con = world
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    events = spark.read.format("lancens").option("root", root.uri).load()  # reused throughout

    @SETTINGS
    @given(predicates())
    def check(pair):
        spark_sql, duck = pair
        found = sorted(r.id for r in events.filter(spark_sql).select("id").collect())
        assert found == oracle_ids(con, duck), spark_sql
        assert events.count() == con.execute("SELECT count(*) FROM t").fetchone()[0]

    try:
        check()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_generated_predicates_through_the_prune_option_and_scan_equal_duckdb(world, spark):
    root, _, con = world

    @settings(SETTINGS, max_examples=12)
    @given(predicates())
    def check(pair):
        spark_sql, duck = pair
        expected = oracle_ids(con, duck)
        fresh = (
            spark.read.format("lancens")
            .option("root", root.uri)
            .option("prune", spark_sql)
            .option("timeZone", "UTC")
            .load()
            .filter(spark_sql)
        )
        assert sorted(r.id for r in fresh.select("id").collect()) == expected, spark_sql
        result = invoke(*root.args, "scan", "--where", spark_sql, "--columns", "id", "--json")
        assert result.exit_code == 0, (spark_sql, result.stderr)
        assert sorted(r[0] for r in json.loads(result.stdout)["rows"]) == expected, spark_sql

    check()
