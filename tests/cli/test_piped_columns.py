"""Piped output keeps its columns whatever the data: `cut -f` and `awk` scripts never break.

A column that only some data fills (a restore's commit message in `versions __manifest`, a
partition on a root that has partition tables, a restored table lacking an index) is always
there, `-` where there is nothing. Each command below runs on data with and without the optional
thing, and every line of both must have the same number of tab-separated fields.

(`ls` is the one exception: its `partition` column is there on a partitioned root's listings
and not on a plain root's, as tests/cli/test_output_contract.py pins: it follows the kind of the
root and the namespace listed, which no write changes.)
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from data import events
from helpers import SPEC1, Root, cli, ok


def _fields(result) -> set[int]:
    """The numbers of tab-separated fields of the piped lines (one number when fixed)."""
    lines = result.stdout.splitlines()
    assert lines, (result.exit_code, result.stderr)
    return {len(line.split("\t")) for line in lines}


def _same_columns(without, with_it) -> None:
    (a,), (b,) = _fields(without), _fields(with_it)  # each output: one width for every line
    assert a == b, (without.stdout, with_it.stdout)


@pytest.fixture
def parquet(tmp_path):
    def write(name: str, table) -> str:
        pq.write_table(table, tmp_path / name)
        return str(tmp_path / name)

    return write


def _root(tmp_path: Path, name: str) -> Root:
    path = tmp_path / name
    path.mkdir()
    return Root(str(path), {}, path)


@pytest.fixture
def plain(tmp_path, parquet) -> Root:
    """A root with one plain table `t` and no partitioning."""
    root = _root(tmp_path, "plain")
    ok(root, "create", "table", "t", "--from", parquet("t.parquet", events(30)))
    return root


@pytest.fixture
def partitioned(tmp_path, parquet) -> Root:
    """A partitioned root, nothing written yet."""
    root = _root(tmp_path, "partitioned")
    ok(root, "add-partition-spec", "--schema", parquet("s.parquet", events(1)), *SPEC1)
    return root


def _write(root: Root, parquet, n: int) -> None:
    ok(root, "write", "--from", parquet(f"w{n}.parquet", events(20, seed=n, start=100 * n)))


def test_versions_of_manifest_keeps_its_columns_after_a_restore(partitioned, parquet, plain):
    for n in range(2):
        _write(partitioned, parquet, n)
    before = ok(partitioned, "versions", "__manifest")
    ok(partitioned, "restore", "--to-version", "3", "--yes")
    after = ok(partitioned, "versions", "__manifest")
    assert "lancens restore to version 3" in after.stdout  # the message column, filled
    _same_columns(before, after)
    _same_columns(ok(plain, "versions", "t"), after)  # one view: a table's versions too


def test_versions_and_prune_keep_their_columns_with_partition_tables(partitioned, parquet, plain):
    args = ("--older-than", "0s", "--grace", "0s", "--force")
    empty = {cmd: ok(partitioned, *cmd) for cmd in (("versions",), ("prune", "--dry-run", *args))}
    _write(partitioned, parquet, 0)
    assert not empty[("versions",)].stdout  # no table yet: nothing to list
    for cmd, before in empty.items():
        written = ok(partitioned, *cmd)
        assert "country=" in written.stdout  # partition tables, with their values
        if before.stdout:  # prune: `__manifest` alone, before a partition table exists
            _same_columns(before, written)
        _same_columns(ok(plain, *cmd), written)


def test_check_keeps_its_columns_for_a_finding_on_a_partition_table(partitioned, parquet, plain):
    _write(partitioned, parquet, 0)
    for root in (plain, partitioned):  # a data file gone: one finding on one table each
        entries = ok(root, "ls", "--recursive", "--json").json()["entries"]
        table = next(e for e in entries if e["kind"] == "table")
        next((root.local_path / table["location"] / "data").iterdir()).unlink()
    on_plain, on_partition = cli(plain, "check"), cli(partitioned, "check")
    assert on_plain.exit_code == on_partition.exit_code == 1
    assert "country=" in on_partition.stdout
    _same_columns(on_plain, on_partition)


def test_restore_keeps_its_columns_whether_or_not_a_table_lacks_an_index(partitioned, parquet):
    _write(partitioned, parquet, 0)
    good = ok(partitioned, "versions", "__manifest", "--json").json()["versions"][-1]["version"]
    ok(partitioned, "create", "index", "--column", "customer_id", "--type", "btree")
    indexed = ok(partitioned, "versions", "__manifest", "--json").json()["versions"][-1]["version"]
    _write(partitioned, parquet, 1)
    lacking = ok(partitioned, "restore", "--to-version", str(good), "--dry-run")
    whole = ok(partitioned, "restore", "--to-version", str(indexed), "--dry-run")
    assert {line.split("\t")[-1] for line in lacking.stdout.splitlines()} == {"customer_id_idx"}
    assert {line.split("\t")[-1] for line in whole.stdout.splitlines()} == {"-"}
    _same_columns(lacking, whole)
