"""Spark filters -> the predicate model, NULL folding for absent columns, batch conforming.

No Spark runs here: these are the pieces the data source's reader calls in Spark's workers.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from pyspark.sql import datasource as ds

from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Comparison,
    InList,
    IsNull,
    Not,
    Or,
    evaluate,
    to_sql,
)
from lancens_cli.pipeline.read import conform_batch
from lancens_cli.pipeline.read_filters import translate, without_columns

SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="America/New_York")),
        ("ntz", pa.timestamp("us")),
        ("x", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
    ]
)
UTC = ZoneInfo("UTC")


@pytest.mark.parametrize(
    ("spark_filter", "node", "exact"),
    [
        (ds.EqualTo(("i",), 5), Comparison("i", "=", 5), True),
        (
            ds.GreaterThanOrEqual(("d",), dt.date(2025, 1, 2)),
            Comparison("d", ">=", dt.date(2025, 1, 2)),
            True,
        ),
        (ds.In(("s",), ["a", None, "b"]), InList("s", ("a", "b")), True),
        (ds.IsNotNull(("s",)), IsNull("s", negated=True), True),
        (ds.Not(ds.EqualTo(("i",), 1)), Not(Comparison("i", "=", 1)), True),
        (ds.EqualNullSafe(("s",), None), IsNull("s"), True),
        (
            ds.Not(ds.EqualNullSafe(("s",), "q")),
            Or((IsNull("s"), Comparison("s", "!=", "q"))),
            True,
        ),
        (ds.LessThan(("dec",), Decimal("1.50")), Comparison("dec", "<", Decimal("1.50")), True),
        (
            ds.LessThan(("ntz",), dt.datetime(2025, 1, 1, 10)),
            Comparison("ntz", "<", dt.datetime(2025, 1, 1, 10)),
            True,
        ),
        (
            ds.StringStartsWith(("s",), "ab"),
            And((Comparison("s", ">=", "ab"), Comparison("s", "<", "ac"))),
            False,
        ),
    ],
)
def test_translated_filters(spark_filter, node, exact):
    found = translate(spark_filter, SCHEMA)
    assert found is not None and found.node == node and found.exact is exact


def test_a_zoned_timestamp_is_compared_at_the_same_instant():
    instant = dt.datetime(2025, 6, 1, 16, 0, tzinfo=UTC)  # how Spark sends TIMESTAMP
    found = translate(ds.GreaterThan(("ts",), instant), SCHEMA)
    assert found is not None
    assert found.node.literal == instant and found.node.literal.utcoffset() == dt.timedelta(
        hours=-4
    )
    assert to_sql(found.node) == "ts > TIMESTAMP '2025-06-01 12:00:00'"  # New York wall time


@pytest.mark.parametrize(
    "spark_filter",
    [
        ds.EqualTo(("x",), 0.0),  # floats: Lance orders -0.0 below 0.0, Spark does not
        ds.EqualTo(("i",), 2**40),  # out of the column's range
        ds.EqualTo(("i",), "5"),  # the wrong type
        ds.EqualTo(("nope",), 1),
        ds.EqualTo(("s", "inner"), 1),  # a nested field
        ds.StringEndsWith(("s",), "x"),
        ds.Not(ds.StringStartsWith(("s",), "ab")),  # NOT of a weaker condition
        ds.EqualTo(("ntz",), dt.datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
def test_filters_left_to_spark(spark_filter):
    assert translate(spark_filter, SCHEMA) is None


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (Comparison("s", "=", "a"), FALSE),
        (IsNull("s"), TRUE),
        (IsNull("s", negated=True), FALSE),
        (Or((Comparison("s", "=", "a"), Comparison("i", "=", 1))), Comparison("i", "=", 1)),
        (And((IsNull("s"), Comparison("i", "=", 1))), Comparison("i", "=", 1)),
        (Not(Comparison("s", "=", "a")), FALSE),  # NOT UNKNOWN is UNKNOWN
        (Not(IsNull("s")), FALSE),
    ],
)
def test_absent_columns_read_as_null(node, expected):
    assert without_columns(node, {"s"}) == expected


@pytest.mark.parametrize(
    "node",
    [
        Or((Comparison("s", "!=", "a"), IsNull("s"))),
        Not(And((Comparison("s", "=", "a"), Comparison("i", ">", 0)))),
        Not(Or((IsNull("s", negated=True), Comparison("i", "<", 3)))),
    ],
)
def test_folding_agrees_with_the_evaluator(node):
    for i in (None, -1, 0, 2, 5):
        row = {"i": i, "s": None}
        folded = without_columns(node, {"s"})
        assert (evaluate(node, row) is True) == (evaluate(folded, row) is True)


def test_conform_batch_orders_casts_and_fills_absent_columns():
    batch = pa.record_batch(
        {"b": pa.array([1, 2], pa.int32()), "ts": pa.array([1, 2], pa.timestamp("ns"))}
    )
    target = pa.schema(
        [
            pa.field("ts", pa.timestamp("us"), nullable=True),
            pa.field("b", pa.int64(), nullable=False),
            pa.field("gone", pa.string(), nullable=True),
        ]
    )
    out = conform_batch(batch, target)
    assert out.schema.equals(target) and out.column("gone").null_count == 2
    assert out.column("b").to_pylist() == [1, 2]
