"""Fixtures of the partitioned-namespace tests (the partitioning spec: specs, transforms,
pruning, writes, schema evolution, branches, join plans)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import SPEC1, ok
from typed_rows import SCHEMA, make_rows


@pytest.fixture
def partitioned(local_root, files):
    """A local root with SPEC1 over `data.events`' schema, nothing written yet."""
    ok(local_root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    return local_root


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A namespace of every type (typed_rows.py) in two writes under two specs, and DuckDB
    over its source rows: what row changes (`delete`, `update`) are checked against."""
    folder = tmp_path_factory.mktemp("typed")
    root = partitioned_root(folder, SCHEMA, "bucket(4, id)", "year(d)")
    first, second = make_rows(150, 1, 0), make_rows(150, 2, 1000)
    pq.write_table(first, folder / "first.parquet")
    pq.write_table(second, folder / "second.parquet")
    ok(root, "write", "--from", str(folder / "first.parquet"))
    ok(root, "add-partition-spec", "--field", "flag", "--field", "month(ts)")
    ok(root, "write", "--from", str(folder / "second.parquet"))
    source = pa.concat_tables([first, second])
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", source)
    return root, source, con
