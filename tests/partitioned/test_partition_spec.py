"""The partition spec model: exact JSON round-trip of the partitioning spec's appendices, the
readable `--field` syntax, and field-id reuse."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from spec_appendix import APPENDIX_A

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.field_syntax import parse_field
from lancens_cli.partition.schema import schema_from_text, schema_to_text, with_field_ids
from lancens_cli.partition.spec import PartitionSpec, all_fields, specs_from_metadata

APPENDIX_E_V1 = (
    '{"id":1,"fields":[{"field_id":"event_date","source_ids":[1],'
    '"transform":{"type":"identity"},"result_type":{"type":"date32"}}]}'
)


def test_appendix_a_round_trips_exactly():
    metadata = {k: json.dumps(v) for k, v in APPENDIX_A.items()}
    specs = specs_from_metadata(metadata)
    assert [s.id for s in specs] == [1, 2]
    for spec in specs:
        assert spec.to_json() == APPENDIX_A[spec.key]
    schema = schema_from_text(metadata["schema"])
    assert json.loads(schema_to_text(schema)) == APPENDIX_A["schema"]
    columns = {f.column: f.result_type for f in all_fields(specs).values()}
    assert columns == {
        "partition_field_event_date": pa.date32(),
        "partition_field_event_year": pa.int32(),
        "partition_field_country": pa.string(),
    }


def test_appendix_e_text_is_the_compact_form():
    spec = PartitionSpec.from_json(APPENDIX_E_V1)
    assert spec.to_text() == APPENDIX_E_V1


def test_parameters_expressions_and_unknown_keys_survive():
    document = {
        "id": 3,
        "fields": [
            {
                "field_id": "b",
                "source_ids": [4],
                "transform": {"type": "bucket", "num_buckets": 16},
                "result_type": {"type": "int32"},
                "doc": "kept",
            },
            {
                "field_id": "t",
                "source_ids": [5],
                "transform": {"type": "truncate", "width": 4},
                "result_type": {"type": "utf8"},
            },
            {
                "field_id": "y",
                "source_ids": [1, 2],
                "expression": "date_part('year', col0) + col1",
                "result_type": {"type": "int32"},
            },
        ],
        "future": {"x": 1},
    }
    assert PartitionSpec.from_json(document).to_json() == document


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"id": 1, "fields": [{"field_id": "x", "source_ids": [1],
          "transform": {"type": "weekday"}, "result_type": {"type": "int32"}}]},
         "unknown transform"),
        ({"id": 1, "fields": [{"field_id": "x", "source_ids": [1],
          "transform": {"type": "bucket"}, "result_type": {"type": "int32"}}]}, "num_buckets"),
        ({"id": 1, "fields": [{"field_id": "x", "source_ids": [1],
          "transform": {"type": "identity"}, "expression": "col0",
          "result_type": {"type": "int32"}}]}, "exactly one"),
        ({"id": 1, "fields": [{"field_id": "x", "source_ids": [1],
          "result_type": {"type": "int32"}}]}, "exactly one"),
        ({"id": 1, "fields": [{"field_id": "a b", "source_ids": [1],
          "transform": {"type": "identity"}, "result_type": {"type": "int32"}}]}, "field_id"),
        ({"id": 0, "fields": []}, "spec id"),
        ({"id": 1, "fields": [{"field_id": "x", "source_ids": [1, 2],
          "transform": {"type": "year"}, "result_type": {"type": "int32"}}]}, "one source"),
        ({"fields": []}, '"id"'),
    ],
)  # fmt: skip
def test_malformed_specs_are_refused(document, words):
    with pytest.raises(InvalidInputError, match=words):
        PartitionSpec.from_json(document)


@pytest.mark.parametrize(
    ("text", "columns", "transform", "parameter", "field_id", "result_type"),
    [
        ("event_date", ("event_date",), "identity", None, "event_date", None),
        ("year(event_date) as event_year", ("event_date",), "year", None, "event_year", None),
        ("month(ts)", ("ts",), "month", None, "ts_month", None),
        ("bucket(16, customer_id)", ("customer_id",), "bucket", 16, "customer_id_bucket", None),
        ("bucket(customer_id, 16)", ("customer_id",), "bucket", 16, "customer_id_bucket", None),
        ("truncate(4, name)", ("name",), "truncate", 4, "name_trunc", None),
        ("multi_bucket(8, a, b) as ab", ("a", "b"), "multi_bucket", 8, "ab", None),
        ("year(d) -> int32 as y", ("d",), "year", None, "y", "int32"),
    ],
)
def test_readable_fields(text, columns, transform, parameter, field_id, result_type):
    request = parse_field(text)
    assert (request.columns, request.transform, request.parameter) == (
        columns,
        transform,
        parameter,
    )
    assert (request.field_id, request.result_type) == (field_id, result_type)


def test_expression_field():
    request = parse_field("expr(date_part('year', col0), event_date) -> int32 as y")
    assert request.expression == "date_part('year', col0)"
    assert request.columns == ("event_date",)
    assert (request.result_type, request.field_id) == ("int32", "y")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("weekday(d)", "unknown transform"),
        ("bucket(d)", "bucket count"),
        ("bucket(0, d)", "at least 1"),
        ("truncate(4, a, b)", "one column"),
        ("expr(col0 + 1, d)", "result type"),
        ("expr(col0 + 1, d) -> int64", "field id"),
        ("year(d) as 9lives", "field_id"),
        ("a b", "not a column"),
        ("year(d, e)", "one column"),
    ],
)
def test_bad_fields_name_the_problem(text, words):
    with pytest.raises(InvalidInputError, match=words):
        parse_field(text)


def test_field_ids_are_assigned_depth_first_and_kept():
    schema = pa.schema(
        [
            pa.field("a", pa.int32()),
            pa.field("s", pa.struct([("x", pa.int8()), ("y", pa.string())])),
            pa.field("b", pa.string(), metadata={"lance:field_id": "10"}),
        ]
    )
    numbered = with_field_ids(schema)
    ids = [
        numbered.field("a").metadata[b"lance:field_id"],
        numbered.field("b").metadata[b"lance:field_id"],
    ]
    assert ids == [b"11", b"10"]
    struct = numbered.field("s")
    assert struct.metadata[b"lance:field_id"] == b"12"
    assert [f.metadata[b"lance:field_id"] for f in struct.type] == [b"13", b"14"]
    with pytest.raises(InvalidInputError, match="unique"):
        with_field_ids(
            pa.schema(
                [
                    pa.field("a", pa.int32(), metadata={"lance:field_id": "1"}),
                    pa.field("b", pa.int32(), metadata={"lance:field_id": "1"}),
                ]
            )
        )


def test_a_spec_whose_tables_cannot_be_laid_out_is_refused_before_anything_is_written(tmp_path):
    """`<hash>_v1$<16 chars>...$dataset`: 14 levels pass a file system's 255-byte name."""
    import pyarrow.parquet as pq
    from helpers import invoke, tree_snapshot

    root = tmp_path / "ns"
    root.mkdir()
    columns = {f"c{i}": pa.array([i], pa.int32()) for i in range(14)}
    pq.write_table(pa.table(columns), tmp_path / "rows.parquet")
    fields = [arg for i in range(14) for arg in ("--field", f"c{i}")]
    args = ("--root", str(root), "add-partition-spec", "--schema", str(tmp_path / "rows.parquet"))
    before = tree_snapshot(root)
    refused = invoke(*args, *fields)
    assert refused.exit_code == 2 and "255-byte limit" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert tree_snapshot(root) == before
    assert invoke(*args, *fields[:-2]).exit_code == 0  # 13 levels fit
    written = invoke("--root", str(root), "write", "--from", str(tmp_path / "rows.parquet"))
    assert written.exit_code == 0, written.stderr
