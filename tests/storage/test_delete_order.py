"""A table's files are deleted so that no reader ever sees an older version in its place
(store/manifest_names.py `deletion_phases`, used by every `delete_tree`).

Drop deletes a table's files before it removes its row: a process killed in between leaves
the row, and whatever the deletion left must read as the table did, or as no table at all.
On GCS a batch of deletes runs in parallel, in no order, so here every subset of each phase
is tried after the phases before it, on real tables of both manifest naming schemes.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from lancens_cli.config import NamespaceConfig
from lancens_cli.store.manifest_names import deletion_phases
from lancens_cli.store.storage import Storage


def table_with_versions(path: Path, v2_names: bool) -> int:
    """A table of four versions (the newest with a deletion file); its row count."""
    lance.write_dataset(pa.table({"id": range(10)}), path, enable_v2_manifest_paths=v2_names)
    for start in (10, 20):
        lance.write_dataset(pa.table({"id": range(start, start + 10)}), path, mode="append")
    dataset = lance.dataset(path)
    dataset.delete("id < 3")
    return lance.dataset(path).count_rows()


def files_below(path: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(top, name), path)
        for top, _, names in os.walk(path)
        for name in names
    )


def reads(path: Path) -> int | None:
    """The table's rows as a reader finds them now, or None when it is no table."""
    try:
        return lance.dataset(path).count_rows()
    except (ValueError, OSError):
        return None


@pytest.mark.parametrize("v2_names", [False, True], ids=["v1-names", "v2-names"])
def test_every_partial_deletion_reads_as_the_table_or_as_none(tmp_path, v2_names):
    table = tmp_path / "t.lance"
    rows = table_with_versions(table, v2_names)
    phases = deletion_phases(files_below(table))
    assert [p for phase in phases for p in phase] != []
    assert sorted(p for phase in phases for p in phase) == files_below(table)
    tried = 0
    for done in range(len(phases)):
        for size in range(len(phases[done]) + 1):
            for some in itertools.combinations(phases[done], size):
                trial = tmp_path / f"trial-{tried}.lance"
                shutil.copytree(table, trial)
                for path in [*itertools.chain(*phases[:done]), *some]:
                    os.remove(trial / path)
                assert reads(trial) in (rows, None), (done, some)
                shutil.rmtree(trial)
                tried += 1
    assert tried > 8


def test_a_tree_deleted_through_the_storage_leaves_nothing(tmp_path):
    table = tmp_path / "t.lance"
    table_with_versions(table, True)
    Storage(NamespaceConfig(root="file://" + str(tmp_path))).delete_tree("t.lance")
    assert not table.exists()
