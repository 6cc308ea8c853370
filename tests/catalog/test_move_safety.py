"""Branches and shallow clones across `rename` and `drop`.

A branch (`tree/<branch>/`) and a shallow clone read another dataset's files through a base path
holding its absolute location (the storage layout spec). Moving a table directory must keep every
version of every branch readable (the copy's base paths are rewritten); moving or deleting a
directory another table reads is refused (exit 5) unless `--force`; `check` reports a branch that no
longer resolves. Fixtures are real pylance tables made directly with pylance, never through the
tool.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import lance
import pyarrow as pa
import pytest
from helpers import Root, cli, ok, run_cli, tree_snapshot, uri


def js(root: Root, *args: str):
    return json.loads(ok(root, "--json", *args).stdout)


def refused(root: Root, *args: str, names: tuple[str, ...] = ()):
    result = cli(root, *args)
    assert result.exit_code == 5, (args, result.exit_code, result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    for name in names:
        assert name in result.stderr, result.stderr
    return result


def open_ds(root: Root, rel: str, version=None):
    return lance.dataset(uri(root, rel), version=version, storage_options=root.storage_options)


def rows(ds) -> list[int]:
    return sorted(ds.to_table().column("id").to_pylist())


def location_of(root: Root, name: str) -> str:
    return next(e["location"] for e in js(root, "ls")["entries"] if e["id"] == name)


def table_with_branch(root: Root, rel: str, *, v2_names: bool) -> dict:
    """Versions 1-3 on main (append, delete: a deletion file), a tag on main, a branch `dev`
    from version 3 with an append and a delete of its own, a tag on the branch, and a branch
    `feat/x` of the branch. Returns
    the rows of every version of every branch, read before anything moves."""
    options = root.storage_options
    address = uri(root, rel)
    lance.write_dataset(
        pa.table({"id": list(range(10))}),
        address,
        enable_v2_manifest_paths=v2_names,
        storage_options=options,
    )
    ds = lance.write_dataset(
        pa.table({"id": list(range(10, 20))}), address, mode="append", storage_options=options
    )
    ds.delete("id = 3")
    ds = open_ds(root, rel)
    ds.tags.create("release", 2)
    branch = ds.create_branch("dev", 3)
    branch.insert(pa.table({"id": [100, 101]}))
    open_ds(root, rel).checkout_version(("dev", None)).delete("id = 5")
    ds = open_ds(root, rel)
    ds.tags.create("dev-tag", ("dev", 4))
    # A branch of the branch, its name holding a `/`: it reaches both through base paths.
    ds.create_branch("feat/x", ("dev", 4)).insert(pa.table({"id": [200]}))
    ds = open_ds(root, rel)
    seen = {("main", v): rows(ds.checkout_version(v)) for v in (1, 2, 3)}
    seen.update({("dev", v): rows(ds.checkout_version(("dev", v))) for v in (3, 4, 5)})
    seen.update({("feat/x", v): rows(ds.checkout_version(("feat/x", v))) for v in (4, 5)})
    seen["release"] = rows(ds.checkout_version("release"))
    seen["dev-tag"] = rows(ds.checkout_version("dev-tag"))
    assert seen[("dev", 5)] != seen[("dev", 4)] != seen[("main", 3)]  # the fixture is real
    return seen


def assert_all_readable(root: Root, rel: str, seen: dict) -> None:
    ds = open_ds(root, rel)
    for key, expected in seen.items():
        ref = key if isinstance(key, str) else (key if key[0] != "main" else key[1])
        assert rows(ds.checkout_version(ref)) == expected, key


# --- defect 1: a moved table keeps its branches ------------------------------------------------


@pytest.mark.parametrize("v2_names", [False, True], ids=["v1-manifest-names", "v2-manifest-names"])
def test_rename_keeps_every_version_of_every_branch_readable(local_root, v2_names):
    seen = table_with_branch(local_root, "b.lance", v2_names=v2_names)
    result = run_cli(*local_root.args, "rename", "b", "b2")  # as a user runs it
    assert result.exit_code == 0, result.stderr
    new = location_of(local_root, "b2")
    assert new != "b.lance" and not (local_root.local_path / "b.lance").exists()
    assert_all_readable(local_root, new, seen)
    base_paths = open_ds(local_root, new).checkout_version(("dev", None)).base_paths()
    assert [b.path for b in base_paths.values()] == [str(local_root.local_path / new)]
    # The branch can be written to after the move, and check resolves it.
    open_ds(local_root, new).checkout_version(("dev", None)).insert(pa.table({"id": [7]}))
    assert 7 in rows(open_ds(local_root, new).checkout_version(("dev", None)))
    report = js(local_root, "check")
    assert report["healthy"] and report["findings"] == []


def test_rename_leaves_the_source_intact_until_the_swap(local_root):
    """The copy is hard-linked on local disk: rewriting its manifests must not write through
    the links into the source's manifests (a crash before the swap leaves the source live)."""
    table_with_branch(local_root, "b.lance", v2_names=True)
    source = local_root.local_path / "b.lance"
    before = tree_snapshot(source)
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.store.base_paths import relocate_table, spellings
    from lancens_cli.store.storage import Storage

    storage = Storage(NamespaceConfig(root="file://" + str(local_root.local_path)))
    storage.copy_tree("b.lance", "0123abcd_b2")
    moved = relocate_table(
        storage, "0123abcd_b2", spellings(storage, "b.lance"), storage.uri("0123abcd_b2")
    )
    assert len(moved.manifests) == 5  # dev: versions 3-5, feat/x: 4-5
    assert sorted(moved.refs) == ["_refs/branches/feat%2Fx.json", "_refs/tags/dev-tag.json"]
    assert tree_snapshot(source) == before
    again = relocate_table(
        storage, "0123abcd_b2", spellings(storage, "b.lance"), storage.uri("0123abcd_b2")
    )
    assert again.manifests == []  # a rerun finds nothing left to move


def test_rename_refuses_to_move_a_manifest_it_cannot_rewrite(local_root):
    table_with_branch(local_root, "b.lance", v2_names=True)
    versions = local_root.local_path / "b.lance" / "tree" / "dev" / "_versions"
    victim = sorted(versions.glob("*.manifest"))[0]
    victim.write_bytes(victim.read_bytes() + b"trailing bytes")  # no footer at the end now
    before = tree_snapshot(local_root.local_path)
    refused(local_root, "rename", "b", "b2", names=("--keep-location", victim.name))
    refused(local_root, "rename", "b", "b2", "--dry-run", names=(victim.name,))
    assert tree_snapshot(local_root.local_path) == before
    ok(local_root, "rename", "b", "b2", "--keep-location")


def test_check_reports_a_branch_that_no_longer_resolves(local_root):
    table_with_branch(local_root, "b.lance", v2_names=False)
    assert js(local_root, "check")["healthy"]
    # What a move without rewriting does (the old rename, or a user's `mv`): main still reads.
    shutil.copytree(local_root.local_path / "b.lance", local_root.local_path / "moved.lance")
    shutil.rmtree(local_root.local_path / "b.lance")
    assert rows(open_ds(local_root, "moved.lance")) == rows(open_ds(local_root, "moved.lance"))
    result = cli(local_root, "--json", "check")
    assert result.exit_code == 1
    findings = json.loads(result.stdout)["findings"]
    codes = {(f["code"], f["object"]) for f in findings}
    assert codes == {("branch_unresolved", "moved")}, findings
    assert all("b.lance" in f["message"] for f in findings)
    assert {f["message"].split(":")[0] for f in findings} == {"branch dev", "branch feat/x"}


# --- defect 2: tables that read another one ----------------------------------------------------


def source_and_clone(root: Root) -> None:
    """`src` (root table; version 2 deletes a row: a deletion file; tag `v1` on it) and `c`, a
    shallow clone of that tag, reading the data and the deletion file through a base path."""
    options = root.storage_options
    lance.write_dataset(
        pa.table({"id": [1, 2, 3]}), uri(root, "src.lance"), storage_options=options
    )
    open_ds(root, "src.lance").delete("id = 2")
    ds = open_ds(root, "src.lance")
    ds.tags.create("v1", 2)
    ds = lance.write_dataset(
        pa.table({"id": [4]}), uri(root, "src.lance"), mode="append", storage_options=options
    )
    ds.shallow_clone(uri(root, "c.lance"), "v1", storage_options=options)
    clone = open_ds(root, "c.lance")
    assert rows(clone) == [1, 3]
    assert clone.get_fragments()[0].metadata.deletion_file is not None


def test_rename_refuses_to_move_a_table_a_clone_reads(local_root):
    source_and_clone(local_root)
    before = tree_snapshot(local_root.local_path)
    refused(local_root, "rename", "src", "s2", names=("c (latest)", "--keep-location", "--force"))
    assert tree_snapshot(local_root.local_path) == before
    plan = js(local_root, "rename", "src", "s2", "--dry-run")
    assert plan["dependents"] == [
        {"table": "c", "location": "c.lance", "needs": "src.lance", "via": ["latest"]}
    ]
    assert "read by c" in plan["changes"][0]["detail"]
    assert tree_snapshot(local_root.local_path) == before
    ok(local_root, "rename", "src", "s2", "--keep-location")  # nothing moves: allowed
    assert rows(open_ds(local_root, "c.lance")) == [1, 3]
    ok(local_root, "rename", "s2", "src", "--keep-location")
    ok(local_root, "rename", "src", "s3", "--force")
    assert not (local_root.local_path / "src.lance").exists()
    result = cli(local_root, "--json", "check")
    assert result.exit_code == 1
    codes = {f["code"] for f in json.loads(result.stdout)["findings"]}
    assert codes == {"missing_data_file", "missing_deletion_file"}


def test_drop_refuses_to_delete_data_a_clone_reads(local_root):
    source_and_clone(local_root)
    before = tree_snapshot(local_root.local_path)
    result = refused(local_root, "drop", "src", "--yes", names=("c (latest)", "--keep-data"))
    assert "src" in result.stderr
    assert tree_snapshot(local_root.local_path) == before
    plan = js(local_root, "drop", "src", "--dry-run")
    assert [d["table"] for d in plan["dependents"]] == ["c"]
    assert plan["changes"][0]["detail"] == "read by c (latest)"
    # Without --yes on a pipe, the refusal comes first and names the dependent.
    piped = run_cli(*local_root.args, "drop", "src")
    assert piped.exit_code == 5 and "c (latest)" in piped.stderr
    # Dropping the clone first frees the source.
    ok(local_root, "drop", "c", "--yes")
    ok(local_root, "drop", "src", "--yes")
    assert js(local_root, "ls")["entries"] == []


def test_drop_keep_data_and_force(local_root):
    source_and_clone(local_root)
    keep = js(local_root, "drop", "src", "--keep-data")  # no file deleted: no refusal
    assert keep["changes"][0]["detail"] == "data kept"
    assert rows(open_ds(local_root, "c.lance")) == [1, 3]
    ok(local_root, "register", "src", "src.lance")
    forced = js(local_root, "drop", "src", "--yes", "--force")
    assert [d["table"] for d in forced["dependents"]] == ["c"]
    assert not (local_root.local_path / "src.lance").exists()


def test_dependents_are_found_through_tags_and_branches(local_root):
    """A clone overwritten since (its latest version reads no file of the source, though it
    still declares the base path) keeps a tag and a branch that do: both are named."""
    source_and_clone(local_root)
    clone = open_ds(local_root, "c.lance")
    clone.tags.create("kept", clone.version)
    clone.create_branch("exp", clone.version)
    lance.write_dataset(pa.table({"id": [9]}), uri(local_root, "c.lance"), mode="overwrite")
    from lancens_cli.store.base_path_readers import referenced_paths  # what the scan reads

    labels = {label for label, _ in referenced_paths(_storage(local_root), "c.lance")}
    assert {"tag kept", "branch exp"} <= labels
    plan = js(local_root, "drop", "src", "--dry-run")
    via = plan["dependents"][0]["via"]
    assert "tag kept" in via and "branch exp" in via
    refused(local_root, "drop", "src", "--yes", names=("tag kept", "branch exp"))


@pytest.mark.parametrize("v2_names", [False, True], ids=["v1-manifest-names", "v2-manifest-names"])
def test_the_scan_reads_by_hand_what_lance_reads(local_root, tmp_path, monkeypatch, v2_names):
    """A table with no tag and no branch has its newest manifest's base paths read by hand,
    not opened with Lance: every table's answer is the one Lance's own open gives, whatever
    the clone (through a symlinked spelling of the root, appended to since, deleted from,
    overwritten), and a table with refs is still opened with Lance."""
    from lancens_cli.store import base_path_readers

    made = dict(enable_v2_manifest_paths=v2_names)
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), uri(local_root, "src.lance"), **made)
    lance.write_dataset(pa.table({"id": [4]}), uri(local_root, "src.lance"), mode="append")
    src = open_ds(local_root, "src.lance")
    src.shallow_clone(uri(local_root, "plain.lance"), 1)
    link = tmp_path / "link"
    os.symlink(local_root.local_path, link)
    lance.dataset(str(link / "src.lance")).shallow_clone(str(link / "spelled.lance"), 2)
    src.shallow_clone(uri(local_root, "grown.lance"), 2)
    lance.write_dataset(pa.table({"id": [9]}), uri(local_root, "grown.lance"), mode="append")
    open_ds(local_root, "grown.lance").delete("id = 1")
    src.shallow_clone(uri(local_root, "over.lance"), 1)
    lance.write_dataset(pa.table({"id": [7]}), uri(local_root, "over.lance"), mode="overwrite")
    src.shallow_clone(uri(local_root, "tagged.lance"), 1).tags.create("t", 1)
    lance.write_dataset(pa.table({"id": [5]}), uri(local_root, "alone.lance"), **made)
    for stray in ("²", "٣"):  # digits to `str.isdigit`, no version to Lance
        (local_root.local_path / "alone.lance" / "_versions" / f"{stray}.manifest").touch()
    names = ["src", "plain", "spelled", "grown", "over", "tagged", "alone"]
    locations = [f"{name}.lance" for name in names]
    storage = _storage(local_root)
    by_hand = dict(base_path_readers._scans(storage, locations))
    for location in locations:
        found = base_path_readers._latest_alone(storage, location, None)
        assert (found is None) == (location == "tagged.lance"), location
    monkeypatch.setattr(base_path_readers, "_latest_alone", lambda *args: None)
    by_lance = dict(base_path_readers._scans(storage, locations))
    assert by_hand == by_lance
    assert {loc for loc, paths in by_lance.items() if paths} == {
        "plain.lance", "spelled.lance", "grown.lance", "over.lance", "tagged.lance"
    }  # fmt: skip
    plan = js(local_root, "drop", "src", "--dry-run")  # directory tables, all of them
    assert [d["table"] for d in plan["dependents"]] == sorted(names[1:-1])


def _storage(root: Root):
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.store.storage import Storage

    return Storage(NamespaceConfig(root="file://" + str(root.local_path)))


def test_drop_cascade_refuses_only_for_dependents_outside(local_root):
    ok(local_root, "create", "namespace", "team")
    lance.write_dataset(pa.table({"id": [1, 2]}), uri(local_root, "srcdir"))
    ok(local_root, "register", "team.src", "srcdir")
    # A clone inside the dropped namespace is fine ...
    open_ds(local_root, "srcdir").shallow_clone(uri(local_root, "inner"), 1)
    ok(local_root, "register", "team.inner", "inner")
    plan = js(local_root, "drop", "team", "--cascade", "--dry-run")
    assert plan["dependents"] == []
    # ... one outside it is not.
    open_ds(local_root, "srcdir").shallow_clone(uri(local_root, "outer.lance"), 1)
    before = tree_snapshot(local_root.local_path)
    refused(local_root, "drop", "team", "--cascade", "--yes", names=("outer (latest)",))
    assert tree_snapshot(local_root.local_path) == before
    ok(local_root, "drop", "outer", "--yes")
    ok(local_root, "drop", "team", "--cascade", "--yes")
    assert not (local_root.local_path / "srcdir").exists()


# --- S3 ------------------------------------------------------------------------------------------


def test_s3_rename_and_drop_refuse_and_branches_move(s3_root):
    source_and_clone(s3_root)
    refused(s3_root, "rename", "src", "s2", names=("c (latest)",))
    refused(s3_root, "drop", "src", "--yes", names=("c (latest)",))
    assert rows(open_ds(s3_root, "src.lance")) == [1, 3, 4]
    assert rows(open_ds(s3_root, "c.lance")) == [1, 3]
    seen = table_with_branch(s3_root, "b.lance", v2_names=False)
    ok(s3_root, "rename", "b", "b2")
    assert_all_readable(s3_root, location_of(s3_root, "b2"), seen)
    assert js(s3_root, "check")["healthy"]


# --- a rename of a table with branches killed at random moments -------------------------------


def _live(root: Root) -> dict[str, str]:
    """Name -> location of b / b2 while listed as a Lance table."""
    listing = cli(root, "ls", "--json")
    assert listing.exit_code == 0, listing.stderr
    return {
        e["id"]: e["location"]
        for e in listing.json()["entries"]
        if e["id"] in ("b", "b2") and e["state"] == "ok"
    }


def _kill_after(args: list[str], delay: float) -> int | None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "LANCE_LOG": "error"},
    )
    try:
        return proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return None


def test_killed_rename_keeps_every_branch_version_readable(tmp_path):
    """SIGKILL at random moments of the move: whichever name is live reads every version of
    every branch, and the rerun completes with all of them readable (a fresh table per round:
    a copied template's branches would still point at the template)."""
    rng = random.Random(9)
    outcomes = []
    runtime = None
    for round_number in range(6):
        work = tmp_path / f"round{round_number}"
        work.mkdir()
        root = Root(str(work), {}, work)
        seen = table_with_branch(root, "b.lance", v2_names=bool(round_number % 2))
        if runtime is None:
            start = time.monotonic()
            assert run_cli(*root.args, "rename", "b", "b2").exit_code == 0
            runtime = time.monotonic() - start
            assert_all_readable(root, _live(root)["b2"], seen)
            continue
        code = _kill_after([*root.args, "rename", "b", "b2"], rng.uniform(0.3, 1.1) * runtime)
        outcomes.append("finished" if code == 0 else "killed")
        live = _live(root)
        assert len(live) == 1, live
        assert_all_readable(root, next(iter(live.values())), seen)
        rerun = run_cli(*root.args, "rename", "b", "b2")
        assert rerun.exit_code in (0, 3), rerun.stderr
        live = _live(root)
        assert set(live) == {"b2"}
        assert_all_readable(root, live["b2"], seen)
        assert not (work / "b.lance").exists()
        checked = json.loads(cli(root, "--json", "check").stdout)
        codes = {f["code"] for f in checked["findings"]}
        assert codes <= {"staged_manifest_file"}, codes
        leftovers = [p for p in work.rglob("*.tmp")]
        assert leftovers == []
    print(outcomes)
    assert "killed" in outcomes, outcomes


def test_rename_moves_branches_whose_base_paths_spell_the_root_through_a_symlink(tmp_path):
    """A branch made while the root was reached through a symlink (or with `//` in it) names
    its table in that spelling; a rename through the real path must still move it."""
    real = tmp_path / "disk1" / "ns"
    real.mkdir(parents=True)
    (tmp_path / "data").symlink_to(tmp_path / "disk1")
    through_link = Root(f"{tmp_path}/data//ns", {}, real)
    seen = table_with_branch(through_link, "b.lance", v2_names=True)
    spelt = open_ds(through_link, "b.lance").checkout_version(("dev", None)).base_paths()
    assert all("/data//ns/" in b.path for b in spelt.values())  # the fixture spells it so
    real_root = Root(str(real), {}, real)
    result = run_cli(*real_root.args, "rename", "b", "b2")
    assert result.exit_code == 0, result.stderr
    new = location_of(real_root, "b2")
    assert not (real / "b.lance").exists()
    assert_all_readable(real_root, new, seen)
    moved = open_ds(real_root, new).checkout_version(("dev", None)).base_paths()
    assert [b.path for b in moved.values()] == [str(real / new)]
    assert js(real_root, "check")["healthy"]
