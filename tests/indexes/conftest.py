"""Fixtures of the index tests: lancedb-made tables with btree, FTS and IVF_PQ indexes and rows
appended since, and a partitioned namespace of three partitions."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from helpers import ok
from index_data import SCHEMA, rows


@pytest.fixture
def lancedb_root(local_root):
    """Two tables made by lancedb (btree on id, FTS on text, IVF_PQ on vec), each with 5% of
    its rows appended after the indexes were built."""
    import lancedb

    db = lancedb.connect(str(local_root.local_path))
    for name, n in (("docs", 600), ("notes", 400)):
        table = db.create_table(name, rows(0, n, seed=len(name)))
        table.create_scalar_index("id")
        table.create_fts_index("text")
        table.create_index(
            vector_column_name="vec", index_type="IVF_PQ", num_partitions=2, num_sub_vectors=4
        )
        table.add(rows(n, n // 20, seed=len(name)))
    return local_root


@pytest.fixture
def three_partitions(local_root, tmp_path):
    """A partitioned namespace (spec: k) with 300 rows in partitions a, b, c."""
    pq.write_table(SCHEMA.empty_table(), tmp_path / "schema.parquet")
    pq.write_table(rows(0, 900, ("a", "b", "c")), tmp_path / "first.parquet")
    ok(
        local_root,
        "add-partition-spec",
        "--schema",
        str(tmp_path / "schema.parquet"),
        "--field",
        "k",
    )
    ok(local_root, "write", "--from", str(tmp_path / "first.parquet"))
    return local_root
