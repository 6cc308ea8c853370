"""`restore` of a partitioned root to a version from before an index was built.

The restored partition tables are version N's again, with N's indexes: the namespace's index
definition built since is missing on them. The restore must say so (per table in text, in a
pipe and in JSON, a `warning:` on stderr, dry run included) and name the command that builds
it; after that command `describe` finds no table lacking it, and a vector search on each
partition table answers as a numpy brute force over the rows read back with pylance.
"""

from __future__ import annotations

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
    manifest,
    ok,
    partition_tables,
    tree_snapshot,
)

DIM = VECTOR_DIM
INDEX = ("--column", "emb", "--type", "ivf_pq", "--num-partitions", "2", "--num-sub-vectors", "2")
REMEDY = "lancens prune --optimize-indexes --yes"


def write(root, path, table: pa.Table) -> int:
    """Write `table`; the `__manifest` version that publishes it."""
    pq.write_table(table, path)
    ok(root, "write", "--from", str(path))
    return manifest(root).version


def setup(root, tmp_path, sizes: dict[str, int]) -> int:
    """A namespace partitioned by city, a first write (its `__manifest` version returned),
    the index on every partition table, then a bad write."""
    pq.write_table(city_vectors(0, sizes), tmp_path / "schema.parquet")
    ok(root, "add-partition-spec", "--schema", str(tmp_path / "schema.parquet"), "--field", "city")
    good = write(root, tmp_path / "first.parquet", city_vectors(0, sizes))
    ok(root, "create", "index", *INDEX)
    write(root, tmp_path / "bad.parquet", city_vectors(10_000, dict.fromkeys(sizes, 40)))
    return good


def published(root) -> dict[str, lance.LanceDataset]:
    return {
        row["partition_field_city"]: lance.dataset(
            str(root.local_path / row["location"]), version=row["read_version"]
        )
        for row in partition_tables(root)
    }


def test_restore_names_the_index_it_leaves_missing_and_prune_builds_it(local_root, tmp_path):
    root = local_root
    good = setup(root, tmp_path, {"Oslo": 300, "Lima": 260})
    assert index_definition_state(root)["lacking"] == 0

    unchanged = tree_snapshot(root.local_path)
    dry = cli(root, "restore", "--to-version", str(good), "--dry-run", "--json")
    assert dry.exit_code == 0, dry
    assert tree_snapshot(root.local_path) == unchanged
    planned = dry.json()
    assert planned["index_remedy"] == REMEDY
    for change in planned["changes"]:
        assert change["lacking_indexes"] == [{"name": "emb_idx", "too_few_rows": None}]
    assert "warning: restore would leave 2 partition tables without" in dry.stderr
    assert REMEDY in dry.stderr

    piped = cli(root, "restore", "--to-version", str(good), "--dry-run")
    lines = [line.split("\t") for line in piped.stdout.rstrip("\n").split("\n")]
    assert len(lines) == 2 and all(cells[-1] == "emb_idx" for cells in lines)

    done = cli(root, "restore", "--to-version", str(good), "--yes", "--json")
    assert done.exit_code == 0, done
    restored = done.json()
    assert restored["new_version"] is not None and restored["index_remedy"] == REMEDY
    assert {c["partition"]["city"] for c in restored["changes"] if c["lacking_indexes"]} == {
        "Oslo",
        "Lima",
    }
    assert any(REMEDY in note and "emb_idx" in note for note in restored["notes"])
    assert "warning: restore left 2 partition tables without" in done.stderr
    assert index_definition_state(root)["lacking"] == 2  # what the restore said
    ids_restored = {
        c: sorted(ds.to_table().column("id").to_pylist()) for c, ds in published(root).items()
    }
    assert ids_restored == {"Oslo": list(range(300)), "Lima": list(range(300, 560))}

    ok(root, *REMEDY.split()[1:])
    state = index_definition_state(root)
    assert (state["lacking"], state["missing_rows"], state["unindexed_rows"]) == (0, 0, 0)
    rng = np.random.default_rng(5)
    for city, ds in published(root).items():
        assert sorted(ds.to_table().column("id").to_pylist()) == ids_restored[city]
        stats = ds.stats.index_stats("emb_idx")
        assert stats["num_indexed_rows"] == ds.count_rows(), (city, stats)
        for query in rng.standard_normal((4, DIM)).astype("float32"):
            expected = exact_neighbours(ds, query, 5)
            nearest = {"column": "emb", "q": query, "k": 5, "nprobes": 64, "refine_factor": 200}
            got = ds.to_table(columns=["id"], nearest=nearest).column("id").to_pylist()
            assert got == expected, city
            unindexed = ds.to_table(columns=["id"], nearest={**nearest, "use_index": False})
            assert unindexed.column("id").to_pylist() == expected, city


@pytest.mark.parametrize("text", [False, True])
def test_a_restored_table_too_small_to_train_is_named_with_its_rows(local_root, tmp_path, text):
    root = local_root
    good = setup(root, tmp_path, {"Oslo": 300, "Lima": 10})
    if text:
        shown = ok(root, "restore", "--to-version", str(good), "--yes")
        lacking = sorted(line.split("\t")[-1] for line in shown.stdout.strip().split("\n"))
        assert lacking == ["emb_idx", "emb_idx (too few rows)"]
        return
    shown = ok(root, "restore", "--to-version", str(good), "--yes", "--json").json()
    lima = next(c for c in shown["changes"] if c["partition"]["city"] == "Lima")
    assert lima["lacking_indexes"] == [
        {"name": "emb_idx", "too_few_rows": "10 rows, fewer than the 256 vectors ivf_pq trains on"}
    ]
    assert shown["index_remedy"] == REMEDY  # Oslo's is built by it
    assert any("city=Lima: emb_idx, 10 rows" in note for note in shown["notes"])
