"""`prune`'s per-table `status` says what the run did: a table whose indexes were built or brought
current (`--optimize-indexes`) but lost no version is `indexes optimized` (`would optimize
indexes` in a dry run), a compacted one `compacted`, and `nothing to do` only when nothing at
all was done; the same word in `--json`, piped text and on a terminal, one table or every one.
"""

from __future__ import annotations

import lance
import pyarrow.parquet as pq
import pytest
import terminal
from helpers import ok, partition_tables
from index_data import rows

OPTIMIZE = ("prune", "--optimize-indexes")


@pytest.fixture
def stale_indexes(three_partitions, tmp_path):
    """The three partitions with a btree the namespace defines, then 30 rows more in each
    (not in the index yet)."""
    root = three_partitions
    ok(root, "create", "index", "--column", "id", "--type", "btree")
    pq.write_table(rows(900, 90, ("a", "b", "c")), tmp_path / "more.parquet")
    ok(root, "write", "--from", str(tmp_path / "more.parquet"))
    return root


def _statuses(report: dict) -> dict[str, str]:
    return {t["table"]: t["status"] for t in report["tables"]}


def _piped_status(stdout: str, table: str) -> str:
    """The status cell of `table`'s line in piped output (the column after the location)."""
    (line,) = [line for line in stdout.splitlines() if line.split("\t")[0] == table]
    cells = line.split("\t")
    return next(c for c in cells if c.startswith(("indexes", "would", "nothing", "pruned")))


def test_a_namespace_whose_indexes_were_optimized_says_so(stale_indexes):
    root = stale_indexes
    tables = {r["object_id"].replace("$", ".") for r in partition_tables(root)}
    dry = ok(root, *OPTIMIZE, "--dry-run", "--json").json()
    assert {t: s for t, s in _statuses(dry).items() if t in tables} == dict.fromkeys(
        tables, "would optimize indexes"
    )
    assert dry["manifest"]["status"] == "nothing to do"
    piped = ok(root, *OPTIMIZE, "--dry-run").stdout
    for table in tables:
        assert _piped_status(piped, table).startswith("would optimize indexes; indexes: id_idx")
    done = ok(root, *OPTIMIZE, "--yes", "--json").json()
    assert {t: s for t, s in _statuses(done).items() if t in tables} == dict.fromkeys(
        tables, "indexes optimized"
    )
    assert done["totals"]["versions_removed"] == 0 and done["totals"]["rows_indexed"] == 90
    again = ok(root, *OPTIMIZE, "--yes", "--json").json()
    assert set(_statuses(again).values()) == {"nothing to do"}


def test_piped_and_terminal_say_indexes_optimized(stale_indexes, tmp_path):
    root = stale_indexes
    tables = {r["object_id"].replace("$", ".") for r in partition_tables(root)}
    piped = ok(root, *OPTIMIZE, "--yes")
    for table in tables:
        status = _piped_status(piped.stdout, table)
        assert status == "indexes optimized; indexes: id_idx optimized (30 rows)"
    assert "nothing to do;" not in piped.stdout
    # more rows, and the same on a terminal (which lists only the tables with work)
    pq.write_table(rows(990, 30, ("a", "b", "c")), tmp_path / "again.parquet")
    ok(root, "write", "--from", str(tmp_path / "again.parquet"))
    code, stdout, stderr = terminal.on_terminal(
        *root.args, *OPTIMIZE, "--yes", stream="stdout", columns=250
    )
    assert code == 0, stderr
    shown = terminal.shown(stdout)
    assert shown.count("indexes optimized") == 3 and "nothing to do;" not in shown


@pytest.fixture
def one_table(local_root, tmp_path):
    """A plain table with a btree on id and rows appended since (two fragments)."""
    root = local_root
    pq.write_table(rows(0, 300), tmp_path / "t.parquet")
    ok(root, "create", "table", "t", "--from", str(tmp_path / "t.parquet"))
    ok(root, "create", "index", "t", "--column", "id", "--type", "btree")
    lance.write_dataset(rows(300, 20), str(root.local_path / "t.lance"), mode="append")
    return root


def test_one_table_whose_index_was_optimized_says_so(one_table):
    root = one_table
    dry = ok(root, *OPTIMIZE, "t", "--dry-run", "--json").json()
    assert _statuses(dry) == {"t": "would optimize indexes"}
    piped = ok(root, *OPTIMIZE, "t", "--yes")
    assert _piped_status(piped.stdout, "t") == (
        "indexes optimized; indexes: id_idx optimized (20 rows)"
    )
    assert ok(root, *OPTIMIZE, "t", "--yes", "--json").json()["tables"][0]["status"] == (
        "nothing to do"
    )


def test_a_compacted_table_says_compacted(local_root, tmp_path):
    root = local_root
    pq.write_table(rows(0, 100), tmp_path / "t.parquet")
    ok(root, "create", "table", "t", "--from", str(tmp_path / "t.parquet"))
    for start in (100, 200, 300):  # four small fragments, no index
        lance.write_dataset(rows(start, 100), str(root.local_path / "t.lance"), mode="append")
    dry = ok(root, "prune", "t", "--compact", "--dry-run", "--json").json()
    assert _statuses(dry) == {"t": "would compact"}
    done = ok(root, "prune", "t", "--compact", "--yes", "--json").json()
    assert _statuses(done) == {"t": "compacted"} and done["compacted"]
    assert len(lance.dataset(str(root.local_path / "t.lance")).get_fragments()) == 1
