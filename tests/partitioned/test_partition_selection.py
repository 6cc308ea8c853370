"""Partition selection (the partitioning spec's "Partition Pruning", Appendix D).

The parser and renderer are checked construct by construct; the selection rules one by one; and
the promise that matters (a partition holding a matching row is never pruned) against brute
force over random rows, specs and predicates, through both the Python and the Lance SQL path.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import tempfile
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec_appendix import APPENDIX_A

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition import transforms
from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Between,
    Comparison,
    InList,
    IsNull,
    Node,
    Not,
    Or,
    evaluate,
    negation_normal_form,
    to_sql,
)
from lancens_cli.partition.predicate_parser import parse
from lancens_cli.partition.schema import with_field_ids
from lancens_cli.partition.selection import plan, selected
from lancens_cli.partition.spec import PartitionField, PartitionSpec, Transform, specs_from_metadata
from lancens_cli.schema_json import schema_from_json

UTC = dt.UTC

SCHEMA = with_field_ids(
    pa.schema(
        [
            ("i", pa.int64()),
            ("s", pa.string()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us")),
            ("tz", pa.timestamp("us", tz="America/New_York")),
            ("f", pa.float32()),
            ("dec", pa.decimal128(10, 2)),
            ("b", pa.bool_()),
            ("u8", pa.uint8()),
            ("My Col", pa.int32()),
            ("l", pa.list_(pa.int32())),
        ]
    )
)
IDS = {f.name: int(f.metadata[b"lance:field_id"]) for f in SCHEMA}
GONE = 99  # a source id no longer in the schema


def field(
    kind: str,
    *columns: str,
    n: int | None = None,
    w: int | None = None,
    source_ids: tuple[int, ...] | None = None,
    expression: str | None = None,
    result: pa.DataType | None = None,
    field_id: str = "f",
) -> PartitionField:
    """A partition field over named columns, its result type as transforms.py computes it."""
    ids = source_ids if source_ids is not None else tuple(IDS[c] for c in columns)
    if expression is not None:
        return PartitionField(field_id, ids, result, expression=expression)
    transform = Transform(kind, num_buckets=n, width=w)
    types = [SCHEMA.field(c).type for c in columns]
    kind_type = result if result is not None else transforms.result_type(transform, types)
    return PartitionField(field_id, ids, kind_type, transform=transform)


def version_filter(text: str, *fields: PartitionField) -> str:
    """The SQL of the one-version filter `text` gives under a spec of `fields`."""
    chosen = plan(parse(text, SCHEMA), [PartitionSpec(1, tuple(fields))], SCHEMA)
    return to_sql(chosen.versions[0].filter)


def part_value(f: PartitionField, *values: Any) -> Any:
    """The transform's own value, so these tests do not restate its arithmetic."""
    kinds = [SCHEMA.field(c).type for c in _names(f)]
    return transforms.value_of(f, list(values), kinds)


def _names(f: PartitionField) -> list[str]:
    by_id = {v: k for k, v in IDS.items()}
    return [by_id[s] for s in f.source_ids]


# --------------------------------------------------------------------------- parser

D = dt.date(2025, 12, 10)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("i = 5", Comparison("i", "=", 5)),
        ("i != 5", Comparison("i", "!=", 5)),
        ("i <> 5", Comparison("i", "!=", 5)),
        ("i < -5", Comparison("i", "<", -5)),
        ("i <= 1e3", Comparison("i", "<=", 1000)),
        ("i > 5.0", Comparison("i", ">", 5)),
        ("i >= 5", Comparison("i", ">=", 5)),
        ("5 < i", Comparison("i", ">", 5)),
        ("5 >= i", Comparison("i", "<=", 5)),
        ("'a' = s", Comparison("s", "=", "a")),
        ("s = 'it''s'", Comparison("s", "=", "it's")),
        ("i IN (1, 2)", InList("i", (1, 2))),
        ("i NOT IN (1)", InList("i", (1,), negated=True)),
        ("i BETWEEN 1 AND 3", Between("i", 1, 3)),
        ("i NOT BETWEEN 1 AND 3", Between("i", 1, 3, negated=True)),
        ("s IS NULL", IsNull("s")),
        ("s IS NOT NULL", IsNull("s", negated=True)),
        ("NOT (i = 1)", Not(Comparison("i", "=", 1))),
        ("NOT i IN (1)", InList("i", (1,), negated=True)),
        ("b = TRUE", Comparison("b", "=", True)),
        ("b <> false", Comparison("b", "!=", False)),
        ("d = DATE '2025-12-10'", Comparison("d", "=", D)),
        ("d = '2025-12-10'", Comparison("d", "=", D)),
        ("d = CAST('2025-12-10' AS DATE)", Comparison("d", "=", D)),
        ("d = TIMESTAMP '2025-12-10 00:00:00'", Comparison("d", "=", D)),
        (
            "ts = TIMESTAMP '2025-12-10 10:00:00'",
            Comparison("ts", "=", dt.datetime(2025, 12, 10, 10)),
        ),
        (
            "ts = '2025-12-10T10:00:00.25'",
            Comparison("ts", "=", dt.datetime(2025, 12, 10, 10, 0, 0, 250000)),
        ),
        ("ts = '2025-12-10 12:00:00+02:00'", Comparison("ts", "=", dt.datetime(2025, 12, 10, 10))),
        ("ts >= DATE '2025-12-10'", Comparison("ts", ">=", dt.datetime(2025, 12, 10))),
        ("dec < 1.005", Comparison("dec", "<", Decimal("1.005"))),
        ("f = 0.5", Comparison("f", "=", 0.5)),
        ('"My Col" = 1', Comparison("My Col", "=", 1)),
        ("`My Col` = 1", Comparison("My Col", "=", 1)),
        ("I = 1", Comparison("i", "=", 1)),
        ("l IS NULL", IsNull("l")),
        (
            "i = 1 AND (s = 'a' OR s = 'b')",
            And(
                (
                    Comparison("i", "=", 1),
                    Or((Comparison("s", "=", "a"), Comparison("s", "=", "b"))),
                )
            ),
        ),
    ],
)
def test_parse_constructs(text: str, expected: Node) -> None:
    assert parse(text, SCHEMA) == expected


def test_parse_typed_literals() -> None:
    assert parse("f = 0.1", SCHEMA).literal == pa.scalar(0.1, pa.float32()).as_py()
    stamp = parse("tz = '2025-06-01 12:00:00'", SCHEMA).literal
    assert stamp.astimezone(UTC) == dt.datetime(2025, 6, 1, 16, tzinfo=UTC)  # wall time in NY
    stamp = parse("tz = '2025-06-01 12:00:00Z'", SCHEMA).literal
    assert stamp.astimezone(UTC) == dt.datetime(2025, 6, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("i = 1 AND", "cannot parse"),
        ("abs(i) = 1", "function call"),
        ("i = abs(-1)", "function call"),
        ("i = s", "two columns"),
        ("i + 1 = 2", "arithmetic"),
        ("i = 1 + 1", "arithmetic"),
        ("nope = 1", "unknown column 'nope'"),
        ("s = 5", "quoted string"),
        ("i = 'abc'", "takes a number"),
        ("d = 'xyz'", "'xyz' is not a date"),
        ("d = '2025-02-30'", "not a date"),
        ("ts = 'noon'", "not a timestamp"),
        ("d = TIMESTAMP '2025-01-01 10:00:00'", "not a whole date"),
        ("tz = '2025-11-02 01:30:00'", "ambiguous or skipped"),
        ("s LIKE 'a%'", "LIKE"),
        ("i = NULL", "IS NULL"),
        ("i", "bare column"),
        ("i IN (SELECT 1)", "not a query"),
        ("u8 = 300", "out of range"),
        ("i = 1.5", "takes an integer"),
        ("f = 1e40", "out of range"),
        ("b = 1", "TRUE or FALSE"),
        ("l = 1", "cannot be compared"),
        ("i IS TRUE", "IS [NOT] NULL"),
        ("t.i = 1", "qualified"),
        ("1 = 1", "must be a column"),
        ("ts = INTERVAL '1' DAY", "Interval"),
        ("SELECT 1", "Select"),
    ],
)
def test_parse_refuses(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse(text, SCHEMA)
    assert message in caught.value.message
    assert "\n" not in caught.value.message


@pytest.mark.parametrize(
    ("text", "sql"),
    [
        ("5 < i", "i > 5"),
        ("i != 1", "i <> 1"),
        ("i NOT IN (1, 2)", "i NOT IN (1, 2)"),
        ("NOT (i = 1 OR s = 'a')", "NOT (i = 1 OR s = 'a')"),
        ("i = 1 AND (s = 'a' OR s IS NULL)", "i = 1 AND (s = 'a' OR s IS NULL)"),
        ("i = 1 AND s = 'a' OR i = 2", "(i = 1 AND s = 'a') OR i = 2"),
        (
            "d BETWEEN '2025-01-01' AND '2025-02-01'",
            "d BETWEEN DATE '2025-01-01' AND DATE '2025-02-01'",
        ),
        ("ts > '2025-01-01 10:00'", "ts > TIMESTAMP '2025-01-01 10:00:00'"),
        ("dec = 1.5", "`dec` = CAST('1.5' AS DECIMAL(2, 1))"),
        ('"My Col" = 1', "`My Col` = 1"),
        ("s = 'it''s'", "s = 'it''s'"),
    ],
)
def test_to_sql(text: str, sql: str) -> None:
    node = parse(text, SCHEMA)
    assert to_sql(node) == sql
    assert parse(sql, SCHEMA) == node


def test_evaluate_three_valued() -> None:
    null_row = {"i": None}
    assert evaluate(parse("i = 1", SCHEMA), null_row) is None
    assert evaluate(parse("NOT (i = 1)", SCHEMA), null_row) is None
    assert evaluate(parse("i IN (1, 2)", SCHEMA), null_row) is None
    assert evaluate(parse("i NOT BETWEEN 1 AND 2", SCHEMA), null_row) is None
    assert evaluate(parse("i IS NULL", SCHEMA), null_row) is True
    assert evaluate(parse("i = 1 AND s = 'a'", SCHEMA), {"i": 2, "s": None}) is False
    assert evaluate(parse("i = 1 OR s = 'a'", SCHEMA), {"i": 1, "s": None}) is True
    assert evaluate(parse("i = 1 OR s = 'a'", SCHEMA), {"i": 2, "s": None}) is None
    assert evaluate(parse("i NOT IN (1, 2)", SCHEMA), {"i": 3}) is True
    assert evaluate(parse("i NOT BETWEEN 1 AND 2", SCHEMA), {"i": 2}) is False


def test_negation_normal_form() -> None:
    def nnf(text: str) -> str:
        return to_sql(negation_normal_form(parse(text, SCHEMA)))

    assert nnf("NOT (i < 5)") == "i >= 5"
    assert nnf("NOT (i = 1 OR NOT s <> 'a')") == "i <> 1 AND s <> 'a'"
    assert nnf("i NOT IN (1, 2)") == "i <> 1 AND i <> 2"
    assert nnf("NOT (i NOT IN (1, 2))") == "i IN (1, 2)"
    assert nnf("i NOT BETWEEN 1 AND 5") == "i < 1 OR i > 5"
    assert nnf("NOT (s IS NULL AND i IS NOT NULL)") == "s IS NOT NULL OR i IS NULL"


# --------------------------------------------------------------------------- Appendix D

APPENDIX_SCHEMA = schema_from_json(APPENDIX_A["schema"])
APPENDIX_SPECS = specs_from_metadata(
    {k: json.dumps(v) for k, v in APPENDIX_A.items() if k != "schema"}
)
MANIFEST_TYPES = {
    "partition_field_event_date": pa.date32(),
    "partition_field_event_year": pa.int32(),
    "partition_field_country": pa.string(),
}


def _appendix_c_rows() -> list[dict[str, Any]]:
    """Appendix C's rows, plus tables the Appendix D query must not return."""

    def row(object_id: str, kind: str, date: dt.date | None, year: int | None, country: str | None):
        return {
            "object_id": object_id,
            "object_type": kind,
            "partition_field_event_date": date,
            "partition_field_event_year": year,
            "partition_field_country": country,
        }

    return [
        row("v1", "namespace", None, None, None),
        row("v1$k7m2n9p4q8r5s3t6", "namespace", D, None, None),
        row("v1$k7m2n9p4q8r5s3t6$dataset", "table", D, None, None),
        row("v1$w1x2y3z4a5b6c7d8$dataset", "table", dt.date(2025, 12, 11), None, None),
        row("v2", "namespace", None, None, None),
        row("v2$e9f0g1h2i3j4k5l6", "namespace", None, 2025, None),
        row("v2$e9f0g1h2i3j4k5l6$m7n8o9p0q1r2s3t4", "namespace", None, 2025, "US"),
        row("v2$e9f0g1h2i3j4k5l6$m7n8o9p0q1r2s3t4$dataset", "table", None, 2025, "US"),
        row("v2$e9f0g1h2i3j4k5l6$aaaaaaaaaaaaaaaa$dataset", "table", None, 2025, "FR"),
        row("v2$bbbbbbbbbbbbbbbb$cccccccccccccccc$dataset", "table", None, 2024, "US"),
        row("v3$dddddddddddddddd$dataset", "table", None, None, None),  # no such spec
    ]


def _lance_kept(rows: list[dict[str, Any]], types: dict[str, pa.DataType], where: str) -> set[str]:
    """object_ids a Lance `__manifest`-like table returns for `where`."""
    import lance

    schema = pa.schema([("object_id", pa.string()), ("object_type", pa.string()), *types.items()])
    with tempfile.TemporaryDirectory() as root:
        dataset = lance.write_dataset(pa.Table.from_pylist(rows, schema=schema), f"{root}/m")
        return set(dataset.to_table(filter=where, columns=["object_id"]).column(0).to_pylist())


def test_appendix_d() -> None:
    predicate = parse("event_date = '2025-12-10' AND country = 'US'", APPENDIX_SCHEMA)
    chosen = plan(predicate, APPENDIX_SPECS, APPENDIX_SCHEMA)
    assert chosen.manifest_filter() == (
        "object_type = 'table' AND ("
        "(object_id LIKE 'v1$%' AND partition_field_event_date = DATE '2025-12-10') OR "
        "(object_id LIKE 'v2$%' AND partition_field_event_year = 2025 AND "
        "partition_field_country = 'US'))"
    )
    v1, v2 = chosen.versions
    assert to_sql(v1.filter) == "partition_field_event_date = DATE '2025-12-10'"
    assert v1.residual == "country = 'US'"  # v1 has no country partition: the scan applies it
    assert [to_sql(p) for p in v1.pushed] == ["event_date = DATE '2025-12-10'"]
    assert to_sql(v2.filter) == (
        "partition_field_event_year = 2025 AND partition_field_country = 'US'"
    )
    assert v2.residual == "event_date = DATE '2025-12-10'"  # the year only narrows it
    expected = {
        "v1$k7m2n9p4q8r5s3t6$dataset",
        "v2$e9f0g1h2i3j4k5l6$m7n8o9p0q1r2s3t4$dataset",
    }
    rows = _appendix_c_rows()
    assert {r["object_id"] for r in selected(chosen, rows)} == expected
    assert _lance_kept(rows, MANIFEST_TYPES, chosen.manifest_filter()) == expected


def test_no_predicate_and_nothing_kept() -> None:
    everything = plan(None, APPENDIX_SPECS, APPENDIX_SCHEMA)
    assert everything.manifest_filter() == (
        "object_type = 'table' AND ((object_id LIKE 'v1$%') OR (object_id LIKE 'v2$%'))"
    )
    assert all(v.filter == TRUE and v.residual is None for v in everything.versions)
    nothing = plan(parse("id = 1", APPENDIX_SCHEMA), [], APPENDIX_SCHEMA)
    assert nothing.manifest_filter() == "object_type = 'table' AND false"
    empty = plan(
        parse("event_date BETWEEN '2025-03-01' AND '2025-01-01'", APPENDIX_SCHEMA),
        [PartitionSpec(1, (field("month", source_ids=(1,), result=pa.int32()),))],
        APPENDIX_SCHEMA,
    )
    assert empty.versions[0].filter == FALSE
    assert empty.manifest_filter() == "object_type = 'table' AND false"
    rows = _appendix_c_rows()
    assert selected(empty, rows) == []
    assert _lance_kept(rows, MANIFEST_TYPES, empty.manifest_filter()) == set()


# --------------------------------------------------------------------------- rules

IDENT_I = field("identity", "i")
YEAR_D = field("year", "d")
MONTH_D = field("month", "d")
DAY_TS = field("day", "ts")
HOUR_TS = field("hour", "ts")
BUCKET_I = field("bucket", "i", n=4)
MULTI_IS = field("multi_bucket", "i", "s", n=4)
TRUNC_I = field("truncate", "i", w=10)
TRUNC_S = field("truncate", "s", w=2)
EXPR_I = field("", "i", expression="abs(col0) % 4", result=pa.int64())


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        # identity: every operator carries over
        ("i < 5", [IDENT_I], "partition_field_f < 5"),
        ("i <> 5", [IDENT_I], "partition_field_f <> 5"),
        ("i IN (1, 2)", [IDENT_I], "partition_field_f IN (1, 2)"),
        ("i BETWEEN 1 AND 2", [IDENT_I], "partition_field_f BETWEEN 1 AND 2"),
        ("i IS NULL", [IDENT_I], "partition_field_f IS NULL"),
        ("NOT (i >= 5)", [IDENT_I], "partition_field_f < 5"),
        ("i NOT IN (1, 2)", [IDENT_I], "partition_field_f <> 1 AND partition_field_f <> 2"),
        ("i NOT BETWEEN 1 AND 5", [IDENT_I], "partition_field_f < 1 OR partition_field_f > 5"),
        ("i = 1 OR s = 'a'", [IDENT_I], "true"),
        ("s = 'a'", [IDENT_I], "true"),
        # year and truncate are monotone
        ("d = '2025-03-01'", [YEAR_D], "partition_field_f = 2025"),
        ("d < '2025-03-01'", [YEAR_D], "partition_field_f <= 2025"),
        ("d > '2025-03-01'", [YEAR_D], "partition_field_f >= 2025"),
        ("d <> '2025-03-01'", [YEAR_D], "true"),
        (
            "d BETWEEN '2024-05-01' AND '2025-02-01'",
            [YEAR_D],
            "partition_field_f BETWEEN 2024 AND 2025",
        ),
        ("d IN ('2024-05-01', '2024-06-01')", [YEAR_D], "partition_field_f = 2024"),
        ("d IS NOT NULL", [YEAR_D], "partition_field_f IS NOT NULL"),
        ("i < 15", [TRUNC_I], f"partition_field_f <= {part_value(TRUNC_I, 15)}"),
        ("i > -1", [TRUNC_I], f"partition_field_f >= {part_value(TRUNC_I, -1)}"),
        ("s >= 'abc'", [TRUNC_S], "partition_field_f >= 'ab'"),
        # month / day / hour repeat: only =, IN and short closed ranges
        ("d = '2025-03-01'", [MONTH_D], "partition_field_f = 3"),
        ("d < '2025-03-01'", [MONTH_D], "true"),
        ("d BETWEEN '2025-01-30' AND '2025-03-02'", [MONTH_D], "partition_field_f IN (1, 2, 3)"),
        ("d >= '2025-01-30' AND d < '2025-02-02'", [MONTH_D], "partition_field_f IN (1, 2)"),
        ("d BETWEEN '2024-01-30' AND '2025-03-02'", [MONTH_D], "true"),
        ("d >= '2025-01-30'", [MONTH_D], "true"),
        (
            "ts BETWEEN '2025-01-31 23:00:00' AND '2025-02-01 01:00:00'",
            [DAY_TS],
            "partition_field_f IN (31, 1)",
        ),
        (
            "ts >= '2025-01-01 22:30:00' AND ts <= '2025-01-02 00:10:00'",
            [HOUR_TS],
            "partition_field_f IN (22, 23, 0)",
        ),
        ("ts BETWEEN '2025-01-01 00:00:00' AND '2025-01-02 00:00:00'", [HOUR_TS], "true"),
        # hashes: = and IN only
        ("i = 7", [BUCKET_I], f"partition_field_f = {part_value(BUCKET_I, 7)}"),
        ("i < 7", [BUCKET_I], "true"),
        ("i <> 7", [BUCKET_I], "true"),
        ("i IS NULL", [BUCKET_I], "partition_field_f IS NULL"),
        ("i = 5", [EXPR_I], "partition_field_f = 1"),
        ("i IN (5, -5, 2)", [EXPR_I], "partition_field_f IN (1, 2)"),
        ("i IS NULL", [EXPR_I], "true"),
        # multi-column fields need every source bound in one AND group
        ("i = 1 AND s = 'a'", [MULTI_IS], f"partition_field_f = {part_value(MULTI_IS, 1, 'a')}"),
        ("i = 1", [MULTI_IS], "true"),
        ("i = 1 OR s = 'a'", [MULTI_IS], "true"),
        ("i = 1 AND s <> 'a'", [MULTI_IS], "true"),
        ("i IS NULL", [MULTI_IS], "true"),
        ("i IS NOT NULL", [MULTI_IS], "partition_field_f IS NOT NULL"),
    ],
)
def test_rules(text: str, fields: list[PartitionField], expected: str) -> None:
    assert version_filter(text, *fields) == expected


def test_multi_column_combinations() -> None:
    text = "(i = 1 OR i = 2) AND s IN ('a', 'b') AND i <> 3"
    values = sorted({part_value(MULTI_IS, i, s) for i in (1, 2) for s in ("a", "b")})
    got = plan(parse(text, SCHEMA), [PartitionSpec(1, (MULTI_IS,))], SCHEMA).versions[0]
    assert isinstance(got.filter, Comparison | InList)
    found = [got.filter.literal] if isinstance(got.filter, Comparison) else got.filter.literals
    assert sorted(found) == values
    assert [to_sql(p) for p in got.pushed] == ["i = 1 OR i = 2", "s IN ('a', 'b')"]
    assert got.residual == to_sql(parse(text, SCHEMA))  # a hash enforces nothing exactly
    too_many = " AND ".join(
        [
            f"i IN ({', '.join(str(k) for k in range(40))})",
            f"s IN ({', '.join(repr(str(k)) for k in range(30))})",
        ]
    )
    assert version_filter(too_many, MULTI_IS) == "true"  # 1,200 combinations: no pruning


def test_removed_source_is_never_pruned() -> None:
    gone = field("identity", source_ids=(GONE,), result=pa.int64())
    multi = field("multi_bucket", n=4, source_ids=(IDS["i"], GONE), result=pa.int32(), field_id="g")
    assert version_filter("i = 1 AND i IS NULL", gone, multi) == "true"


def test_untransformable_literal_is_not_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> Any:
        raise InvalidInputError("no")

    monkeypatch.setattr(transforms, "value_of", refuse)
    year, hashed = field("year", "d", field_id="y"), field("bucket", "i", n=4, field_id="b")
    assert version_filter("d = '2025-01-01' AND i = 1", year, hashed) == "true"


def test_literal_outside_partition_type_is_not_pruned() -> None:
    narrow = field("identity", "i", result=pa.int32())  # the column was promoted to int64 later
    chosen = plan(parse("i = 9999999999", SCHEMA), [PartitionSpec(1, (narrow,))], SCHEMA)
    assert chosen.versions[0].filter == TRUE
    assert chosen.versions[0].residual == "i = 9999999999"
    assert version_filter("i = 5", narrow) == "partition_field_f = 5"


def test_residual_and_pushed_per_version() -> None:
    text = "i IN (1, 2) AND s = 'x' AND NOT (i = 3 OR d < '2025-01-01')"
    spec1 = PartitionSpec(1, (IDENT_I,))
    spec2 = PartitionSpec(2, (field("year", "d", field_id="y"),))
    spec3 = PartitionSpec(3, (field("identity", "b", field_id="b"),))
    v1, v2, v3 = plan(parse(text, SCHEMA), [spec1, spec2, spec3], SCHEMA).versions
    # identity(i) enforces the i parts exactly; the date part stays for the scan
    assert v1.residual == "s = 'x' AND d >= DATE '2025-01-01'"
    assert [to_sql(p) for p in v1.pushed] == ["i IN (1, 2)", "NOT (i = 3 OR d < DATE '2025-01-01')"]
    assert v2.residual == to_sql(parse(text, SCHEMA))
    assert to_sql(v2.filter) == "partition_field_y >= 2025"
    assert v3.filter == TRUE and v3.pushed == () and v3.residual == to_sql(parse(text, SCHEMA))


def test_zoned_timestamps_render_as_lance_reads_them() -> None:
    ident = field("identity", "tz", field_id="tz")
    hour = field("hour", "tz", field_id="h")
    chosen = plan(
        parse("tz = '2025-06-01 12:00:00'", SCHEMA), [PartitionSpec(1, (ident, hour))], SCHEMA
    )
    assert to_sql(chosen.versions[0].filter) == (
        "partition_field_tz = TIMESTAMP '2025-06-01 12:00:00' AND partition_field_h = 12"
    )
    kind = pa.timestamp("us", tz="America/New_York")
    noon = dt.datetime(2025, 6, 1, 16, tzinfo=UTC)
    rows = [
        {
            "object_id": "v1$a$dataset",
            "object_type": "table",
            "partition_field_tz": noon,
            "partition_field_h": 12,
        },
        {
            "object_id": "v1$b$dataset",
            "object_type": "table",
            "partition_field_tz": noon + dt.timedelta(hours=1),
            "partition_field_h": 13,
        },
    ]
    types = {"partition_field_tz": kind, "partition_field_h": pa.int32()}
    assert _lance_kept(rows, types, chosen.manifest_filter()) == {"v1$a$dataset"}
    assert {r["object_id"] for r in selected(chosen, rows)} == {"v1$a$dataset"}


# --------------------------------------------------------------------------- usefulness


@pytest.mark.parametrize("kind", ["identity", "bucket"])
def test_equality_keeps_one_partition(kind: str) -> None:
    f = field(kind, "i", n=8 if kind == "bucket" else None)
    rows = [{"i": k} for k in range(40)]
    scenario = _Scenario([PartitionSpec(1, (f,))], rows, [0] * len(rows))
    chosen = plan(parse("i = 7", SCHEMA), scenario.specs, SCHEMA)
    kept = {r["object_id"] for r in selected(chosen, scenario.manifest)}
    assert len(scenario.tables()) == (40 if kind == "identity" else 8)
    assert kept == {scenario.owner[7]}
    assert _lance_kept(scenario.manifest, scenario.types, chosen.manifest_filter()) == kept


# --------------------------------------------------------------------------- brute force

COLUMNS = ("i", "s", "d", "ts")
DOMAIN: dict[str, list[Any]] = {
    "i": list(range(-12, 13)),
    "s": ["", "a", "ab", "abc", "b", "ba", "bz", "é", "éa", "z"],
    "d": [dt.date(2024, 12, 30) + dt.timedelta(days=k) for k in range(5)]
    + [dt.date(2025, 2, 27) + dt.timedelta(days=k) for k in range(4)]
    + [dt.date(2025, 6, 30), dt.date(2025, 7, 1)],
    "ts": [
        base + dt.timedelta(minutes=m)
        for base in (
            dt.datetime(2024, 12, 31, 22),
            dt.datetime(2025, 2, 28, 22),
            dt.datetime(2025, 7, 1),
        )
        for m in range(0, 241, 25)
    ]
    + [dt.datetime(2025, 1, 1, 0, 0, 0, 1)],
}


def _catalogue() -> list[PartitionField]:
    """Every field the random specs draw from; one field_id per definition, as the spec says."""
    out = [field("identity", c, field_id=f"id_{c}") for c in COLUMNS]
    out += [field(t, c, field_id=f"{t}_{c}") for t in ("year", "month", "day") for c in ("d", "ts")]
    out.append(field("hour", "ts", field_id="hour_ts"))
    out += [field("bucket", c, n=n, field_id=f"b{n}_{c}") for c in COLUMNS for n in (1, 3)]
    for columns in (("i", "s"), ("s", "i"), ("i", "d"), ("s", "ts"), ("d", "ts"), ("s", "d", "i")):
        out.append(field("multi_bucket", *columns, n=5, field_id="mb_" + "_".join(columns)))
    out += [field("truncate", "i", w=w, field_id=f"tr{w}_i") for w in (1, 5, 10)]
    out += [field("truncate", "s", w=w, field_id=f"tr{w}_s") for w in (1, 2)]
    out.append(field("", "i", expression="abs(col0) % 4", result=pa.int64(), field_id="ex_i"))
    out.append(field("", "s", expression="upper(col0)", result=pa.string(), field_id="ex_s"))
    concat = "concat(col0, '-', col1)"
    out.append(field("", "s", "i", expression=concat, result=pa.string(), field_id="ex_si"))
    out.append(field("identity", source_ids=(GONE,), result=pa.int64(), field_id="gone"))
    return out


CATALOGUE = _catalogue()


class _Scenario:
    """Rows written under spec versions, grouped into partition tables as a writer would."""

    def __init__(self, specs: list[PartitionSpec], rows: list[dict[str, Any]], versions: list[int]):
        self.specs, self.rows = specs, rows
        arrays = {c: pa.array([r.get(c) for r in rows], SCHEMA.field(c).type) for c in COLUMNS}
        by_id = {IDS[c]: arrays[c] for c in COLUMNS}
        fields = {f.field_id: f for s in specs for f in s.fields}
        values = {
            fid: transforms.apply_field(
                f, [by_id.get(s) for s in f.source_ids], len(rows)
            ).to_pylist()
            for fid, f in fields.items()
        }
        self.types = {f.column: f.result_type for f in fields.values()}
        self.owner: list[str] = []
        tables: dict[tuple[Any, ...], dict[str, Any]] = {}
        for k, version in enumerate(versions):
            spec = specs[version]
            key = (spec.id, *(_key(values[f.field_id][k]) for f in spec.fields))
            if key not in tables:
                partition = {f.column: values[f.field_id][k] for f in spec.fields}
                tables[key] = {"object_id": f"v{spec.id}$p{len(tables)}$dataset", **partition}
            self.owner.append(tables[key]["object_id"])
        self.manifest = [_manifest_row(t, self.types, "table") for t in tables.values()]
        # namespace rows carry partition values too (Appendix C); they are never tables to scan
        self.manifest += [
            _manifest_row({**t, "object_id": t["object_id"][:-8]}, self.types, "namespace")
            for t in tables.values()
        ]

    def tables(self) -> set[str]:
        return set(self.owner)


def _key(value: Any) -> Any:
    return (type(value).__name__, repr(value))


def _manifest_row(table: dict[str, Any], types: dict[str, Any], kind: str) -> dict[str, Any]:
    return {"object_type": kind, **{c: None for c in types}, **table}


def _literal(column: str) -> st.SearchStrategy[Any]:
    return st.sampled_from(DOMAIN[column])


def _atom(columns: tuple[str, ...]) -> st.SearchStrategy[Node]:
    return _atoms(st.sampled_from(columns))


@st.composite
def _atoms(draw: Any, columns: st.SearchStrategy[str]) -> Node:
    column = draw(columns)
    shape = draw(st.sampled_from(["cmp", "cmp", "eq", "in", "between", "null"]))
    if shape == "eq":
        return Comparison(column, "=", draw(_literal(column)))
    if shape == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return Comparison(column, op, draw(_literal(column)))
    if shape == "in":
        values = draw(st.lists(_literal(column), min_size=1, max_size=4, unique=True))
        return InList(column, tuple(values), draw(st.booleans()))
    if shape == "between":
        low, high = draw(_literal(column)), draw(_literal(column))
        if draw(st.integers(0, 3)):  # mostly well-ordered ranges, sometimes empty ones
            low, high = min(low, high), max(low, high)
        return Between(column, low, high, draw(st.booleans()))
    return IsNull(column, draw(st.booleans()))


@functools.cache  # building strategies costs more than drawing from them
def predicates(columns: tuple[str, ...]) -> st.SearchStrategy[Node]:
    """Half arbitrary trees, half AND / OR groups of the atoms chosen can use."""

    def groups(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        two_or_three = st.lists(inner, min_size=2, max_size=3)
        ands = two_or_three.map(lambda xs: And(tuple(xs)))
        ors = two_or_three.map(lambda xs: Or(tuple(xs)))
        return st.one_of(ands, ors, ands, ors, inner.map(Not))

    arbitrary = st.recursive(_atom(columns), groups, max_leaves=6)
    usable = _atom(columns).filter(_prunable)
    clause = st.one_of(usable, usable, st.lists(usable, min_size=2, max_size=2).map(_or))
    conjunction = st.lists(clause, min_size=1, max_size=3).map(_and)
    grouped = st.one_of(conjunction, st.lists(conjunction, min_size=2, max_size=2).map(_or))
    return st.one_of(arbitrary, grouped)


def _prunable(node: Node) -> bool:
    if isinstance(node, Comparison):
        return node.op != "!="
    return isinstance(node, IsNull) or not node.negated


def _and(items: list[Node]) -> Node:
    return items[0] if len(items) == 1 else And(tuple(items))


def _or(items: list[Node]) -> Node:
    return Or(tuple(items))


def _literals(node: Node, column: str) -> list[Any]:
    """The literals a predicate compares `column` with (rows drawn near them match often)."""
    if isinstance(node, And | Or):
        return [v for item in node.items for v in _literals(item, column)]
    if isinstance(node, Not):
        return _literals(node.item, column)
    if isinstance(node, IsNull) or node.column != column:
        return []
    if isinstance(node, Comparison):
        return [node.literal]
    if isinstance(node, InList):
        return list(node.literals)
    return [node.low, node.high]


def _value(column: str) -> st.SearchStrategy[Any]:
    return st.sampled_from([None, *DOMAIN[column]])


def _touches(f: PartitionField, columns: tuple[str, ...]) -> bool:
    return any(IDS.get(c) in f.source_ids for c in columns)


@functools.cache
def _spec_fields(columns: tuple[str, ...]) -> st.SearchStrategy[list[PartitionField]]:
    relevant = st.sampled_from([f for f in CATALOGUE if _touches(f, columns)])
    pick = st.one_of(relevant, relevant, st.sampled_from(CATALOGUE))
    return st.lists(pick, min_size=1, max_size=3, unique_by=lambda f: f.field_id)


_PAIRS = st.lists(st.sampled_from(COLUMNS), min_size=2, max_size=2, unique=True).map(tuple)
COLUMN_SETS = st.one_of(st.sampled_from(COLUMNS).map(lambda c: (c,)), _PAIRS, _PAIRS)


def _rows(predicate: Node) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Rows whose values are often the predicate's own literals, sometimes NULL."""
    values = {c: [None, *_literals(predicate, c) * 3, *DOMAIN[c]] for c in COLUMNS}
    row = st.fixed_dictionaries({c: st.sampled_from(v) for c, v in values.items()})
    return st.lists(row, min_size=6, max_size=30)


@st.composite
def scenarios(draw: Any) -> tuple[_Scenario, Node]:
    """Predicates over one or two columns, specs mostly on those columns (or chosen is moot)."""
    columns = draw(COLUMN_SETS)
    chosen = draw(st.lists(_spec_fields(columns), min_size=1, max_size=3))
    specs = [PartitionSpec(k + 1, tuple(fs)) for k, fs in enumerate(chosen)]
    predicate = draw(predicates(columns))
    rows = draw(_rows(predicate))
    versions = [draw(st.integers(0, len(specs) - 1)) for _ in rows]
    return _Scenario(specs, rows, versions), predicate


def _check(scenario: _Scenario, generated: Node) -> Any:
    """No matching row's partition is pruned; kept partitions + residual = the predicate."""
    predicate = parse(to_sql(generated), SCHEMA)  # through the text form, as users give it
    chosen = plan(predicate, scenario.specs, SCHEMA)
    kept = {r["object_id"] for r in selected(chosen, scenario.manifest)}
    assert kept <= scenario.tables()
    residuals = {
        v.spec_id: TRUE if v.residual is None else parse(v.residual, SCHEMA)
        for v in chosen.versions
    }
    for k, row in enumerate(scenario.rows):
        truth = evaluate(predicate, row)
        assert truth == evaluate(generated, row)
        if truth is True:
            assert scenario.owner[k] in kept, (to_sql(predicate), row, chosen.manifest_filter())
        if scenario.owner[k] in kept:
            residual = residuals[int(scenario.owner[k][1:].split("$")[0])]
            assert (truth is True) == (evaluate(residual, row) is True), (
                to_sql(predicate),
                to_sql(residual),
                row,
            )
    return chosen, kept


SETTINGS = {
    "derandomize": True,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@settings(max_examples=600, **SETTINGS)
@given(scenarios())
def test_never_prunes_a_matching_row(case: tuple[_Scenario, Node]) -> None:
    _check(*case)


@settings(max_examples=60, **SETTINGS)
@given(scenarios())
def test_lance_sql_keeps_what_python_keeps(case: tuple[_Scenario, Node]) -> None:
    scenario, generated = case
    chosen, kept = _check(scenario, generated)
    assert _lance_kept(scenario.manifest, scenario.types, chosen.manifest_filter()) == kept


@settings(max_examples=200, **SETTINGS)
@given(predicates(COLUMNS), st.fixed_dictionaries({c: _value(c) for c in COLUMNS}))
def test_negation_normal_form_is_exact(predicate: Node, row: dict[str, Any]) -> None:
    assert evaluate(negation_normal_form(predicate), row) == evaluate(predicate, row)


def test_catalogue_fields_all_apply() -> None:
    rows = [{c: DOMAIN[c][k % len(DOMAIN[c])] for c in COLUMNS} for k in range(12)]
    scenario = _Scenario([PartitionSpec(1, tuple(CATALOGUE))], rows, [0] * len(rows))
    assert len(scenario.tables()) > 1


# --------------------------------------------------------------------------- focused rules

TIME_FIELDS = [
    field(t, c, field_id=f"{t}_{c}") for t in ("year", "month", "day") for c in ("d", "ts", "tz")
]
TIME_FIELDS += [field("hour", c, field_id=f"hour_{c}") for c in ("ts", "tz")]
NEW_YORK = ZoneInfo("America/New_York")  # the `tz` column's zone; transforms read wall time
MULTI_FIELDS = [f for f in CATALOGUE if len(f.source_ids) > 1 and set(_names(f)) == {"i", "s"}]


def _kept_by_filter(f: PartitionField, predicate: Node, values: list[Any]) -> list[bool]:
    """Whether each row (the source values of `f`) has its partition kept by `predicate`."""
    version = plan(predicate, [PartitionSpec(1, (f,))], SCHEMA).versions[0]
    sources = [
        pa.array([v[k] for v in values], SCHEMA.field(c).type) for k, c in enumerate(_names(f))
    ]
    partition = transforms.apply_field(f, sources, len(values)).to_pylist()
    return [evaluate(version.filter, {f.column: p}) is True for p in partition]


@st.composite
def _time_ranges(draw: Any) -> tuple[PartitionField, Node, list[Any]]:
    """Short and long closed ranges, as BETWEEN or as two bounds, and values in and around."""
    f = draw(st.sampled_from(TIME_FIELDS))
    column = _names(f)[0]
    minutes = draw(st.sampled_from([90, 60 * 30, 60 * 24 * 40, 60 * 24 * 400]))
    if column == "d":
        low = draw(st.dates(dt.date(2024, 1, 1), dt.date(2025, 12, 31)))
        high = low + dt.timedelta(days=draw(st.integers(0, minutes // (60 * 24))))
        value = st.dates(low - dt.timedelta(days=40), high + dt.timedelta(days=40))
    else:
        low = draw(st.datetimes(dt.datetime(2024, 1, 1), dt.datetime(2025, 12, 31)))
        high = low + dt.timedelta(minutes=draw(st.integers(0, minutes)))
        span = dt.timedelta(minutes=minutes)
        value = st.one_of(st.datetimes(low, high), st.datetimes(low - span, high + span))
        if column == "tz":  # naive values stand for UTC instants, seen in New York
            low, high = (x.replace(tzinfo=dt.UTC).astimezone(NEW_YORK) for x in (low, high))
            value = value.map(lambda x: x.replace(tzinfo=dt.UTC).astimezone(NEW_YORK))
    if draw(st.booleans()):
        predicate: Node = Between(column, low, high)
    else:
        lower = Comparison(column, draw(st.sampled_from([">", ">="])), low)
        upper = Comparison(column, draw(st.sampled_from(["<", "<="])), high)
        predicate = And((upper, lower))
    return f, predicate, draw(st.lists(value, min_size=1, max_size=40))


@settings(max_examples=300, **SETTINGS)
@given(_time_ranges())
def test_time_ranges_keep_every_match(case: tuple[PartitionField, Node, list[Any]]) -> None:
    f, predicate, values = case
    column = _names(f)[0]
    kept = _kept_by_filter(f, predicate, [[v] for v in values])
    for value, keep in zip(values, kept, strict=True):
        if evaluate(predicate, {column: value}) is True:
            assert keep, (to_sql(predicate), value)


_I_OR_S = st.sampled_from(["i", "s"])


@st.composite
def _bound_groups(draw: Any) -> Node:
    """AND groups binding i and s through =, IN and ORs of =, with other atoms mixed in."""

    def bind(column: str) -> Node:
        values = draw(st.lists(_literal(column), min_size=1, max_size=3, unique=True))
        shape = draw(st.sampled_from(["eq", "in", "or"]))
        if shape == "eq" or len(values) == 1:
            return Comparison(column, "=", values[0])
        if shape == "in":
            return InList(column, tuple(values))
        return Or(tuple(Comparison(column, "=", v) for v in values))

    items = [bind("i"), bind("s")]
    items += draw(st.lists(st.one_of(_atoms(_I_OR_S), st.builds(bind, _I_OR_S)), max_size=2))
    return And(tuple(draw(st.permutations(items))))


@settings(max_examples=150, **SETTINGS)
@given(st.sampled_from(MULTI_FIELDS), _bound_groups(), st.data())
def test_multi_column_bindings_keep_every_match(
    f: PartitionField, predicate: Node, data: st.DataObject
) -> None:
    rows = data.draw(_rows(predicate))
    kept = _kept_by_filter(f, predicate, [[r[c] for c in _names(f)] for r in rows])
    for row, keep in zip(rows, kept, strict=True):
        if evaluate(predicate, row) is True:
            assert keep, (to_sql(predicate), row)
