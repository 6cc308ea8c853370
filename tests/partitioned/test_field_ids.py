"""The partitioning spec, Namespace Schema: "Field IDs are never reused and must remain consistent
across partition tables." A generated sequence of `evolve-schema` adds, drops and renames, with
writes that create new partition tables between them: every published partition table carries
exactly the namespace schema's field ids, and `check` finds a table that does not."""

from __future__ import annotations

import json

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lancens_cli.partition.schema import field_ids_by_path, lance_ids_by_path
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of

STEP = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["int32", "string", "int64"])),
    st.tuples(st.just("drop"), st.integers(0, 100)),
    st.tuples(st.just("rename"), st.integers(0, 100)),
    st.tuples(st.just("write"), st.integers(1, 3)),
)


def published_ids(root) -> tuple[dict[str, int], list[dict[str, int]]]:
    ns = Namespace.from_properties({"root": str(root)})
    snapshot = ns.snapshot()
    wanted = field_ids_by_path(layout_of(snapshot).schema)
    tables = []
    for row in snapshot.rows:
        if row["object_type"] == "table" and row.get("read_version"):
            ds = lance.dataset(str(root / row["location"]), version=row["read_version"])
            tables.append(lance_ids_by_path(ds.lance_schema))
    return wanted, tables


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(STEP, min_size=2, max_size=8))
def test_every_partition_table_carries_the_namespace_schemas_field_ids(tmp_path_factory, steps):
    tmp = tmp_path_factory.mktemp("ids")
    root = tmp / "ns"
    root.mkdir()
    args = ("--root", str(root))
    first = pa.table({"k": pa.array([0], pa.int64()), "a": ["x"], "b": pa.array([1], pa.int32())})
    pq.write_table(first, tmp / "rows.parquet")
    spec = ("add-partition-spec", "--schema", str(tmp / "rows.parquet"), "--field", "k")
    assert invoke(*args, *spec).exit_code == 0
    assert invoke(*args, "write", "--from", str(tmp / "rows.parquet")).exit_code == 0
    columns = {"a": pa.string(), "b": pa.int32()}  # besides the partition column k
    next_k, added = 1, 0
    for kind, arg in steps:
        if kind == "add":
            name = f"n{added}"
            added += 1
            change = ["--add", f"{name} {arg}"]
            columns[name] = {"int32": pa.int32(), "string": pa.string(), "int64": pa.int64()}[arg]
        elif kind in ("drop", "rename") and columns:
            name = sorted(columns)[arg % len(columns)]
            if kind == "drop":
                change = ["--drop", name]
                del columns[name]
            else:
                change = ["--rename", f"{name}={name}_r"]
                columns[f"{name}_r"] = columns.pop(name)
        elif kind == "write":
            rows = {"k": pa.array(range(next_k, next_k + arg), pa.int64())}
            rows |= {c: pa.nulls(arg, t) for c, t in columns.items()}
            next_k += arg
            pq.write_table(pa.table(rows), tmp / "more.parquet")
            result = invoke(*args, "write", "--from", str(tmp / "more.parquet"))
            assert result.exit_code == 0, result.stderr
            continue
        else:
            continue
        result = invoke(*args, "evolve-schema", *change)
        assert result.exit_code == 0, (change, result.stderr)
    wanted, tables = published_ids(root)
    assert tables
    for ids in tables:
        assert {p: ids[p] for p in wanted} == wanted, (steps, ids, wanted)
    result = invoke(*args, "check", "--json")
    assert result.exit_code == 0, result.stdout


def dropped_b_added_c(tmp_path):
    """The issue's namespace: `k int64, a string, b int32` by `k`, a row written, then
    `evolve-schema --drop b --add 'c int32'` (b had id 2; c gets 3)."""
    root = tmp_path / "ns"
    root.mkdir()
    args = ("--root", str(root))
    rows = pa.table({"k": pa.array([0], pa.int64()), "a": ["x"], "b": pa.array([1], pa.int32())})
    pq.write_table(rows, tmp_path / "rows.parquet")
    spec = ("add-partition-spec", "--schema", str(tmp_path / "rows.parquet"), "--field", "k")
    assert invoke(*args, *spec).exit_code == 0
    assert invoke(*args, "write", "--from", str(tmp_path / "rows.parquet")).exit_code == 0
    assert invoke(*args, "evolve-schema", "--drop", "b", "--add", "c int32").exit_code == 0
    return root


def test_check_finds_a_partition_table_whose_field_ids_are_not_the_schemas(tmp_path):
    """A table created by a writer that let Lance number the fields (as lancens did before):
    after a drop and an add, the new column's id is the dropped one's."""
    root = dropped_b_added_c(tmp_path)
    args = ("--root", str(root))
    ns = Namespace.from_properties({"root": str(root)})
    (row,) = [r for r in ns.snapshot().rows if r.get("read_version")]
    # the table rewritten as a naive writer creates it: ids 0, 1, 2 for k, a, c
    same = lance.dataset(str(root / row["location"]), version=row["read_version"]).to_table()
    plain = same.cast(pa.schema([pa.field(f.name, f.type) for f in same.schema]))
    renumbered = lance.write_dataset(plain, str(root / row["location"]), mode="overwrite")
    assert lance_ids_by_path(renumbered.lance_schema)["c"] == 2
    ns.manifest.mutate(
        lambda snapshot, edit: edit.replace(row["object_id"], read_version=renumbered.version)
    )
    result = invoke(*args, "check", "--json")
    assert result.exit_code == 1
    (found,) = [
        f for f in json.loads(result.stdout)["findings"] if f["code"].endswith("ids_differ")
    ]
    assert "c has id 2, which the namespace gave b" in found["message"]


@pytest.mark.spark
def test_ingest_creates_partition_tables_with_the_namespace_schemas_field_ids(tmp_path, spark):
    """The Spark path: tasks write the data files, the driver commits each new table; after a
    drop and an add the new table's `c` has the namespace's id 3, not the dropped `b`'s 2, and
    its rows read back."""
    root = dropped_b_added_c(tmp_path)
    args = ("--root", str(root))
    more = pa.table({"k": pa.array([7, 8], pa.int64()), "a": ["y", "z"], "c": pa.array([5, 6])})
    pq.write_table(
        more.cast(pa.schema([("k", pa.int64()), ("a", pa.string()), ("c", pa.int32())])),
        tmp_path / "more.parquet",
    )
    result = invoke(*args, "ingest", str(tmp_path / "more.parquet"), "--master", "local[2]")
    assert result.exit_code == 0, result.stderr
    wanted, tables = published_ids(root)
    assert len(tables) == 3
    for ids in tables:
        assert {p: ids[p] for p in wanted} == wanted == {"k": 0, "a": 1, "c": 3}
    ns = Namespace.from_properties({"root": str(root)})
    read = []
    for row in ns.snapshot().rows:
        if row["object_type"] == "table" and row.get("read_version"):
            ds = lance.dataset(str(root / row["location"]), version=row["read_version"])
            assert ds.schema.names == ["k", "a", "c"]
            read += ds.to_table().to_pylist()
    assert sorted(read, key=lambda r: r["k"]) == [
        {"k": 0, "a": "x", "c": None},
        {"k": 7, "a": "y", "c": 5},
        {"k": 8, "a": "z", "c": 6},
    ]
    assert invoke(*args, "check").exit_code == 0
