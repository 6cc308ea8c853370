"""A source column of another type than the namespace's is taken or refused alike by every
writer: `write` in this process, `ingest` and `merge` on Spark.

Each takes a column whose every value the namespace's type holds exactly (integers into a
double, dates and numbers written as text, whole floats into integers) and refuses, in one
line naming the column and the value, nothing published, one it cannot: an integer a double
would round, a day that does not exist, a fraction into an integer. A column of a kind no
exact cast reaches (a timestamp into a number, a date or text; a number into a boolean) is
refused before a row is cast. Real local Spark.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Root, invoke, manifest, ok, published_rows

pytestmark = pytest.mark.spark

CASES = [
    (pa.float64(), pa.array([1, -7, 2**53, None], pa.int64())),
    (pa.float64(), pa.array([2**53 + 1], pa.int64())),
    (pa.float32(), pa.array([3, 2**24 + 1], pa.int32())),
    (pa.date32(), pa.array(["2024-02-29", "1970-01-01", None])),
    (pa.date32(), pa.array(["2023-02-29"])),
    (pa.int64(), pa.array(["12", "-3", "9223372036854775807"])),
    (pa.int64(), pa.array(["1.5"])),
    (pa.string(), pa.array([7, -1], pa.int64())),
    (pa.int32(), pa.array([1.0, -2.0], pa.float64())),
    (pa.int32(), pa.array([1.5], pa.float64())),
    (pa.int8(), pa.array([127, 128], pa.int64())),
    (pa.bool_(), pa.array(["true", "false"])),
    (pa.decimal128(10, 2), pa.array([decimal.Decimal("1.25")], pa.decimal128(5, 2))),
    (pa.timestamp("us", tz="UTC"), pa.array([dt.date(2024, 1, 2)], pa.date32())),
    # kinds no exact cast joins: refused before a row is cast, by every writer
    (pa.int64(), pa.array([dt.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("ms"))),
    (pa.date32(), pa.array([dt.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("us"))),
    (pa.string(), pa.array([dt.datetime(2024, 1, 2)], pa.timestamp("ms", tz="+02:00"))),
    (pa.bool_(), pa.array([2, 0], pa.int64())),
    (pa.timestamp("us"), pa.array([1], pa.int64())),
    (pa.int32(), pa.array([dt.date(2024, 1, 2)], pa.date32())),
]


def namespace(folder, value_type) -> Root:
    folder.mkdir(parents=True)
    seed = folder / "seed.parquet"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", value_type)])
    pq.write_table(schema.empty_table(), seed)
    root = Root(str(folder / "ns"), {}, folder / "ns")
    ok(root, "init")
    ok(root, "add-partition-spec", "--schema", str(seed), "--field", "bucket(2, id)")
    return root


def outcome(root: Root, *args: str) -> tuple:
    """What a user sees: the rows published, or the error's last line (nothing published)."""
    before = int(manifest(root).version)
    result = invoke(*root.args, *args)
    if result.exit_code != 0:
        assert int(manifest(root).version) == before, result.stderr
        assert "Traceback" not in result.stderr
        return ("refused", result.exit_code, result.stderr.strip().splitlines()[-1])
    rows = published_rows(root).sort_by("id").to_pylist()
    return ("taken", [(r["id"], r["v"]) for r in rows])


@pytest.mark.parametrize(
    "target, given", CASES, ids=lambda x: str(x.type if hasattr(x, "type") else x)
)
def test_a_column_of_another_type_is_taken_or_refused_alike_on_spark(
    tmp_path, spark, target, given
):
    source = pa.table({"id": pa.array(range(len(given)), pa.int64()), "v": given})
    folder = tmp_path / "source"
    folder.mkdir()
    pq.write_table(source, folder / "part.parquet")
    here = outcome(
        namespace(tmp_path / "write", target), "write", "--from", str(folder / "part.parquet")
    )
    ingested = outcome(namespace(tmp_path / "ingest", target), "ingest", str(folder))
    merged = outcome(
        namespace(tmp_path / "merge", target),
        "merge", "--from", str(folder), "--on", "id", "--engine", "spark",
    )  # fmt: skip
    if here[0] == "taken":
        assert ingested == merged == here
        return
    # refused alike; the type is named as each engine holds it (Spark: microseconds, UTC)
    for refused in (here, ingested, merged):
        assert refused[:2] == ("refused", 2) and "column 'v'" in refused[2], refused
    assert ingested == merged
