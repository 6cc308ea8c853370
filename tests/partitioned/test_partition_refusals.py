"""What a partitioned root refuses, through the CLI: user namespaces and tables named `v<N>` or
below one, a different `--schema` for add-partition-spec, and partition expressions that are
volatile or do not return their result_type (refused when the spec is added, by `--field` and
by `--spec` file alike). Each is one line on stderr, its exit code, and nothing changed."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events
from helpers import ok, run_cli, tree_snapshot


def refused(root, *args: str, code: int, words: str) -> str:
    before = tree_snapshot(root.local_path)
    result = run_cli(*root.args, *args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert words in result.stderr, result.stderr
    assert tree_snapshot(root.local_path) == before
    return result.stderr


def _table_schema(tmp_path) -> str:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps({"fields": [{"name": "a", "nullable": True, "type": {"type": "int64"}}]})
    )
    return str(path)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["create", "namespace", "v2"], "reserved"),
        (["create", "namespace", "v17"], "reserved"),
        (["create", "namespace", "v1.mine"], "lancens write"),
        (["create", "namespace", "v1.mine", "--dry-run"], "lancens write"),
        (["create", "namespace", "v2.mine"], "reserved"),
        (["create", "table", "v1.t", "--schema", "{schema}"], "lancens write"),
        (["create", "table", "v3.t", "--schema", "{schema}"], "reserved"),
        (["create", "table", "v2", "--schema", "{schema}"], "reserved"),
    ],
)
def test_spec_version_names_are_refused(partitioned, tmp_path, args, words):
    args = [a.replace("{schema}", _table_schema(tmp_path)) for a in args]
    refused(partitioned, *args, code=5, words=words)


def test_the_spec_namespace_itself_already_exists_and_other_names_are_free(partitioned, tmp_path):
    refused(partitioned, "create", "namespace", "v1", code=4, words="already exists")
    ok(partitioned, "create", "namespace", "v1", "--exist-ok")
    for name in ("v0", "vx", "version2", "v01"):
        ok(partitioned, "create", "namespace", name)
    ok(partitioned, "create", "table", "v0.t", "--schema", _table_schema(tmp_path))


def test_register_and_rename_keep_out_of_spec_namespaces(partitioned, tmp_path, files):
    """`register` into `v<N>`, `rename` onto a `v<N>` name, and `rename` of a partition out of
    its spec namespace are refused like `create` (exit 5, nothing changed)."""
    import lance

    ok(partitioned, "write", "--from", files("rows.parquet", events(20)))
    ok(partitioned, "create", "table", "mine", "--schema", _table_schema(tmp_path))
    outside = partitioned.local_path / "ext" / "t.lance"
    lance.write_dataset(pa.table({"a": pa.array([1], pa.int64())}), outside)
    refused(partitioned, "register", "v1.x", "ext/t.lance", code=5, words="lancens write")
    refused(partitioned, "register", "v2", "ext/t.lance", code=5, words="reserved")
    refused(partitioned, "rename", "mine", "v2", code=5, words="reserved")
    refused(partitioned, "rename", "mine", "v1.mine", code=5, words="lancens write")
    listing = json.loads(run_cli(*partitioned.args, "partitions", "--json").stdout)
    partition = listing["partitions"][0]["table"]
    refused(partitioned, "rename", partition, "moved", code=5, words="partition spec v1")
    refused(partitioned, "rename", "v1", "v9", code=5, words="partition spec v1")
    ok(partitioned, "rename", "mine", "yours")


def test_v_names_are_free_on_a_root_that_is_not_partitioned(local_root, tmp_path):
    ok(local_root, "create", "namespace", "v2")
    ok(local_root, "create", "table", "v2.t", "--schema", _table_schema(tmp_path))


def test_a_different_schema_points_to_evolve_schema(partitioned, tmp_path):
    other = tmp_path / "other.parquet"
    pq.write_table(events(1).append_column("extra", pa.array([1], pa.int64())), other)
    refused(
        partitioned,
        "add-partition-spec",
        "--schema",
        str(other),
        "--field",
        "bucket(4, id)",
        code=2,
        words="lancens evolve-schema",
    )
    same = tmp_path / "same.parquet"
    pq.write_table(events(1), same)
    ok(partitioned, "add-partition-spec", "--schema", str(same), "--field", "bucket(4, id)")


VOLATILE = ["random()", "now()", "uuid()", "current_date()", "current_time()", "col0 + random()"]


@pytest.mark.parametrize("expression", VOLATILE)
def test_volatile_expressions_are_refused_at_add_time(partitioned, tmp_path, expression):
    field = f"expr({expression}, customer_id) -> int64 as x"
    refused(partitioned, "add-partition-spec", "--field", field, code=2, words="deterministic")
    spec = tmp_path / "spec.json"
    document = {
        "fields": [
            {
                "field_id": "x",
                "source_ids": [3],
                "expression": expression,
                "result_type": {"type": "int64"},
            }
        ]
    }
    spec.write_text(json.dumps(document))
    refused(partitioned, "add-partition-spec", "--spec", str(spec), code=2, words="deterministic")


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ({"expression": "CAST(col0 AS VARCHAR)", "result_type": {"type": "int32"}}, "declared"),
        ({"expression": "col0 > 1", "result_type": {"type": "int32"}}, "declared"),
        (
            {"transform": {"type": "bucket", "num_buckets": 4}, "result_type": {"type": "int64"}},
            "int32",
        ),
        ({"transform": {"type": "identity"}, "result_type": {"type": "utf8"}}, "int64"),
    ],
)
def test_a_spec_file_field_must_return_its_result_type(partitioned, tmp_path, field, words):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"fields": [{"field_id": "x", "source_ids": [3], **field}]}))
    refused(partitioned, "add-partition-spec", "--spec", str(spec), code=2, words=words)
    # the same definition written as --field is refused alike
    if "expression" in field:
        kind = field["result_type"]["type"]
        text = f"expr({field['expression']}, customer_id) -> {kind} as x"
        refused(partitioned, "add-partition-spec", "--field", text, code=2, words=words)


def test_a_good_expression_is_added_and_writes(partitioned, files):
    field = "expr(col0 % 7, customer_id) -> int64 as c7"
    ok(partitioned, "add-partition-spec", "--field", field)
    ok(partitioned, "write", "--from", files("a.parquet", events(50)))
    listed = ok(partitioned, "--json", "partitions").json()["partitions"]
    assert {p["values"]["c7"] for p in listed} <= set(range(7))
