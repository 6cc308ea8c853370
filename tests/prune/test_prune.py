"""`lancens prune`: every version a reader can reach stays and reads the same; the rest goes.

The namespace (tests/prune/prune_namespace.py) holds a table of 20 versions with a tag, a branch and
two shallow clones, a partitioned namespace whose published `read_version` is older than the
window and older than a dead write's unpublished version, a root `<name>.lance` table, an
abandoned table write, a staged `__manifest` file and many `__manifest` versions.
Versions are made old enough with `--older-than 1s --force` after a short sleep.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import country_rows
from helpers import run_cli, tree_snapshot
from prune_namespace import ABANDONED, assert_same, build, reachable, versions

FAST = ["--older-than", "1s", "--grace", "1s", "--force"]


def prune(root, *args, **kwargs):
    return run_cli(*root.args, "prune", *args, **kwargs)


@pytest.fixture
def built(local_root, tmp_path):
    result = build(local_root, tmp_path)
    time.sleep(1.2)  # every version and file is now older than the 1 s window
    return result


def by_id(report: dict) -> dict[str, dict]:
    return {t["object_id"]: t for t in report["tables"]}


def test_prune_keeps_every_reachable_version_and_removes_the_rest(local_root, built):
    before = reachable(built)
    result = prune(local_root, *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()

    assert_same(before, reachable(built))  # published, tagged, branched, cloned: unchanged
    assert versions(built.table) == [3, 5, 9, 20]
    for version in built.removable:
        with pytest.raises((OSError, ValueError), match="not found|Not found"):
            lance.dataset(built.table, version=version)
    # The dead write's version is gone; the published one is the table's latest again.
    assert versions(built.partition) == [built.published]
    assert built.dead_version > built.published
    assert not (built.path / ABANDONED).exists()
    assert not built.staged.exists()
    assert not built.uncommitted.exists()
    manifest_versions = versions(built.path / "__manifest")
    assert manifest_versions == [max(manifest_versions)]  # --retain 1

    check = run_cli(*local_root.args, "check")
    assert check.exit_code == 0, check.stdout + check.stderr

    # The JSON says what was kept and why.
    t = by_id(report)["plain$t"]
    reasons = {k["version"]: " | ".join(k["reasons"]) for k in t["protected"]}
    assert "tag keep" in reasons[3]
    assert "shallow clone cloned_tag.lance" in reasons[3]
    assert "branch dev" in reasons[5]
    assert "shallow clone cloned_v9.lance" in reasons[9]
    assert "latest" in reasons[20]
    assert sorted(t["versions_removed"]) == built.removable
    assert any("tag keep keeps version 3, older than 1s" in n for n in t["notes"])
    part = next(x for x in report["tables"] if x["location"] == built.partition.name)
    assert part["unpublished_removed"] == [built.dead_version]
    assert any(
        "published read_version" in r
        for k in part["protected"]
        if k["version"] == built.published
        for r in k["reasons"]
    )
    debris = {d["location"]: d["action"] for d in report["debris"]}
    assert debris[ABANDONED] == "deleted"
    assert debris[f"__manifest/data/{built.staged.name}"] == "deleted"
    totals = report["totals"]
    assert totals["tables_failed"] == 0
    assert totals["versions_removed"] >= len(built.removable)
    assert totals["bytes_freed"] > 0
    assert t["unreferenced_removed"] >= 1
    assert report["manifest"]["versions_removed"]

    # A second run finds nothing left to do.
    again = prune(local_root, *FAST, "--yes", "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["totals"]["versions_removed"] == 0
    assert_same(before, reachable(built))


def test_defaults_keep_young_versions_and_debris(local_root, built):
    before = reachable(built)
    result = prune(local_root, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["totals"]["versions_removed"] == 0
    assert versions(built.table) == list(range(1, 21))
    assert (built.path / ABANDONED).exists() and built.staged.exists()
    assert built.uncommitted.exists()
    assert {d["action"] for d in report["debris"]} == {"kept"}
    young = by_id(report)["plain$t"]["protected"]
    assert all(any("younger than 7d" in r for r in k["reasons"]) for k in young)
    assert_same(before, reachable(built))


def test_dry_run_changes_nothing_and_plans_the_same_work(local_root, built):
    snapshot = tree_snapshot(built.path)
    dry = prune(local_root, *FAST, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    assert tree_snapshot(built.path) == snapshot  # byte for byte, no lease file either
    assert "dry run: nothing changed" in dry.stderr
    planned = dry.json()
    assert planned["dry_run"] is True
    assert {d["action"] for d in planned["debris"]} >= {"would delete"}
    real = prune(local_root, *FAST, "--yes", "--json").json()
    for table in planned["tables"]:
        done = by_id(real)[table["object_id"]]
        assert sorted(table["versions_removed"]) == sorted(done["versions_removed"])
        assert table["unpublished_removed"] == done["unpublished_removed"]
        assert table["protected"] == done["protected"]
    assert planned["totals"]["versions_removed"] == real["totals"]["versions_removed"]


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["--older-than", "30m", "--yes"], 5, "under 1 hour"),
        (["--grace", "59m", "--yes"], 5, "--force"),
        (["--older-than", "1s", "--grace", "1s"], 5, "without --yes"),
        (["--older-than", "7", "--yes"], 2, "not a duration"),
        (["--retain", "0", "--yes"], 2, "--retain"),
        (["--parallel", "0", "--yes"], 2, "--parallel"),
    ],
)
def test_rails_refuse_and_change_nothing(local_root, built, args, code, words):
    snapshot = tree_snapshot(built.path)
    extra = ["--force"] if "without --yes" in words else []
    result = prune(local_root, *args, *extra)
    assert result.exit_code == code, result.stderr
    assert words in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert tree_snapshot(built.path) == snapshot


def test_rail_errors_are_json_with_json(local_root, built):
    result = prune(local_root, "--older-than", "5m", "--yes", "--json")
    assert result.exit_code == 5
    assert json.loads(result.stderr)["error"]["name"] == "PermissionDenied"


def test_missing_root_is_not_found(tmp_path):
    result = run_cli("--root", str(tmp_path / "nope"), "prune", "--yes")
    assert result.exit_code == 3, result.stderr


def test_a_second_prune_exits_4_while_the_lease_is_held(local_root, built):
    from lancens_cli.config import resolve_config
    from lancens_cli.service.prune.lease import LEASE_DIR, acquire
    from lancens_cli.store.storage import Storage

    storage = Storage(resolve_config({"root": local_root.uri}, {}, None))
    lease = acquire(storage)
    try:
        snapshot = tree_snapshot(built.path)
        started = time.monotonic()
        result = prune(local_root, *FAST, "--yes")
        assert result.exit_code == 4, result.stderr
        assert "another prune holds the lease" in result.stderr
        assert time.monotonic() - started < 15  # at once, no waiting for the lease
        assert tree_snapshot(built.path) == snapshot
    finally:
        lease.release()
    result = prune(local_root, *FAST, "--yes")
    assert result.exit_code == 0, result.stderr
    assert not list((built.path / LEASE_DIR).glob("lease-*"))  # released (the record stays)


@pytest.mark.parametrize("stale", ["dead process", "expired"])
def test_a_killed_prunes_lease_does_not_block_the_next(local_root, built, stale):
    from datetime import UTC, datetime, timedelta

    from lancens_cli.service.prune.lease import LEASE_DIR

    done = subprocess.run([sys.executable, "-c", "pass"])
    assert done.returncode == 0
    lease = {
        "owner": "killed",
        "host": "this-host" if stale == "expired" else os.uname().nodename,
        "pid": 2**22 + 7 if stale == "dead process" else os.getpid(),
        "expires": (
            datetime.now(UTC) + (timedelta(hours=1) if stale == "dead process" else -timedelta(1))
        ).isoformat(),
    }
    (built.path / LEASE_DIR).mkdir()
    (built.path / LEASE_DIR / "lease-000000000003").write_text(json.dumps(lease))
    result = prune(local_root, *FAST, "--yes")
    assert result.exit_code == 0, result.stderr
    assert not (built.path / LEASE_DIR / "lease-000000000003").exists()


def test_a_failing_table_exits_6_and_the_rest_is_done(local_root, built):
    other = next(p for p in built.path.iterdir() if p.name.endswith("more$u"))
    for i in range(3):
        lance.write_dataset(pa.table({"a": pa.array([i], pa.int64())}), other, mode="append")
    time.sleep(1.1)
    newest = sorted((other / "_versions").glob("*.manifest"))[0]  # V2 naming: newest first
    newest.write_bytes(b"not a manifest")
    result = prune(local_root, *FAST, "--yes", "--json")
    assert result.exit_code == 6, result.stderr
    assert "more.u" in result.stderr  # as every command takes it
    report = result.json()
    assert by_id(report)["more$u"]["status"] == "failed"
    assert by_id(report)["plain$t"]["status"] == "pruned"
    assert versions(built.table) == [3, 5, 9, 20]


def test_named_tables_only(local_root, built):
    other = next(p for p in built.path.iterdir() if p.name.endswith("more$u"))
    lance.write_dataset(pa.table({"a": pa.array([7], pa.int64())}), other, mode="append")
    manifest_before = versions(built.path / "__manifest")
    time.sleep(1.1)
    result = prune(local_root, "plain.t", *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    assert [t["object_id"] for t in result.json()["tables"]] == ["plain$t"]
    assert versions(built.table) == [3, 5, 9, 20]
    assert versions(other) == [1, 2]
    assert versions(built.path / "__manifest") == manifest_before
    assert (built.path / ABANDONED).exists()
    missing = prune(local_root, "plain.nope", *FAST, "--yes")
    assert missing.exit_code == 3


def test_an_orphan_directory_holding_a_table_is_reported_never_deleted(local_root, built):
    lost = built.path / "1234abcd_plain$lost"
    shutil.copytree(built.path / "old.lance", lost)
    result = prune(local_root, *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    debris = {d["location"]: d for d in result.json()["debris"]}
    assert debris[lost.name]["action"] == "reported"
    assert debris[lost.name]["code"] == "orphan_table_directory"
    assert lance.dataset(lost).count_rows() == 4


def test_an_empty_table_directory_goes_once_past_the_grace(local_root, built):
    """A SIGKILL inside a delete, between a table directory's last entry and the directory
    itself, leaves it empty: past the grace it goes (`check` would register it as an orphan
    table forever); a young one, where a write may be starting, stays."""
    cut = built.path / "0badc0de_plain$cut"
    starting = built.path / "0badc0df_plain$starting"
    cut.mkdir()
    os.utime(cut, (1e9, 1e9))
    starting.mkdir()
    found = run_cli(*local_root.args, "check", "--json")
    findings = {f["location"]: f for f in found.json()["findings"]}
    assert findings[cut.name]["code"] == "abandoned_table_write"
    assert findings[cut.name]["fixable"] and not findings[starting.name]["fixable"]
    result = prune(local_root, "--older-than", "1s", "--grace", "60s", "--force", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    debris = {d["location"]: d["action"] for d in result.json()["debris"]}
    assert debris[cut.name] == "deleted" and not cut.exists()
    assert debris[starting.name] == "kept" and starting.exists()


def test_compact_publishes_compacted_partitions_in_one_manifest_commit(local_root, tmp_path):
    data = tmp_path / "rows.parquet"
    args = local_root.args
    pq.write_table(country_rows(0), data)
    assert run_cli(*args, "add-partition-spec", "--schema", str(data), "--field", "country")
    for start in (0, 10, 20):
        pq.write_table(country_rows(start), data)
        assert run_cli(*args, "write", "--from", str(data)).exit_code == 0
    manifest = lance.dataset(str(local_root.local_path / "__manifest"))
    before_version = manifest.version

    def published():
        m = lance.dataset(str(local_root.local_path / "__manifest"))
        out = {}
        for row in m.to_table(filter="object_type = 'table'").to_pylist():
            ds = lance.dataset(str(local_root.local_path / row["location"]))
            ds = ds.checkout_version(row["read_version"])
            out[row["object_id"]] = (ds.to_table().sort_by("id"), len(ds.get_fragments()))
        return out

    old = published()
    assert all(fragments == 3 for _, fragments in old.values())
    result = prune(local_root, "--compact", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert len(report["compacted"]) == len(old)
    assert all(c["published"] for c in report["compacted"])
    after_version = lance.dataset(str(local_root.local_path / "__manifest")).version
    assert after_version == before_version + 1 == report["compacted_published_in"]
    new = published()
    for key, (table, _) in old.items():
        assert new[key][0].equals(table)
        assert new[key][1] == 1


@pytest.mark.slow
def test_writers_and_readers_during_prune_lose_nothing(local_root, built, tmp_path):
    """Appends to plain.t, partitioned writes and a reader of the published versions run
    while prune runs again and again (versions older than 1 s expire; the grace keeps its
    1-hour floor: below it, a write in flight is indistinguishable from a dead one)."""
    stop = threading.Event()
    errors: list[str] = []
    appended: list[int] = []
    written: list[int] = []

    def append():
        i = 1000
        while not stop.is_set():
            value = pa.table({"a": pa.array([i], pa.int64())})
            lance.write_dataset(value, built.table, mode="append")
            appended.append(i)
            i += 1

    def write_partitions():
        n = 0
        while not stop.is_set():
            data = tmp_path / f"w{n}.parquet"
            pq.write_table(country_rows(10_000 + 10 * n), data)
            result = run_cli(*local_root.args, "write", "--from", str(data))
            if result.exit_code != 0:
                errors.append(f"write: {result.stderr}")
            else:
                written.append(n)
            n += 1

    def read():
        while not stop.is_set():
            try:
                m = lance.dataset(str(built.path / "__manifest"))
                for row in m.to_table(filter="read_version IS NOT NULL").to_pylist():
                    path = built.path / row["location"]
                    lance.dataset(path, version=row["read_version"]).to_table()
            except Exception as exc:  # noqa: BLE001 - the assertion below shows it
                errors.append(f"read: {exc}")

    threads = [threading.Thread(target=f) for f in (append, write_partitions, read)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):
            result = prune(local_root, "--older-than", "1s", "--grace", "1h", "--force", "--yes")
            assert result.exit_code == 0, result.stderr
            time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors[:3]
    values = set(lance.dataset(built.table).to_table().column("a").to_pylist())
    assert set(appended) <= values
    m = lance.dataset(str(built.path / "__manifest"))
    ids = set()
    for row in m.to_table(filter="read_version IS NOT NULL").to_pylist():
        path = built.path / row["location"]
        ids |= set(lance.dataset(path, version=row["read_version"]).to_table()["id"].to_pylist())
    for n in written:
        assert set(range(10_000 + 10 * n, 10_000 + 10 * n + 5)) <= ids
    time.sleep(1.1)  # the writers are done: the debris of the build is no one's now
    assert prune(local_root, *FAST, "--yes").exit_code == 0
    assert run_cli(*local_root.args, "check").exit_code == 0


def test_prune_on_s3(s3_root, tmp_path):
    opts = s3_root.storage_options
    data = tmp_path / "a.parquet"
    pq.write_table(pa.table({"a": pa.array([0], pa.int64())}), data)
    assert run_cli(*s3_root.args, "create", "namespace", "n").exit_code == 0
    assert run_cli(*s3_root.args, "create", "table", "n.t", "--from", str(data)).exit_code == 0
    uri = f"{s3_root.uri}/" + next(
        r["location"]
        for r in lance.dataset(f"{s3_root.uri}/__manifest", storage_options=opts)
        .to_table()
        .to_pylist()
        if r["object_id"] == "n$t"
    )
    for i in range(1, 8):
        lance.write_dataset(
            pa.table({"a": pa.array([i], pa.int64())}),
            uri,
            mode="overwrite" if i == 4 else "append",
            storage_options=opts,
        )
    ds = lance.dataset(uri, storage_options=opts)
    ds.tags.create("keep", 2)
    tagged = lance.dataset(uri, version=2, storage_options=opts).to_table()
    latest = ds.to_table()
    time.sleep(1.2)
    result = prune(s3_root, *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    table = next(t for t in result.json()["tables"] if t["object_id"] == "n$t")
    assert sorted(table["versions_removed"]) == [1, 3, 4, 5, 6, 7]
    ds = lance.dataset(uri, storage_options=opts)
    assert [v["version"] for v in ds.versions()] == [2, 8]
    assert lance.dataset(uri, version="keep", storage_options=opts).to_table().equals(tagged)
    assert ds.to_table().equals(latest)
    assert run_cli(*s3_root.args, "check").exit_code == 0

    # The lease works on S3: put-if-not-exists, and a second run exits 4.
    from lancens_cli.config import resolve_config
    from lancens_cli.service.prune.lease import acquire
    from lancens_cli.store.exclusive_files import create_exclusive
    from lancens_cli.store.storage import Storage

    props = {"root": s3_root.uri}
    storage = Storage(resolve_config(props, opts, None))
    assert create_exclusive(storage, "probe/once", "first")
    assert not create_exclusive(storage, "probe/once", "second")  # If-None-Match: * honoured
    assert storage.fs.cat_file(storage.fs_path("probe/once")) == b"first"
    storage.delete_file("probe/once")
    lease = acquire(storage)
    try:
        assert prune(s3_root, *FAST, "--yes").exit_code == 4
    finally:
        lease.release()
    assert prune(s3_root, *FAST, "--yes").exit_code == 0


def test_files_a_clone_reads_stay_when_no_source_version_references_them(local_root, tmp_path):
    """Another tool removed the source version a clone was made from (its manifest only):
    the files are unreferenced in the source, yet the clone reads them; prune keeps them."""
    path = local_root.local_path
    source = path / "src.lance"
    lance.write_dataset(pa.table({"a": pa.array([1, 2], pa.int64())}), source)
    lance.write_dataset(pa.table({"a": pa.array([3], pa.int64())}), source, mode="append")
    lance.dataset(source).shallow_clone(str(path / "copy.lance"), 2)
    expected = lance.dataset(path / "copy.lance").to_table()
    lance.write_dataset(pa.table({"a": pa.array([9], pa.int64())}), source, mode="overwrite")
    for version in (1, 2):
        name = f"{(1 << 64) - 1 - version:020d}.manifest"
        (source / "_versions" / name).unlink()
    time.sleep(1.2)
    result = prune(local_root, *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    assert lance.dataset(path / "copy.lance").to_table().equals(expected)
    clone = lance.dataset(path / "copy.lance")
    read = [f.path for frag in clone.get_fragments() for f in frag.metadata.files]
    assert read and all((source / "data" / name).exists() for name in read)


def test_a_table_that_never_loads_stops_every_version_removal(local_root, built):
    """It may be a shallow clone of any table: without its base paths nothing is safe to go."""
    other = next(p for p in built.path.iterdir() if p.name.endswith("more$u"))
    for manifest in (other / "_versions").glob("*.manifest"):
        manifest.write_bytes(b"not a manifest")
    result = prune(local_root, *FAST, "--yes", "--json")
    assert result.exit_code == 6, result.stderr
    report = by_id(result.json())
    assert report["more$u"]["status"] == "failed"
    assert versions(built.table) == list(range(1, 21))
    assert any("may be a shallow clone" in n for n in report["plain$t"]["notes"])


def test_retain_keeps_the_newest_n(local_root, built):
    result = prune(local_root, *FAST, "--retain", "5", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    assert versions(built.table) == [3, 5, 9, 16, 17, 18, 19, 20]
    kept = {k["version"]: k["reasons"] for k in by_id(result.json())["plain$t"]["protected"]}
    assert all("newest 5" in kept[v] for v in (16, 17, 18, 19, 20))


def test_a_kept_manifest_version_protects_what_it_publishes(local_root, built):
    """A tagged __manifest version (kept however old) still sends readers to an older
    read_version of a partition table: that version stays, and reads the same."""
    manifest = lance.dataset(str(built.path / "__manifest"))
    current = {
        r["location"]: r["read_version"]
        for r in manifest.to_table(filter="read_version IS NOT NULL").to_pylist()
    }
    old_manifest, location, old_version = None, None, None
    for info in manifest.versions():
        view = manifest.checkout_version(info["version"])
        if "read_version" not in view.schema.names:
            continue
        for row in view.to_table(filter="read_version IS NOT NULL").to_pylist():
            if row["read_version"] < current.get(row["location"], 0):
                old_manifest, location, old_version = (
                    info["version"],
                    row["location"],
                    row["read_version"],
                )
                break
        if old_manifest:
            break
    assert old_manifest is not None
    manifest.tags.create("audit", old_manifest)
    before = lance.dataset(built.path / location, version=old_version).to_table()
    result = prune(local_root, *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    assert old_version in versions(built.path / location)
    assert lance.dataset(built.path / location, version=old_version).to_table().equals(before)
    table = next(t for t in result.json()["tables"] if t["location"] == location)
    reasons = {k["version"]: k["reasons"] for k in table["protected"]}
    assert f"published read_version (__manifest v{old_manifest})" in reasons[old_version]
    manifest_kept = {k["version"]: k["reasons"] for k in result.json()["manifest"]["protected"]}
    assert "tag audit" in manifest_kept[old_manifest]


def test_a_manifest_with_many_fragments_is_compacted_and_lists_the_same(local_root):
    """A writer that appends rows (rather than rewriting) leaves one fragment per commit."""
    from lancens_cli.store.manifest import manifest_schema

    assert run_cli(*local_root.args, "create", "namespace", "first").exit_code == 0
    uri = str(local_root.local_path / "__manifest")
    for i in range(20):
        row = {
            "object_id": f"ns{i:02d}",
            "object_type": "namespace",
            "location": None,
            "metadata": None,
            "base_objects": None,
        }
        table = pa.Table.from_pylist([row], schema=manifest_schema())
        lance.write_dataset(table, uri, mode="append")
    assert len(lance.dataset(uri).get_fragments()) == 21
    listed = run_cli(*local_root.args, "ls", "--json").json()
    result = prune(local_root, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    compacted = [c for c in result.json()["compacted"] if c.get("table") == "__manifest"]
    assert compacted and compacted[0]["fragments_before"] == 21
    assert len(lance.dataset(uri).get_fragments()) == 1
    assert run_cli(*local_root.args, "ls", "--json").json() == listed


def test_a_table_dropped_during_prune_is_gone_not_failed(local_root, built):
    """`drop` lands between prune's plan and its per-table work: the table is reported `gone`,
    the run is not a failure, and every other table is pruned as usual."""
    from datetime import timedelta

    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.prune.policy import PrunePolicy
    from lancens_cli.service.prune.run import prune as prune_root
    from lancens_cli.service.prune.run import run_locally

    other = next(p for p in built.path.iterdir() if p.name.endswith("more$u"))
    lance.write_dataset(pa.table({"a": pa.array([7], pa.int64())}), other, mode="append")
    time.sleep(1.1)

    def drop_then_run(*args):
        dropped = run_cli(*local_root.args, "drop", "more.u", "--yes")
        assert dropped.exit_code == 0, dropped.stderr
        return run_locally(*args)

    ns = Namespace.from_properties({"root": local_root.uri})
    policy = PrunePolicy(
        older_than=timedelta(seconds=1), retain=1, grace=timedelta(seconds=1), force=True
    )
    report = prune_root(ns, [], policy, tasks=drop_then_run)
    by_table = {t.object_id: t for t in report.tables}
    assert by_table["more$u"].status == "gone", by_table["more$u"]
    assert report.failed == []
    assert by_table["plain$t"].status == "pruned"
    assert versions(built.table) == [3, 5, 9, 20]
    assert not other.exists()


def test_a_branchs_own_old_versions_expire_and_what_readers_need_stays(local_root, tmp_path):
    """Every commit to a branch leaves a version in `tree/<name>/_versions/`: prune expires
    them like the main lineage's, keeping the branch head, a tag on the branch and the version
    a child branch starts from; main and every kept reference read exactly as before."""
    pq.write_table(pa.table({"a": pa.array([0, 1], pa.int64())}), tmp_path / "a.parquet")
    run = run_cli(*local_root.args, "create", "table", "t", "--from", str(tmp_path / "a.parquet"))
    assert run.exit_code == 0, run.stderr
    table = next(p for p in local_root.local_path.iterdir() if p.name.endswith("t.lance"))
    ds = lance.dataset(table)
    dev = ds.create_branch("dev", ds.version)
    for i in range(6):
        dev = lance.write_dataset(
            pa.table({"a": pa.array([10 + i], pa.int64())}), dev, mode="append"
        )
    dev_versions = versions_of(table / "tree" / "dev")
    tagged, child_start = dev_versions[2], dev_versions[3]
    ds.tags.create("on_dev", ("dev", tagged))
    feature = ds.create_branch("feature", ("dev", child_start))
    lance.write_dataset(pa.table({"a": pa.array([99], pa.int64())}), feature, mode="append")

    def reads() -> dict[str, list]:
        main = lance.dataset(table)
        return {
            "main": main.to_table()["a"].to_pylist(),
            "dev": main.checkout_version(("dev", None)).to_table()["a"].to_pylist(),
            "tag": lance.dataset(table, version="on_dev").to_table()["a"].to_pylist(),
            "feature": main.checkout_version(("feature", None)).to_table()["a"].to_pylist(),
            "child start": main.checkout_version(("dev", child_start)).to_table()["a"].to_pylist(),
        }

    before = reads()
    time.sleep(1.2)
    result = prune(local_root, *FAST, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    (report,) = [t for t in result.json()["tables"] if t["object_id"] == "t"]
    kept = {tagged, child_start, dev_versions[-1]}
    assert versions_of(table / "tree" / "dev") == sorted(kept)
    assert report["branch_versions_removed"]["dev"] == [v for v in dev_versions if v not in kept]
    reasons = {k["version"]: k["reasons"] for k in report["protected"] if k.get("branch") == "dev"}
    assert "tag on_dev" in reasons[tagged] and "branch feature starts here" in reasons[child_start]
    assert reads() == before
    checked = run_cli(*local_root.args, "check", "--json")
    assert checked.json()["healthy"], checked.stdout


def versions_of(directory) -> list[int]:
    from lancens_cli.store.manifest_names import version_from_manifest_name

    found = (version_from_manifest_name(p.name) for p in (directory / "_versions").iterdir())
    return sorted(v for v in found if v is not None)
