"""A shallow clone keeps what it reads, however its source's path was spelt.

The root given through a symlink (`/data -> /disk1`), a clone made through the real path, a
doubled slash or a `..`: prune compares locations in one canonical form, finds every clone as a
dependent of its source, and removes no source version a clone reads.
"""

from __future__ import annotations

import json
import os
import time
from urllib.parse import quote

import lance
import pyarrow as pa
import pytest
from helpers import invoke

FAST = ["--older-than", "1s", "--grace", "1s", "--force"]


@pytest.fixture
def disks(tmp_path):
    """`data dir/ns` (the root as the user names it) is `disk1/ns` through a symlink."""
    (tmp_path / "disk1" / "ns").mkdir(parents=True)
    os.symlink(tmp_path / "disk1", tmp_path / "data dir")
    return tmp_path


@pytest.mark.parametrize(
    "spelling",
    [
        "{link}/ns/src.lance",  # as the root is spelt
        "{real}/ns/src.lance",  # the real path, while the root is given through the symlink
        "{link}/ns//src.lance",  # a doubled slash
        "{link}/ns/sub/../src.lance",  # a `..`
        "{link}/./ns/src.lance",  # a `.`
        "file://{link}/ns/src.lance",  # the URIs Lance records as given: file:///p
        "file:{link}/ns/src.lance",  # file:/p
        "file://localhost{real}/ns/src.lance",  # file://localhost/p
        "file://{quoted}/ns/src.lance",  # percent-encoded (a space in the path)
    ],
)
def test_a_clone_through_any_spelling_keeps_its_source_version(disks, spelling):
    root = disks / "data dir" / "ns"
    source = root / "src.lance"
    for value in (1, 2, 3):
        lance.write_dataset(
            pa.table({"a": [value]}), source, mode="append" if value > 1 else "create"
        )
    path = spelling.format(
        real=disks / "disk1", link=disks / "data dir", quoted=quote(str(disks / "data dir"))
    )
    (root / "sub").mkdir(exist_ok=True)
    lance.dataset(path, version=1).shallow_clone(str(root / "copy.lance"), 1)
    expected = lance.dataset(str(root / "copy.lance")).to_table()
    time.sleep(1.2)
    result = invoke("--root", str(root), "prune", *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = {t["location"]: t for t in json.loads(result.stdout)["tables"]}
    kept = {k["version"] for k in report["src.lance"]["protected"]}
    assert 1 in kept, report["src.lance"]
    assert lance.dataset(str(root / "copy.lance")).to_table().equals(expected)


def test_a_clones_index_files_stay_after_its_source_rebuilt_its_indexes(tmp_path):
    """A shallow clone of an untagged version; the source then rebuilds its scalar and FTS
    indexes (replace=True). The clone's manifest names the old index files in the source: the
    version holding them stays, and the clone's index queries answer as before."""
    root = tmp_path / "ns"
    root.mkdir()
    source = root / "src.lance"
    rows = pa.table({"a": list(range(200)), "s": [f"word{i % 7} other" for i in range(200)]})
    ds = lance.write_dataset(rows, source)
    ds.create_scalar_index("a", "BTREE")
    ds = lance.dataset(str(source))
    ds.create_scalar_index("s", "INVERTED")
    ds = lance.dataset(str(source))
    ds.shallow_clone(str(root / "copy.lance"), ds.version)
    clone = lance.dataset(str(root / "copy.lance"))
    before = (
        clone.to_table(filter="a = 42").to_pylist(),
        sorted(r["a"] for r in clone.to_table(full_text_query="word3").to_pylist()),
    )
    ds = lance.dataset(str(source))
    ds.create_scalar_index("a", "BTREE", replace=True)
    lance.dataset(str(source)).create_scalar_index("s", "INVERTED", replace=True)
    time.sleep(1.2)
    result = invoke("--root", str(root), "prune", *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    clone = lance.dataset(str(root / "copy.lance"))
    after = (
        clone.to_table(filter="a = 42").to_pylist(),
        sorted(r["a"] for r in clone.to_table(full_text_query="word3").to_pylist()),
    )
    assert after == before and before[1]
    uuids = {i["uuid"] for i in clone.list_indices()}
    assert all((source / "_indices" / u).is_dir() for u in uuids)


def test_prune_compact_leaves_a_clone_with_borrowed_indexes_as_it_reads(tmp_path):
    """Lance's compaction of a shallow clone remaps the indexes it reads from its source into
    the clone but keeps the source's base id, so every index query on the compacted clone
    fails. `prune --compact` leaves such a clone as it is and says why."""
    root = tmp_path / "ns"
    root.mkdir()
    source = root / "src.lance"
    for start in (0, 10, 20):
        rows = pa.table({"a": list(range(start, start + 10))})
        lance.write_dataset(rows, source, mode="append" if start else "create")
    lance.dataset(str(source)).create_scalar_index("a", "BTREE")
    ds = lance.dataset(str(source))
    ds.shallow_clone(str(root / "copy.lance"), ds.version)
    result = invoke("--root", str(root), "prune", "--compact", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = {t["location"]: t for t in json.loads(result.stdout)["tables"]}
    assert any("not compacted" in n for n in report["copy.lance"]["notes"])
    clone = lance.dataset(str(root / "copy.lance"))
    assert clone.to_table(filter="a = 12").column("a").to_pylist() == [12]
    assert len(clone.get_fragments()) == 3


def test_a_clone_whose_base_path_cannot_be_placed_stops_every_removal(tmp_path, monkeypatch):
    """Made from a relative path, a clone's base path is relative to whatever directory its
    reader runs in: it may read any table, so prune removes no version anywhere and says so."""
    root = tmp_path / "ns"
    root.mkdir()
    for value in (1, 2, 3):
        lance.write_dataset(
            pa.table({"a": [value]}), root / "src.lance", mode="append" if value > 1 else "create"
        )
    monkeypatch.chdir(tmp_path)
    lance.dataset("ns/src.lance", version=1).shallow_clone("ns/copy.lance", 1)
    expected = lance.dataset("ns/copy.lance").to_table()
    time.sleep(1.2)
    result = invoke("--root", str(root), "prune", *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = {t["location"]: t for t in json.loads(result.stdout)["tables"]}
    assert report["src.lance"]["versions_removed"] == []
    assert any("cannot be placed" in note for note in report["src.lance"]["notes"])
    assert lance.dataset("ns/copy.lance").to_table().equals(expected)
    assert lance.dataset(str(root / "src.lance"), version=1).to_table().num_rows == 1
