"""Bucket hashing (murmur.py) and partition transforms / expressions (transforms.py)."""

from __future__ import annotations

import datetime as dt
import decimal

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.murmur import bucket_of, hash_array, hash_multi
from lancens_cli.partition.spec import PartitionField, Transform
from lancens_cli.partition.transforms import (
    apply_field,
    apply_transform,
    check_expression,
    evaluate_expression,
    result_type,
    value_of,
)

UTC = dt.UTC
PLUS2 = dt.timezone(dt.timedelta(hours=2))
STAMP = dt.datetime(2017, 11, 16, 22, 31, 8)
MULTI_34_ICEBERG = -1842709838


def le8(value: int) -> bytes:
    return value.to_bytes(8, "little", signed=True)


def hashes(values: list, kind: pa.DataType) -> list:
    return hash_array(pa.array(values, type=kind)).to_pylist()


# ---------------------------------------------------------------- single-column golden values

GOLDEN = [
    (34, pa.int64(), 2017239379),
    (34, pa.int32(), 2017239379),
    (dt.date(2017, 11, 16), pa.date32(), -653330422),
    (dt.date(2017, 11, 16), pa.date64(), -653330422),
    (dt.time(22, 31, 8), pa.time64("us"), -662762989),
    (dt.time(22, 31, 8), pa.time64("ns"), -662762989),
    (dt.time(22, 31, 8), pa.time32("s"), -662762989),
    (dt.time(22, 31, 8), pa.time32("ms"), -662762989),
    (STAMP, pa.timestamp("us"), -2047944441),
    (STAMP, pa.timestamp("ns"), -2047944441),
    (STAMP, pa.timestamp("ms"), -2047944441),
    (STAMP, pa.timestamp("s"), -2047944441),
    (STAMP.replace(tzinfo=UTC), pa.timestamp("us", tz="UTC"), -2047944441),
    (STAMP.replace(tzinfo=UTC), pa.timestamp("us", tz="America/Los_Angeles"), -2047944441),
    ("iceberg", pa.string(), 1210000089),
    ("iceberg", pa.large_string(), 1210000089),
    ("iceberg", pa.string_view(), 1210000089),
    (b"\x00\x01\x02\x03", pa.binary(), -188683207),
    (b"\x00\x01\x02\x03", pa.large_binary(), -188683207),
    (b"\x00\x01\x02\x03", pa.binary(4), -188683207),
    (decimal.Decimal("14.20"), pa.decimal128(9, 2), -500754589),
    (decimal.Decimal("14.20"), pa.decimal256(40, 2), -500754589),
]


@pytest.mark.parametrize(("value", "kind", "expected"), GOLDEN, ids=lambda x: str(x))
def test_iceberg_golden_hashes(value, kind, expected):
    assert hashes([value, None], kind) == [expected, None]


def test_dictionary_strings_hash_like_plain_strings():
    array = pa.array(["iceberg", None, "iceberg"]).dictionary_encode()
    assert hash_array(array).to_pylist() == [1210000089, None, 1210000089]


def test_chunked_input_is_accepted():
    chunked = pa.chunked_array([[34], [None, 34]], type=pa.int64())
    assert hash_array(chunked).to_pylist() == [2017239379, None, 2017239379]


@pytest.mark.parametrize(
    "kind",
    [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()]
    + [pa.uint64()],
)
def test_every_integer_width_hashes_as_int64(kind):
    assert hashes([5], kind) == [mmh3.hash(le8(5), 0, True)]


def test_uint64_above_int64_max_is_hashed_as_its_unsigned_bytes():
    big = 2**64 - 1
    assert hashes([big], pa.uint64()) == [mmh3.hash(big.to_bytes(8, "little"), 0, True)]


def test_multibyte_strings_hash_their_utf8_bytes():
    text = "日本語 é"
    assert hashes([text], pa.string()) == [mmh3.hash(text.encode("utf-8"), 0, True)]


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ("0", b"\x00"),
        ("-1", b"\xff"),
        ("1.27", b"\x7f"),
        ("1.28", b"\x00\x80"),
        ("-1.29", b"\xff\x7f"),
    ],
)
def test_decimal_uses_minimal_twos_complement(text, raw):
    value = decimal.Decimal(text)
    scale = 2 if "." in text else 0
    assert hashes([value], pa.decimal128(10, scale)) == [mmh3.hash(raw, 0, True)]


def test_sub_microsecond_timestamps_floor_to_microseconds():
    nanos = pa.array([-1, 1_999], type=pa.int64()).cast(pa.timestamp("ns"))
    expected = [mmh3.hash(le8(-1), 0, True), mmh3.hash(le8(1), 0, True)]
    assert hash_array(nanos).to_pylist() == expected


def test_vectorised_hash_matches_mmh3():
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [rng.integers(-(2**63), 2**63 - 1, 2000, dtype=np.int64), [0, -1, 2**63 - 1, -(2**63)]]
    )
    expected = [mmh3.hash(le8(int(v)), 0, True) for v in values]
    assert hash_array(pa.array(values)).to_pylist() == expected


@pytest.mark.parametrize(
    ("kind", "value"), [(pa.float64(), 1.0), (pa.float32(), 1.0), (pa.bool_(), True)]
)
def test_unhashable_types_are_refused_by_name(kind, value):
    with pytest.raises(InvalidInputError, match=str(kind)):
        hash_array(pa.array([value], type=kind))


# ------------------------------------------------------------------------------ murmur3_multi


def test_multi_golden_value_and_documented_rule():
    key = (0).to_bytes(4, "little") + le8(34) + (1).to_bytes(4, "little") + b"iceberg"
    assert mmh3.hash(key, 0, True) == MULTI_34_ICEBERG
    got = hash_multi([pa.array([34], pa.int64()), pa.array(["iceberg"])]).to_pylist()
    assert got == [MULTI_34_ICEBERG]


def test_multi_vectorised_integers_follow_the_same_rule():
    firsts = pa.array([34, None, 5, None], pa.int64())
    seconds = pa.array([7, 7, None, None], pa.int16())
    pos = [i.to_bytes(4, "little") for i in range(2)]
    expected = [
        mmh3.hash(pos[0] + le8(34) + pos[1] + le8(7), 0, True),
        mmh3.hash(pos[1] + le8(7), 0, True),
        mmh3.hash(pos[0] + le8(5), 0, True),
        None,
    ]
    assert hash_multi([firsts, seconds]).to_pylist() == expected


def test_multi_null_rules():
    ints = pa.array([34, None, None, 34], pa.int64())
    texts = pa.array([None, "iceberg", None, "iceberg"])
    got = hash_multi([ints, texts]).to_pylist()
    alone = hash_multi([pa.array([34], pa.int64())]).to_pylist()[0]
    assert got[0] == alone
    assert got[1] != hashes(["iceberg"], pa.string())[0]
    assert got[1] != got[0]
    assert got[2] is None
    assert got[3] == MULTI_34_ICEBERG


def test_multi_missing_column_reads_as_null_and_keeps_positions():
    texts = pa.array(["iceberg", None])
    with_missing = hash_multi([None, texts]).to_pylist()
    with_nulls = hash_multi([pa.nulls(2, pa.int64()), texts]).to_pylist()
    assert with_missing == with_nulls
    assert with_missing[0] == mmh3.hash((1).to_bytes(4, "little") + b"iceberg", 0, True)
    assert with_missing[1] is None


def test_multi_is_type_promotion_resistant():
    narrow = hash_multi([pa.array([5], pa.int8()), pa.array(["x"], pa.large_string())])
    wide = hash_multi([pa.array([5], pa.int64()), pa.array(["x"], pa.string())])
    assert narrow.to_pylist() == wide.to_pylist()


# ---------------------------------------------------------------------------------- bucket_of


def test_bucket_of_handles_int32_min_without_overflow():
    got = bucket_of(pa.array([-(2**31), 2**31 - 1, -5, None], pa.int32()), 7).to_pylist()
    assert got == [2**31 % 7, (2**31 - 1) % 7, 5, None]
    assert bucket_of(pa.array([-(2**31)], pa.int32()), 2**31 - 1).to_pylist() == [1]


@pytest.mark.parametrize("n", [0, -3, True, 2**31])
def test_bucket_count_is_validated(n):
    with pytest.raises(InvalidInputError):
        bucket_of(pa.array([1], pa.int32()), n)


@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=50),
    st.integers(1, 2**31 - 1),
)
def test_bucket_is_always_in_range(values, n):
    got = bucket_of(pa.array(values, pa.int32()), n).to_pylist()
    assert got == [abs(v) % n for v in values]
    assert all(0 <= b < n for b in got)


# -------------------------------------------------------------------------------- result_type


@pytest.mark.parametrize(
    ("transform", "sources", "expected"),
    [
        (Transform("identity"), [pa.decimal128(10, 2)], pa.decimal128(10, 2)),
        (Transform("year"), [pa.date32()], pa.int32()),
        (Transform("month"), [pa.date64()], pa.int32()),
        (Transform("day"), [pa.timestamp("ns", tz="+02:00")], pa.int32()),
        (Transform("hour"), [pa.timestamp("s")], pa.int32()),
        (Transform("bucket", num_buckets=4), [pa.large_string()], pa.int32()),
        (Transform("multi_bucket", num_buckets=4), [pa.int8(), pa.binary()], pa.int32()),
        (Transform("truncate", width=3), [pa.int16()], pa.int16()),
        (Transform("truncate", width=3), [pa.large_string()], pa.large_string()),
        (Transform("truncate", width=3), [pa.binary()], pa.binary()),
    ],
)
def test_result_type(transform, sources, expected):
    assert result_type(transform, sources) == expected


@pytest.mark.parametrize(
    ("transform", "sources", "needle"),
    [
        (Transform("hour"), [pa.date32()], "hour cannot take a date32"),
        (Transform("year"), [pa.string()], "year cannot take a string"),
        (Transform("bucket", num_buckets=4), [pa.float64()], "double"),
        (Transform("multi_bucket", num_buckets=4), [pa.int8(), pa.bool_()], "bool"),
        (Transform("truncate", width=3), [pa.float32()], "truncate cannot take a float"),
        (Transform("year"), [pa.date32(), pa.date32()], "one source column"),
        (Transform("identity"), [pa.float64()], "NaN and -0.0"),
    ],
)
def test_result_type_refusals(transform, sources, needle):
    with pytest.raises(InvalidInputError, match=needle) as caught:
        result_type(transform, sources)
    assert "\n" not in caught.value.message


# ------------------------------------------------------------------------- time transforms


def parts(values: list, kind: pa.DataType) -> dict[str, list]:
    array = pa.array(values, type=kind)
    names = ["year", "month", "day"] + (["hour"] if pa.types.is_timestamp(kind) else [])
    return {n: apply_transform(Transform(n), [array], len(values)).to_pylist() for n in names}


@pytest.mark.parametrize("kind", [pa.date32(), pa.date64()])
def test_date_parts_of_leap_day_and_pre_epoch(kind):
    got = parts([dt.date(2024, 2, 29), dt.date(1969, 12, 31), None], kind)
    assert got == {"year": [2024, 1969, None], "month": [2, 12, None], "day": [29, 31, None]}


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_timestamp_parts_including_negative_timestamps(unit):
    values = [dt.datetime(2024, 2, 29, 13, 5), dt.datetime(1969, 12, 31, 23, 59, 59), None]
    assert parts(values, pa.timestamp(unit)) == {
        "year": [2024, 1969, None],
        "month": [2, 12, None],
        "day": [29, 31, None],
        "hour": [13, 23, None],
    }


def test_zoned_timestamps_are_read_as_wall_time_in_their_zone():
    local = dt.datetime(2025, 1, 1, 0, 30, tzinfo=PLUS2)
    got = parts([local], pa.timestamp("us", tz="+02:00"))
    assert got == {"year": [2025], "month": [1], "day": [1], "hour": [0]}
    three_utc = dt.datetime(2025, 6, 1, 3, tzinfo=dt.UTC)  # the example: 23 in New York
    assert parts([three_utc], pa.timestamp("us", tz="America/New_York"))["hour"] == [23]
    assert apply_transform(Transform("year"), [pa.array([local])], 1).type == pa.int32()


ZONES = [None, "UTC", "America/New_York", "Asia/Kolkata", "+05:30", "-03:00", "Europe/London"]
ZONES += ["Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia", "America/St_Johns"]


def datafusion_parts(array: pa.Array) -> dict[str, list]:
    """The spec's derived expressions, `date_part(<part>, col0)`, as DataFusion evaluates them."""
    import datafusion

    context = datafusion.SessionContext()
    batch = pa.RecordBatch.from_arrays([array], ["col0"])
    found = {}
    for part in ("year", "month", "day", "hour"):
        if part == "hour" and pa.types.is_date(array.type):
            continue
        query = context.from_arrow(batch).select(
            datafusion.functions.date_part(datafusion.lit(part), datafusion.col("col0")).alias("v")
        )
        found[part] = query.to_arrow_table()["v"].cast(pa.int32()).to_pylist()
    return found


_NEAR_DST = st.sampled_from([1710054000, 1730613600, 1711846800, 1729990800, 1317468000])


@settings(max_examples=120, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    unit=st.sampled_from(["s", "ms", "us", "ns"]),
    seconds=st.lists(
        st.one_of(
            st.integers(-62_135_596_800, 253_402_300_799),  # years 1 to 9999
            _NEAR_DST.flatmap(lambda t: st.integers(t - 7200, t + 7200)),
            st.integers(-86_400 * 800, 86_400 * 800),  # around 1970
            st.none(),
        ),
        min_size=1,
        max_size=30,
    ),
)
def test_time_transforms_equal_their_expressions_as_datafusion_evaluates_them(zone, unit, seconds):
    """Every zone (DST changes, half- and quarter-hour offsets, a day skipped), every unit,
    pre-1970 and NULLs: what `write` stores is what the spec's expression evaluates to."""
    scale = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    if unit == "ns":  # ns timestamps reach 1677..2262 only
        seconds = [
            None if s is None else max(min(s, 9_200_000_000), -9_200_000_000) for s in seconds
        ]
    values = [None if s is None else s * scale + (scale // 3 if s % 2 else 0) for s in seconds]
    kind = pa.timestamp(unit, tz=zone)
    assert parts(values, kind) == datafusion_parts(pa.array(values, kind))


@pytest.mark.parametrize(
    "zone", ["America/New_York", "Australia/Lord_Howe", "Europe/London", "America/St_Johns"]
)
def test_time_transforms_keep_daylight_saving_time_after_2037_as_datafusion_does(zone):
    """Zone files list transitions up to 2037, then a rule; DataFusion lists them up to 2099:
    a summer hour of 2058, the instants around a 2058 transition, and the years after 2099
    (where DataFusion keeps the last offset) all read as DataFusion reads them."""
    instants = [2_782_969_200 + d for d in (-1, 0, 1, 3_599, 3_600)]  # 2058-03-10 07:00Z
    instants += [2_792_995_200, 4_102_444_799, 4_102_444_800, 6_065_218_800, 7_258_118_400]
    values = [s * 1_000_000 + 7 for s in instants]
    kind = pa.timestamp("us", tz=zone)
    assert parts(values, kind) == datafusion_parts(pa.array(values, kind))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(-719_162, 2_932_896), st.none()), min_size=1))
def test_date_transforms_equal_their_expressions_as_datafusion_evaluates_them(days):
    assert parts(days, pa.date32()) == datafusion_parts(pa.array(days, pa.date32()))


# -------------------------------------------------------------------------------- truncate


def truncate(values: list, kind: pa.DataType, width: int) -> list:
    array = pa.array(values, type=kind)
    out = apply_transform(Transform("truncate", width=width), [array], len(values))
    assert out.type == kind
    return out.to_pylist()


@pytest.mark.parametrize("kind", [pa.int8(), pa.int32(), pa.int64()])
def test_truncate_integers_rounds_toward_zero_as_the_spec_formula(kind):
    got = truncate([-1, -10, -11, 0, 9, 10, 19, None], kind, 10)
    assert got == [0, -10, -10, 0, 0, 10, 10, None]


def test_truncate_unsigned_and_huge_width():
    assert truncate([2**64 - 1, 7, None], pa.uint64(), 10) == [2**64 - 6, 0, None]
    assert truncate([5, -5, 0, None], pa.int64(), 2**70) == [0, 0, 0, None]


def test_truncate_toward_zero_never_leaves_the_source_type():
    assert truncate([-128, 127], pa.int8(), 10) == [-120, 120]
    assert truncate([-(2**63), 2**63 - 1], pa.int64(), 10) == [-(2**63) + 8, 2**63 - 8]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_truncate_strings_counts_code_points(kind):
    got = truncate(["héllo", "日本語テキスト", "ab", "", None], kind, 3)
    assert got == ["hél", "日本語", "ab", "", None]


def test_truncate_binary_counts_bytes():
    data = "日本".encode()
    assert truncate([data, b"a", None], pa.binary(), 2) == [data[:2], b"a", None]


# ------------------------------------------------------------------------------------ NULLs

SINGLE = [
    (Transform("identity"), pa.int64()),
    (Transform("year"), pa.date32()),
    (Transform("month"), pa.timestamp("us")),
    (Transform("day"), pa.date64()),
    (Transform("hour"), pa.timestamp("ns", tz="UTC")),
    (Transform("bucket", num_buckets=8), pa.string()),
    (Transform("truncate", width=4), pa.string()),
    (Transform("truncate", width=4), pa.int32()),
    (Transform("multi_bucket", num_buckets=8), pa.int64()),
]


@pytest.mark.parametrize(("transform", "kind"), SINGLE, ids=lambda x: str(x))
def test_null_in_null_out(transform, kind):
    out = apply_transform(transform, [pa.nulls(3, kind)], 3)
    assert out.to_pylist() == [None, None, None]


@pytest.mark.parametrize(("transform", "kind"), SINGLE, ids=lambda x: str(x))
def test_missing_source_reads_as_null_of_the_result_type(transform, kind):
    declared = result_type(transform, [kind])
    field = PartitionField("f", (7,), declared, transform=transform)
    out = apply_field(field, [None], 2)
    assert out.type == declared
    assert out.to_pylist() == [None, None]


def test_multi_bucket_skips_missing_and_is_null_only_when_all_are():
    transform = Transform("multi_bucket", num_buckets=16)
    texts = pa.array(["iceberg", None])
    got = apply_transform(transform, [None, texts], 2).to_pylist()
    single = mmh3.hash((1).to_bytes(4, "little") + b"iceberg", 0, True)
    assert got == [abs(single) % 16, None]
    assert apply_transform(transform, [None, None], 2).to_pylist() == [None, None]


def test_bucket_transform_matches_formula():
    values = pa.array([34, -7, None], pa.int64())
    got = apply_transform(Transform("bucket", num_buckets=10), [values], 3).to_pylist()
    assert got == [abs(2017239379) % 10, abs(mmh3.hash(le8(-7), 0, True)) % 10, None]


# ------------------------------------------------------------------------------ apply_field


def test_apply_field_casts_identity_to_the_declared_type():
    field = PartitionField("i", (1,), pa.int64(), transform=Transform("identity"))
    out = apply_field(field, [pa.array([1, None], pa.int32())], 2)
    assert out.type == pa.int64()
    assert out.to_pylist() == [1, None]


def test_apply_field_refuses_a_lossy_identity():
    field = PartitionField("i", (1,), pa.int8(), transform=Transform("identity"))
    with pytest.raises(InvalidInputError, match="declared int8"):
        apply_field(field, [pa.array([1000], pa.int32())], 1)


# ------------------------------------------------------------------------------ expressions


def test_expression_date_part_year():
    dates = pa.array([dt.date(2024, 2, 29), None, dt.date(1969, 12, 31)])
    out = evaluate_expression("date_part('year', col0)", [dates], pa.int32(), 3)
    assert out.type == pa.int32()
    assert out.to_pylist() == [2024, None, 1969]


def test_expression_over_two_columns():
    left = pa.array([1, 2, None], pa.int64())
    right = pa.array(["a", "b", "c"])
    out = evaluate_expression("concat(col1, '-', col0)", [left, right], pa.string(), 3)
    assert out.to_pylist() == ["a-1", "b-2", "c-"]


def test_expression_keeps_row_order_on_large_input():
    values = np.arange(200_000, dtype=np.int64)
    out = evaluate_expression("col0 * 3 + 1", [pa.array(values)], pa.int64(), len(values))
    assert np.array_equal(out.to_numpy(), values * 3 + 1)


def test_expression_missing_source_reads_as_null():
    got = evaluate_expression("date_part('year', col0)", [None], pa.int32(), 2)
    assert got.type == pa.int32()
    assert got.to_pylist() == [None, None]
    both = evaluate_expression("coalesce(col1, col0)", [pa.array([4, 5]), None], pa.int64(), 2)
    assert both.to_pylist() == [4, 5]


def test_expression_result_cast_only_when_lossless():
    small = pa.array([1, 2], pa.int32())
    assert evaluate_expression("col0 + 1", [small], pa.int32(), 2).to_pylist() == [2, 3]
    with pytest.raises(InvalidInputError, match="declared int32"):
        evaluate_expression("col0 * 3000000000", [small], pa.int32(), 2)


def test_expression_wrong_result_type_is_refused():
    dates = pa.array([dt.date(2024, 2, 29)])
    with pytest.raises(InvalidInputError, match="returns int32, declared string"):
        evaluate_expression("date_part('year', col0)", [dates], pa.string(), 1)


@pytest.mark.parametrize(
    ("expression", "needle"),
    [
        ("date_part('year', col0", "ParserError"),
        ("no_such_function(col0)", "no_such_function"),
        ("col3 + 1", "col3"),
        ("random()", "random"),
        ("NOW()", "now"),
        ("current_date", "current_date"),
        ("uuid()", "uuid"),
        ("row_number() OVER ()", "window"),
    ],
)
def test_bad_expressions_are_one_line_invalid_input(expression, needle):
    with pytest.raises(InvalidInputError, match=needle) as caught:
        evaluate_expression(expression, [pa.array([1], pa.int64())], pa.int64(), 1)
    assert "\n" not in caught.value.message


def test_quoted_words_are_not_mistaken_for_functions():
    out = evaluate_expression("concat(col0, 'now()')", [pa.array(["a"])], pa.string(), 1)
    assert out.to_pylist() == ["anow()"]


def test_check_expression():
    check_expression("date_part('year', col0)", [pa.timestamp("us", tz="UTC")], pa.int32())
    check_expression("left(col0, 2)", [pa.large_string()], pa.large_string())
    with pytest.raises(InvalidInputError, match="declared date32"):
        check_expression("date_part('year', col0)", [pa.date32()], pa.date32())
    with pytest.raises(InvalidInputError, match="random"):
        check_expression("col0 + random()", [pa.float64()], pa.float64())


def test_expression_field_through_apply_field():
    field = PartitionField("y", (3,), pa.int32(), expression="date_part('month', col0)")
    out = apply_field(field, [pa.array([dt.date(2024, 2, 29), None])], 2)
    assert out.to_pylist() == [2, None]


# --------------------------------------------------------------------------------- value_of


def test_value_of():
    year = PartitionField("y", (1,), pa.int32(), transform=Transform("year"))
    assert value_of(year, [dt.date(2025, 12, 10)], [pa.date32()]) == 2025
    assert value_of(year, [None], [pa.date32()]) is None
    multi = PartitionField(
        "m", (1, 2), pa.int32(), transform=Transform("multi_bucket", num_buckets=1000)
    )
    assert (
        value_of(multi, [34, "iceberg"], [pa.int64(), pa.string()]) == abs(MULTI_34_ICEBERG) % 1000
    )
    text = PartitionField("t", (1,), pa.string(), transform=Transform("truncate", width=2))
    assert value_of(text, ["héllo"], [pa.string()]) == "hé"
    expr = PartitionField("e", (1,), pa.int32(), expression="date_part('hour', col0)")
    assert value_of(expr, [dt.datetime(2025, 1, 1, 7)], [pa.timestamp("us")]) == 7


def test_value_of_refuses_wrong_arity_and_bad_literals():
    year = PartitionField("y", (1,), pa.int32(), transform=Transform("year"))
    with pytest.raises(InvalidInputError):
        value_of(year, [dt.date(2025, 1, 1), dt.date(2025, 1, 1)], [pa.date32(), pa.date32()])
    with pytest.raises(InvalidInputError):
        value_of(year, ["not a date"], [pa.date32()])


@pytest.mark.parametrize(
    ("arrays", "payload", "expected"),
    [
        (
            [pa.array([34], pa.int64()), pa.array(["iceberg"])],
            "00000000220000000000000001000000" + b"iceberg".hex(),
            -1842709838,
        ),
        (
            [pa.array([None], pa.int64()), pa.array(["iceberg"])],
            "01000000" + b"iceberg".hex(),
            -409290239,
        ),
        (
            [pa.array(["iceberg"]), pa.array([None], pa.int64())],
            "00000000" + b"iceberg".hex(),
            -2124184600,
        ),
        (
            [pa.array([34], pa.int32()), pa.array([None], pa.string())],
            "000000002200000000000000",
            139952921,
        ),
        (
            [pa.array([dt.date(2017, 11, 16)], pa.date32()), pa.array([b"\x00\x01\x02\x03"])],
            "000000004e440000000000000100000000010203",
            -684343458,
        ),
    ],
)
def test_murmur3_multi_vectors(arrays, payload, expected):
    """The documented byte layout (docs/partitioning.md), checked against mmh3 directly."""
    import mmh3

    from lancens_cli.partition.murmur import hash_multi

    assert mmh3.hash(bytes.fromhex(payload), 0, signed=True) == expected
    assert hash_multi(arrays).to_pylist() == [expected]


def test_murmur3_multi_of_all_nulls_is_null():
    from lancens_cli.partition.murmur import hash_multi

    assert hash_multi(
        [pa.array([None], pa.int64()), pa.array([None], pa.string())]
    ).to_pylist() == [None]
