"""Embedding vectors (`fixed_size_list<float32>[N]` columns) through `ingest`, the `lancens`
data source and `join`, on a real local Spark.

Spark has no fixed-size list: it reads a Parquet vector as `array<float>`, and the join hands
vectors to it as arrays of the same values. Vectors are random (numpy, some NULL); rows are
read back with pylance and compared exactly, joins with a brute-force join in Python over the
source rows (join_reference.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Root, invoke, published_rows
from join_reference import brute_join, build, result_rows

from lancens_cli.schema_json import schema_to_json

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("shared_master")]

DIM = 8
VECTOR = pa.list_(pa.float32(), DIM)
CITIES = ["Oslo", "Lima", "Pune", "Kiev"]


def vectors(rng: np.random.Generator, n: int, nulls: int) -> pa.Array:
    """`n` random vectors, the first `nulls` of every ten NULL."""
    values = pa.array(rng.standard_normal(n * DIM).astype("float32"))
    mask = pa.array([i % 10 < nulls for i in range(n)])
    return pa.FixedSizeListArray.from_arrays(values, DIM, mask=mask)


def rows(seed: int, ids: range, vector: str = "emb") -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": pa.array([CITIES[i % len(CITIES)] for i in ids]),
            vector: vectors(rng, n, nulls=1),
            "score": pa.array(rng.random(n)),
        }
    )


def ok(*args: str) -> dict:
    done = invoke(*args, "--json")
    assert done.exit_code == 0, done.stderr
    return done.json()


def manifest_version(root: Path) -> int:
    return lance.dataset(str(root / "__manifest")).version


def read_back(root: Path) -> pa.Table:
    """Every published row, by id."""
    table = published_rows(Root(str(root), {}, root))
    return table.sort_by("id")


def new_root(tmp: Path, name: str, schema: pa.Schema) -> Path:
    """An empty namespace partitioned by city over `schema`."""
    root = tmp / name
    (tmp / f"{name}.schema.json").write_text(json.dumps(schema_to_json(schema)))
    ok("--root", str(root), "init")
    schema_file = str(tmp / f"{name}.schema.json")
    ok("--root", str(root), "add-partition-spec", "--schema", schema_file, "--field", "city")
    return root


@pytest.fixture(scope="module")
def sides(spark, tmp_path_factory):
    """The left namespace, filled by `ingest` from Parquet (vectors with NULLs), and the right
    one (vector column `vec`, two rows per id for some ids), written by `write`."""
    tmp = tmp_path_factory.mktemp("vectors")
    left_rows = rows(1, range(300))
    left = new_root(tmp, "left", left_rows.schema)
    source = tmp / "left.parquet"
    pq.write_table(left_rows, source, row_group_size=100)
    ingested = ok("--root", str(left), "ingest", str(source))
    right_rows = pa.concat_tables(
        [rows(2, range(150, 450), "vec"), rows(3, range(200, 260), "vec")]
    )
    right = build(tmp, "right", right_rows, ["city"])
    return left, left_rows, ingested, right, right_rows


def test_ingest_keeps_vectors_exactly_and_refuses_a_wrong_length(sides, tmp_path):
    left, left_rows, ingested, _, _ = sides

    assert ingested["rows"] == 300
    back = read_back(left)
    assert back.schema.field("emb").type == VECTOR
    assert back.column("emb").null_count == 30
    assert back.to_pylist() == left_rows.to_pylist()  # float32 values, exactly

    # a list of another length (Spark's `array<float>`), among good and NULL ones
    before, rows_before = manifest_version(left), back
    lists = [[1.0] * DIM, None, [2.0] * (DIM - 1)]
    bad = pa.table(
        {
            "id": pa.array([1000, 1001, 1002], pa.int64()),
            "city": ["Oslo", "Lima", "Oslo"],
            "emb": pa.array(lists, pa.list_(pa.float32())),
            "score": [0.5, 0.5, 0.5],
        }
    )
    pq.write_table(bad, tmp_path / "bad.parquet")
    done = invoke("--root", str(left), "ingest", str(tmp_path / "bad.parquet"))
    assert done.exit_code == 2, done.stderr
    error = [line for line in done.stderr.splitlines() if "error" in line]
    assert error == [
        "lancens: error: column 'emb' takes vectors of 8 values; a row of the input holds 7"
    ], done.stderr
    assert manifest_version(left) == before
    assert read_back(left).equals(rows_before)


def test_a_pyspark_job_writes_array_columns_into_vectors(spark, tmp_path):
    """`array<float>` into a vector column, also one inside a struct (`meta.v`)."""
    from pyspark.sql.types import ArrayType, FloatType, LongType, StringType, StructField
    from pyspark.sql.types import StructType as Struct

    from lancens_cli.pipeline import register

    source = rows(4, range(40)).drop_columns(["score"])
    emb, ids = source["emb"].combine_chunks(), source["id"].combine_chunks()
    source = source.append_column("meta", pa.StructArray.from_arrays([emb, ids], ["v", "n"]))
    schema = source.schema.append(pa.field("score", pa.float64()))  # the job leaves it NULL
    root = new_root(tmp_path, "ns", schema)
    array = ArrayType(FloatType())
    struct = Struct(
        [
            StructField("id", LongType()),
            StructField("city", StringType()),
            StructField("emb", array),
            StructField("meta", Struct([StructField("v", array), StructField("n", LongType())])),
        ]
    )
    register(spark)
    frame = spark.createDataFrame(source.to_pylist(), struct)

    frame.write.format("lancens").option("root", str(root)).mode("append").save()

    back = read_back(root)
    assert back.schema.field("emb").type == VECTOR
    assert back.schema.field("meta").type.field("v").type == VECTOR
    assert back.drop_columns(["score"]).to_pylist() == source.to_pylist()
    assert back.column("score").null_count == 40
    before = manifest_version(root)
    short = spark.createDataFrame([(99, "Oslo", [1.0] * DIM, {"v": [1.0, 2.0], "n": 1})], struct)
    with pytest.raises(Exception, match=r"column 'meta.v' takes vectors of 8 values; .* holds 2"):
        short.write.format("lancens").option("root", str(root)).mode("append").save()
    assert manifest_version(root) == before


def test_joins_hand_vectors_to_spark_as_arrays(sides, tmp_path):
    left, left_rows, _, right, right_rows = sides
    both = ("--on", "l.city = r.city", "--on", "l.id = r.id")

    def expected(on: list[str], how: str) -> list[tuple]:
        return brute_join(left_rows, right_rows, on, on, how)

    # storage-partitioned (both sides by city), inner rows and a left count
    inner = ok("join", str(left), str(right), *both, "--limit", "0")
    assert inner["storage_partitioned"] is True
    columns = ["l_id", "l_city", "emb", "l_score", "r_id", "r_city", "vec", "r_score"]
    assert inner["columns"] == columns
    assert result_rows(inner) == expected(["city", "id"], "inner")
    assert len(inner["rows"]) > 100
    count = ok("join", str(left), str(right), *both, "--how", "left", "--count")
    assert count == {"count": len(expected(["city", "id"], "left")), "storage_partitioned": True}

    # the shuffle fallback (neither side is partitioned by id), left rows
    by_id = ("--on", "l.id = r.id")
    shuffled = ok("join", str(left), str(right), *by_id, "--how", "left", "--limit", "0")
    assert shuffled["storage_partitioned"] is False
    assert result_rows(shuffled) == expected(["id"], "left")

    # --columns to Parquet files: the vectors as lists of the same float32 values
    out = tmp_path / "out"
    picked = ("--columns", "l_id,emb,vec", "--format", "parquet")
    written = ok("join", str(left), str(right), *both, *picked, "--to", str(out))
    files = pq.read_table(out)
    assert written["rows"] == files.num_rows == len(inner["rows"])
    assert files.schema.field("emb").type.value_type == pa.float32()
    got = sorted((r["l_id"], str(r["emb"]), str(r["vec"])) for r in files.to_pylist())
    want = sorted((r["l_id"], str(r["emb"]), str(r["vec"])) for r in inner["rows"])
    assert got == want
