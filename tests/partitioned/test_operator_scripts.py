"""What deploy scripts and cron jobs run against a partitioned namespace, every time: the same
spec again is nothing to do, every id a command prints is one every command takes, and every
mutating command has a dry run that changes nothing and says what it would do."""

from __future__ import annotations

import json

from data import events
from helpers import SPEC1, cli, ok, tree_snapshot


def test_the_same_spec_again_is_nothing_to_do_once_partitions_exist(partitioned, files):
    rows = files("rows.parquet", events(40))
    ok(partitioned, "write", "--from", rows)
    before = tree_snapshot(partitioned.local_path)
    for extra in ([], ["--dry-run"], ["--schema", rows]):
        again = cli(partitioned, "add-partition-spec", *SPEC1, *extra, "--json")
        assert again.exit_code == 0, (extra, again.stderr)
        assert again.json()["action"] == "exists" and again.json()["version"] == 1
        assert "nothing to do" in again.stderr
        assert tree_snapshot(partitioned.local_path) == before, extra


def test_prune_prints_partition_tables_as_ids_every_command_takes(partitioned, files):
    ok(partitioned, "write", "--from", files("rows.parquet", events(40)))
    for delimiter in (".", "/"):
        args = ("--delimiter", delimiter) if delimiter != "." else ()
        report = ok(partitioned, *args, "prune", "--yes", "--full", "--json").json()
        tables = [t["table"] for t in report["tables"] if t["object_id"]]
        assert tables and not any("$" in t for t in tables), tables
        piped = ok(partitioned, *args, "prune", "--yes", "--full").stdout.splitlines()
        shown = [line.split("\t")[0] for line in piped if line.startswith("v1")]
        assert sorted(shown) == sorted(tables)
        for table in tables[:2]:  # pasted back into other commands
            assert ok(partitioned, *args, "versions", table).stdout
            assert ok(partitioned, *args, "describe", table).stdout
            assert ok(partitioned, *args, "prune", table, "--yes").stdout


def test_write_has_a_dry_run_that_writes_nothing(partitioned, files):
    first = events(40)
    ok(partitioned, "write", "--from", files("first.parquet", first))
    more = files("more.parquet", events(30, seed=7, countries=("US", "JP")))
    before = tree_snapshot(partitioned.local_path)
    planned = ok(partitioned, "write", "--from", more, "--dry-run", "--json").json()
    assert tree_snapshot(partitioned.local_path) == before
    assert planned["dry_run"] is True and planned["rows"] == 30
    new = {p["values"]["country"] for p in planned["partitions"] if p["created"]}
    assert "JP" in new and "US" not in new
    assert all(p["read_version"] is None for p in planned["partitions"])
    for p in planned["partitions"]:  # a table it would create is named when it is created
        assert (p["table"] is None) == p["created"] == (p["location"] is None), p
    text = ok(partitioned, "write", "--from", more, "--dry-run")
    assert "would create" in text.stdout and "nothing changed" in text.stderr
    done = ok(partitioned, "write", "--from", more, "--json").json()
    assert sorted(json.dumps(p["values"]) for p in done["partitions"]) == sorted(
        json.dumps(p["values"]) for p in planned["partitions"]
    )
    assert [p["created"] for p in done["partitions"]] == [
        p["created"] for p in planned["partitions"]
    ]
    existing = {p["table"] for p in planned["partitions"] if not p["created"]}
    assert existing == {p["table"] for p in done["partitions"] if not p["created"]}


def test_an_evolve_schema_dry_run_says_what_would_be_applied(partitioned, files):
    ok(partitioned, "write", "--from", files("rows.parquet", events(20)))
    before = tree_snapshot(partitioned.local_path)
    dry = ok(partitioned, "evolve-schema", "--add", "score float64", "--dry-run", "--json")
    assert [c["outcome"] for c in dry.json()["changes"]] == ["would apply"]
    assert tree_snapshot(partitioned.local_path) == before
    real = ok(partitioned, "evolve-schema", "--add", "score float64", "--json")
    assert [c["outcome"] for c in real.json()["changes"]] == ["applied"]
