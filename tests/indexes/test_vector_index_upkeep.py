"""A vector index over a namespace whose partition tables are of very different sizes.

Lance trains a product quantizer (ivf_pq) on 256 vectors at least; on fewer it does not refuse,
it commits an index that holds no rows. `create index` must not call that "built": a partition
table with too few vectors is left without the index, named with its rows and the reason (text,
pipe, JSON, a `warning:` on stderr, exit 0), the definition is kept, and once the table has
enough rows `prune --optimize-indexes` builds it (a write alone does not). One table named alone
with too few vectors is refused (exit 2, nothing changed). The oracle of every search is a numpy
brute force over the rows read back with pylance.
"""

from __future__ import annotations

import json

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import VECTOR_DIM, city_vectors
from helpers import (
    cli,
    exact_neighbours,
    index_definition_state,
    ok,
    partition_tables,
    tree_snapshot,
)

DIM = VECTOR_DIM
SIZES = {"Oslo": 300, "Lima": 10, "Nuuk": 3}  # one partition PQ can train on, two it cannot
INDEX = ("--column", "emb", "--type", "ivf_pq", "--num-partitions", "4", "--num-sub-vectors", "2")


def write(root, path, table: pa.Table) -> None:
    pq.write_table(table, path)
    ok(root, "write", "--from", str(path))


@pytest.fixture
def cities(local_root, tmp_path):
    """A namespace partitioned by city: Oslo 300 rows, Lima 10, Nuuk 3."""
    first = city_vectors(0, SIZES)
    pq.write_table(first, tmp_path / "first.parquet")
    ok(
        local_root,
        "add-partition-spec",
        "--schema",
        str(tmp_path / "first.parquet"),
        "--field",
        "city",
    )
    ok(local_root, "write", "--from", str(tmp_path / "first.parquet"))
    return local_root


def tables_by_city(root) -> dict[str, dict]:
    return {row["partition_field_city"]: row for row in partition_tables(root)}


def published(root, row) -> lance.LanceDataset:
    return lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])


def searched(ds, query: np.ndarray, k: int, use_index: bool) -> list[int]:
    # with the index: every IVF partition probed, every candidate re-ranked by its exact
    # distance, so the index must hold every row for the answer to be exact
    nearest = {"column": "emb", "q": query, "k": k, "use_index": use_index}
    nearest |= {"nprobes": 64, "refine_factor": 200} if use_index else {}
    return ds.to_table(columns=["id"], nearest=nearest).column("id").to_pylist()


def assert_searches_exact(root) -> None:
    """On every published partition table, the index's answer is the brute force's."""
    rng = np.random.default_rng(11)
    for city, row in tables_by_city(root).items():
        ds = published(root, row)
        assert {i.name for i in ds.describe_indices()} == {"emb_idx"}, city
        stats = ds.stats.index_stats("emb_idx")
        assert stats["num_unindexed_rows"] == 0, (city, stats)
        assert stats["num_indexed_rows"] == ds.count_rows(), (city, stats)
        for query in rng.standard_normal((4, DIM)).astype("float32"):
            expected = exact_neighbours(ds, query, 5)
            assert searched(ds, query, 5, use_index=True) == expected, city
            assert searched(ds, query, 5, use_index=False) == expected, city


def test_small_partition_tables_are_left_without_the_index_and_named(cities):
    root = cities
    before = tables_by_city(root)
    result = cli(root, "create", "index", *INDEX, "--json")
    assert result.exit_code == 0, result
    document = result.json()
    by_city = {t["partition"]["city"]: t for t in document["tables"]}
    assert by_city["Oslo"]["status"] == "built" and by_city["Oslo"]["published"] is True
    assert by_city["Oslo"]["rows"] == 300
    for city in ("Lima", "Nuuk"):
        left = by_city[city]
        assert left["status"] == "too few rows", left
        assert left["rows"] == SIZES[city]
        assert left["version_after"] is None and left["published"] is None
        assert f"{SIZES[city]} rows, fewer than the 256 vectors ivf_pq trains on" in left["note"]
        assert "prune --optimize-indexes builds it" in left["note"]
    assert document["definition_stored"] is True
    # nothing was committed to the tables left: no version of theirs holds an empty index
    after = tables_by_city(root)
    for city in ("Lima", "Nuuk"):
        ds = lance.dataset(str(root.local_path / after[city]["location"]))
        assert ds.version == before[city]["read_version"] == after[city]["read_version"]
        assert ds.describe_indices() == []
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert "city=Lima: 10 rows" in warnings[0] and "city=Nuuk: 3 rows" in warnings[0]
    assert "2 tables left without it (too few rows)" in result.stderr
    state = index_definition_state(root)
    assert (state["lacking"], state["too_few_rows"], state["missing_rows"]) == (2, 2, 0)


def test_the_text_of_a_pipe_and_a_dry_run(cities):
    root = cities
    unchanged = tree_snapshot(root.local_path)
    dry = cli(root, "create", "index", *INDEX, "--dry-run")
    assert dry.exit_code == 0, dry
    assert tree_snapshot(root.local_path) == unchanged
    assert "would build on 1 table, 2 tables would be left without it" in dry.stderr
    assert "warning: index emb_idx would not be built on 2 partition tables" in dry.stderr
    lines = [line.split("\t") for line in dry.stdout.rstrip("\n").split("\n")]
    assert len(lines) == 3 and all(len(cells) == 6 for cells in lines)
    notes = sorted(cells[5] for cells in lines)
    assert notes[0] == "" and notes[1].startswith("not built: 10 rows, fewer than the 256")
    assert notes[2].startswith("not built: 3 rows, fewer than the 256")

    piped = cli(root, "create", "index", *INDEX)
    assert piped.exit_code == 0, piped
    lines = [line.split("\t") for line in piped.stdout.rstrip("\n").split("\n")]
    assert sorted(cells[4] for cells in lines) == ["-", "-", "True"]  # published
    assert sum("fewer than the 256 vectors ivf_pq trains on" in c[5] for c in lines) == 2


def test_one_table_named_alone_with_too_few_vectors_is_refused(cities, local_root, tmp_path):
    root = cities
    lima = tables_by_city(root)["Lima"]["object_id"].replace("$", ".")
    unchanged = tree_snapshot(root.local_path)
    for args in ((), ("--dry-run",), ("--json",)):
        refused = cli(root, "create", "index", lima, *INDEX, *args)
        assert refused.exit_code == 2, refused
        assert refused.stdout == ""
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert json.loads(refused.stderr)["error"]["name"] == "InvalidInput"
    assert "has 10 rows, fewer than the 256 vectors ivf_pq trains on" in refused.stderr
    assert tree_snapshot(root.local_path) == unchanged
    # an index IVF partitions alone train on any number of vectors: built, and said how
    flat = ok(root, "create", "index", lima, "--column", "emb", "--type", "ivf_flat")
    assert "trained" not in flat.stdout  # no --num-partitions asked: Lance's own choice
    ds = lance.dataset(str(root.local_path / tables_by_city(root)["Lima"]["location"]))
    assert ds.stats.index_stats("emb_idx")["num_indexed_rows"] == 10


def test_prune_builds_it_once_the_tables_have_enough_rows(cities, tmp_path):
    root = cities
    ok(root, "create", "index", *INDEX)
    # while the tables are small, prune does not build an index that would hold no rows
    report = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    lima = tables_by_city(root)["Lima"]
    entry = next(t for t in report["tables"] if t["object_id"] == lima["object_id"])
    assert [(i["name"], i["action"]) for i in entry["indexes"]] == [("emb_idx", "too few rows")]
    assert any("10 rows, fewer than the 256 vectors" in note for note in entry["notes"])
    assert lance.dataset(str(root.local_path / lima["location"])).describe_indices() == []
    assert index_definition_state(root)["lacking"] == 2

    # a write that gives them enough rows does not build it (only a new table's first does)
    write(root, tmp_path / "more.parquet", city_vectors(1000, {"Lima": 250, "Nuuk": 260}))
    state = index_definition_state(root)
    assert (state["lacking"], state["too_few_rows"]) == (2, 0)
    assert all(published(root, r).count_rows() >= 256 for r in tables_by_city(root).values())

    report = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    built = {
        i["name"]: i["action"]
        for t in report["tables"]
        if t["object_id"] != tables_by_city(root)["Oslo"]["object_id"]
        for i in t["indexes"]
    }
    assert built == {"emb_idx": "built"}
    assert all(entry["published"] for entry in report["indexed"])
    state = index_definition_state(root)
    assert (state["lacking"], state["too_few_rows"], state["missing_rows"]) == (0, 0, 0)
    assert_searches_exact(root)


def test_a_new_small_partition_gets_no_empty_index_at_its_first_write(cities, tmp_path):
    root = cities
    ok(root, "create", "index", *INDEX)
    write(root, tmp_path / "new.parquet", city_vectors(2000, {"Pune": 5, "Oslo": 20}))
    pune = tables_by_city(root)["Pune"]
    assert published(root, pune).describe_indices() == []
    state = index_definition_state(root)
    assert (state["lacking"], state["too_few_rows"]) == (3, 3)


def test_describe_on_a_terminal_counts_the_tables_too_small_for_the_index(cities):
    import terminal

    ok(cities, "create", "index", *INDEX)
    code, stdout, stderr = terminal.on_terminal(
        *cities.args, "describe", stream="stdout", columns=140
    )
    assert code == 0, stderr
    shown = " ".join(terminal.shown(stdout).split())
    assert "2 of 3 partition tables lack it (2 with too few vectors to train it yet)" in shown
