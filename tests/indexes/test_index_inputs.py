"""`create index` and `prune --optimize-indexes` at the command line: every bad input exits 2
with one line and leaves the tree as it was; the output in a pipe and with --json."""

from __future__ import annotations

import json

import pytest
from helpers import cli, ok, run_cli, tree_snapshot

BAD_ON_THE_ROOT = [
    (["--column", "nope", "--type", "btree"], "no such column"),
    (["--column", "text", "--type", "ivf_pq"], "does not fit"),
    (["--column", "vec", "--type", "btree"], "does not fit"),
    (["--column", "id", "--type", "fts"], "does not fit"),
    (["--column", "k", "--type", "label_list"], "does not fit"),
    (["--column", "id", "--type", "hash"], "not an index type"),
    (["--column", "id", "--type", "btree", "--num-partitions", "4"], "only for vector"),
    (["--column", "vec", "--type", "ivf_pq", "--num-sub-vectors", "3"], "does not divide"),
    (["--column", "vec", "--type", "ivf_flat", "--num-sub-vectors", "2"], "--num-sub-vectors"),
    (["--column", "vec", "--type", "ivf_pq", "--metric", "manhattan"], "--metric"),
    (["--type", "btree"], "--column"),
    (["--column", "id"], "--type"),
]


@pytest.mark.parametrize(("args", "words"), BAD_ON_THE_ROOT)
def test_a_bad_index_exits_2_with_one_line_and_changes_nothing(three_partitions, args, words):
    root = three_partitions
    before = tree_snapshot(root.local_path)
    result = cli(root, "create", "index", *args)
    assert result.exit_code == 2, result
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr
    assert tree_snapshot(root.local_path) == before


def test_a_redefinition_needs_replace_and_a_plain_root_needs_an_id(three_partitions, local_root):
    root = three_partitions
    ok(root, "create", "index", "--column", "id", "--type", "btree")
    before = tree_snapshot(root.local_path)
    again = cli(root, "create", "index", "--column", "id", "--type", "bitmap", "--name", "id_idx")
    assert again.exit_code == 2 and "--replace" in again.stderr
    assert tree_snapshot(root.local_path) == before
    ok(
        root,
        "create",
        "index",
        "--column",
        "id",
        "--type",
        "bitmap",
        "--name",
        "id_idx",
        "--replace",
    )


def test_bad_input_on_a_table(lancedb_root):
    root = lancedb_root
    before = tree_snapshot(root.local_path)
    for args, code in (
        (["docs", "--column", "nope", "--type", "btree"], 2),
        (["docs", "--column", "id", "--type", "btree"], 2),  # id_idx exists: --replace
        (["missing", "--column", "id", "--type", "btree"], 3),
        (["--column", "id", "--type", "btree"], 2),  # not a partitioned root
    ):
        result = cli(root, "create", "index", *args)
        assert result.exit_code == code, (args, result)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert tree_snapshot(root.local_path) == before


def test_create_index_on_a_table_and_dry_run(lancedb_root):
    root = lancedb_root
    before = tree_snapshot(root.local_path)
    planned = ok(root, "create", "index", "docs", "--column", "k", "--type", "bitmap", "--dry-run")
    assert tree_snapshot(root.local_path) == before
    assert "would build" in planned.stderr
    made = ok(root, "create", "index", "docs", "--column", "k", "--type", "bitmap", "--json")
    table = made.json()["tables"][0]
    assert table["version_after"] == table["version_before"] + 1
    shown = ok(root, "describe", "docs", "--json").json()["details"]["indices"]
    assert ("k_idx", "Bitmap", 0) in {(i["name"], i["type"], i["unindexed_rows"]) for i in shown}


def test_output_in_a_pipe_and_as_json(three_partitions):
    root = three_partitions
    piped = run_cli(*root.args, "create", "index", "--column", "id", "--type", "btree")
    assert piped.exit_code == 0, piped.stderr
    lines = piped.stdout.rstrip("\n").split("\n")
    assert len(lines) == 3 and all(len(line.split("\t")) == 6 for line in lines)
    assert all(line.split("\t")[4] == "True" for line in lines)
    assert piped.stderr.strip().endswith("kept as the namespace's definition")
    as_json = run_cli(*root.args, "create", "index", "--column", "text", "--type", "fts", "--json")
    document = json.loads(as_json.stdout)
    assert document["index"] == {
        "name": "text_idx",
        "column": "text",
        "type": "INVERTED",
        "params": {},
    }
    assert document["definition_stored"] is True and len(document["tables"]) == 3

    dry = run_cli(*root.args, "prune", "--optimize-indexes", "--dry-run")
    assert dry.exit_code == 0
    assert all("indexes:" not in line for line in dry.stdout.splitlines())  # all current
    report = json.loads(
        run_cli(*root.args, "prune", "--optimize-indexes", "--yes", "--json").stdout
    )
    for table in report["tables"]:
        assert {i["name"] for i in table["indexes"]} == {"id_idx", "text_idx"}
        assert all(i["action"] == "current" for i in table["indexes"])
