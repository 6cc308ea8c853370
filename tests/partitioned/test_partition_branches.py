"""Branches and tags of a partitioned namespace through the CLI (the partitioning spec, Read
Behavior): `write --branch`, `tag-partitions [--publish]`, what `partitions`, `scan` and `describe`
read, `prune` keeping published branches and tags, and `check` of the published version."""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pyarrow.compute  # noqa: F401
from data import events
from helpers import ok, partition_tables, run_cli, tree_snapshot


def scanned_ids(root) -> list[int]:
    result = ok(root, "--json", "scan", "--columns", "id", "--limit", "100000")
    return sorted(row[0] for row in result.json()["rows"])


def main_rows(root) -> dict[str, int]:
    """Rows of the latest `main` version of each partition table, by object id."""
    return {
        row["object_id"]: lance.dataset(str(root.local_path / row["location"])).count_rows()
        for row in partition_tables(root)
    }


def table_uri(root, row) -> str:
    return str(root.local_path / row["location"])


def write_main_then_dev(root, files, main_rows: int) -> None:
    """`main_rows` rows written to main, then 50 more (ids from 500) to branch `dev`."""
    ok(root, "write", "--from", files("a.parquet", events(main_rows, seed=1)))
    ok(
        root,
        "write",
        "--from",
        files("b.parquet", events(50, seed=2, start=500)),
        "--branch",
        "dev",
    )


def test_branch_write_is_read_while_main_stays(partitioned, files):
    ok(partitioned, "write", "--from", files("a.parquet", events(200, seed=1)))
    before = main_rows(partitioned)
    new = files("b.parquet", events(100, seed=2, start=1000))
    result = ok(partitioned, "--json", "write", "--from", new, "--branch", "dev").json()
    assert result["rows"] == 100
    touched = {p["table"] for p in result["partitions"]}
    rows = partition_tables(partitioned)
    assert {r["object_id"] for r in rows if r["read_branch"] == "dev"} == touched
    for row in rows:
        if row["object_id"] in touched:
            ds = lance.dataset(table_uri(partitioned, row))
            assert "dev" in ds.branches.list()
            on_dev = ds.checkout_version(("dev", row["read_version"]))
            assert on_dev.count_rows() > before.get(row["object_id"], 0)
    # main of every table is unchanged; a table the branch write created is empty on main
    assert main_rows(partitioned) == {oid: before.get(oid, 0) for oid in main_rows(partitioned)}
    # readers follow read_branch + read_version
    assert scanned_ids(partitioned) == sorted([*range(200), *range(1000, 1100)])
    listed = ok(partitioned, "--json", "partitions").json()["partitions"]
    dev = next(p for p in listed if p["read_branch"] == "dev")
    details = ok(partitioned, "--json", "describe", dev["table"]).json()["details"]
    assert details["read_branch"] == "dev" and details["version"] == dev["read_version"]
    on_dev = lance.dataset(str(partitioned.local_path / dev["location"]))
    assert details["rows"] == on_dev.checkout_version(("dev", dev["read_version"])).count_rows()
    # a second branch write continues the branch
    more = files("c.parquet", events(50, seed=3, start=5000))
    ok(partitioned, "write", "--from", more, "--branch", "dev")
    assert scanned_ids(partitioned) == sorted([*range(200), *range(1000, 1100), *range(5000, 5050)])
    assert main_rows(partitioned) == {oid: before.get(oid, 0) for oid in main_rows(partitioned)}


def test_main_write_onto_a_branch_partition_is_refused(partitioned, files):
    data = files("a.parquet", events(100, seed=1))
    ok(partitioned, "write", "--from", data, "--branch", "dev")
    before = tree_snapshot(partitioned.local_path)
    result = run_cli(*partitioned.args, "write", "--from", data)
    assert result.exit_code == 5, result.stderr
    assert "--branch dev" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert tree_snapshot(partitioned.local_path) == before
    # the same write to the branch goes on: each partition's branch version moves by one
    versions = {r["object_id"]: r["read_version"] for r in partition_tables(partitioned)}
    ok(partitioned, "write", "--from", data, "--branch", "dev")
    for row in partition_tables(partitioned):
        assert row["read_branch"] == "dev" and row["read_version"] == versions[row["object_id"]] + 1
    assert scanned_ids(partitioned) == sorted([*range(100), *range(100)])


def test_bad_branch_names_are_refused(partitioned, files):
    data = files("a.parquet", events(10))
    before = tree_snapshot(partitioned.local_path)
    for name in ("main", "a/b", "..", "-x", "a b"):
        result = run_cli(*partitioned.args, "write", "--from", data, "--branch", name)
        assert result.exit_code == 2 and "not a valid name" in result.stderr, result.stderr
    assert tree_snapshot(partitioned.local_path) == before


def test_tags_publish_and_a_later_write_moves_touched_partitions_off_the_tag(
    partitioned,
    files,
):
    write_main_then_dev(partitioned, files, 300)
    snapshot_ids = scanned_ids(partitioned)
    published = {
        r["object_id"]: (r["read_branch"], r["read_version"]) for r in partition_tables(partitioned)
    }

    dry = ok(partitioned, "--json", "tag-partitions", "snap", "--dry-run").json()
    assert {t["action"] for t in dry["tables"]} == {"create"} and not dry["published"]
    for row in partition_tables(partitioned):
        assert "snap" not in lance.dataset(table_uri(partitioned, row)).tags.list()

    result = ok(partitioned, "--json", "tag-partitions", "snap", "--publish").json()
    assert result["published"] and len(result["tables"]) == len(published)
    for row in partition_tables(partitioned):
        tag = lance.dataset(table_uri(partitioned, row)).tags.list()["snap"]
        branch, version = published[row["object_id"]]
        assert (tag["branch"], tag["version"]) == (branch, version)
        # the partitioning spec: "read_tag only"
        assert (row["read_tag"], row["read_version"], row["read_branch"]) == ("snap", None, None)
    assert scanned_ids(partitioned) == snapshot_ids
    listed = ok(partitioned, "--json", "partitions").json()["partitions"]
    assert {p["read_tag"] for p in listed} == {"snap"}

    # idempotent
    again = ok(partitioned, "--json", "tag-partitions", "snap").json()
    assert {t["action"] for t in again["tables"]} == {"exists"}

    # a write moves the partitions it touches off the tag; the others stay on it
    new = events(20, seed=9, start=9000)
    written = ok(
        partitioned, "--json", "write", "--from", files("c.parquet", new), "--branch", "dev"
    )
    touched = {p["table"] for p in written.json()["partitions"]}
    for row in partition_tables(partitioned):
        if row["object_id"] in touched:
            assert row["read_tag"] is None and row["read_branch"] == "dev"
        else:
            assert row["read_tag"] == "snap"
    assert scanned_ids(partitioned) == sorted([*snapshot_ids, *range(9000, 9020)])

    # the name now names other versions than the published ones: refused unless --force
    before = tree_snapshot(partitioned.local_path)
    refused = run_cli(*partitioned.args, "tag-partitions", "snap")
    assert refused.exit_code == 5 and "--force" in refused.stderr
    assert tree_snapshot(partitioned.local_path) == before
    moved = ok(partitioned, "--json", "tag-partitions", "snap", "--force").json()
    assert {t["action"] for t in moved["tables"]} <= {"exists", "move"}
    assert any(t["action"] == "move" for t in moved["tables"])


def test_prune_keeps_published_branch_and_tag_versions(partitioned, files):
    ok(partitioned, "write", "--from", files("a.parquet", events(200, seed=1)))
    ok(partitioned, "write", "--from", files("b.parquet", events(100, seed=2, start=1000)))
    ok(
        partitioned,
        "write",
        "--from",
        files("c.parquet", events(50, seed=3, start=2000)),
        "--branch",
        "dev",
    )
    ok(partitioned, "tag-partitions", "snap", "--publish")
    ok(
        partitioned,
        "write",
        "--from",
        files("d.parquet", events(30, seed=4, start=3000)),
        "--branch",
        "dev",
    )
    before = scanned_ids(partitioned)
    ok(partitioned, "prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes")
    assert scanned_ids(partitioned) == before
    for row in partition_tables(partitioned):
        ds = lance.dataset(table_uri(partitioned, row))
        tag = ds.tags.list()["snap"]
        ds.checkout_version(
            tag["version"] if tag["branch"] is None else (tag["branch"], tag["version"])
        ).to_table()
        if row["read_branch"]:
            ds.checkout_version((row["read_branch"], row["read_version"])).to_table()
    result = ok(partitioned, "check")
    assert "healthy" in result.stdout + result.stderr


def _branch_data_file(root, row) -> str:
    data = root.local_path / row["location"] / "tree" / row["read_branch"] / "data"
    return str(data / sorted(os.listdir(data))[0])


def test_check_reports_a_published_version_readers_cannot_read(partitioned, files):
    write_main_then_dev(partitioned, files, 100)
    clean = run_cli(*partitioned.args, "check")
    assert clean.exit_code == 0, clean.stdout + clean.stderr
    row = next(r for r in partition_tables(partitioned) if r["read_branch"] == "dev")
    os.remove(_branch_data_file(partitioned, row))
    result = run_cli(*partitioned.args, "--json", "check")
    assert result.exit_code == 1
    codes = {(f["code"], f["object"]) for f in result.json()["findings"]}
    assert ("published_version_unreadable", row["object_id"].replace("$", ".")) in codes


def test_check_reports_a_missing_published_main_version(partitioned, files):
    ok(partitioned, "write", "--from", files("a.parquet", events(100, seed=1)))
    row = partition_tables(partitioned)[0]
    uri = table_uri(partitioned, row)
    # a later, unpublished version (a write that died before its __manifest commit)
    lance.write_dataset(lance.dataset(uri).to_table().slice(0, 1), uri, mode="append")
    published = row["read_version"]
    versions = partitioned.local_path / row["location"] / "_versions"
    os.remove(versions / f"{(1 << 64) - 1 - published:020d}.manifest")
    result = run_cli(*partitioned.args, "--json", "check")
    assert result.exit_code == 1
    found = [f for f in result.json()["findings"] if f["code"] == "published_version_unreadable"]
    assert len(found) == 1 and f"version {published}" in found[0]["message"]
    assert found[0]["object"] == row["object_id"].replace("$", ".")


def test_prune_compact_leaves_partitions_read_from_a_branch_or_tag(partitioned, files):
    """`prune --compact` compacts only partition tables whose readers read main: a table
    published on a branch or a tag keeps main as it was and is not republished."""
    for i in range(3):
        ok(
            partitioned,
            "write",
            "--from",
            files(f"m{i}.parquet", events(40, seed=i, start=i * 100)),
        )
    on_main = {row["location"] for row in partition_tables(partitioned)}
    us = events(40, seed=9, start=5000)
    us = us.filter(pa.compute.equal(us["country"], "US"))  # the US partitions only
    ok(partitioned, "write", "--from", files("b.parquet", us), "--branch", "dev")
    on_branch = {row["location"] for row in partition_tables(partitioned) if row["read_branch"]}
    assert on_branch
    main_versions = {
        loc: lance.dataset(str(partitioned.local_path / loc)).version for loc in on_branch
    }
    before = scanned_ids(partitioned)
    result = ok(
        partitioned,
        "--json",
        "prune",
        "--compact",
        "--older-than",
        "0s",
        "--grace",
        "0s",
        "--force",
        "--yes",
    )
    compacted = {c["location"] for c in result.json()["compacted"] if "location" in c}
    assert compacted and compacted <= on_main - on_branch
    for loc, version in main_versions.items():
        assert lance.dataset(str(partitioned.local_path / loc)).version == version
    assert scanned_ids(partitioned) == before


def test_check_finds_and_fixes_a_dead_branch_writes_files(partitioned, files):
    """A branch write killed before its commit leaves files in `tree/<branch>/data`: `check`
    reports them as `unreferenced_data_file` and `--fix` deletes them; the branch reads on."""
    write_main_then_dev(partitioned, files, 100)
    row = next(r for r in partition_tables(partitioned) if r["read_branch"] == "dev")
    lance.fragment.write_fragments(  # no commit
        events(5, seed=3, start=900), table_uri(partitioned, row) + "/tree/dev"
    )
    before = scanned_ids(partitioned)
    report = run_cli(*partitioned.args, "--json", "check", "--grace-minutes", "0")
    stray = [f for f in report.json()["findings"] if f["code"] == "unreferenced_data_file"]
    assert stray and all("/tree/dev/data/" in f["location"] for f in stray), report.stdout
    fixed = run_cli(*partitioned.args, "check", "--fix", "--grace-minutes", "0")
    assert fixed.exit_code == 0, fixed.stdout + fixed.stderr
    assert all(not os.path.exists(partitioned.local_path / f["location"]) for f in stray)
    assert scanned_ids(partitioned) == before
    assert run_cli(*partitioned.args, "check").exit_code == 0
