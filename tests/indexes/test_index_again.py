"""`create index` without ID, given a name the namespace already defines: the same definition
again is `nothing to do` (exit 0, nothing built, no commit; `--dry-run` alike), another one under
that name exit 2 in one line naming the difference (unless `--replace`), and the answer counts
the partition tables that lack the index, which `prune --optimize-indexes` builds.

Each through the CLI as a user runs it: piped text and `--json`."""

from __future__ import annotations

import lance
import pytest
from helpers import cli, manifest, ok, partition_tables, tree_snapshot

BTREE = ("create", "index", "--column", "id", "--type", "btree")


def table_versions(root) -> dict[str, int]:
    """Each partition table's latest version, read with pylance."""
    return {
        row["object_id"]: lance.dataset(str(root.local_path / row["location"])).version
        for row in partition_tables(root)
    }


@pytest.fixture
def indexed(three_partitions):
    ok(three_partitions, *BTREE)
    return three_partitions


@pytest.mark.parametrize("extra", [(), ("--dry-run",)], ids=["run", "dry-run"])
def test_the_same_definition_again_is_nothing_to_do(indexed, extra):
    root = indexed
    before = tree_snapshot(root.local_path)
    versions, tables = manifest(root).version, table_versions(root)
    text = cli(root, *BTREE, *extra)
    assert text.exit_code == 0, text.stderr
    assert text.stdout.strip() == ""
    assert text.stderr.strip() == (
        "index id_idx (btree on id) is already the namespace's definition: nothing to do"
    )
    answer = ok(root, *BTREE, *extra, "--json").json()
    assert answer["status"] == "nothing to do" and answer["tables"] == []
    assert answer["manifest_version"] is None and answer["dry_run"] is bool(extra)
    assert (answer["lacking"], answer["lacking_too_few_rows"]) == (0, 0)
    # nothing built, no commit: neither __manifest nor any partition table moved
    assert manifest(root).version == versions and table_versions(root) == tables
    assert tree_snapshot(root.local_path) == before


@pytest.mark.parametrize(
    ("args", "difference"),
    [
        (("--column", "id", "--type", "bitmap"), "type: btree -> bitmap"),
        (("--column", "text", "--type", "btree", "--name", "id_idx"), "column: id -> text"),
    ],
    ids=["type", "column"],
)
def test_another_definition_under_the_name_is_refused_naming_the_difference(
    indexed, args, difference
):
    root = indexed
    before = tree_snapshot(root.local_path)
    for extra in ((), ("--dry-run",)):
        refused = cli(root, "create", "index", *args, *extra)
        assert refused.exit_code == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert "already defines an index named 'id_idx' as btree on id" in line
        assert f"differs in {difference}" in line and "--replace" in line
    assert tree_snapshot(root.local_path) == before


def test_vector_parameters_are_part_of_the_definition(three_partitions):
    root = three_partitions
    pq = ("create", "index", "--column", "vec", "--type", "ivf_pq", "--num-sub-vectors", "2")
    ok(root, *pq, "--num-partitions", "2")
    versions = manifest(root).version
    again = ok(root, *pq, "--num-partitions", "2")
    assert "nothing to do" in again.stderr and "num_partitions=2" in again.stderr
    refused = cli(root, *pq, "--num-partitions", "4")
    assert refused.exit_code == 2 and "differs in num_partitions: 2 -> 4" in refused.stderr
    assert manifest(root).version == versions


def test_tables_that_lack_it_are_counted_and_prune_builds_it(three_partitions):
    root = three_partitions
    written = manifest(root).version  # the write, before the index
    ok(root, *BTREE)
    ok(root, "restore", "--to-version", str(written), "--yes")  # the tables' unindexed versions
    versions = manifest(root).version
    text = ok(root, *BTREE)
    assert "nothing to do; 3 partition tables lack it: " in text.stderr
    assert "lancens prune --optimize-indexes --yes builds it there" in text.stderr
    answer = ok(root, *BTREE, "--json").json()
    assert answer["status"] == "nothing to do" and answer["lacking"] == 3
    assert manifest(root).version == versions  # still no commit
    ok(root, "prune", "--optimize-indexes", "--yes")
    assert ok(root, *BTREE, "--json").json()["lacking"] == 0


def test_replace_rebuilds_the_same_definition(indexed):
    root = indexed
    versions, tables = manifest(root).version, table_versions(root)
    answer = ok(root, *BTREE, "--replace", "--json").json()
    assert answer["status"] == "built" and answer["manifest_version"] == versions + 1
    assert all(table_versions(root)[t] == v + 1 for t, v in tables.items())
