"""`prune --optimize-indexes` over lancedb-made tables: every index covers every row afterwards,
and scalar, full-text and vector queries answer as brute force does."""

from __future__ import annotations

import lance
import numpy as np
import pytest
from helpers import ok
from index_data import WORDS

TABLES = ("docs.lance", "notes.lance")


def unindexed(ds) -> dict[str, int]:
    return {
        i.name: ds.stats.index_stats(i.name)["num_unindexed_rows"] for i in ds.describe_indices()
    }


def exact_neighbours(ds, query: np.ndarray, k: int) -> list[int]:
    table = ds.to_table(columns=["id", "vec"])
    vectors = np.stack(table.column("vec").to_numpy(zero_copy_only=False))
    distances = ((vectors - query) ** 2).sum(axis=1)
    ids = table.column("id").to_numpy()
    return [int(i) for i in ids[np.argsort(distances, kind="stable")[:k]]]


def indexed_neighbours(ds, query: np.ndarray, k: int) -> list[int]:
    # every IVF partition probed, every candidate re-ranked by its exact distance: the index
    # must then find the exact top-k, appended rows included
    found = ds.to_table(
        columns=["id"],
        nearest={"column": "vec", "q": query, "k": k, "nprobes": 64, "refine_factor": 200},
    )
    return found.column("id").to_pylist()


@pytest.fixture
def optimized(lancedb_root):
    before = {t: unindexed(lance.dataset(str(lancedb_root.local_path / t))) for t in TABLES}
    assert all(n > 0 for counts in before.values() for n in counts.values()), before
    report = ok(lancedb_root, "prune", "--optimize-indexes", "--yes", "--json").json()
    return lancedb_root, before, report


def test_after_the_run_no_index_misses_a_row(optimized):
    root, before, report = optimized
    for location in TABLES:
        ds = lance.dataset(str(root.local_path / location))
        assert set(unindexed(ds).values()) == {0}
        entry = next(t for t in report["tables"] if t["location"] == location)
        assert {i["name"]: i["rows_indexed"] for i in entry["indexes"]} == before[location]
        assert {i["action"] for i in entry["indexes"]} == {"optimized"}
    assert report["totals"]["rows_indexed"] == sum(sum(c.values()) for c in before.values())


def test_queries_answer_as_brute_force(optimized):
    root, _, _ = optimized
    ds = lance.dataset(str(root.local_path / "docs.lance"))
    everything = ds.to_table().to_pylist()
    # scalar: a range across the appended rows
    got = ds.to_table(columns=["id"], filter="id >= 590 AND id < 615").column("id").to_pylist()
    assert sorted(got) == [r["id"] for r in everything if 590 <= r["id"] < 615]
    # full text: a word every eighth row has, and a token only one appended row has
    for word in (WORDS[5], "n612"):
        got = ds.to_table(columns=["id"], full_text_query=word).column("id").to_pylist()
        assert sorted(got) == sorted(r["id"] for r in everything if word in r["text"].split())
    # vectors: appended rows' own vectors, and random queries
    rng = np.random.default_rng(7)
    queries = [np.array(everything[i]["vec"], dtype="float32") for i in (600, 615, 629)]
    queries += [rng.standard_normal(8).astype("float32") for _ in range(5)]
    for query in queries:
        assert indexed_neighbours(ds, query, 5) == exact_neighbours(ds, query, 5)


def test_a_second_run_finds_nothing_and_the_record_skips_the_tables(optimized):
    root, _, _ = optimized
    again = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    for table in again["tables"]:
        assert {i["action"] for i in table["indexes"]} == {"current"}
    assert again["indexed"] == []
    third = ok(root, "prune", "--optimize-indexes", "--yes", "--json").json()
    assert all("unchanged since the last prune" in " ".join(t["notes"]) for t in third["tables"])


def test_dry_run_lists_each_index_with_its_unindexed_rows(lancedb_root):
    report = ok(lancedb_root, "prune", "--optimize-indexes", "--dry-run", "--json").json()
    docs = next(t for t in report["tables"] if t["location"] == "docs.lance")
    assert {(i["name"], i["unindexed_rows"], i["action"]) for i in docs["indexes"]} == {
        ("id_idx", 30, "would optimize"),
        ("text_idx", 30, "would optimize"),
        ("vec_idx", 30, "would optimize"),
    }
    ds = lance.dataset(str(lancedb_root.local_path / "docs.lance"))
    assert set(unindexed(ds).values()) == {30}  # nothing changed


def test_describe_shows_unindexed_rows_per_index(lancedb_root):
    details = ok(lancedb_root, "describe", "docs", "--json").json()["details"]
    assert {(i["name"], i["unindexed_rows"]) for i in details["indices"]} == {
        ("id_idx", 30),
        ("text_idx", 30),
        ("vec_idx", 30),
    }


def test_with_compaction_every_index_is_current_and_every_row_stays(lancedb_root):
    counts = {t: lance.dataset(str(lancedb_root.local_path / t)).count_rows() for t in TABLES}
    ok(lancedb_root, "prune", "--compact", "--optimize-indexes", "--yes", "--json")
    for location in TABLES:
        ds = lance.dataset(str(lancedb_root.local_path / location))
        assert ds.count_rows() == counts[location]
        assert set(unindexed(ds).values()) == {0}
