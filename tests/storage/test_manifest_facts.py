"""What prune reads from a manifest's protobuf itself (store/base_paths.py) equals what Lance
reads from it, for every version of real tables of every kind: the data files a version keeps
in its own `data/` (a shallow clone's reach into its source through `base_id` excluded) and
its base paths."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

from lancens_cli.store.base_paths import base_path_strings, own_data_files, split_manifest_file
from lancens_cli.store.manifest_names import version_from_manifest_name
from lancens_cli.store.protobuf import ManifestFormatError


def _tables(tmp_path: Path) -> list[Path]:
    """A table with appends, a delete (a deletion file), a compaction and a btree index; a
    shallow clone of it with rows of its own; a clone of the clone; a table of V1-named
    manifests with a nested schema."""
    source = tmp_path / "source.lance"
    for i in range(4):
        data = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "s": ["x"] * 10})
        lance.write_dataset(data, source, mode="append" if i else "create")
    ds = lance.dataset(source)
    ds.delete("id < 3")
    ds.create_scalar_index("id", "BTREE")
    ds.optimize.compact_files(target_rows_per_fragment=15)
    clone = tmp_path / "clone.lance"
    lance.dataset(source).shallow_clone(clone, lance.dataset(source).version)
    lance.write_dataset(pa.table({"id": [100], "s": ["c"]}), clone, mode="append")
    twice = tmp_path / "twice.lance"
    lance.dataset(clone).shallow_clone(twice, lance.dataset(clone).version)
    lance.write_dataset(pa.table({"id": [200], "s": ["t"]}), twice, mode="append")
    nested = tmp_path / "nested.lance"
    rows = pa.table({"p": pa.array([{"a": 1, "b": [1, 2]}, {"a": 2, "b": []}])})
    lance.write_dataset(rows, nested, enable_v2_manifest_paths=False)
    lance.write_dataset(rows, nested, mode="append")
    return [source, clone, twice, nested]


def test_own_data_files_and_base_paths_equal_what_lance_reads(tmp_path):
    checked = 0
    for table in _tables(tmp_path):
        for manifest in sorted((table / "_versions").glob("*.manifest")):
            version = version_from_manifest_name(manifest.name)
            ds = lance.dataset(table, version=version)
            files = [f for fr in ds.get_fragments() for f in fr.metadata.files]
            message = split_manifest_file(manifest.read_bytes())[1]
            assert own_data_files(message) == sum(f.base_id is None for f in files), manifest
            assert sorted(base_path_strings(message)) == sorted(
                str(b.path) for b in ds.base_paths().values()
            )
            checked += 1
    assert checked >= 12
    clone_latest = lance.dataset(tmp_path / "twice.lance")
    own = [f for fr in clone_latest.get_fragments() for f in fr.metadata.files]
    assert any(f.base_id is not None for f in own) and any(f.base_id is None for f in own)


@pytest.mark.parametrize(
    "message",
    [
        bytes([2 << 3 | 2, 5, 1, 2]),  # a fragment longer than the message
        bytes([2 << 3 | 2, 2, 2 << 3 | 2, 9]),  # a data file longer than its fragment
        bytes([2 << 3 | 7, 0]),  # wire type 7 does not exist
        bytes([2 << 3 | 0, 0x80]),  # a varint cut short
    ],
)
def test_a_manifest_that_does_not_parse_is_refused_in_words(message):
    with pytest.raises(ManifestFormatError):
        own_data_files(message)
