"""`add-partition-spec` never leaves a `__manifest` version a spec-following reader cannot read.

Lance cannot commit rows and table metadata in one operation, so a spec change is two commits:
the `partition_field_*` columns and the `v<N>` namespace first, the spec itself last. Every
version of `__manifest`, after a clean run and after a kill between the two commits, is
consistent: each spec its metadata holds names columns that exist and a `v<N>` namespace that
exists. A rerun after the kill finishes the change.
"""

from __future__ import annotations

import json

import lance
import pyarrow.parquet as pq
import pytest
from data import country_rows
from helpers import invoke

from lancens_cli.store.manifest import ManifestStore


def inconsistencies(root) -> list[str]:
    """What any `__manifest` version's specs name that the version lacks."""
    found = []
    manifest = lance.dataset(str(root / "__manifest"))
    for entry in manifest.versions():
        at = lance.dataset(str(root / "__manifest"), version=entry["version"])
        names = set(at.schema.names)
        ids = set(at.to_table(columns=["object_id"])["object_id"].to_pylist())
        for key, text in (at.metadata or {}).items():
            if not key.startswith("partition_spec_v"):
                continue
            spec = json.loads(text)
            namespace = f"v{spec['id']}"
            if namespace not in ids:
                found.append(f"version {entry['version']}: {key} without {namespace}")
            for field in spec["fields"]:
                column = f"partition_field_{field['field_id']}"
                if column not in names:
                    found.append(f"version {entry['version']}: {key} names missing {column}")
    return found


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "ns"
    path.mkdir()
    pq.write_table(country_rows(0), tmp_path / "rows.parquet")
    return path


def test_every_manifest_version_of_a_spec_change_is_consistent(root, tmp_path):
    args = ("--root", str(root))
    schema = ("--schema", str(tmp_path / "rows.parquet"))
    assert invoke(*args, "add-partition-spec", *schema, "--field", "country").exit_code == 0
    assert invoke(*args, "write", "--from", str(tmp_path / "rows.parquet")).exit_code == 0
    assert invoke(*args, "add-partition-spec", "--field", "bucket(4, id)").exit_code == 0
    assert inconsistencies(root) == []
    assert len(lance.dataset(str(root / "__manifest")).versions()) >= 5


def test_a_kill_between_the_commits_leaves_it_consistent_and_a_rerun_finishes(
    root, tmp_path, monkeypatch
):
    args = ("--root", str(root))
    schema = ("--schema", str(tmp_path / "rows.parquet"))
    assert invoke(*args, "add-partition-spec", *schema, "--field", "country").exit_code == 0
    assert invoke(*args, "write", "--from", str(tmp_path / "rows.parquet")).exit_code == 0

    def killed(self, snapshot, edit):
        raise SystemExit(137)  # the process dies before the spec's own commit

    with monkeypatch.context() as patch:
        patch.setattr(ManifestStore, "_commit_metadata", killed)
        assert invoke(*args, "add-partition-spec", "--field", "bucket(4, id)").exit_code != 0
    metadata = lance.dataset(str(root / "__manifest")).metadata
    assert "partition_spec_v2" not in metadata  # the columns and v2 landed, the spec not
    assert inconsistencies(root) == []
    listed = invoke(*args, "partitions", "--json")
    assert listed.exit_code == 0, listed.stderr  # readers read it as before the change
    assert invoke(*args, "check").exit_code == 0

    rerun = invoke(*args, "add-partition-spec", "--field", "bucket(4, id)", "--json")
    assert rerun.exit_code == 0, rerun.stderr
    assert "partition_spec_v2" in lance.dataset(str(root / "__manifest")).metadata
    assert inconsistencies(root) == []
    assert invoke(*args, "write", "--from", str(tmp_path / "rows.parquet")).exit_code == 0
    assert invoke(*args, "check").exit_code == 0
