"""`check` of a partitioned root opens each partition table once for all its checks
(service/table_looks.py), and still finds what each check found when it opened the table
itself.

The root is made as users and other writers leave one: several writes, a delete (deletion
files), a partition table compacted by another tool and never published (its published version
is no longer its latest, and its old data files are referenced by old versions only), a
branch, and a stray data file a killed writer left; every row has an embedding column. What
`check` reports of unreferenced data files is compared with Lance's own account of every file
each version references; Lance opens are counted by location.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import cli, ok, partition_tables

from lancens_cli.store import tables as store_tables

STRAY = "data/stray-from-a-killed-write.lance"


def _with_embedding(rows: pa.Table) -> pa.Table:
    """Events with a 4-float embedding column, NULL every fifth row: what the schema checks
    read from each table's look."""
    vectors = [None if i % 5 == 0 else [i / 7, -i / 3, 0.0, float(i)] for i in range(len(rows))]
    return rows.append_column("emb", pa.array(vectors, pa.list_(pa.float32(), 4)))


@pytest.fixture
def busy_root(tmp_path):
    schema = _with_embedding(events(1)).schema
    root = partitioned_root(tmp_path, schema, "bucket(4, customer_id)")
    for batch in range(3):
        path = tmp_path / f"w{batch}.parquet"
        pq.write_table(_with_embedding(events(120, seed=batch, start=batch * 120)), path)
        ok(root, "write", "--from", str(path))
    ok(root, "delete", "--where", "country = 'DE'", "--yes")
    rows = partition_tables(root)
    compacted, branched, strayed = (root.local_path / rows[i]["location"] for i in range(3))
    lance.dataset(str(compacted)).optimize.compact_files()  # another tool's, unpublished
    dataset = lance.dataset(str(branched))
    dataset.create_branch("experiment", (None, dataset.version))
    stray = strayed / STRAY
    stray.write_bytes(b"half a data file")
    old = time.time() - 3 * 3600
    os.utime(stray, (old, old))
    return root, rows


def _unreferenced_by_lance(root, rows) -> set[tuple[str, str]]:
    """Every file under a partition table's data/ that no version (nor branch head) names."""
    found = set()
    for row in rows:
        path = root.local_path / row["location"]
        dataset = lance.dataset(str(path))
        tracked = set(dataset.tracked_files().read_all().column("path").to_pylist())
        for name in os.listdir(path / "data"):
            if f"data/{name}" not in tracked:
                found.add((row["location"], f"data/{name}"))
    return found


def test_check_finds_what_each_check_found_alone(busy_root):
    root, rows = busy_root
    result = cli(root, "--json", "check")
    report = json.loads(result.stdout)
    unreferenced = {
        tuple(f["location"].split("/", 1))
        for f in report["findings"]
        if f["code"] == "unreferenced_data_file"
    }
    assert unreferenced == _unreferenced_by_lance(root, rows) == {(rows[2]["location"], STRAY)}
    codes = Counter(f["code"] for f in report["findings"])
    assert codes == {"unreferenced_data_file": 1}, report["findings"]
    assert result.exit_code != 0
    ok(root, "check", "--fix")
    assert not (root.local_path / rows[2]["location"] / STRAY).exists()
    assert cli(root, "check").exit_code == 0


def test_each_partition_table_is_opened_once(busy_root, monkeypatch):
    root, rows = busy_root
    opened: Counter[str] = Counter()
    real = store_tables.lance.dataset

    def counted(uri, *args, **kwargs):
        opened[os.path.basename(str(uri).rstrip("/"))] += 1
        return real(uri, *args, **kwargs)

    monkeypatch.setattr(store_tables.lance, "dataset", counted)
    cli(root, "check")
    per_table = {row["location"]: opened[row["location"]] for row in rows}
    # its published version is not its latest: opened for its schema, and for its files by
    # the published-version check (a table another writer left so is the rare one)
    compacted = rows[0]["location"]
    assert per_table.pop(compacted) == 3
    assert set(per_table.values()) == {1}, per_table
