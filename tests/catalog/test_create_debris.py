"""What a killed `create table` leaves behind, and how a rerun and `check --fix` deal with it.

The debris is made the way a killed writer makes it: Lance data files written with
`lance.fragment.write_fragments` and no version committed. `create` never deletes a file it did
not write: a rerun over debris exits 4 and says that `check --fix` removes it after the grace.
"""

from __future__ import annotations

import os
import time

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke, tree_snapshot


def _debris(path) -> set[str]:
    """Data files of a write that died before its commit; returns their names."""
    lance.fragment.write_fragments(pa.table({"id": list(range(50))}), str(path))
    assert not (path / "_versions").exists()
    return set(os.listdir(path / "data"))


@pytest.fixture
def orders(tmp_path):
    path = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"id": list(range(1000)), "v": [float(i) for i in range(1000)]}), path)
    return str(path)


def _age(path, seconds: int) -> None:
    past = time.time() - seconds
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            os.utime(os.path.join(dirpath, name), (past, past))


def test_rerun_refuses_a_root_write_that_never_committed_until_check_fix(local_root, orders):
    """A rerun of a killed root create touches nothing and says how to go on; `check --fix`
    deletes the debris once older than the grace period, and the next rerun creates the table."""
    old_files = _debris(local_root.local_path / "orders.lance")
    _age(local_root.local_path / "orders.lance", 120)
    listed = invoke(*local_root.args, "ls", "--json").json()
    assert [(e["id"], e["state"]) for e in listed["entries"]] == [("orders", "uncommitted write")]

    before = tree_snapshot(local_root.local_path)
    result = invoke(*local_root.args, "create", "table", "orders", "--from", orders)
    assert result.exit_code == 4, result.stderr
    assert "check --fix" in result.stderr and "--grace-minutes" in result.stderr
    assert tree_snapshot(local_root.local_path) == before

    # two minutes old: within the default grace (an hour) it might be a write in flight
    kept = invoke(*local_root.args, "check", "--fix", "--json")
    assert kept.exit_code == 1 and not kept.json()["findings"][0]["fixed"]
    assert set(os.listdir(local_root.local_path / "orders.lance" / "data")) == old_files
    fixed = invoke(*local_root.args, "check", "--fix", "--grace-minutes", "1")
    assert fixed.exit_code == 0, fixed.stdout
    assert not (local_root.local_path / "orders.lance").exists()

    result = invoke(*local_root.args, "create", "table", "orders", "--from", orders)
    assert result.exit_code == 0, result.stderr
    table = lance.dataset(str(local_root.local_path / "orders.lance"))
    assert table.count_rows() == 1000
    files = set(os.listdir(local_root.local_path / "orders.lance" / "data"))
    assert {f.path for frag in table.get_fragments() for f in frag.data_files()} == files
    assert invoke(*local_root.args, "check").exit_code == 0


def test_fresh_debris_may_be_a_racer_and_is_left_alone(local_root, orders):
    """Files younger than the grace may belong to a writer still at work: `create` refuses the
    name without touching them, and `check --fix` keeps them."""
    fresh = _debris(local_root.local_path / "orders.lance")
    before = tree_snapshot(local_root.local_path)
    result = invoke(*local_root.args, "create", "table", "orders", "--from", orders)
    assert result.exit_code == 4, result.stderr
    assert invoke(*local_root.args, "check", "--fix", "--grace-minutes", "1").exit_code == 1
    assert tree_snapshot(local_root.local_path) == before
    assert set(os.listdir(local_root.local_path / "orders.lance" / "data")) == fresh


@pytest.mark.parametrize(
    "extra", ["readme.txt", ".lance-reserved", ".lance-deregistered", "_versions/1.manifest"]
)
def test_a_directory_with_anything_more_is_not_written_over(local_root, orders, extra):
    target = local_root.local_path / "orders.lance"
    _debris(target)
    (target / extra).parent.mkdir(parents=True, exist_ok=True)
    (target / extra).write_text("kept")
    before = tree_snapshot(local_root.local_path)
    result = invoke(*local_root.args, "create", "table", "orders", "--from", orders)
    if extra == ".lance-deregistered":
        # a forgotten directory is not the table: the new one gets a V2 directory
        assert result.exit_code == 0, result.stderr
        assert {p: b for p, b in tree_snapshot(local_root.local_path).items() if p in before} == (
            before
        )
    else:
        assert result.exit_code == 4, result.stderr
        assert "already exists" in result.stderr
        assert tree_snapshot(local_root.local_path) == before


def test_failing_input_removes_only_its_own_files_from_a_shared_directory(
    local_root, tmp_path, monkeypatch
):
    """A root `<name>.lance` may receive a racer's files while we write: a failed write takes
    away its own only. (The racer's files are put there once our create has checked the name.)"""
    import lancens_cli.service.catalog.create as create_module

    target = local_root.local_path / "orders.lance"
    real_write = create_module.write_new_table
    racer_files: set[str] = set()

    def racer_arrives_first(storage, location, data, **kwargs):
        racer_files.update(_debris(target))
        return real_write(storage, location, data, **kwargs)

    monkeypatch.setattr(create_module, "write_new_table", racer_arrives_first)
    # streamed, as a CSV over 256 MiB is, so that the bad row fails the write midway
    monkeypatch.setattr("lancens_cli.store.csv_rows.TYPED_WHOLE", 0)
    bad = tmp_path / "late.csv"
    good_rows = "".join(f"{i},{i}\n" for i in range(200_000))
    bad.write_text("a,b\n" + good_rows + "1\n")
    result = invoke(*local_root.args, "create", "table", "orders", "--from", str(bad))
    assert result.exit_code == 2, result.stderr
    assert racer_files and set(os.listdir(target / "data")) == racer_files


def test_check_fix_deletes_abandoned_v2_writes_and_keeps_committed_orphans(local_root, orders):
    assert invoke(*local_root.args, "create", "namespace", "sales").exit_code == 0
    abandoned = local_root.local_path / "0badf00d_sales$lost"
    _debris(abandoned)
    committed = local_root.local_path / "0badcafe_sales$found"
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), str(committed))

    report = invoke(*local_root.args, "check", "--json").json()
    codes = {f["location"]: f["code"] for f in report["findings"]}
    assert codes == {
        abandoned.name: "abandoned_table_write",
        committed.name: "orphan_table_directory",
    }
    # younger than the grace: might be a create in flight, so it stays
    fixed = invoke(*local_root.args, "check", "--fix", "--json").json()
    assert abandoned.exists()
    assert {f["location"] for f in fixed["findings"] if f.get("fixed")} == {committed.name}

    _age(abandoned, 7200)
    assert invoke(*local_root.args, "check", "--fix").exit_code == 0
    assert not abandoned.exists()
    assert committed.exists()
    assert invoke(*local_root.args, "check").exit_code == 0
    listed = invoke(*local_root.args, "ls", "sales", "--json").json()
    assert [e["id"] for e in listed["entries"]] == ["sales.found"]
