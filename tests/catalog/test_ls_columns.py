"""`ls` reads only the `__manifest` columns it shows, so another writer's columns change
nothing it lists: a partitioned root's listing, whole and by pages, is the same before and
after columns of every kind of name are added to its catalog."""

from __future__ import annotations

import lance
import pyarrow as pa
import pyarrow.parquet as pq
from data import events, partitioned_root
from helpers import invoke, ls_json, ls_pages

OTHER_WRITERS_COLUMNS = [
    pa.field("b-c", pa.int64()),
    pa.field("notes", pa.list_(pa.string())),
    pa.field("partition_field_é x", pa.string()),  # not a field of any spec
]


def test_a_listing_is_the_same_with_another_writers_columns(tmp_path):
    table = events(120, seed=3)
    root = partitioned_root(tmp_path, table.schema, "country")
    pq.write_table(table, tmp_path / "events.parquet")
    assert invoke(*root.args, "write", "--from", str(tmp_path / "events.parquet")).exit_code == 0
    assert invoke(*root.args, "create", "namespace", "team").exit_code == 0
    before = ls_json(root, "-R"), ls_json(root), ls_pages(root, 2, "-R")
    assert sum(e["kind"] == "table" for e in before[0]["entries"]) > 2  # the partitions

    manifest = lance.dataset(str(root.local_path / "__manifest"))
    manifest.add_columns(OTHER_WRITERS_COLUMNS)
    assert set(lance.dataset(manifest.uri).schema.names) >= {f.name for f in OTHER_WRITERS_COLUMNS}

    after = ls_json(root, "-R"), ls_json(root), ls_pages(root, 2, "-R")
    assert after == before
