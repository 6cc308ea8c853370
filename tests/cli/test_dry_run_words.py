"""Dry runs show the location a real run will use (a pattern where it is drawn at random), and
counts in messages are words ("1 table", "2 directories"), while --json stays as it was."""

from __future__ import annotations

import json
import re

import lance
import pyarrow as pa
import pytest
from helpers import invoke, tree_snapshot

from lancens_cli.words import noun, plural

NOTE = "dry run: <hash> stands for 8 random hex digits, drawn when the directory is created"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("LANCENS_CONFIG", str(tmp_path / "absent.toml"))
    path = tmp_path / "ns"
    path.mkdir()
    assert invoke("init", "--root", str(path)).exit_code == 0
    assert invoke("create", "namespace", "a", "--root", str(path)).exit_code == 0
    (tmp_path / "s.json").write_text(json.dumps({"fields": [{"name": "x", "type": "int64"}]}))
    return path


def _create(root, *args):
    return invoke(
        "create", "table", *args, "--schema", str(root.parent / "s.json"), "--root", str(root)
    )


def test_plural_words():
    assert plural(1, "object") == "1 object"
    assert plural(0, "table") == "0 tables"
    assert plural(2, "directory") == "2 directories"
    assert plural(3, "partition table") == "3 partition tables"
    assert noun(1, "key") == "key" and noun(2, "key") == "keys"


def test_create_dry_run_shows_the_location_pattern(root):
    before = tree_snapshot(root)
    dry = _create(root, "a.b", "--dry-run")
    assert dry.exit_code == 0
    assert dry.stdout == "would create\ttable\ta.b\t<hash>_a$b\t-\n"
    assert dry.stderr.splitlines() == [NOTE]
    assert tree_snapshot(root) == before  # nothing written
    again = _create(root, "a.b", "--dry-run")
    assert again.stdout == dry.stdout  # no random name that changes from run to run
    as_json = _create(root, "a.b", "--dry-run", "--json")
    assert as_json.stderr == ""
    assert as_json.json() == {
        "changes": [
            {
                "action": "create",
                "kind": "table",
                "id": "a.b",
                "location": "<hash>_a$b",
                "dry_run": True,
                "detail": None,
            }
        ],
        "dry_run": True,
        "message": None,
    }
    real = _create(root, "a.b")
    assert real.exit_code == 0 and real.stderr == ""
    location = real.stdout.split("\t")[3]
    assert re.fullmatch(r"[0-9a-f]{8}_a\$b", location)  # what the pattern promised


def test_create_dry_run_of_a_root_table_shows_its_fixed_directory(root):
    dry = _create(root, "t", "--dry-run")
    assert dry.stdout == "would create\ttable\tt\tt.lance\t-\n" and dry.stderr == ""
    no_listing = _create(root, "t", "--dry-run", "--no-dir-listing")
    assert no_listing.stdout == "would create\ttable\tt\t<hash>_t\t-\n"
    assert no_listing.stderr.splitlines() == [NOTE]


def test_rename_dry_run_shows_the_location_pattern(root):
    assert _create(root, "t").exit_code == 0
    dry = invoke("rename", "t", "a.t2", "--dry-run", "--root", str(root))
    assert dry.stdout == "would rename\ttable\tt\t<hash>_a$t2\t-> a.t2 (moves from t.lance)\n"
    assert dry.stderr.splitlines() == [NOTE]
    kept = invoke("rename", "t", "a.t2", "--dry-run", "--keep-location", "--root", str(root))
    assert "<hash>" not in kept.stdout and kept.stderr == ""


def test_counts_are_words(root):
    assert _create(root, "a.b").exit_code == 0
    one = invoke("check", "--root", str(root))
    assert one.exit_code == 0
    assert one.stderr.splitlines()[-1] == "1 table, 1 namespace checked: healthy"
    assert _create(root, "a.c").exit_code == 0
    assert invoke("create", "namespace", "z", "--root", str(root)).exit_code == 0
    two = invoke("check", "--root", str(root))
    assert two.stderr.splitlines()[-1] == "2 tables, 2 namespaces checked: healthy"
    as_json = invoke("check", "--root", str(root), "--json")
    assert as_json.stderr == "" and as_json.json()["tables_checked"] == 2


def test_migrate_counts_are_words(root):
    for name in ("v1a", "v1b"):
        lance.write_dataset(pa.table({"x": [1]}), str(root / f"{name}.lance"))
    two = invoke("migrate-v1", "--dry-run", "--root", str(root))
    assert "dry run: 2 tables would be registered; nothing changed" in two.stderr.splitlines()
    assert invoke("migrate-v1", "--root", str(root)).exit_code == 0
    lance.write_dataset(pa.table({"x": [1]}), str(root / "v1c.lance"))
    one = invoke("migrate-v1", "--check", "--root", str(root))
    assert one.exit_code == 7
    assert "1 table left to migrate" in one.stderr.splitlines()
