"""`lancens migrate-v1`: registering V1 `<name>.lance` tables (and, with --legacy, spec-001
`<name>` tables) in `__manifest` (the directory namespace spec "Migration from V1 to V2").

What is proved, on a local directory and on S3 (moto) where practical:
- `--check` (exit 7 while tables are left) and `--dry-run` change nothing at all;
- a run registers every table in exactly ONE new `__manifest` version, moves no data, and says
  per table what it did; a rerun changes nothing; afterwards dir listing can be turned off and
  both the reference `DirectoryNamespace(dir_listing_enabled=false)` and `lancens` list them all;
- directories that are not Lance tables, deregistered ones, and invalid names are handled as
  specified (registered with a note / skipped with a reason, exit 6);
- a process SIGKILLed at random moments leaves either nothing or everything registered, and a
  rerun completes with each table registered exactly once.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import lance
import lance_namespace as ln
import pytest
from data import numbered
from helpers import Root, invoke, object_tags, put_object, run_cli, tree_snapshot, uri
from lance.namespace import DirectoryNamespace

# --- helpers -----------------------------------------------------------------------------------


def ours(root: Root, *args: str, code: int = 0):
    """`lancens` in-process against `root`; assert the exit code."""
    result = invoke(*root.args, *args)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result


def ours_json(root: Root, *args: str, code: int = 0) -> dict:
    return ours(root, *args, "--json", code=code).json()


def write_v1(root: Root, location: str, n: int = 10) -> None:
    """A table written by plain pylance, the way V1 users create them."""
    lance.write_dataset(numbered(n), uri(root, location), storage_options=root.storage_options)


def put_file(root: Root, location: str, body: bytes = b"hello") -> None:
    """One plain file below the root (a directory on S3 is a prefix with a file in it)."""
    if root.local_path is not None:
        path = root.local_path / location
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        return
    put_object(root, location, body)


def snapshot(root: Root, under: str = "") -> dict[str, object]:
    """Every object below the root (or `under`) with its content / ETag: proves nothing changed."""
    if root.local_path is not None:
        base = root.local_path / under if under else root.local_path
        return tree_snapshot(base)
    return object_tags(root, under)


def without_manifest(snap: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in snap.items() if "__manifest" not in k}


def manifest_version(root: Root) -> int | None:
    """Latest `__manifest` version, None while it does not exist."""
    try:
        return lance.dataset(uri(root, "__manifest"), storage_options=root.storage_options).version
    except (ValueError, OSError, RuntimeError):
        return None


def manifest_rows(root: Root) -> list[dict]:
    ds = lance.dataset(uri(root, "__manifest"), storage_options=root.storage_options)
    return ds.to_table().to_pylist()


def table_rows(root: Root) -> dict[str, str]:
    """object_id -> location of every table row; asserts there is no duplicate object_id."""
    rows = [r for r in manifest_rows(root) if r["object_type"] == "table"]
    counts = Counter(r["object_id"] for r in rows)
    assert all(c == 1 for c in counts.values()), counts
    return {r["object_id"]: r["location"] for r in rows}


def reference(root: Root, **extra: str) -> DirectoryNamespace:
    return DirectoryNamespace(**{**root.properties, **extra})


def reference_tables(root: Root) -> list[str]:
    """Root tables as the reference sees them with directory listing off (manifest only)."""
    ns = reference(root, dir_listing_enabled="false")
    return sorted(ns.list_tables(ln.ListTablesRequest(id=[])).tables)


def by_name(report: dict) -> dict[str, dict]:
    return {t["name"]: t for t in report["tables"]}


# --- a V1-only namespace: check, dry run, migrate, rerun ---------------------------------------


def test_v1_only_namespace_migrates_in_one_commit(any_root):
    names = ["alpha", "beta", "gamma"]
    for name in names:
        write_v1(any_root, f"{name}.lance", n=5 + len(name))
    before = snapshot(any_root)
    assert manifest_version(any_root) is None  # V1 only: no __manifest yet

    # --check: exit 7, every table "to migrate", nothing written.
    report = ours_json(any_root, "migrate-v1", "--check", code=7)
    assert report["to_migrate"] == 3 and report["migrated"] == 0 and not report["complete"]
    assert {n: t["status"] for n, t in by_name(report).items()} == dict.fromkeys(
        names, "to migrate"
    )
    assert snapshot(any_root) == before

    # --dry-run: exit 0, nothing written.
    report = ours_json(any_root, "migrate-v1", "--dry-run")
    assert report["dry_run"] and report["to_migrate"] == 3
    assert snapshot(any_root) == before
    assert manifest_version(any_root) is None

    # The real run, as a user runs it (a subprocess): exactly one new __manifest version.
    result = run_cli(*any_root.args, "migrate-v1", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert manifest_version(any_root) == 1
    assert report["manifest_version"] == 1 and report["commits"] == 1
    assert report["migrated"] == 3 and report["complete"]
    for name in names:
        item = by_name(report)[name]
        assert (item["status"], item["location"], item["state"]) == (
            "migrated",
            f"{name}.lance",
            "ok",
        )
    # The user is told that directory listing may now be turned off, and how.
    assert "--no-dir-listing" in result.stderr and "turned off" in result.stderr
    # Rows point at the existing directories; no table data moved or changed.
    assert table_rows(any_root) == {n: f"{n}.lance" for n in names}
    assert without_manifest(snapshot(any_root)) == without_manifest(before)

    # Rerun: nothing changes, every table "already registered".
    after_first = snapshot(any_root)
    result = run_cli(*any_root.args, "migrate-v1", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["migrated"] == 0 and report["already_registered"] == 3
    assert {t["status"] for t in report["tables"]} == {"already registered"}
    assert "nothing to migrate" in result.stderr
    assert manifest_version(any_root) == 1
    assert snapshot(any_root) == after_first
    ours(any_root, "migrate-v1", "--check")  # exit 0: nothing left

    # Directory listing can be turned off: the reference and lancens see every table.
    assert reference_tables(any_root) == names
    ref_ns = reference(any_root, dir_listing_enabled="false")
    for name in names:
        described = ref_ns.describe_table(ln.DescribeTableRequest(id=[name]))
        assert described.location.rstrip("/").endswith(f"/{name}.lance")
        assert lance.dataset(described.location, storage_options=any_root.storage_options)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LANCENS_DIR_LISTING_ENABLED", "false")
        listing = ours_json(any_root, "ls")["entries"]
    assert sorted(e["id"] for e in listing) == names
    assert {e["source"] for e in listing} == {"manifest"}  # the manifest alone
    # The same through the flag.
    listing = ours_json(any_root, "--no-dir-listing", "ls")["entries"]
    assert sorted(e["id"] for e in listing) == names
    assert {e["source"] for e in listing} == {"manifest"}


def test_no_dir_listing_hides_unmigrated_tables(local_root, monkeypatch):
    """Before migration a V1 table is invisible with dir listing off: that is why we migrate.

    (Also proves that `--no-dir-listing` is honoured; the environment variable is the control.)
    """
    write_v1(local_root, "only_v1.lance")
    default = ours_json(local_root, "ls")["entries"]  # dir listing on (default)
    assert [e["id"] for e in default] == ["only_v1"]
    with monkeypatch.context() as patch:
        patch.setenv("LANCENS_DIR_LISTING_ENABLED", "false")
        via_env = ours_json(local_root, "ls")["entries"]
    assert via_env == []
    for args in (("--no-dir-listing", "ls"), ("ls", "--no-dir-listing")):
        via_flag = ours_json(local_root, *args)["entries"]
        assert via_flag == [], f"{args}: --no-dir-listing was ignored, the V1 table is listed"


def test_migrate_requires_the_manifest(local_root, monkeypatch):
    write_v1(local_root, "t.lance")
    before = snapshot(local_root)
    with monkeypatch.context() as patch:
        patch.setenv("LANCENS_MANIFEST_ENABLED", "false")
        result = invoke(*local_root.args, "migrate-v1")
    assert result.exit_code == 1 and "manifest" in result.stderr
    for args in (("--no-manifest", "migrate-v1"), ("migrate-v1", "--no-manifest")):
        result = invoke(*local_root.args, *args)
        assert result.exit_code == 1, f"{args}: --no-manifest was ignored, migrate-v1 ran"
    assert snapshot(local_root) == before


def test_missing_root_and_empty_root(local_root, tmp_path):
    missing = Root(str(tmp_path / "nope"), {}, tmp_path / "nope")
    assert invoke(*missing.args, "migrate-v1").exit_code == 3
    assert not (tmp_path / "nope").exists()
    # An empty root: nothing to do, and no __manifest is created for nothing.
    ours(local_root, "migrate-v1")
    ours(local_root, "migrate-v1", "--check")
    assert manifest_version(local_root) is None


# --- what is not a plain V1 table ---------------------------------------------------------------


def test_junk_deregistered_and_invalid_names(any_root):
    write_v1(any_root, "good.lance")
    put_file(any_root, "junk.lance/notes.txt", b"not a lance table")
    write_v1(any_root, "gone.lance")
    put_file(any_root, "gone.lance/.lance-deregistered", b"reserved")
    write_v1(any_root, "bad$name.lance")
    put_file(any_root, "stray.txt", b"a file, not a directory")

    before = snapshot(any_root)
    report = ours_json(any_root, "migrate-v1", "--check", code=7)
    assert snapshot(any_root) == before
    assert report["to_migrate"] == 2 and report["skipped"] == 1 and report["deregistered"] == 1

    result = run_cli(*any_root.args, "migrate-v1", "--json")
    assert result.exit_code == 6, result.stderr  # some directories had to be skipped
    assert "skipped" in result.stderr
    items = by_name(result.json())
    assert set(items) == {"good", "junk", "gone", "bad$name"}
    # The V1 directory namespace spec counts a non-Lance directory as a table: registered, and
    # the report says what it is.
    assert items["junk"]["status"] == "migrated"
    assert items["junk"]["state"] == "not a Lance table"
    assert "not a Lance table" in items["junk"]["reason"]
    assert items["good"]["status"] == "migrated" and items["good"]["reason"] is None
    # A deregistered table stays deregistered, and is not counted as left behind.
    assert items["gone"]["status"] == "deregistered"
    assert ".lance-deregistered" in items["gone"]["reason"]
    # An invalid name is skipped with a reason that names the problem.
    assert items["bad$name"]["status"] == "skipped"
    assert "$" in items["bad$name"]["reason"]
    assert not result.json()["complete"]
    assert "--no-dir-listing" not in result.stderr  # not complete: do not advise turning it off

    assert table_rows(any_root) == {"good": "good.lance", "junk": "junk.lance"}
    assert manifest_version(any_root) == 1
    assert without_manifest(snapshot(any_root)) == without_manifest(before)

    # Nothing pending, but skipped directories remain: --check and reruns say so with exit 6.
    report = ours_json(any_root, "migrate-v1", "--check", code=6)
    assert report["to_migrate"] == 0 and report["skipped"] == 1
    ours(any_root, "migrate-v1", code=6)
    assert manifest_version(any_root) == 1


def test_more_invalid_names(local_root):
    """Names our validation refuses are skipped, each with its reason; a bare `.lance` directory
    is no table name at all."""
    bad = {
        "__manifest": "reserved",
        " padded": "whitespace",
        "a%2Fb": "encoded separator",
    }
    for name in bad:
        write_v1(local_root, f"{name}.lance")
    write_v1(local_root, "fine name.lance")  # an inner space is a valid name
    (local_root.local_path / ".lance").mkdir()
    (local_root.local_path / ".lance" / "x").write_text("x")
    result = invoke(*local_root.args, "migrate-v1", "--json")
    assert result.exit_code == 6, result.stderr
    items = by_name(result.json())
    assert set(items) == {*bad, "fine name"}
    for name, why in bad.items():
        assert items[name]["status"] == "skipped" and why in items[name]["reason"], items[name]
    assert table_rows(local_root) == {"fine name": "fine name.lance"}


def test_unknown_writer_flag_stops_migration(local_root):
    """A __manifest with a writer feature flag we do not know may be read but not changed."""
    ours(local_root, "create", "namespace", "ns1")
    ds = lance.dataset(uri(local_root, "__manifest"))
    ds.update_metadata({"lance.namespace.manifest.writer_feature_flags": "2"})
    write_v1(local_root, "t.lance")
    version = manifest_version(local_root)
    report = ours_json(local_root, "migrate-v1", "--check", code=7)  # reading is fine
    assert report["to_migrate"] == 1
    result = invoke(*local_root.args, "migrate-v1")
    assert result.exit_code == 1 and "writer features" in result.stderr
    assert manifest_version(local_root) == version
    assert "t" not in table_rows(local_root)


def test_deregistered_table_does_not_block_completion(local_root):
    """`drop --keep-data` leaves a `.lance-deregistered` directory on purpose. It is not a table
    left behind: the migration is complete (exit 0, dir listing may be turned off), else a cron
    `migrate-v1 --check` fails forever after any deregistration."""
    write_v1(local_root, "kept.lance")
    write_v1(local_root, "dropped.lance")
    ours(local_root, "migrate-v1")
    ours(local_root, "drop", "dropped", "--keep-data", "--yes")
    assert (local_root.local_path / "dropped.lance" / ".lance-deregistered").exists()
    assert table_rows(local_root) == {"kept": "kept.lance"}

    report = invoke(*local_root.args, "migrate-v1", "--json")
    assert by_name(report.json())["dropped"]["status"] == "deregistered"  # never re-registered
    assert table_rows(local_root) == {"kept": "kept.lance"}
    assert report.exit_code == 0, (report.exit_code, report.stderr)
    assert report.json()["complete"]
    assert invoke(*local_root.args, "migrate-v1", "--check").exit_code == 0


def test_name_conflicts_are_skipped(local_root, monkeypatch):
    parquet = local_root.local_path.parent / "src.parquet"
    import pyarrow.parquet as pq

    pq.write_table(numbered(), parquet)
    ours(local_root, "create", "namespace", "sales")
    # A root table whose row points at a V2 directory (created with dir listing off).
    with monkeypatch.context() as patch:
        patch.setenv("LANCENS_DIR_LISTING_ENABLED", "false")
        ours(local_root, "create", "table", "moved", "--from", str(parquet))
    moved_location = table_rows(local_root)["moved"]
    assert moved_location != "moved.lance"
    write_v1(local_root, "sales.lance")  # the name is a namespace
    write_v1(local_root, "moved.lance")  # the name is a table elsewhere
    write_v1(local_root, "fresh.lance")
    version = manifest_version(local_root)

    result = invoke(*local_root.args, "migrate-v1", "--json")
    assert result.exit_code == 6, result.stderr
    items = by_name(result.json())
    assert items["fresh"]["status"] == "migrated"
    assert items["sales"]["status"] == "skipped" and "namespace" in items["sales"]["reason"]
    assert items["moved"]["status"] == "skipped" and moved_location in items["moved"]["reason"]
    assert manifest_version(local_root) == version + 1
    assert table_rows(local_root) == {"moved": moved_location, "fresh": "fresh.lance"}


# --- --legacy: spec-001 tables in <name> directories --------------------------------------------


def test_legacy_tables(any_root):
    write_v1(any_root, "modern.lance")
    write_v1(any_root, "oldstyle")  # V1 spec: the table directory is just the name
    put_file(any_root, "notes/readme.txt", b"not a table")  # a V1 layout, but not Lance
    write_v1(any_root, "0badcafe_orphan")  # a V2 directory: `check` looks after those
    before = snapshot(any_root)

    # Without --legacy only <name>.lance directories are candidates.
    report = ours_json(any_root, "migrate-v1")
    assert set(by_name(report)) == {"modern"}
    assert table_rows(any_root) == {"modern": "modern.lance"}
    version = manifest_version(any_root)

    report = ours_json(any_root, "migrate-v1", "--legacy", "--check", code=7)
    assert by_name(report)["oldstyle"]["status"] == "to migrate"

    report = ours_json(any_root, "migrate-v1", "--legacy")
    items = by_name(report)
    assert set(items) == {"modern", "oldstyle"}
    assert items["oldstyle"]["status"] == "migrated"
    assert items["oldstyle"]["location"] == "oldstyle"
    assert items["modern"]["status"] == "already registered"
    assert manifest_version(any_root) == version + 1
    # Registered where it is: location == name, no data moved or copied.
    assert table_rows(any_root) == {"modern": "modern.lance", "oldstyle": "oldstyle"}
    assert without_manifest(snapshot(any_root)) == without_manifest(before)
    described = reference(any_root, dir_listing_enabled="false").describe_table(
        ln.DescribeTableRequest(id=["oldstyle"])
    )
    assert described.location.rstrip("/").endswith("/oldstyle")
    assert lance.dataset(described.location, storage_options=any_root.storage_options).count_rows()

    ours(any_root, "migrate-v1", "--legacy", "--check")
    assert manifest_version(any_root) == version + 1


# --- mixed and already-migrated namespaces ------------------------------------------------------


def test_mixed_namespace(any_root, tmp_path):
    import pyarrow.parquet as pq

    parquet = tmp_path / "src.parquet"
    pq.write_table(numbered(), parquet)
    ours(any_root, "create", "table", "managed", "--from", str(parquet))
    ours(any_root, "create", "namespace", "ns1")
    ours(any_root, "create", "table", "ns1.inner", "--from", str(parquet))
    write_v1(any_root, "legacy_a.lance")
    write_v1(any_root, "legacy_b.lance")
    rows_before = {r["object_id"]: r for r in manifest_rows(any_root)}
    version = manifest_version(any_root)
    before = snapshot(any_root)

    ours_json(any_root, "migrate-v1", "--check", code=7)
    assert snapshot(any_root) == before

    report = ours_json(any_root, "migrate-v1")
    items = by_name(report)
    assert set(items) == {"managed", "legacy_a", "legacy_b"}  # child namespaces are V2 only
    assert items["managed"]["status"] == "already registered"
    assert items["legacy_a"]["status"] == items["legacy_b"]["status"] == "migrated"
    assert report["complete"] and report["commits"] == 1
    assert manifest_version(any_root) == version + 1
    rows_after = {r["object_id"]: r for r in manifest_rows(any_root)}
    # Existing rows are untouched; exactly the two V1 tables were added.
    assert {k: rows_after[k] for k in rows_before} == rows_before
    assert set(rows_after) - set(rows_before) == {"legacy_a", "legacy_b"}
    table_rows(any_root)  # no duplicates
    assert without_manifest(snapshot(any_root)) == without_manifest(before)

    assert reference_tables(any_root) == ["legacy_a", "legacy_b", "managed"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LANCENS_DIR_LISTING_ENABLED", "false")
        listing = ours_json(any_root, "ls", "--recursive")["entries"]
    assert sorted(e["id"] for e in listing if e["kind"] == "table") == [
        "legacy_a",
        "legacy_b",
        "managed",
        "ns1.inner",
    ]


def test_already_migrated_namespace(any_root, tmp_path):
    import pyarrow.parquet as pq

    parquet = tmp_path / "src.parquet"
    pq.write_table(numbered(), parquet)
    for name in ("t1", "t2"):
        ours(any_root, "create", "table", name, "--from", str(parquet))
    version = manifest_version(any_root)
    before = snapshot(any_root)

    ours(any_root, "migrate-v1", "--check")
    result = run_cli(*any_root.args, "migrate-v1", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["migrated"] == 0 and result.json()["already_registered"] == 2
    assert "nothing to migrate" in result.stderr
    assert manifest_version(any_root) == version
    assert snapshot(any_root) == before


# --- crash safety: SIGKILL at random moments, then rerun -----------------------------------------

N_KILL_TABLES = 300


def _populate(root_path, seed_dir, n: int) -> None:
    root_path.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        shutil.copytree(seed_dir, root_path / f"t{i:04d}.lance")


def _start_migrate(root_path) -> subprocess.Popen:
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    env.pop("LANCENS_ROOT", None)
    return subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", "--root", str(root_path), "migrate-v1", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _registered(root: Root) -> int:
    """Table rows in __manifest (0 while it does not exist); asserts no duplicates."""
    if manifest_version(root) is None:
        return 0
    return len(table_rows(root))


def test_kill_and_rerun(tmp_path):
    seed = tmp_path / "seed.lance"
    lance.write_dataset(numbered(), str(seed))

    # Measure one uninterrupted run on an identical namespace first.
    timing_root = tmp_path / "timing"
    _populate(timing_root, seed, N_KILL_TABLES)
    started = time.monotonic()
    proc = _start_migrate(timing_root)
    assert proc.wait(timeout=120) == 0
    runtime = time.monotonic() - started
    assert _registered(Root(str(timing_root), {}, timing_root)) == N_KILL_TABLES

    root_path = tmp_path / "ns"
    _populate(root_path, seed, N_KILL_TABLES)
    root = Root(str(root_path), {}, root_path)
    rng = random.Random(os.getpid() ^ int(time.time()))
    # At least 5 delays spread over the run, one random moment per slice of [0.3, 1.1] x runtime
    # (the import phase is short of work; the scan and the commit sit in the second half).
    slices = 7
    delays = [
        runtime * rng.uniform(0.3 + 0.8 * i / slices, 0.3 + 0.8 * (i + 1) / slices)
        for i in range(slices)
    ]
    outcomes = []
    for delay in delays:
        if (root_path / "__manifest").exists():
            shutil.rmtree(root_path / "__manifest")  # back to V1-only: each kill counts
        proc = _start_migrate(root_path)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        code = proc.wait(timeout=60)
        registered = _registered(root)
        # One commit: a killed run registered nothing or everything, never a part.
        assert registered in (0, N_KILL_TABLES), (delay, code, registered)
        outcomes.append((round(delay, 2), code, registered))
    print(f"runtime {runtime:.2f}s; kills (delay, exit code, rows registered): {outcomes}")
    # The last kill's leftovers (staged files, half a manifest) are kept for the rerun.
    for _ in range(2):  # interrupt the completion once more before the rerun
        proc = _start_migrate(root_path)
        time.sleep(runtime * rng.uniform(0.5, 1.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert _registered(root) in (0, N_KILL_TABLES)

    result = run_cli("--root", str(root_path), "migrate-v1", "--json")
    assert result.exit_code == 0, (outcomes, result.stderr)
    report = result.json()
    assert report["migrated"] + report["already_registered"] == N_KILL_TABLES
    rows = table_rows(root)  # asserts no duplicate object_id
    assert len(rows) == N_KILL_TABLES, outcomes
    assert rows == {f"t{i:04d}": f"t{i:04d}.lance" for i in range(N_KILL_TABLES)}
    assert run_cli("--root", str(root_path), "migrate-v1", "--check").exit_code == 0

    checked = run_cli("--root", str(root_path), "check", "--json")
    codes = {f["code"] for f in checked.json()["findings"]}
    # A commit killed between writing its data file and committing leaves a staged file; younger
    # than the grace period it is reported (not fixable yet). Nothing else may be wrong.
    assert codes <= {"staged_manifest_file"}, (outcomes, checked.stdout)
    assert checked.exit_code == (1 if codes else 0)
    assert checked.json()["tables_checked"] == N_KILL_TABLES
    # Every kill must have been at a distinct moment.
    assert len({d for d, _, _ in outcomes}) >= 5, outcomes


def test_report_text_output(local_root):
    """Piped (non-JSON) output: one tab-separated line per directory."""
    write_v1(local_root, "one.lance")
    result = run_cli(*local_root.args, "migrate-v1", "--check")
    assert result.exit_code == 7
    assert result.stdout.splitlines() == ["to migrate\tone\tone.lance\tok\t-"]
    assert "left to migrate" in result.stderr
