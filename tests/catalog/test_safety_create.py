"""Data safety of `create`, `migrate-v1 --legacy` and a rename racing a drop.

- `R/t` (a V1-spec table) and `R/t.lance` both claim `t`: `migrate-v1 --legacy` registers
  `t.lance` (the directory namespace spec's directory for `t`, the one directory listing already
  resolves), skips `t` with the reason, exits 6 and migrates the rest; `--check` / `--dry-run` plan
  `t` once.
- `rename t t2` racing `drop t --yes` never brings the dropped table back: the loser exits 3
  or 4, and nothing is left that `check` would call an interrupted rename to rerun.
- a root `t.lance` holding only the data files of a write that never committed is listed as
  an `uncommitted write`, skipped by `migrate-v1`, and an `abandoned_table_write` that
  `check --fix` deletes once older than the grace period.
- `create table x` over such a directory (a killed create, an `rsync -a` copy in progress)
  exits 4 and touches nothing; `create` deletes only files it wrote itself.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Root, cli, invoke, run_cli, tree_snapshot

from lancens_cli.store.manifest import ManifestStore
from lancens_cli.store.storage import Storage


def lns_json(root: Root, *args: str, code: int = 0) -> dict:
    result = invoke(*root.args, *args, "--json")
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result.json()


def rows(root: Root) -> dict[str, str]:
    """object_id -> location of every table row of `__manifest`."""
    path = f"{root.uri}/__manifest"
    if root.local_path is not None and not (root.local_path / "__manifest").exists():
        return {}
    table = lance.dataset(path, storage_options=root.storage_options).to_table().to_pylist()
    return {r["object_id"]: r["location"] for r in table if r["object_type"] == "table"}


def listed(root: Root) -> dict[str, str]:
    """id -> state of every table `ls` shows."""
    report = lns_json(root, "ls")
    return {e["id"]: e["state"] for e in report["entries"] if e["kind"] == "table"}


def write_table(path: Path, n: int = 50, versions: int = 1) -> None:
    for version in range(versions):
        lance.write_dataset(
            pa.table({"id": list(range(n))}), str(path), mode="append" if version else "create"
        )


def uncommitted(path: Path) -> set[str]:
    """What a write killed before its commit leaves: Lance data files and no version."""
    lance.fragment.write_fragments(pa.table({"id": list(range(50))}), str(path))
    assert not (path / "_versions").exists()
    return set(os.listdir(path / "data"))


def age(path: Path, seconds: int) -> None:
    past = time.time() - seconds
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            os.utime(os.path.join(dirpath, name), (past, past))


@pytest.fixture
def parquet(tmp_path) -> str:
    path = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"id": list(range(1000))}), path)
    return str(path)


# --- 3. migrate-v1 --legacy: two directories claim one name -------------------------------------


def test_legacy_and_v1_directory_claiming_one_name(local_root):
    base = local_root.local_path
    write_table(base / "t", n=10)  # the V1 directory namespace spec: the directory is just the name
    write_table(base / "t.lance", n=20)  # the directory namespace spec / V1: <name>.lance
    write_table(base / "other", n=30)  # a legacy table no one else claims

    def plan(*flags: str, code: int) -> list[tuple[str, str, str]]:
        report = lns_json(local_root, "migrate-v1", "--legacy", *flags, code=code)
        return sorted((t["name"], t["location"], t["status"]) for t in report["tables"])

    expected = [
        ("other", "other", "to migrate"),
        ("t", "t", "skipped"),
        ("t", "t.lance", "to migrate"),
    ]
    before = tree_snapshot(base)
    assert plan("--check", code=7) == expected
    assert plan("--dry-run", code=0) == expected
    assert tree_snapshot(base) == before

    report = lns_json(local_root, "migrate-v1", "--legacy", code=6)
    items = {(t["name"], t["location"]): t for t in report["tables"]}
    assert items["t", "t.lance"]["status"] == "migrated"
    assert items["other", "other"]["status"] == "migrated"
    assert items["t", "t"]["status"] == "skipped"
    assert "t.lance" in items["t", "t"]["reason"]
    assert rows(local_root) == {"t": "t.lance", "other": "other"}
    described = lns_json(local_root, "describe", "t")
    assert described["details"]["rows"] == 20  # what dir listing showed before the migration

    again = lns_json(local_root, "migrate-v1", "--legacy", code=6)
    assert again["migrated"] == 0 and again["skipped"] == 1
    assert rows(local_root) == {"t": "t.lance", "other": "other"}


# --- 6. a root <name>.lance holding only an uncommitted write ------------------------------------


def test_root_uncommitted_write_is_listed_skipped_and_fixable(local_root, parquet):
    base = local_root.local_path
    write_table(base / "kept.lance")
    uncommitted(base / "t.lance")

    assert listed(local_root) == {"kept": "ok", "t": "uncommitted write"}

    before = tree_snapshot(base)
    report = lns_json(local_root, "migrate-v1", "--check", code=7)
    states = {t["name"]: t["status"] for t in report["tables"]}
    assert states == {"kept": "to migrate", "t": "skipped"}
    report = lns_json(local_root, "migrate-v1", code=6)
    items = {t["name"]: t for t in report["tables"]}
    assert items["kept"]["status"] == "migrated"
    assert items["t"]["status"] == "skipped" and "never committed" in items["t"]["reason"]
    assert rows(local_root) == {"kept": "kept.lance"}
    assert lns_json(local_root, "migrate-v1", "--check", code=6)["skipped"] == 1
    assert {p: b for p, b in tree_snapshot(base).items() if p.startswith("t.lance")} == {
        p: b for p, b in before.items() if p.startswith("t.lance")
    }

    # young: it may be a write in flight, so it is reported and kept
    report = lns_json(local_root, "check", code=1)
    findings = [(f["code"], f["object"], f["fixable"]) for f in report["findings"]]
    assert findings == [("abandoned_table_write", "t", False)]
    fixed = lns_json(local_root, "check", "--fix", code=1)
    assert not fixed["findings"][0]["fixed"] and (base / "t.lance").exists()

    # the same finding when only `t` is checked
    scoped = lns_json(local_root, "check", "t", code=1)
    assert [f["code"] for f in scoped["findings"]] == ["abandoned_table_write"]

    fixed = lns_json(local_root, "check", "--fix", "--grace-minutes", "0")
    assert [(f["code"], f["fixed"]) for f in fixed["findings"]] == [("abandoned_table_write", True)]
    assert not (base / "t.lance").exists()
    assert cli(local_root, "check").exit_code == 0
    assert cli(local_root, "create", "table", "t", "--from", parquet).exit_code == 0
    assert lns_json(local_root, "describe", "t")["details"]["rows"] == 1000


def test_uncommitted_write_with_dir_listing_off_is_not_registered(local_root):
    base = local_root.local_path
    assert cli(local_root, "init").exit_code == 0
    assert cli(local_root, "create", "namespace", "sales").exit_code == 0
    uncommitted(base / "t.lance")
    age(base / "t.lance", 7200)
    report = lns_json(local_root, "--no-dir-listing", "check", code=1)
    findings = [(f["code"], f["location"], f["fixable"]) for f in report["findings"]]
    assert findings == [("abandoned_table_write", "t.lance", True)]
    assert cli(local_root, "--no-dir-listing", "check", "--fix").exit_code == 0
    assert not (base / "t.lance").exists()
    assert rows(local_root) == {}


def test_uncommitted_write_on_any_store(any_root, parquet):
    """The same predicate on local disk and on S3: listed, refused by `create` with nothing
    changed, skipped by `migrate-v1`, deleted by `check --fix` after the grace."""
    uri = f"{any_root.uri}/t.lance"
    lance.fragment.write_fragments(
        pa.table({"id": list(range(50))}), uri, storage_options=any_root.storage_options
    )
    assert cli(any_root, "init").exit_code == 0
    assert listed(any_root) == {"t": "uncommitted write"}
    described = cli(any_root, "describe", "t")
    assert described.exit_code == 1 and "never committed" in described.stderr

    def files() -> set[str]:
        storage = _storage(any_root)
        return {path for path, _ in storage.walk_files("t.lance")}

    before = files()
    refused = cli(any_root, "create", "table", "t", "--from", parquet)
    assert refused.exit_code == 4 and "check --fix" in refused.stderr, refused.stderr
    assert files() == before and before
    assert lns_json(any_root, "migrate-v1", "--check", code=6)["skipped"] == 1
    report = lns_json(any_root, "check", "--fix", "--grace-minutes", "0")
    assert [(f["code"], f["fixed"]) for f in report["findings"]] == [
        ("abandoned_table_write", True)
    ]
    assert files() == set() and listed(any_root) == {}
    assert cli(any_root, "create", "table", "t", "--from", parquet).exit_code == 0
    assert listed(any_root) == {"t": "ok"}


def _storage(root: Root) -> Storage:
    from lancens_cli.config import NamespaceConfig

    return Storage(NamespaceConfig.from_properties(root.properties))


# --- 7. create never deletes a file it did not write -------------------------------------------


def test_create_refuses_a_copy_in_progress_and_touches_nothing(local_root, tmp_path, parquet):
    """`rsync -a` of a table: data files first (old modification times), `_versions/` last."""
    source = tmp_path / "source.lance"
    write_table(source, n=500, versions=2)
    age(source, 3 * 86400)
    target = local_root.local_path / "x.lance"
    shutil.copytree(source / "data", target / "data", copy_function=shutil.copy2)

    before = tree_snapshot(local_root.local_path)
    for extra in ([], ["--exist-ok"]):
        result = cli(local_root, "create", "table", "x", "--from", parquet, *extra)
        assert result.exit_code == 4, result.stderr
        assert "never committed" in result.stderr and "check --fix" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    for how in (["--declare"], ["--from", parquet, "--dry-run"]):
        assert cli(local_root, "create", "table", "x", *how).exit_code == 4
    assert tree_snapshot(local_root.local_path) == before
    assert listed(local_root) == {"x": "uncommitted write"}

    # the copy completes: it is the table rsync was copying, whole
    shutil.copytree(source / "_versions", target / "_versions", copy_function=shutil.copy2)
    shutil.copytree(source / "_transactions", target / "_transactions", dirs_exist_ok=True)
    assert lns_json(local_root, "describe", "x")["details"]["rows"] == 1000


def test_a_loser_after_its_own_version_1_removes_only_its_own_files(
    local_root, parquet, monkeypatch
):
    """Our version 1 of `x.lance` is committed, then the name is taken before our row lands:
    we remove our version, data and transaction files, and leave a file someone else put there."""
    import lancens_cli.service.catalog.create as create_module
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace

    base = local_root.local_path
    assert cli(local_root, "create", "namespace", "other").exit_code == 0
    real_write = create_module.write_new_table

    def write_then_lose_the_name(storage, location, data, **kwargs):
        dataset = real_write(storage, location, data, **kwargs)
        (base / location / "data" / "someone-elses.lance").write_bytes(b"not ours")
        # a racer's row for the name lands first
        racer = Namespace(NamespaceConfig.from_properties(local_root.properties))
        racer.manifest.mutate(lambda s, e: e.add(create_module.namespace_row("x")))
        return dataset

    monkeypatch.setattr(create_module, "write_new_table", write_then_lose_the_name)
    result = cli(local_root, "create", "table", "x", "--from", parquet)
    assert result.exit_code == 4, result.stderr
    left = {
        os.path.relpath(os.path.join(d, f), base / "x.lance")
        for d, _, fs in os.walk(base / "x.lance")
        for f in fs
    }
    assert left == {"data/someone-elses.lance"}


# --- 4. a rename racing a drop ------------------------------------------------------------------


def _build_race_root(root: Root, registered: bool) -> None:
    write_table(root.local_path / "t.lance", n=200, versions=3)
    write_table(root.local_path / "keep.lance", n=10)
    if registered:
        assert cli(root, "migrate-v1").exit_code == 0
    else:
        assert cli(root, "init").exit_code == 0


def _dropped_state_is_clean(root: Root) -> None:
    """The drop won: neither name is there, nothing half-renamed is left, `check` is quiet."""
    assert set(listed(root)) == {"keep"}
    assert set(rows(root)) <= {"keep"}
    assert set(os.listdir(root.local_path)) - {"__manifest"} == {"keep.lance"}
    report = invoke(*root.args, "check", "--json")
    findings = {f["code"] for f in report.json()["findings"]}
    assert findings <= {"staged_manifest_file"}, report.stdout
    again = cli(root, "rename", "t", "t2")
    assert again.exit_code == 3, again.stderr


def _drop_once_at(root: Root, monkeypatch, owner: type, method: str, when=lambda arg: True):
    """`lancens drop t --yes`, as a real process, the first time `owner.method` is called
    (with an argument `when` accepts), before the call itself; the drop's result is returned
    in a list filled then."""
    real = getattr(owner, method)
    dropped = []

    def drop_first(self, arg):
        if not dropped and when(arg):
            dropped.append(run_cli(*root.args, "drop", "t", "--yes"))
            assert dropped[0].exit_code == 0, dropped[0].stderr
        return real(self, arg)

    monkeypatch.setattr(owner, method, drop_first)
    return dropped


@pytest.mark.parametrize("registered", [True, False], ids=["registered", "directory-only"])
def test_a_drop_just_before_the_renames_first_commit_wins(local_root, monkeypatch, registered):
    """The interleaving of the issue: the drop commits between the rename's reading of the
    table and its first manifest commit. The rename exits 3 and does not bring `t` back."""
    _build_race_root(local_root, registered)
    dropped = _drop_once_at(local_root, monkeypatch, ManifestStore, "mutate")
    result = cli(local_root, "rename", "t", "t2")
    monkeypatch.undo()
    assert dropped and result.exit_code == 3, (result.exit_code, result.stderr)
    assert "no longer exists" in result.stderr
    _dropped_state_is_clean(local_root)


def test_a_drop_between_the_renames_copy_and_its_swap_wins(local_root, monkeypatch):
    """The drop runs after the rename copied the table and before it swaps the rows: the
    rename exits 4 (the table changed under it), removes its copy, and `t2` never appears."""
    _build_race_root(local_root, registered=True)
    real_copy = Storage.copy_tree
    dropped = []

    def copy_then_drop(self, src, dst):
        real_copy(self, src, dst)
        dropped.append(run_cli(*local_root.args, "drop", "t", "--yes"))

    monkeypatch.setattr(Storage, "copy_tree", copy_then_drop)
    result = cli(local_root, "rename", "t", "t2")
    monkeypatch.undo()
    assert dropped and dropped[0].exit_code == 0, dropped[0].stderr
    assert result.exit_code in (3, 4), (result.exit_code, result.stderr)
    _dropped_state_is_clean(local_root)


def test_a_drop_deleting_the_data_during_the_rename_wins(local_root, monkeypatch):
    """The drop's first step (deleting the data) lands before the rename's first commit, its
    second (removing the row) after: the rename must not journal a rename of a table whose
    data is going, and the drop completes."""
    _build_race_root(local_root, registered=True)
    real_mutate = ManifestStore.mutate
    calls = []

    def delete_data_first(self, plan):
        if not calls:
            shutil.rmtree(local_root.local_path / "t.lance" / "_versions")  # as drop does first
            shutil.rmtree(local_root.local_path / "t.lance")
        calls.append(plan)
        return real_mutate(self, plan)

    monkeypatch.setattr(ManifestStore, "mutate", delete_data_first)
    result = cli(local_root, "rename", "t", "t2")
    monkeypatch.undo()
    assert result.exit_code in (3, 4), (result.exit_code, result.stderr)
    assert "t2" not in listed(local_root)
    finish = run_cli(*local_root.args, "drop", "t", "--yes")  # the drop's second step
    assert finish.exit_code == 0, finish.stderr
    _dropped_state_is_clean(local_root)


@pytest.mark.parametrize("registered", [True, False], ids=["registered", "directory-only"])
def test_a_drop_while_the_rename_reads_the_manifests_wins(local_root, monkeypatch, registered):
    """The drop deletes the table while the rename parses its manifests (before anything of
    the rename is written): the rename exits 4 in words, not with a storage error, and `t2`
    never appears. (Two racing processes hit this in CI.)"""
    _build_race_root(local_root, registered)
    dropped = _drop_once_at(
        local_root, monkeypatch, Storage, "read_bytes", lambda path: "t.lance/_versions/" in path
    )
    result = cli(local_root, "rename", "t", "t2")
    monkeypatch.undo()
    assert dropped and result.exit_code == 4, (result.exit_code, result.stderr)
    assert "changed by another process" in result.stderr
    _dropped_state_is_clean(local_root)


def test_a_drop_half_way_through_a_v2_table_stops_its_rename(local_root, parquet, monkeypatch):
    """A V2 table's rename is one commit, planned after the drop began deleting its data
    (`_versions/` goes first): the rename exits 4 instead of giving the new name a table that
    is being deleted, and the drop completes."""
    assert cli(local_root, "create", "namespace", "sales").exit_code == 0
    assert cli(local_root, "create", "table", "sales.t", "--from", parquet).exit_code == 0
    location = rows(local_root)["sales$t"]
    real_mutate = ManifestStore.mutate

    def drop_starts(self, plan):
        shutil.rmtree(local_root.local_path / location / "_versions")  # as drop does first
        return real_mutate(self, plan)

    monkeypatch.setattr(ManifestStore, "mutate", drop_starts)
    result = cli(local_root, "rename", "sales.t", "sales.t2")
    monkeypatch.undo()
    assert result.exit_code == 4, (result.exit_code, result.stderr)
    assert rows(local_root) == {"sales$t": location}
    assert cli(local_root, "drop", "sales.t", "--yes").exit_code == 0
    assert rows(local_root) == {} and not (local_root.local_path / location).exists()
    assert cli(local_root, "check").exit_code == 0


def test_a_rename_journaled_over_a_vanished_table_is_no_circle(local_root):
    """A row journaling a rename whose table is gone (what the old race left): `check` does not
    advise rerunning the rename, the rename says what to do, and that completes."""
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import RENAME_INTENT_KEY, Namespace
    from lancens_cli.store.manifest import decode_properties, encode_properties

    _build_race_root(local_root, registered=True)
    ns = Namespace(NamespaceConfig.from_properties(local_root.properties))

    def journal(snapshot, edit):
        properties = decode_properties(snapshot.get("t")["metadata"])
        properties[RENAME_INTENT_KEY] = json.dumps({"to": "t2", "location": "0badf00d_t2"})
        edit.replace("t", metadata=encode_properties(properties))

    ns.manifest.mutate(journal)
    shutil.rmtree(local_root.local_path / "t.lance")

    report = lns_json(local_root, "check", code=1)
    advice = [f["message"] for f in report["findings"] if f["code"] == "interrupted_rename"]
    assert advice and "rerun" not in advice[0] and "lancens drop t --yes" in advice[0]
    rerun = cli(local_root, "rename", "t", "t2")
    assert rerun.exit_code == 3 and "lancens drop t --yes" in rerun.stderr, rerun.stderr
    assert cli(local_root, "drop", "t", "--yes").exit_code == 0
    _dropped_state_is_clean(local_root)


RACE_ROUNDS = int(os.environ.get("LANCENS_RACE_ROUNDS", "16"))

# `python -m lancens_cli ARGS`, after the imports and once a start file appears (plus a delay):
# process start-up takes seconds and varies by more than the whole race window, so each
# process pays it first and the two commands then start within milliseconds of each other.
_STARTER = """
import os, sys, time
import lance, pyarrow, pyarrow.compute
import lancens_cli.service.check
import lancens_cli.service.catalog.drop, lancens_cli.service.catalog.rename
from lancens_cli.cli.app import main
go, delay = sys.argv[1], float(sys.argv[2])
sys.argv = ["lancens", *sys.argv[3:]]
while not os.path.exists(go):
    time.sleep(0.0005)
time.sleep(delay)
main()
"""


@pytest.mark.slow
def test_rename_and_drop_as_racing_processes(tmp_path):
    """`lancens rename t t2 & lancens drop t --yes` as real processes, many times, the drop
    starting up to 0.1 s before or after the rename: exactly one wins and the other exits 3 or
    4; a dropped table stays gone, a renamed one is whole, and `check` is quiet."""
    rng = random.Random(9)
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    env.pop("LANCENS_ROOT", None)
    outcomes = []
    for number in range(RACE_ROUNDS):
        path = tmp_path / f"r{number}"
        path.mkdir()
        root = Root(str(path), {}, path)
        _build_race_root(root, registered=number % 2 == 0)
        offset = rng.uniform(-0.1, 0.1)  # > 0: the drop starts that much after the rename
        go = tmp_path / f"go{number}"

        def start(delay: float, *argv: str, path: Path = path, go: Path = go) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, "-c", _STARTER, str(go), str(delay), "--root", str(path), *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )

        procs = {
            "rename": start(max(0.0, -offset), "rename", "t", "t2"),
            "drop": start(max(0.0, offset), "drop", "t", "--yes"),
        }
        time.sleep(2.0)  # both have imported what they need
        go.write_text("go")
        results = {}
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=120)
            results[name] = (proc.returncode, err.strip())
        rename_code, drop_code = results["rename"][0], results["drop"][0]
        where = f"round {number} (drop {offset:+.3f}s after the rename): {results}"
        assert (rename_code == 0) != (drop_code == 0), where
        assert max(rename_code, drop_code) in (3, 4), where
        if drop_code == 0:
            outcomes.append("drop")
            _dropped_state_is_clean(root)
        else:
            outcomes.append("rename")
            assert set(listed(root)) == {"keep", "t2"}, where
            assert lns_json(root, "describe", "t2")["details"]["rows"] == 600, where
            report = invoke(*root.args, "check", "--json").json()
            assert {f["code"] for f in report["findings"]} <= {"staged_manifest_file"}, where
        shutil.rmtree(path)
    print(f"\nrename/drop race: {RACE_ROUNDS} rounds, won by {outcomes}")


def test_a_rename_landing_before_the_drops_delete_keeps_the_renamed_data(
    local_root, parquet, monkeypatch
):
    """The drop looked `sales.t` up; a rename of it commits before the drop deletes anything.
    The drop's marking commit finds the row moved: it exits 3 and deletes nothing, so the
    renamed table (same directory, new name) stays whole."""
    assert cli(local_root, "create", "namespace", "sales").exit_code == 0
    assert cli(local_root, "create", "table", "sales.t", "--from", parquet).exit_code == 0
    location = rows(local_root)["sales$t"]
    real_mutate = ManifestStore.mutate
    renamed = []

    def rename_first(self, plan):
        if not renamed:
            renamed.append(run_cli(*local_root.args, "rename", "sales.t", "sales.t2"))
        return real_mutate(self, plan)

    monkeypatch.setattr(ManifestStore, "mutate", rename_first)
    result = cli(local_root, "drop", "sales.t", "--yes")
    monkeypatch.undo()
    assert renamed and renamed[0].exit_code == 0, renamed[0].stderr
    assert result.exit_code == 3, (result.exit_code, result.stderr)
    assert rows(local_root) == {"sales$t2": location}
    table = lance.dataset(str(local_root.local_path / location)).to_table()
    assert table.num_rows == pq.read_table(parquet).num_rows
    assert cli(local_root, "check").exit_code == 0


def test_a_rename_after_the_drops_mark_is_refused(local_root, parquet, monkeypatch):
    """The drop's mark landed first: a rename arriving while the data is deleted exits 4 and
    changes nothing; the drop completes and nothing of `sales.t` is left."""
    assert cli(local_root, "create", "namespace", "sales").exit_code == 0
    assert cli(local_root, "create", "table", "sales.t", "--from", parquet).exit_code == 0
    location = rows(local_root)["sales$t"]
    real_delete = Storage.delete_tree
    renamed = []

    def rename_then_delete(self, path):
        if not renamed:
            renamed.append(run_cli(*local_root.args, "rename", "sales.t", "sales.t2"))
        return real_delete(self, path)

    monkeypatch.setattr(Storage, "delete_tree", rename_then_delete)
    result = cli(local_root, "drop", "sales.t", "--yes")
    monkeypatch.undo()
    assert renamed and renamed[0].exit_code == 4, (renamed[0].exit_code, renamed[0].stderr)
    assert "being dropped" in renamed[0].stderr
    assert result.exit_code == 0, result.stderr
    assert rows(local_root) == {} and not (local_root.local_path / location).exists()
    assert cli(local_root, "check").exit_code == 0
