"""Users' Spark sessions in other time zones (real local Spark).

A user's job in Asia/Kolkata or America/New_York writes TIMESTAMP values into a
`timestamp_ntz` namespace column and TIMESTAMP_NTZ values into a `timestamp` one: what is stored
is exactly what Spark's own CAST gives in that session (DST gaps and overlaps included), and a
read in the session returns what Spark's own Parquet round trip of the same rows returns.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from data import partitioned_root
from helpers import Root

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("instant", pa.timestamp("us", tz="UTC")),
        ("wall", pa.timestamp("us")),
        ("day", pa.date32()),
    ]
)
# wall times: ordinary, pre-1970 with microseconds, New York's 2025 spring gap and fall overlap,
# Kolkata midnight; instants likewise
VALUES = [
    (1, "2024-06-01 12:00:00", "2024-06-01 12:00:00", "2024-06-01"),
    (2, "1969-12-31 23:59:59.999999", "1900-01-01 00:00:00.000001", "1900-01-01"),
    (3, "2025-03-09 02:30:00", "2025-03-09 02:30:00", "2025-03-09"),
    (4, "2025-11-02 01:30:00", "2025-11-02 01:30:00", "2025-11-02"),
    (5, "2024-01-01 00:00:00", "2024-01-01 00:00:00", "2024-01-01"),
]


@pytest.fixture
def root(tmp_path, spark) -> Root:
    return partitioned_root(tmp_path, SCHEMA, "bucket(2, id)")


@pytest.fixture(params=["Asia/Kolkata", "America/New_York"])
def zone(request, spark):
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", request.param)
    yield request.param
    spark.conf.set("spark.sql.session.timeZone", previous)


def source(spark):
    """The user's rows: `instant_in` a TIMESTAMP, `wall_in` a TIMESTAMP_NTZ (both read in the
    session zone from the same text), to be written into the other kind of column."""
    rows = ", ".join(
        f"({i}, TIMESTAMP '{a}', TIMESTAMP_NTZ '{b}', DATE '{d}')" for i, a, b, d in VALUES
    )
    return spark.sql(f"SELECT * FROM VALUES {rows} AS t(id, instant_in, wall_in, day)")


def test_timestamps_cross_kinds_exactly_as_spark_casts_them(root, spark, zone):
    rows = source(spark)
    swapped = rows.selectExpr("id", "wall_in AS instant", "instant_in AS wall", "day")
    swapped.write.format("lancens").option("root", root.uri).mode("append").save()
    expected = rows.selectExpr(
        "id",
        "CAST(wall_in AS TIMESTAMP) AS instant",
        "CAST(instant_in AS TIMESTAMP_NTZ) AS wall",
        "day",
    )
    read = spark.read.format("lancens").option("root", root.uri).load()
    assert sorted(read.collect()) == sorted(expected.collect())


def test_a_read_in_the_session_equals_sparks_own_parquet_round_trip(root, spark, zone, tmp_path):
    rows = source(spark).selectExpr("id", "instant_in AS instant", "wall_in AS wall", "day")
    rows.write.format("lancens").option("root", root.uri).mode("append").save()
    rows.write.parquet(str(tmp_path / "copy.parquet"))
    ours = spark.read.format("lancens").option("root", root.uri).load()
    theirs = spark.read.parquet(str(tmp_path / "copy.parquet"))
    assert sorted(ours.collect()) == sorted(theirs.select(*ours.columns).collect())
    # what is stored, read with pylance: the instants are the session's, in UTC
    from lancens_cli.service.namespace import Namespace

    ns = Namespace.from_properties({"root": root.uri})
    import lance

    stored = []
    for row in ns.snapshot().rows:
        if row["object_type"] == "table":
            stored += lance.dataset(ns.storage.uri(row["location"])).to_table().to_pylist()
    as_utc = {
        r.id: r.instant_utc
        for r in rows.selectExpr(
            "id",
            "date_format(to_utc_timestamp(instant, current_timezone()), "
            "'yyyy-MM-dd HH:mm:ss.SSSSSS') AS instant_utc",
        ).collect()
    }
    for row in stored:
        assert row["instant"].strftime("%Y-%m-%d %H:%M:%S.%f") == as_utc[row["id"]]
