"""A parsed condition crosses to the data source as data: what arrives is what was parsed.

`scan --where` parses its condition once and hands the data source the understood conjuncts
in `partition/condition_data.py`'s JSON form (the `pruneCondition` option). Generated
conditions over every literal type (integers at their type's bounds, float32 values, decimals,
dates, wall times, instants in zones with daylight saving, in both folds) come back equal to
what the parser made; anything a hand could write wrong is one input error; and the data
source's options read it without parsing SQL at all.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.condition_data import decode, encode
from lancens_cli.partition.literals import zone
from lancens_cli.partition.predicate import (
    And,
    Between,
    Comparison,
    InList,
    IsNull,
    Not,
    Or,
    to_sql,
)
from lancens_cli.partition.spark_conditions import split_condition

SCHEMA = pa.schema(
    [
        ("i8", pa.int8()),
        ("u64", pa.uint64()),
        ("i64", pa.int64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(20, 4)),
        ("flag", pa.bool_()),
        ("name", pa.string()),
        ("day", pa.date32()),
        ("wall", pa.timestamp("us")),
        ("berlin", pa.timestamp("us", tz="Europe/Berlin")),
        ("india", pa.timestamp("us", tz="+05:30")),
        ("utc", pa.timestamp("us", tz="UTC")),
    ]
)


def _stamps(tz: str | None) -> st.SearchStrategy:
    naive = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))
    if tz is None:
        return naive
    return st.builds(
        lambda wall, fold: wall.replace(fold=fold, tzinfo=zone(tz)).astimezone(zone(tz)),
        naive,
        st.integers(0, 1),
    )


LITERALS = {
    "i8": st.integers(-128, 127),
    "u64": st.integers(0, 2**64 - 1),
    "i64": st.integers(-(2**63), 2**63 - 1),
    "f32": st.floats(width=32, allow_nan=False, allow_infinity=False),
    "f64": st.floats(allow_nan=False, allow_infinity=False),
    "dec": st.decimals(min_value=-(10**15), max_value=10**15, places=4).map(Decimal),
    "flag": st.booleans(),
    "name": st.text(max_size=12),
    "day": st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
    "wall": _stamps(None),
    "berlin": _stamps("Europe/Berlin"),
    "india": _stamps("+05:30"),
    "utc": _stamps("UTC"),
}


@st.composite
def atoms(draw):
    column = draw(st.sampled_from(sorted(LITERALS)))
    value = LITERALS[column]
    kind = draw(st.sampled_from(["cmp", "in", "between", "null"]))
    negated = draw(st.booleans())
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return Comparison(column, op, draw(value))
    if kind == "in":
        return InList(column, tuple(draw(st.lists(value, min_size=1, max_size=4))), negated)
    if kind == "between":
        return Between(column, draw(value), draw(value), negated)
    return IsNull(column, negated)


nodes = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: And(tuple(xs))),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: Or(tuple(xs))),
        inner.map(Not),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(nodes, min_size=1, max_size=3))
def test_what_is_encoded_decodes_equal_with_every_literal_typed_as_before(conjuncts):
    back = decode(encode(conjuncts), SCHEMA)
    assert back == conjuncts
    assert [to_sql(n) for n in back] == [to_sql(n) for n in conjuncts]
    for original, decoded in zip(_literals(conjuncts), _literals(back), strict=True):
        assert type(decoded) is type(original)
        if isinstance(original, dt.datetime):  # the same wall time in the column's zone
            assert decoded.replace(tzinfo=None) == original.replace(tzinfo=None)
            assert decoded.utcoffset() == original.utcoffset()


def _literals(items):
    for node in items:
        if isinstance(node, And | Or):
            yield from _literals(node.items)
        elif isinstance(node, Not):
            yield from _literals([node.item])
        elif isinstance(node, Comparison):
            yield node.literal
        elif isinstance(node, InList):
            yield from node.literals
        elif isinstance(node, Between):
            yield from (node.low, node.high)


@settings(max_examples=150, deadline=None)
@given(st.lists(nodes, min_size=1, max_size=3))
def test_a_parsed_condition_arrives_as_the_parser_made_it(conjuncts):
    """Text → parser → data → nodes: the same nodes as the parser's, so one parse suffices."""
    text = " AND ".join(f"({to_sql(n)})" for n in conjuncts)
    parsed = split_condition(text, SCHEMA, "lance", floats=True).understood
    assert decode(encode(parsed), SCHEMA) == parsed


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ("not json", "not JSON"),
        ("[]", "not a condition of format 1"),
        ('{"format": 2, "conjuncts": []}', "format 1"),
        ('{"format": 1}', "no list of conjuncts"),
        (
            '{"format": 1, "conjuncts": [{"column": "nope", "op": "=", "value": {"int": "1"}}]}',
            "column 'nope' is not in the schema",
        ),
        (
            '{"format": 1, "conjuncts": [{"column": "i8", "op": "=", "value": {"int": "300"}}]}',
            "column 'i8' (int8) cannot hold",
        ),
        (
            '{"format": 1, "conjuncts": [{"column": "i8", "op": "=", "value": {"string": "x"}}]}',
            "cannot hold",
        ),
        (
            '{"format": 1, "conjuncts": [{"column": "i8", "op": "~", "value": {"int": "1"}}]}',
            "'~' is not a comparison",
        ),
        (
            '{"format": 1, "conjuncts": [{"column": "f64", "op": "=", "value": {"float": "inf"}}]}',
            "cannot hold",
        ),
        (
            '{"format": 1, "conjuncts": [{"column": "wall", "op": "=",'
            ' "value": {"timestamp": "2024-01-01T00:00:00+01:00"}}]}',
            "cannot hold",
        ),
        (
            '{"format": 1, "conjuncts": [{"column": "utc", "op": "=",'
            ' "value": {"timestamp": "2024-01-01T00:00:00"}}]}',
            "cannot hold",
        ),
        ('{"format": 1, "conjuncts": [{"and": [{"const": true}]}]}', "two or more"),
        ('{"format": 1, "conjuncts": [{"column": "i8", "in": []}]}', "not a list of values"),
        ('{"format": 1, "conjuncts": [7]}', "7 is not a condition"),
        (
            '{"format": 1, "conjuncts": ['
            + '{"not": ' * 5000
            + '{"const": true}'
            + "}" * 5000
            + "]}",
            "nested too deeply",
        ),
    ],
    ids=lambda value: value[:60] if isinstance(value, str) else None,
)
def test_a_wrong_condition_is_one_input_error(data, words):
    with pytest.raises(InvalidInputError) as caught:
        decode(data, SCHEMA)
    message = caught.value.message
    assert message.startswith("option pruneCondition: ") and words in message, message
    assert "\n" not in message


def test_the_source_reads_the_parsed_condition_without_parsing_sql(monkeypatch):
    from lancens_cli.pipeline.read_plan import READ_OPTIONS, option_nodes
    from lancens_cli.pipeline.source_options import SourceOptions

    where = "i64 >= 5 AND name IN ('a', 'b') AND berlin < TIMESTAMP '2025-03-30 02:30:00+02:00'"
    parsed = split_condition(where, SCHEMA).understood
    options = {"root": "/nowhere", "pruneCondition": encode(parsed)}

    def no_parse(*args, **kwargs):
        raise AssertionError("the data source parsed SQL")

    monkeypatch.setattr(sqlglot, "parse_one", no_parse)
    assert option_nodes(SourceOptions.parse(options, READ_OPTIONS), SCHEMA) == parsed
    assert json.loads(options["pruneCondition"])["format"] == 1
