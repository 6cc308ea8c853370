"""A partition a restore stopped publishing is named for what happened to it: while time travel
reads it nothing is said; a prune that expires the last versions publishing it says so before it
goes (dry run too), and once no readable version publishes it `check` and the next prune call it
the restore's, never a write that died before its `__manifest` commit."""

from __future__ import annotations

import lance
import pyarrow as pa
import pyarrow.parquet as pq
from helpers import invoke

NOW = ("--older-than", "0s", "--grace", "0s", "--retain", "1", "--force", "--yes")


def write(args, path, cities: list[str]) -> None:
    pq.write_table(pa.table({"id": list(range(len(cities))), "city": cities}), path)
    done = invoke(*args, "write", "--from", str(path))
    assert done.exit_code == 0, done.stderr


def debris(result) -> list[dict]:
    return [d for d in result.json()["debris"] if d["code"] == "unpublished_partition_table"]


def test_a_partition_a_restore_unpublished_is_named_before_and_after_it_goes(tmp_path):
    root = tmp_path / "ns"
    args = ("--root", str(root))
    pq.write_table(pa.table({"id": [0], "city": ["Oslo"]}), tmp_path / "schema.parquet")
    assert invoke(*args, "init").exit_code == 0
    spec = ("add-partition-spec", "--schema", str(tmp_path / "schema.parquet"), "--field", "city")
    assert invoke(*args, *spec).exit_code == 0
    write(args, tmp_path / "a.parquet", ["Oslo", "Lima"])
    good = lance.dataset(str(root / "__manifest")).version
    write(args, tmp_path / "b.parquet", ["Pune"])
    restored = invoke(*args, "restore", "--to-version", str(good), "--yes", "--json")
    assert restored.exit_code == 0, restored.stderr
    made = restored.json()["new_version"]
    (gone,) = [c for c in restored.json()["changes"] if c["action"] == "unpublished"]

    checked = invoke(*args, "check", "--json")  # time travel to the bad write still reads it
    assert checked.exit_code == 0, checked.stdout

    words = f"the restore to __manifest version {good} (made version {made}"
    dry = invoke(*args, "prune", *NOW, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    (named,) = debris(dry)
    assert named["location"] == gone["location"] and named["action"] == "kept"
    assert words in named["message"] and "the next prune deletes it" in named["message"]

    first = invoke(*args, "prune", *NOW, "--json")
    assert first.exit_code == 0, first.stderr
    assert [d["action"] for d in debris(first)] == ["kept"]
    assert (root / gone["location"]).is_dir()

    checked = invoke(*args, "check", "--json")
    (finding,) = [f for f in checked.json()["findings"] if f["location"] == gone["location"]]
    assert finding["code"] == "unpublished_partition_table"
    assert words in finding["message"] and "no readable __manifest version" in finding["message"]
    assert "died" not in finding["message"]

    dry = invoke(*args, "prune", *NOW, "--dry-run", "--json")
    assert [(d["action"], words in d["message"]) for d in debris(dry)] == [("would delete", True)]
    second = invoke(*args, "prune", *NOW, "--json")
    assert [d["action"] for d in debris(second)] == ["deleted"]
    assert not (root / gone["location"]).exists()
    assert invoke(*args, "check").exit_code == 0


def test_restore_names_tables_as_every_other_output_does(tmp_path):
    """One id form: `v1.abc.dataset` in text and JSON (`object_id` keeps the raw form)."""
    root = tmp_path / "ns"
    root.mkdir()
    args = ("--root", str(root))
    pq.write_table(pa.table({"id": [0], "city": ["Oslo"]}), tmp_path / "schema.parquet")
    spec = ("add-partition-spec", "--schema", str(tmp_path / "schema.parquet"), "--field", "city")
    assert invoke(*args, *spec).exit_code == 0
    write(args, tmp_path / "a.parquet", ["Oslo"])
    good = lance.dataset(str(root / "__manifest")).version
    write(args, tmp_path / "b.parquet", ["Oslo", "Lima"])
    restore = ("restore", "--to-version", str(good), "--yes")
    (change,) = [
        c
        for c in invoke(*args, *restore, "--dry-run", "--json").json()["changes"]
        if c["action"] == "unpublished"
    ]
    assert change["table"] == change["object_id"].replace("$", ".")
    piped = invoke(*args, *restore).stdout
    tables = [line.split("\t")[2] for line in piped.splitlines()]  # action, partition, table
    assert change["table"] in tables and not any("$" in t for t in tables)
