"""murmur3 / murmur3_multi as DataFusion functions: the same values as bucket / multi_bucket."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition import murmur
from lancens_cli.partition.spec import Transform
from lancens_cli.partition.transforms import apply_transform, evaluate_expression

N = 200
BUCKETS = 13


def _values(kind: pa.DataType, rng: random.Random) -> list:
    """Random values of `kind`, a tenth of them NULL."""

    def one():
        if pa.types.is_integer(kind):
            bits = kind.bit_width
            low, high = (
                (0, 2**bits - 1)
                if pa.types.is_unsigned_integer(kind)
                else (
                    -(2 ** (bits - 1)),
                    2 ** (bits - 1) - 1,
                )
            )
            return rng.randint(low, high)
        if pa.types.is_date(kind):
            return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-30000, 30000))
        if pa.types.is_timestamp(kind):
            return dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randint(-(10**9), 10**9))
        if pa.types.is_time(kind):
            return dt.time(rng.randrange(24), rng.randrange(60), rng.randrange(60))
        if pa.types.is_decimal(kind):
            return decimal.Decimal(rng.randint(-(10**8), 10**8)).scaleb(-kind.scale)
        if pa.types.is_fixed_size_binary(kind):
            return bytes(rng.randrange(256) for _ in range(kind.byte_width))
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            return bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
        return "".join(rng.choice("abcé€𝄞 xyz") for _ in range(rng.randrange(10)))

    return [None if rng.random() < 0.1 else one() for _ in range(N)]


TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint32(),
    pa.uint64(),
    pa.date32(),
    pa.date64(),
    pa.timestamp("s"),
    pa.timestamp("ms"),
    pa.timestamp("us"),
    pa.timestamp("ns", tz="UTC"),
    pa.time32("s"),
    pa.time64("us"),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(6),
    pa.decimal128(12, 2),
]


@pytest.mark.parametrize("kind", TYPES, ids=str)
def test_murmur3_in_an_expression_equals_the_bucket_transform(kind):
    rng = random.Random(str(kind))
    array = pa.array(_values(kind, rng), type=kind)
    hashed = evaluate_expression("murmur3(col0)", [array], pa.int32(), N)
    assert hashed.equals(murmur.hash_array(array))
    by_expression = evaluate_expression(
        f"abs(cast(murmur3(col0) as bigint)) % {BUCKETS}", [array], pa.int32(), N
    )
    by_transform = apply_transform(Transform("bucket", num_buckets=BUCKETS), [array], N)
    assert by_expression.to_pylist() == by_transform.to_pylist()


@pytest.mark.parametrize(
    "kinds", [(pa.int32(), pa.string()), (pa.date32(), pa.int64(), pa.binary())]
)
def test_murmur3_multi_in_an_expression_equals_multi_bucket(kinds):
    rng = random.Random(str(kinds))
    arrays = [pa.array(_values(k, rng), type=k) for k in kinds]
    cols = ", ".join(f"col{i}" for i in range(len(kinds)))
    hashed = evaluate_expression(f"murmur3_multi({cols})", arrays, pa.int32(), N)
    assert hashed.equals(murmur.hash_multi(arrays))
    by_expression = evaluate_expression(
        f"abs(cast(murmur3_multi({cols}) as bigint)) % {BUCKETS}", arrays, pa.int32(), N
    )
    by_transform = apply_transform(Transform("multi_bucket", num_buckets=BUCKETS), arrays, N)
    assert by_expression.to_pylist() == by_transform.to_pylist()


def test_golden_values_and_type_promotion():
    assert (
        evaluate_expression("murmur3(col0)", [pa.array([34], pa.int32())], pa.int32(), 1)[0].as_py()
        == 2017239379
    )
    assert (
        evaluate_expression("murmur3(col0)", [pa.array(["iceberg"])], pa.int32(), 1)[0].as_py()
        == 1210000089
    )
    narrow = evaluate_expression("murmur3(col0)", [pa.array([5, -7], pa.int16())], pa.int32(), 2)
    wide = evaluate_expression("murmur3(col0)", [pa.array([5, -7], pa.int64())], pa.int32(), 2)
    assert narrow.equals(wide)


def test_a_missing_source_hashes_as_null():
    present = pa.array([1, 2, None], pa.int64())
    assert evaluate_expression("murmur3(col0)", [None], pa.int32(), 3).null_count == 3
    multi = evaluate_expression("murmur3_multi(col0, col1)", [present, None], pa.int32(), 3)
    assert multi.equals(murmur.hash_multi([present, None]))


@pytest.mark.parametrize(
    "expression, words",
    [
        ("murmur3(col0 + 1)", "one column reference"),
        ("murmur3(col0, col1)", "one column reference"),
        ("murmur3_multi(col0, 2)", "column references"),
        ("murmur3(col7)", "no source column col7"),
    ],
)
def test_hash_calls_take_source_columns(expression, words):
    arrays = [pa.array([1], pa.int64()), pa.array(["a"])]
    with pytest.raises(InvalidInputError, match=words.replace("(", r"\(")):
        evaluate_expression(expression, arrays, pa.int32(), 1)


def test_floats_cannot_be_hashed():
    with pytest.raises(InvalidInputError, match="cannot hash"):
        evaluate_expression("murmur3(col0)", [pa.array([1.5])], pa.int32(), 1)


def test_an_expression_field_calling_murmur3_partitions_like_bucket(local_root, tmp_path):
    rng = random.Random(7)
    data = pa.table(
        {
            "id": pa.array(range(500), pa.int64()),
            "user": pa.array([rng.choice(["ann", "bob", "cy", "dee", "eve"]) for _ in range(500)]),
        }
    )
    source = tmp_path / "d.parquet"
    pq.write_table(data, source)
    args = [*local_root.args]
    spec = invoke(
        *args,
        "add-partition-spec",
        "--schema",
        str(source),
        "--field",
        "bucket(4, user) as b",
        "--field",
        "expr(abs(cast(murmur3(col0) as bigint)) % 4, user) -> int32 as e",
    )
    assert spec.exit_code == 0, spec.stderr
    written = invoke(*args, "write", "--from", str(source), "--json")
    assert written.exit_code == 0, written.stderr
    partitions = json.loads(written.stdout)["partitions"]
    assert partitions and all(p["values"]["b"] == p["values"]["e"] for p in partitions)
    manifest = lance.dataset(str(local_root.local_path / "__manifest"))
    rows = manifest.to_table(filter="object_type = 'table'").to_pylist()
    for row in rows:
        users = lance.dataset(str(local_root.local_path / row["location"])).to_table()["user"]
        expected = murmur.bucket_of(murmur.hash_array(users), 4).to_pylist()
        assert set(expected) == {row["partition_field_e"]}
