"""Spark SQL conditions -> the predicate model, NULL folding for absent columns, conforming.

No Spark runs here: these are the pieces the data source's reader calls in Spark's workers.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

from lancens_cli.errors import InvalidInputError
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
)
from lancens_cli.partition.spark_conditions import split_condition
from lancens_cli.partition.table_filter import without_columns
from lancens_cli.pipeline.slice_reader import conform_batch

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
    ("text", "node"),
    [
        ("i = 5", Comparison("i", "=", 5)),
        ("d >= DATE '2025-01-02'", Comparison("d", ">=", dt.date(2025, 1, 2))),
        ("d >= '2025-01-02'", Comparison("d", ">=", dt.date(2025, 1, 2))),
        ("s IN ('a', 'b')", InList("s", ("a", "b"))),
        ("s IS NOT NULL", IsNull("s", negated=True)),
        ("NOT (i = 1)", Not(Comparison("i", "=", 1))),
        ("dec < 1.50", Comparison("dec", "<", Decimal("1.50"))),
        ("ntz < '2025-01-01 10:00:00'", Comparison("ntz", "<", dt.datetime(2025, 1, 1, 10))),
        (
            "ntz < TIMESTAMP_NTZ '2025-01-01 10:00:00'",
            Comparison("ntz", "<", dt.datetime(2025, 1, 1, 10)),
        ),
        ("s = 'it\\'s'", Comparison("s", "=", "it's")),
        ('s = "dq"', Comparison("s", "=", "dq")),
        ("s = 'a' OR i = 2", Or((Comparison("s", "=", "a"), Comparison("i", "=", 2)))),
    ],
)
def test_spark_sql_conjuncts_in_the_predicate_model(text, node):
    (part,) = split_condition(text, SCHEMA).conjuncts
    assert part.node == node, part.reason


@pytest.mark.parametrize(
    "text",
    [
        "i % 7 = 3",
        "lower(s) = 'a'",
        "s LIKE 'a%'",
        "x = 0.0",  # Spark's float order is not Lance's (-0.0, NaN)
        "i = 1e3",  # a DOUBLE literal in Spark
        "i <=> 1",
        "s = 'a' OR lower(s) = 'b'",  # an OR is taken only when every branch is
        "CASE WHEN i > 0 THEN true ELSE false END",
        "ntz < TIMESTAMP '2025-01-01 10:00:00'",  # an instant against a wall time
        "i IN (1, NULL)",
    ],
)
def test_conjuncts_left_to_spark(text):
    (part,) = split_condition(text, SCHEMA).conjuncts
    assert part.node is None and part.reason


def test_a_timestamp_literal_names_an_instant_in_the_session_zone():
    """Spark casts '2025-01-01 10:00:00' to TIMESTAMP in the session zone."""
    utc = split_condition("ts > '2025-01-01 10:00:00'", SCHEMA, session_zone="UTC")
    kolkata = split_condition("ts > '2025-01-01 10:00:00'", SCHEMA, session_zone="Asia/Kolkata")
    (a,), (b,) = utc.understood, kolkata.understood
    assert a.literal == dt.datetime(2025, 1, 1, 10, tzinfo=UTC)
    assert b.literal == dt.datetime(2025, 1, 1, 4, 30, tzinfo=UTC)
    unknown = split_condition("ts > '2025-01-01 10:00:00'", SCHEMA, session_zone=None)
    assert unknown.understood == []
    offset = split_condition("ts > '2025-01-01 10:00:00+01:00'", SCHEMA, session_zone=None)
    assert offset.understood[0].literal == dt.datetime(2025, 1, 1, 9, tzinfo=UTC)


def test_conditions_split_at_top_level_ands():
    found = split_condition("(i = 1 AND (s = 'a')) AND i % 2 = 1 AND s IS NULL", SCHEMA)
    assert [p.node is not None for p in found.conjuncts] == [True, True, False, True]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("nosuch = 1", "unknown column 'nosuch'"),
        ("i = = 1", "cannot parse"),
        ("   ", "empty"),
        ("i + 1", "not a condition"),
        ("I = -9223372036854775808", "out of range for column i"),
    ],
)
def test_bad_conditions_are_input_errors(text, words):
    with pytest.raises(InvalidInputError, match=words):
        split_condition(text, SCHEMA)


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
        {"b": pa.array([1, 2], pa.int32()), "ts": pa.array([1000, 2000], pa.timestamp("ns"))}
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


@pytest.mark.parametrize(
    ("array", "kind"),
    [
        (pa.array([1, 1000], pa.int16()), pa.int8()),  # a narrower schema: 1000 is no byte
        (pa.array([1, 1500], pa.timestamp("ns")), pa.timestamp("us")),  # nanoseconds lost
    ],
)
def test_conform_batch_never_wraps_or_truncates(array, kind):
    batch = pa.record_batch({"v": array})
    with pytest.raises(InvalidInputError, match="'v'"):
        conform_batch(batch, pa.schema([pa.field("v", kind)]))
