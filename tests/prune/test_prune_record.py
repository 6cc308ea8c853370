"""`prune`'s record: a run skips the tables nothing changed since the last one, and removes
exactly what a run without the record removes (service/prune/record.py)."""

from __future__ import annotations

import gzip
import json
import shutil
import time

import lance
import pyarrow as pa
import pytest
from helpers import Root, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_namespace import STEP, Scene, build

from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune import protect
from lancens_cli.service.prune.record import RECORD, SETTLE
from lancens_cli.service.prune.report import UNCHANGED
from lancens_cli.store.version_files import list_for_plan, list_table

# What happens between two runs: writes, tags made and deleted, branches, clones, a killed
# append's files, partitioned writes (new `__manifest` versions, pins moved).
CHANGE = st.one_of(
    STEP,
    st.tuples(st.just("debris"), st.integers(1, 5)),
    st.tuples(st.just("untag"), st.integers(0, 100)),
)
POLICY = st.fixed_dictionaries(
    {"retain": st.integers(1, 3), "older_than": st.sampled_from(["1s", "1h"])}
)


def flags(policy: dict) -> list[str]:
    return [
        "--older-than", policy["older_than"], "--retain", str(policy["retain"]),
        "--grace", "1s", "--force",
    ]  # fmt: skip


def run(root: Root, *args: str) -> dict:
    result = invoke(*root.args, "--json", "prune", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def removed(report: dict) -> dict[str, tuple]:
    """What a run removed (or would remove), table by table."""
    found = {}
    for t in report["tables"]:
        done = (
            sorted(t["versions_removed"]),
            {b: sorted(v) for b, v in t["branch_versions_removed"].items()},
            sorted(t["unpublished_removed"]),
            t["unreferenced_removed"],
        )
        if done != ([], {}, [], 0):
            found[t["location"]] = done
    return found


def skipped(report: dict) -> set[str]:
    return {t["location"] for t in report["tables"] if UNCHANGED in t["notes"]}


@pytest.mark.slow
def test_an_incremental_run_removes_exactly_what_a_full_run_removes(tmp_path_factory):
    skips: list[int] = []

    @settings(
        max_examples=10,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        before=st.lists(STEP, min_size=2, max_size=8),
        between=st.lists(CHANGE, min_size=0, max_size=5),
        policy=POLICY,
    )
    def property_holds(before, between, policy):
        scene = Scene(tmp_path_factory.mktemp("record"))
        for step in [("append", 5), ("append", 5), ("tag", 0)] + before:
            scene.apply(step)
        time.sleep(1.1)
        run(scene.ns, *flags(policy), "--yes")  # removes what is old; records every table
        for step in between:
            scene.apply(step)
        time.sleep(1.1)  # what changed is past the 1s window and grace for both runs
        full = run(scene.ns, *flags(policy), "--full", "--dry-run")
        assert not skipped(full)
        incremental = run(scene.ns, *flags(policy), "--yes")
        assert removed(incremental) == removed(full), (before, between, policy)
        if between:
            assert scene.location not in skipped(incremental) or not any(
                s[0] in ("append", "overwrite", "delete", "debris") for s in between
            )
        skips.append(len(skipped(incremental)))

    property_holds()
    assert sum(skips) > 0  # the record was used, not only written


@pytest.fixture
def pruned(tmp_path):
    """Four tables of three versions, pruned: two versions each removed, every table recorded."""
    root = tmp_path / "ns"
    root.mkdir()
    for i in range(4):
        for mode in ("create", "append", "append"):
            lance.write_dataset(pa.table({"a": [i]}), root / f"t{i}.lance", mode=mode)
    ns = Root(str(root), {}, root)
    time.sleep(1.1)
    first = run(ns, "--older-than", "1s", "--grace", "1s", "--force", "--yes")
    assert first["totals"]["versions_removed"] == 8
    return ns


POLICY_FLAGS = ("--older-than", "1s", "--grace", "1s", "--force")


def test_a_run_after_a_run_skips_every_unchanged_table_and_full_skips_none(pruned):
    again = run(pruned, *POLICY_FLAGS, "--yes")
    assert skipped(again) == {f"t{i}.lance" for i in range(4)}
    lance.write_dataset(pa.table({"a": [9]}), pruned.local_path / "t2.lance", mode="append")
    changed = run(pruned, *POLICY_FLAGS, "--yes")
    assert skipped(changed) == {"t0.lance", "t1.lance", "t3.lance"}
    assert not skipped(run(pruned, *POLICY_FLAGS, "--full", "--yes"))
    # another policy: the record is not used
    assert not skipped(run(pruned, *POLICY_FLAGS, "--retain", "2", "--yes"))


@pytest.mark.parametrize(
    "damage", ["missing", "garbage", "older_format", "wrong_json", "cut_short", "cut_gzip"]
)
def test_a_missing_or_damaged_record_means_a_full_run(pruned, damage):
    path = pruned.local_path / RECORD
    text = gzip.decompress(path.read_bytes())
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"\x00not a record")
    elif damage == "older_format":
        data = json.loads(text)
        path.write_bytes(gzip.compress(json.dumps({**data, "format": 0}).encode()))
    elif damage == "wrong_json":
        path.write_bytes(gzip.compress(b'{"format": 1, "policy": 3, "tables": []}'))
    elif damage == "cut_short":  # whole lines lost, the compression intact
        path.write_bytes(gzip.compress(b"".join(text.splitlines(keepends=True)[:3])))
    else:  # the file itself cut
        path.write_bytes(path.read_bytes()[:-20])
    report = run(pruned, *POLICY_FLAGS, "--yes")
    assert not skipped(report) and report["totals"]["tables_failed"] == 0
    assert skipped(run(pruned, *POLICY_FLAGS, "--yes")) == {f"t{i}.lance" for i in range(4)}


@pytest.mark.parametrize("entry", ['{"digest": 3}', "[1, 2]", '"text"', "{}"])
def test_an_entry_that_does_not_read_means_that_table_is_looked_at_in_full(pruned, entry):
    """Entries are read only when asked: one another writer damaged (its line still a line)
    costs its table a full look, not the others theirs, and loses nothing."""
    path = pruned.local_path / RECORD
    lines = gzip.decompress(path.read_bytes()).decode().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith('"t1.lance": '))
    ending = "," if lines[at].rstrip().endswith(",") else ""
    lines[at] = f'"t1.lance": {entry}{ending}\n'
    path.write_bytes(gzip.compress("".join(lines).encode()))
    report = run(pruned, *POLICY_FLAGS, "--yes")
    assert skipped(report) == {"t0.lance", "t2.lance", "t3.lance"}
    assert report["totals"]["tables_failed"] == 0 and removed(report) == {}
    for i in range(4):
        assert (
            lance.dataset(pruned.local_path / f"t{i}.lance").to_table()["a"].to_pylist() == [i] * 3
        )
    assert skipped(run(pruned, *POLICY_FLAGS, "--yes")) == {f"t{i}.lance" for i in range(4)}


def test_the_record_is_one_json_document_and_one_written_whole_still_serves(pruned):
    """A table per line (read and written a line at a time) is still one JSON document, and a
    record written as a single line, as earlier versions did, is read the same."""
    path = pruned.local_path / RECORD
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert sorted(data["tables"]) == [f"t{i}.lance" for i in range(4)]
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    assert skipped(run(pruned, *POLICY_FLAGS, "--yes")) == {f"t{i}.lance" for i in range(4)}


def test_a_dry_run_leaves_no_record(tmp_path):
    root = tmp_path / "ns"
    root.mkdir()
    lance.write_dataset(pa.table({"a": [1]}), root / "t.lance")
    run(Root(str(root), {}, root), *POLICY_FLAGS, "--dry-run")
    assert not (root / RECORD).exists()


def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables a run lists whole from now on, in the order listed."""
    listed: list[str] = []
    real_list_table = protect.list_table

    def counting(storage, location):
        listed.append(location)
        return real_list_table(storage, location)

    monkeypatch.setattr(protect, "list_table", counting)
    return listed


def test_an_untouched_local_table_is_skipped_without_listing_it(pruned, monkeypatch):
    """Once its directories' times have settled, a run compares them (one stat each) and lists
    nothing; a table written to since is listed and evaluated."""
    time.sleep(SETTLE.total_seconds() + 0.2)
    run(pruned, *POLICY_FLAGS, "--yes")  # skips by listing, and records the directories' times
    listed = listings(monkeypatch)
    quiet = run(pruned, *POLICY_FLAGS, "--yes")
    assert skipped(quiet) == {f"t{i}.lance" for i in range(4)} and listed == []
    lance.write_dataset(pa.table({"a": [9]}), pruned.local_path / "t3.lance", mode="append")
    changed = run(pruned, *POLICY_FLAGS, "--yes")
    assert listed == ["t3.lance"] and skipped(changed) == {"t0.lance", "t1.lance", "t2.lance"}


def test_a_directory_touched_with_no_file_changed_is_listed_once_then_not(pruned, monkeypatch):
    """A file made and removed moves its directory's time and nothing else: the next run
    lists that table (its listing matches the record) and records the directories' new
    times, so the run after lists nothing again."""
    time.sleep(SETTLE.total_seconds() + 0.2)
    run(pruned, *POLICY_FLAGS, "--yes")  # records the directories' times
    scratch = pruned.local_path / "t1.lance" / "_versions" / "scratch"
    scratch.write_text("x")
    scratch.unlink()
    time.sleep(SETTLE.total_seconds() + 0.2)
    listed = listings(monkeypatch)
    assert skipped(run(pruned, *POLICY_FLAGS, "--yes")) == {f"t{i}.lance" for i in range(4)}
    assert listed == ["t1.lance"]
    listed.clear()
    assert skipped(run(pruned, *POLICY_FLAGS, "--yes")) == {f"t{i}.lance" for i in range(4)}
    assert listed == []


def test_a_version_aging_while_the_run_reads_is_due_for_the_next_run(tmp_path, monkeypatch):
    """A run judges ages by the moment it starts; a table it lists later may hold versions
    that aged in between. They stayed this run (judged young), so the record must make the
    next run look again rather than skip the table until something changes."""
    from lancens_cli.service.prune import decide as prune_decide

    root = tmp_path / "ns"
    root.mkdir()
    for mode in ("create", "append", "append"):
        lance.write_dataset(pa.table({"a": [1]}), root / "t.lance", mode=mode)
    ns = Root(str(root), {}, root)
    read = prune_decide.read_table_state

    def slow_read(*args, **kwargs):
        time.sleep(2.5)  # versions 1 and 2 pass --older-than 2s while the run reads
        return read(*args, **kwargs)

    monkeypatch.setattr(prune_decide, "read_table_state", slow_read)
    policy = ("--older-than", "2s", "--grace", "1s", "--force", "--yes")
    first = run(ns, *policy)
    assert removed(first) == {}  # judged at the start: every version was younger
    monkeypatch.setattr(prune_decide, "read_table_state", read)
    second = run(ns, *policy)
    assert removed(second) == {"t.lance": ([1, 2], {}, [], 0)}


def test_a_table_listed_only_to_plan_and_kept_whole_is_recorded_and_skipped_next(tmp_path):
    """A cold run lists a table with a version past the window only as far as planning needs
    (no digest). When its plan keeps every version (here a shallow clone reads the old one),
    it is listed whole after its turn, so its record entry is made all the same: the next run
    skips it, and a write to it brings it back."""
    root = tmp_path / "ns"
    root.mkdir()
    for mode in ("create", "append"):
        lance.write_dataset(pa.table({"a": [1]}), root / "source.lance", mode=mode)
    lance.dataset(root / "source.lance", version=1).shallow_clone(str(root / "copy.lance"), 1)
    ns = Root(str(root), {}, root)
    time.sleep(1.1)
    first = run(ns, *POLICY_FLAGS, "--yes")
    source = next(t for t in first["tables"] if t["location"] == "source.lance")
    assert source["status"] == "nothing to do" and source["versions_removed"] == []
    assert 1 in {k["version"] for k in source["protected"]}
    assert skipped(run(ns, *POLICY_FLAGS, "--yes")) == {"source.lance", "copy.lance"}
    lance.write_dataset(pa.table({"a": [2]}), root / "source.lance", mode="append")
    assert "source.lance" not in skipped(run(ns, *POLICY_FLAGS, "--yes"))


def test_a_cold_run_records_each_table_as_a_whole_listing_sees_it(tmp_path):
    """Tables first listed only to plan get the entries a whole listing gives: the digest of
    each recorded table is that of listing it whole now (nothing changed since the run)."""
    root = tmp_path / "ns"
    root.mkdir()
    for i in range(3):
        for mode in ("create", "append", "append"):
            lance.write_dataset(pa.table({"a": [i]}), root / f"t{i}.lance", mode=mode)
    lance.write_dataset(pa.table({"a": [9]}), root / "young.lance")
    time.sleep(1.1)
    first = run(Root(str(root), {}, root), *POLICY_FLAGS, "--yes")
    assert first["totals"]["versions_removed"] == 6
    tables = json.loads(gzip.decompress((root / RECORD).read_bytes()))["tables"]
    storage = Namespace.from_properties({"root": str(root)}).storage
    whole = {loc: list_table(storage, loc).digest for loc in tables}
    assert {loc: e["digest"] for loc, e in tables.items()} == whole
    assert set(whole) == {"t0.lance", "t1.lance", "t2.lance", "young.lance"}


def test_a_listing_to_plan_says_what_a_whole_listing_says_of_every_kind_of_table(
    local_root, tmp_path
):
    """Versions with their times, `_refs/`, and the count of data files: the same from
    `list_for_plan` as from `list_table` (or none, for a table with `_refs/`, which is listed
    whole), for every table directory of a root with tags, a branch, shallow clones, deletions,
    a partitioned write that died, a killed append, and `_versions`/`data` that are symlinks
    to directories outside it (files to both listings: never followed)."""
    build(local_root, tmp_path)
    root = local_root.local_path
    for name, linked in (("linked_versions.lance", "_versions"), ("linked_data.lance", "data")):
        outside = tmp_path / f"outside-{name}"
        lance.write_dataset(pa.table({"a": [1]}), outside)
        lance.write_dataset(pa.table({"a": [2]}), outside, mode="append")
        (root / name).mkdir()
        for part in ("_versions", "data", "_transactions"):
            target = root / name / part
            if part == linked:
                target.symlink_to(outside / part, target_is_directory=True)
            else:
                shutil.copytree(outside / part, target)
    tables = sorted({p.parent for p in root.rglob("_versions")})
    assert len(tables) >= 10
    storage = Namespace.from_properties({"root": str(root)}).storage
    refs = 0
    for path in tables:
        whole = list_table(storage, str(path.relative_to(root)))
        planned = list_for_plan(str(path), lambda versions: True)
        if planned is None:
            assert whole.has_refs, path
            refs += 1
            continue
        assert (planned.versions, planned.has_refs, planned.data_files) == (
            whole.versions,
            whole.has_refs,
            whole.data_files,
        ), path
        assert planned.digest == "" and whole.digest
    assert refs >= 1
    assert list_for_plan(str(root / "linked_versions.lance"), bool) is None  # no versions
    assert list_for_plan(str(tmp_path / "nothing-here"), bool).versions == {}


def test_a_table_whose_versions_are_a_symlink_out_of_the_root_is_never_pruned(tmp_path):
    """A table directory whose `_versions` links to another table's outside the root has no
    versions of its own to prune: the other table keeps every version."""
    root = tmp_path / "ns"
    root.mkdir()
    outside = tmp_path / "outside.lance"
    for mode in ("create", "append", "append"):
        lance.write_dataset(pa.table({"a": [1]}), outside, mode=mode)
    (root / "t.lance").mkdir()
    (root / "t.lance" / "_versions").symlink_to(outside / "_versions", target_is_directory=True)
    shutil.copytree(outside / "data", root / "t.lance" / "data")
    time.sleep(1.1)
    report = run(Root(str(root), {}, root), *POLICY_FLAGS, "--retain", "1", "--yes")
    assert report["totals"]["versions_removed"] == 0
    assert [v["version"] for v in lance.dataset(outside).versions()] == [1, 2, 3]


def test_a_clone_read_only_for_the_clone_map_is_listed_whole(tmp_path):
    """`prune a` reads a's shallow clone b for the clone map only: b is listed whole (it gets
    no entry from a later listing), so a change to b brings a back into the next `prune a`."""
    root = tmp_path / "ns"
    root.mkdir()
    for mode in ("create", "append", "append"):
        lance.write_dataset(pa.table({"a": [1]}), root / "a.lance", mode=mode)
    lance.dataset(root / "a.lance", version=1).shallow_clone(str(root / "b.lance"), 1)
    lance.write_dataset(pa.table({"a": [2]}), root / "b.lance", mode="append")
    ns = Root(str(root), {}, root)
    time.sleep(1.1)
    run(ns, *POLICY_FLAGS, "--yes", "a")
    assert skipped(run(ns, *POLICY_FLAGS, "--yes", "a")) == {"a.lance"}
    lance.write_dataset(pa.table({"a": [3]}), root / "b.lance", mode="append")
    time.sleep(1.1)
    assert skipped(run(ns, *POLICY_FLAGS, "--yes", "a")) == set()
