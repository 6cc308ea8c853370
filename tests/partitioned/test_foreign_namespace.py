"""A partitioned namespace laid out by another tool, exactly as the spec's appendices show it.

Built with pylance and pyarrow only (no lancens code): the JSON Arrow schema and a partition
spec in `__manifest`'s table metadata (Appendix A), Appendix C's rows with `metadata` `{}`, one
partition table per partition at `<hash>_<object_id>` (Appendix B). Every command reads and
writes it, `check` calls it healthy, and pylance still reads it after lancens wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke
from spec_appendix import APPENDIX_A

SCHEMA_JSON = APPENDIX_A["schema"]  # the partitioning spec's own example
SPEC_V1 = {
    "id": 1,
    "fields": [
        {
            "field_id": "country",
            "source_ids": [2],
            "transform": {"type": "identity"},
            "result_type": {"type": "utf8"},
        }
    ],
}
ROWS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("event_date", pa.date32()),
        pa.field("country", pa.string()),
    ]
)


def rows(ids: list[int], country: str) -> pa.Table:
    import datetime as dt

    return pa.table(
        {
            "id": ids,
            "event_date": [dt.date(2025, 12, 10)] * len(ids),
            "country": [country] * len(ids),
        },
        schema=ROWS,
    )


def build(root: Path) -> None:
    """The namespace, by hand: one partition (country = US) holding ids 0..4."""
    root.mkdir()
    table_dir = "aabbccdd_v1$k7m2n9p4q8r5s3t6$dataset"
    lance.write_dataset(rows([0, 1, 2, 3, 4], "US"), str(root / table_dir))
    manifest_schema = pa.schema(
        [
            pa.field("object_id", pa.string(), nullable=False),
            pa.field("object_type", pa.string(), nullable=False),
            pa.field("location", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("base_objects", pa.list_(pa.field("object_id", pa.string()))),
            pa.field("read_version", pa.uint64()),
            pa.field("read_branch", pa.string()),
            pa.field("read_tag", pa.string()),
            pa.field("partition_field_country", pa.string()),
        ]
    )
    entries = [
        ("v1", "namespace", None, None, None),
        ("v1$k7m2n9p4q8r5s3t6", "namespace", None, None, "US"),
        ("v1$k7m2n9p4q8r5s3t6$dataset", "table", table_dir, 1, "US"),
    ]
    table = pa.table(
        {
            "object_id": [e[0] for e in entries],
            "object_type": [e[1] for e in entries],
            "location": [e[2] for e in entries],
            "metadata": ["{}"] * len(entries),
            "base_objects": [None] * len(entries),
            "read_version": [e[3] for e in entries],
            "read_branch": [None] * len(entries),
            "read_tag": [None] * len(entries),
            "partition_field_country": [e[4] for e in entries],
        },
        schema=manifest_schema,
    )
    manifest = lance.write_dataset(table, str(root / "__manifest"))
    manifest.update_metadata(
        {"partition_spec_v1": json.dumps(SPEC_V1), "schema": json.dumps(SCHEMA_JSON)}
    )


@pytest.fixture
def foreign(tmp_path) -> tuple[Path, tuple[str, ...]]:
    root = tmp_path / "ns"
    build(root)
    return root, ("--root", str(root))


def test_a_namespace_laid_out_by_another_tool_is_read_by_every_command(foreign):
    root, args = foreign
    listing = invoke(*args, "ls", "--recursive", "--json")
    assert listing.exit_code == 0, listing.stderr
    assert "v1.k7m2n9p4q8r5s3t6.dataset" in {e["id"] for e in json.loads(listing.stdout)["entries"]}
    described = invoke(*args, "describe", "v1.k7m2n9p4q8r5s3t6.dataset", "--json")
    assert described.exit_code == 0, described.stderr
    found = invoke(*args, "partitions", "--where", "country = 'US'", "--json")
    assert json.loads(found.stdout)["partitions_matched"] == 1
    healthy = invoke(*args, "check")
    assert healthy.exit_code == 0, healthy.stdout + healthy.stderr


def test_a_namespace_laid_out_by_another_tool_takes_writes(foreign, tmp_path):
    root, args = foreign
    new = tmp_path / "new.parquet"
    pq.write_table(pa.concat_tables([rows([5, 6], "US"), rows([7], "DE")]), new)
    written = invoke(*args, "write", "--from", str(new))
    assert written.exit_code == 0, written.stderr
    assert invoke(*args, "check").exit_code == 0
    # pylance alone reads what lancens published: every row once
    manifest = lance.dataset(str(root / "__manifest"))
    published = []
    for row in manifest.to_table(filter="object_type = 'table'").to_pylist():
        dataset = lance.dataset(str(root / row["location"]), version=row["read_version"])
        published += dataset.to_table().column("id").to_pylist()
    assert sorted(published) == list(range(8))
    # rows lancens added carry `metadata` `{}`, as Appendix C shows
    added = [r for r in manifest.to_table().to_pylist() if r["partition_field_country"] == "DE"]
    assert len(added) == 2 and {r["metadata"] for r in added} == {"{}"}
    # the schema and the spec another tool wrote are unchanged; our guard came with the write
    metadata = manifest.metadata
    assert json.loads(metadata["schema"]) == SCHEMA_JSON
    assert json.loads(metadata["partition_spec_v1"]) == SPEC_V1
    assert int(metadata["lance.namespace.manifest.writer_feature_flags"])
