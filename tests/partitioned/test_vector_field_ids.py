"""Field ids of a namespace schema with vectors, lists, structs and maps are the ids Lance gives
the same schema, whatever file the schema came from; a namespace an older lancens numbered
otherwise is found by `check` and renumbered by `check --fix` in one commit."""

from __future__ import annotations

import json

import lance
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from helpers import invoke
from hypothesis import given, settings
from hypothesis import strategies as st
from lance.schema import LanceSchema

from lancens_cli.partition.renumber import lance_paths, numbering_faults
from lancens_cli.partition.schema import (
    FIELD_ID_KEY,
    field_ids_by_path,
    lance_ids_by_path,
    schema_from_text,
    schema_to_text,
    with_field_ids,
)
from lancens_cli.partition.schema_evolution import column_sources
from lancens_cli.partition.spec import SCHEMA_KEY, PartitionSpec
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of

SCALARS = [pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(), pa.bool_()]


def nested_types(depth: int = 2) -> st.SearchStrategy:
    """Arrow types as writers make them: vectors, lists (child names as Parquet and Arrow
    name them), structs, maps, nested in one another."""
    scalar = st.sampled_from(SCALARS)
    if depth == 0:
        return scalar
    inner = nested_types(depth - 1)
    child_name = st.sampled_from(["item", "element"])
    return st.one_of(
        scalar,
        st.builds(
            lambda kind, size: pa.list_(pa.field("item", kind), size),
            st.sampled_from([pa.float32(), pa.float16(), pa.uint8(), pa.float64()]),
            st.integers(1, 16),
        ),
        # a fixed-size list of what Lance stores in one (not of variable-length lists)
        st.builds(
            lambda kind, size: pa.list_(kind, size),
            st.one_of(
                scalar,
                st.builds(lambda k: pa.list_(k, 2), scalar),
                st.builds(
                    lambda ks: pa.struct([(f"g{i}", k) for i, k in enumerate(ks)]),
                    st.lists(scalar, min_size=1, max_size=2),
                ),
            ),
            st.integers(1, 4),
        ),
        st.builds(lambda kind, name: pa.list_(pa.field(name, kind)), inner, child_name),
        st.builds(lambda kind: pa.large_list(kind), inner),
        st.builds(
            lambda kinds: pa.struct([(f"f{i}", k) for i, k in enumerate(kinds)]),
            st.lists(inner, min_size=1, max_size=3),
        ),
        st.builds(lambda value: pa.map_(pa.string(), value), inner),
    )


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(kinds=st.lists(nested_types(), min_size=1, max_size=5))
def test_the_namespace_numbers_every_nested_type_as_lance_does(kinds):
    schema = pa.schema([(f"c{i}", kind) for i, kind in enumerate(kinds)])
    numbered = with_field_ids(schema)
    lance_ids = lance_ids_by_path(LanceSchema.from_pyarrow(schema))
    assert field_ids_by_path(numbered) == lance_ids
    assert lance_paths(numbered) == list(lance_ids)
    assert numbering_faults(numbered) == []
    # the JSON form kept in __manifest keeps them
    assert field_ids_by_path(schema_from_text(schema_to_text(numbered))) == lance_ids


def vector_rows(n: int = 48, dim: int = 8, seed: int = 0) -> pa.Table:
    """Rows with an embedding before other columns, plus list, struct and map columns."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype("float32")
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
            "city": pa.array(["Oslo", "Lima", "Pune"] * (n // 3)),
            "tags": pa.array([[f"t{i}", "x"] for i in range(n)]),
            "s": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
            "m": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
            "score": pa.array(rng.random(n)),
        }
    )


def published_tables(root) -> tuple[Namespace, list[tuple[dict, lance.LanceDataset]]]:
    ns = Namespace.from_properties({"root": str(root)})
    tables = []
    for row in ns.snapshot().rows:
        if row["object_type"] == "table" and row.get("read_version"):
            ds = lance.dataset(str(root / row["location"]), version=row["read_version"])
            tables.append((row, ds))
    return ns, tables


def write_source(rows: pa.Table, tmp_path, kind: str) -> str:
    """The rows as a user's file of `kind`: Parquet (its lists' children named `element`),
    an Arrow IPC file (`item`), or a Lance table."""
    if kind == "parquet":
        path = tmp_path / "rows.parquet"
        pq.write_table(rows, path)
    elif kind == "arrow":
        path = tmp_path / "rows.arrow"
        feather.write_feather(rows, path)
    else:
        path = tmp_path / "rows.lance"
        lance.write_dataset(rows, path)
    return str(path)


@pytest.mark.parametrize("kind", ["parquet", "arrow", "lance"])
def test_a_namespace_with_vectors_checks_healthy_after_writes_from_every_source(tmp_path, kind):
    root = tmp_path / "ns"
    args = ("--root", str(root))
    source = write_source(vector_rows(), tmp_path, kind)
    assert invoke(*args, "init").exit_code == 0
    added = invoke(*args, "add-partition-spec", "--schema", source, "--field", "city")
    assert added.exit_code == 0, added.stderr
    for _ in range(2):  # a new table, then an append to it
        result = invoke(*args, "write", "--from", source)
        assert result.exit_code == 0, result.stderr
    result = invoke(*args, "check", "--json")
    assert result.exit_code == 0, result.stdout
    assert result.json()["healthy"] is True
    ns, tables = published_tables(root)
    wanted = field_ids_by_path(layout_of(ns.snapshot()).schema)
    assert wanted["city"] == 2 and "emb.item" not in wanted and "m.entries" in wanted
    assert len(tables) == 3
    for _, ds in tables:
        assert lance_ids_by_path(ds.lance_schema) == wanted
    read = pa.concat_tables([ds.to_table() for _, ds in tables]).sort_by("id").to_pylist()
    expected = sorted(vector_rows().to_pylist() * 2, key=lambda r: r["id"])
    assert [r["id"] for r in read] == [r["id"] for r in expected]
    for got, want in zip(read, expected, strict=True):
        assert got["emb"] == want["emb"] and got["m"] == want["m"] and got["s"] == want["s"]


def vector_namespace(tmp_path) -> tuple:
    """A namespace partitioned by city over `vector_rows`, written once from Parquet."""
    root = tmp_path / "ns"
    args = ("--root", str(root))
    source = write_source(vector_rows(), tmp_path, "parquet")
    assert invoke(*args, "init").exit_code == 0
    assert invoke(*args, "add-partition-spec", "--schema", source, "--field", "city").exit_code == 0
    assert invoke(*args, "write", "--from", source).exit_code == 0
    return root, args, source


def old_numbering(schema: pa.Schema, original: pa.Schema | None = None) -> pa.Schema:
    """The schema numbered as lancens numbered it before: depth-first over every child Arrow
    has (a vector's element included, a map's key and value without its entries), each column
    numbered where it stood in the `original` generation (a column keeps its ids)."""
    original = original if original is not None else schema

    def children(kind):
        if pa.types.is_struct(kind):
            return list(kind)
        if pa.types.is_map(kind):
            return [kind.key_field, kind.item_field]
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return [kind.value_field]
        if pa.types.is_fixed_size_list(kind):
            return [kind.value_field]
        return []

    def rebuilt(kind, kids):
        if pa.types.is_struct(kind):
            return pa.struct(kids)
        if pa.types.is_map(kind):
            return pa.map_(kids[0], kids[1])
        if pa.types.is_fixed_size_list(kind):
            return pa.list_(kids[0], kind.list_size)
        if pa.types.is_large_list(kind):
            return pa.large_list(kids[0])
        return pa.list_(kids[0])

    def number(field, ids):
        field = field.with_metadata({FIELD_ID_KEY: str(next(ids))})
        kids = [number(c, ids) for c in children(field.type)]
        return field.with_type(rebuilt(field.type, kids)) if kids else field

    def size(field):
        return 1 + sum(size(c) for c in children(field.type))

    starts, at = {}, 0
    for f in original:
        starts[f.metadata[FIELD_ID_KEY.encode()]] = at
        at += size(f)
    columns = [
        number(f, iter(range(starts[f.metadata[FIELD_ID_KEY.encode()]], at))) for f in schema
    ]
    return pa.schema(columns)


def as_older_lancens_left_it(root, original=None) -> tuple[dict[str, str], int]:
    """The namespace's schema and specs renumbered as an older lancens numbered them (its
    tables untouched); returns the metadata before and the `__manifest` version after."""
    ns = Namespace.from_properties({"root": str(root)})
    snapshot = ns.snapshot()
    layout = layout_of(snapshot)
    before = dict(snapshot.metadata)
    old = old_numbering(layout.schema, original)
    new_ids = {f.name: int(f.metadata[FIELD_ID_KEY.encode()]) for f in layout.schema}
    old_ids = {f.name: int(f.metadata[FIELD_ID_KEY.encode()]) for f in old}
    by_id = {new_ids[name]: old_ids[name] for name in new_ids}
    updates = {SCHEMA_KEY: schema_to_text(old)}
    for spec in layout.specs:
        document = spec.to_json()
        for f in document["fields"]:
            f["source_ids"] = [by_id[s] for s in f["source_ids"]]
        updates[spec.key] = PartitionSpec.from_json(document).to_text()

    def plan(snapshot, edit):
        edit.set_metadata(updates)

    ns.manifest.mutate(plan)
    return before, ns.snapshot().version


def test_check_fix_renumbers_a_namespace_an_older_lancens_numbered(tmp_path):
    root, args, source = vector_namespace(tmp_path)
    before, version = as_older_lancens_left_it(root)

    found = invoke(*args, "check", "--json")
    assert found.exit_code == 1
    (finding,) = found.json()["findings"]  # one finding, not one per table
    assert finding["code"] == "namespace_field_ids_unlike_lance"
    assert "emb.item has id 2 (Lance gives a vector's elements none)" in finding["message"]
    assert "city 3->2" in finding["message"] and finding["fixable"] is True

    dry = invoke(*args, "check", "--fix", "--dry-run")
    assert dry.exit_code == 1
    ns = Namespace.from_properties({"root": str(root)})
    assert ns.snapshot().version == version

    fixed = invoke(*args, "check", "--fix", "--json")
    assert fixed.exit_code == 0, fixed.stdout
    snapshot = ns.snapshot()
    assert snapshot.version == version + 1  # one commit
    assert snapshot.metadata[SCHEMA_KEY] == before[SCHEMA_KEY]
    assert snapshot.metadata["partition_spec_v1"] == before["partition_spec_v1"]
    assert invoke(*args, "check").exit_code == 0
    # the spec reaches its column again: pruning and writes go on
    pruned = invoke(*args, "partitions", "--where", "city = 'Lima'", "--json")
    assert [p["values"]["city"] for p in pruned.json()["partitions"]] == ["Lima"]
    assert invoke(*args, "write", "--from", source).exit_code == 0
    assert invoke(*args, "check").exit_code == 0


def test_check_fix_carries_the_renumbering_through_the_schema_history(tmp_path):
    """After a rename and a drop, tables of the older generation still read through the
    renumbered history: the renamed column's values come back under its new name."""
    root, args, _ = vector_namespace(tmp_path)
    for change in (["--rename", "score=rating"], ["--drop", "tags"]):
        assert invoke(*args, "evolve-schema", *change).exit_code == 0
    ns = Namespace.from_properties({"root": str(root)})
    history_before = ns.snapshot().metadata["lancens.schema_history"]

    history = [schema_from_text(json.dumps(d)) for d in json.loads(history_before)]
    old = [json.loads(schema_to_text(old_numbering(g, history[0]))) for g in history]
    as_older_lancens_left_it(root, history[0])
    ns.manifest.mutate(
        lambda snapshot, edit: edit.set_metadata({"lancens.schema_history": json.dumps(old)})
    )
    assert invoke(*args, "check").exit_code == 1
    assert invoke(*args, "check", "--fix").exit_code == 0
    snapshot = ns.snapshot()
    renumbered = [
        schema_from_text(json.dumps(d))
        for d in json.loads(snapshot.metadata["lancens.schema_history"])
    ]
    current = layout_of(snapshot).schema
    # the same column has the same id in every generation, the current one included
    ids_now = field_ids_by_path(current)
    for old, new in zip(history, renumbered, strict=True):
        assert numbering_faults(new) == []
        by_name = field_ids_by_path(new)
        assert by_name["id"] == ids_now["id"]
        assert by_name.get("score", by_name.get("rating")) == ids_now["rating"]
        assert set(field_ids_by_path(old)) == set(by_name)
    # a table still at the first generation is read through the history: score is rating
    first = pa.schema([pa.field(f.name, f.type) for f in history[0]])
    sources = column_sources(first, current, renumbered)
    assert sources["rating"] == "score" and sources["emb"] == "emb"
    assert invoke(*args, "check").exit_code == 0


def test_check_says_why_it_cannot_renumber_when_the_tables_disagree(tmp_path):
    root, args, source = vector_namespace(tmp_path)
    ns, tables = published_tables(root)
    row, ds = tables[0]
    # one table rewritten by a tool that numbered its columns from 1 (a column before them,
    # dropped): every id one more than the other tables'
    data = ds.to_table()
    padded = data.add_column(0, "gap", pa.nulls(data.num_rows, pa.int8()))
    rewritten = lance.write_dataset(padded, ds.uri, mode="overwrite")
    rewritten.drop_columns(["gap"])
    rewritten = lance.dataset(ds.uri)
    assert lance_ids_by_path(rewritten.lance_schema)["id"] == 1
    ns.manifest.mutate(
        lambda snapshot, edit: edit.replace(row["object_id"], read_version=rewritten.version)
    )
    _, version = as_older_lancens_left_it(root)
    result = invoke(*args, "check", "--fix", "--json")
    assert result.exit_code == 1
    finding = next(
        f for f in result.json()["findings"] if f["code"] == "namespace_field_ids_unlike_lance"
    )
    assert finding["fixable"] is False and "the partition tables disagree" in finding["message"]
    assert ns.snapshot().version == version  # nothing changed


def test_evolve_schema_around_vectors_keeps_every_tables_ids_lances(tmp_path):
    """Adds (a second embedding, a list), a rename and a drop around the vector, then a write
    creating a new partition table: every table's Lance ids are the namespace's."""
    root, args, _ = vector_namespace(tmp_path)
    changes = [
        ["--add", "emb2 fixed_size_list:float32:4", "--add", "labels list:utf8"],
        ["--rename", "emb=embedding", "--drop", "tags"],
        ["--drop", "score", "--add", "note int32"],
    ]
    for change in changes:
        result = invoke(*args, "evolve-schema", *change)
        assert result.exit_code == 0, result.stderr
    n = 6
    rows = (
        vector_rows(n)
        .drop_columns(["tags", "score"])
        .rename_columns(["id", "embedding", "city", "s", "m"])
    )
    rows = rows.set_column(2, "city", pa.array(["Rome"] * n))
    vectors = pa.array(np.arange(n * 4, dtype="float32"))
    rows = rows.append_column("emb2", pa.FixedSizeListArray.from_arrays(vectors, 4))
    rows = rows.append_column("labels", pa.array([["a", "b"]] * n))
    rows = rows.append_column("note", pa.array(range(n), pa.int32()))
    pq.write_table(rows, tmp_path / "more.parquet")
    result = invoke(*args, "write", "--from", str(tmp_path / "more.parquet"))
    assert result.exit_code == 0, result.stderr
    ns, tables = published_tables(root)
    wanted = field_ids_by_path(layout_of(ns.snapshot()).schema)
    assert "emb2.item" not in wanted and wanted["labels.item"] == wanted["labels"] + 1
    assert len(tables) == 4
    for _, ds in tables:
        assert lance_ids_by_path(ds.lance_schema) == wanted
    (rome,) = [ds for row, ds in tables if row["partition_field_city"] == "Rome"]
    assert rome.to_table(columns=["emb2"]).column("emb2").to_pylist()[1] == [4.0, 5.0, 6.0, 7.0]
    assert invoke(*args, "check").exit_code == 0


def test_an_unknown_vector_type_is_refused_in_words_before_anything_changes(tmp_path):
    root, args, _ = vector_namespace(tmp_path)
    version = Namespace.from_properties({"root": str(root)}).snapshot().version
    result = invoke(*args, "evolve-schema", "--add", "e fixed_size_list:float32:0")
    assert result.exit_code == 2
    assert "fixed_size_list:float32:768" in result.stderr and len(result.stderr.splitlines()) == 1
    assert Namespace.from_properties({"root": str(root)}).snapshot().version == version
