"""Which source version a shallow clone reads, found from Lance's version summaries first.

Generated histories (appends, deletes, compaction, added columns and indexes on the source;
appends, deletes, compaction and another tool's cleanup on the clone) are decided by
`clone_needed_versions` and by a plain oracle that reads every version's file set. The two must
name the same versions, and after `lancens prune` the clone and the source read as before. An
append-only history of many versions reads the file sets of at most two of them.
"""

from __future__ import annotations

import json
import time
import warnings
from datetime import timedelta

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lancens_cli.config import NamespaceConfig
from lancens_cli.service.prune import clones
from lancens_cli.service.prune.protect import read_table_state
from lancens_cli.store.storage import Storage

FAST = ["--older-than", "1s", "--grace", "1s", "--force"]

SOURCE_STEPS = st.sampled_from(["append", "append", "delete", "compact", "column", "index"])
CLONE_STEPS = st.sampled_from(["append", "delete", "compact", "cleanup"])


def _rows(start: int, n: int = 3) -> pa.Table:
    return pa.table({"a": pa.array(range(start, start + n), pa.int64())})


def _apply(uri: str, step: str, counter: list[int]) -> None:
    """One commit of a user's kind to the table at `uri`."""
    counter[0] += 10
    ds = lance.dataset(uri)
    if step == "append":
        rows = _rows(counter[0])
        if "b" in ds.schema.names:
            rows = rows.append_column("b", pc.multiply(rows["a"], 2))
        lance.write_dataset(rows, uri, mode="append")
    elif step == "delete":
        ds.delete(f"a % 3 = {counter[0] % 3}")
    elif step == "compact":
        ds.optimize.compact_files(target_rows_per_fragment=1_000_000)
    elif step == "column" and "b" not in ds.schema.names:
        ds.add_columns({"b": "a * 2"})
    elif step == "index":
        ds.create_scalar_index("a", "BTREE", replace=True)
    elif step == "cleanup":  # another tool removes every older version (of the clone)
        time.sleep(0.01)
        ds.cleanup_old_versions(older_than=timedelta(seconds=0), delete_unverified=True)


def _oracle(source_uri: str, clone_uri: str) -> set[int]:
    """Every version's files read in full: exact match, else newest covering, else sharing."""
    source = lance.dataset(source_uri)
    files = {}
    for info in source.versions():
        view = source.checkout_version(info["version"])
        found = set()
        for fragment in view.get_fragments():
            meta = fragment.metadata
            found |= {f"data/{f.path}" for f in meta.files}
            if meta.deletion_file is not None:
                found.add(meta.deletion_file.path(meta.id))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            found |= {
                f"_indices/{i['uuid']}" for i in view.list_indices() if i.get("base_id") is None
            }
        files[info["version"]] = found
    clone = lance.dataset(clone_uri)
    ids = set(clone.base_paths())
    wanted = set()
    for info in clone.versions():
        view = clone.checkout_version(info["version"])
        for fragment in view.get_fragments():
            meta = fragment.metadata
            wanted |= {f"data/{f.path}" for f in meta.files if f.base_id in ids}
            if meta.deletion_file is not None and meta.deletion_file.base_id in ids:
                wanted.add(meta.deletion_file.path(meta.id))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            wanted |= {
                f"_indices/{i['uuid']}" for i in view.list_indices() if i.get("base_id") in ids
            }
    if not wanted:  # the clone reads nothing of its source any more
        return set()
    exact = [v for v, f in files.items() if f == wanted]
    covering = [v for v, f in files.items() if wanted <= f]
    if exact or covering:
        return {max(exact or covering)}
    return {v for v, f in files.items() if f & wanted}


def _needed(root, location: str = "src.lance", clone: str = "copy.lance") -> set[int]:
    storage = Storage(NamespaceConfig(root="file://" + str(root)))
    state = read_table_state(storage, location, None)
    return set(clones.clone_needed_versions(storage, state, [clone]))


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    before=st.lists(SOURCE_STEPS, min_size=1, max_size=6),
    after=st.lists(SOURCE_STEPS, max_size=4),
    in_clone=st.lists(CLONE_STEPS, max_size=4),
    pick=st.integers(min_value=0, max_value=100),
)
def test_the_clones_version_is_the_oracles_and_prune_keeps_it_readable(
    tmp_path_factory, before, after, in_clone, pick
):
    root = tmp_path_factory.mktemp("ns")
    source, copy = str(root / "src.lance"), str(root / "copy.lance")
    counter = [0]
    lance.write_dataset(_rows(0), source)
    for step in before:
        _apply(source, step, counter)
    versions = [v["version"] for v in lance.dataset(source).versions()]
    cloned = versions[pick % len(versions)]
    lance.dataset(source).shallow_clone(copy, cloned)
    for step in after:
        _apply(source, step, counter)
    for step in in_clone:
        _apply(copy, step, counter)

    expected = _oracle(source, copy)
    assert _needed(root) == expected

    clone_rows = lance.dataset(copy).to_table()
    latest_rows = lance.dataset(source).to_table()
    time.sleep(1.1)
    result = invoke("--root", str(root), "prune", *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = {t["location"]: t for t in json.loads(result.stdout)["tables"]}
    kept = {k["version"] for k in report["src.lance"]["protected"]}
    assert expected <= kept
    assert lance.dataset(copy).to_table().equals(clone_rows)
    assert lance.dataset(source).to_table().equals(latest_rows)


def test_an_append_only_history_reads_two_file_sets_at_most(tmp_path, monkeypatch):
    """120 appends, a clone of version 40: the file set of the clone's version alone is read
    (the one version whose counts of data and deletion files are the clone's)."""
    source = tmp_path / "src.lance"
    lance.write_dataset(_rows(0), source)
    for i in range(1, 120):
        lance.write_dataset(_rows(10 * i), source, mode="append")
    lance.dataset(str(source)).shallow_clone(str(tmp_path / "copy.lance"), 40)
    read: list[int] = []
    files = clones.SourceVersions._read_files

    def counted(self, version):
        read.append(version)
        return files(self, version)

    monkeypatch.setattr(clones.SourceVersions, "_read_files", counted)
    assert _needed(tmp_path) == {40} == _oracle(str(source), str(tmp_path / "copy.lance"))
    assert len(set(read)) <= 2, read


@pytest.mark.parametrize("removed_by_another_tool", [False, True])
def test_a_clone_whose_version_is_gone_keeps_every_version_sharing_its_files(
    tmp_path, removed_by_another_tool
):
    """The clone's version removed behind prune's back (the fallback): no version holds all
    it reads, so every version still holding some of it stays, as the oracle says."""
    source = str(tmp_path / "src.lance")
    lance.write_dataset(_rows(0), source)
    for i in range(1, 4):
        lance.write_dataset(_rows(10 * i), source, mode="append")
    lance.dataset(source).delete("a = 0")  # version 5: fragment 0's deletion file
    lance.dataset(source).shallow_clone(str(tmp_path / "copy.lance"), 5)
    lance.dataset(source).delete("a = 1")  # version 6: a new deletion file for fragment 0
    lance.write_dataset(_rows(100), source, mode="append")  # version 7
    if removed_by_another_tool:
        time.sleep(0.1)
        lance.dataset(source).cleanup_old_versions(
            older_than=timedelta(seconds=0), delete_unverified=True
        )
    expected = _oracle(source, str(tmp_path / "copy.lance"))
    assert _needed(tmp_path) == expected
    assert expected == ({7} if removed_by_another_tool else {5})


def test_a_clone_reading_part_of_its_version_keeps_the_newest_version_holding_all_of_it(tmp_path):
    """The clone dropped a fragment and its first version is gone (no source version holds
    exactly what it reads): the newest version holding all of it stays, not one whose counts
    merely fit (a later compaction and appends) nor an older one (the clone's own version)."""
    source, copy = str(tmp_path / "src.lance"), str(tmp_path / "copy.lance")
    lance.write_dataset(_rows(0), source)  # fragment 0: a = 0, 1, 2
    for i in range(1, 4):
        lance.write_dataset(_rows(10 * i), source, mode="append")  # fragments 1..3
    lance.dataset(source).shallow_clone(copy, 4)
    lance.dataset(copy).delete("a < 10")  # the clone drops fragment 0
    time.sleep(0.1)
    lance.dataset(copy).cleanup_old_versions(
        older_than=timedelta(seconds=0), delete_unverified=True
    )
    lance.dataset(source).delete("a < 10 or a = 10")  # fragments 1..3, a deletion file on 1
    holding = lance.dataset(source).version
    lance.dataset(source).optimize.compact_files(target_rows_per_fragment=1_000_000)
    compacted = lance.dataset(source).version
    for i in range(3):
        lance.write_dataset(_rows(100 + 10 * i), source, mode="append")  # 4 data files
    expected = _oracle(source, copy)
    assert len(expected) == 1 and holding <= min(expected) < compacted, expected
    assert _needed(tmp_path) == expected
