"""What a killed `create table` leaves behind, and how a rerun and `check --fix` deal with it.

The debris is made the way a killed writer makes it: Lance data files written with
`lance.fragment.write_fragments` and no version committed.
"""

from __future__ import annotations

import os
import time

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import invoke, tree_snapshot


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


def test_rerun_writes_over_a_root_write_that_never_committed(local_root, orders):
    old_files = _debris(local_root.local_path / "orders.lance")
    _age(local_root.local_path / "orders.lance", 120)
    listed = invoke(*local_root.args, "ls", "--json").json()
    assert [(e["id"], e["state"]) for e in listed["entries"]] == [("orders", "not a Lance table")]

    result = invoke(*local_root.args, "create", "table", "orders", "--from", orders)
    assert result.exit_code == 0, result.stderr
    table = lance.dataset(str(local_root.local_path / "orders.lance"))
    assert table.count_rows() == 1000
    files = set(os.listdir(local_root.local_path / "orders.lance" / "data"))
    assert not files & old_files, "the dead write's files are removed once the table commits"
    assert {f.path for frag in table.get_fragments() for f in frag.data_files()} == files
    assert invoke(*local_root.args, "check").exit_code == 0


def test_fresh_debris_may_be_a_racer_and_is_left_alone(local_root, orders):
    """A file younger than a minute may belong to a racer still writing: the winner leaves it
    (unreferenced, harmless) rather than failing that racer with an I/O error."""
    fresh = _debris(local_root.local_path / "orders.lance")
    result = invoke(*local_root.args, "create", "table", "orders", "--from", orders)
    assert result.exit_code == 0, result.stderr
    table = lance.dataset(str(local_root.local_path / "orders.lance"))
    assert table.count_rows() == 1000
    files = set(os.listdir(local_root.local_path / "orders.lance" / "data"))
    referenced = {f.path for frag in table.get_fragments() for f in frag.data_files()}
    assert files == referenced | fresh and not referenced & fresh


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


def test_failing_input_removes_only_its_own_files_from_a_shared_directory(local_root, tmp_path):
    """A root `<name>.lance` may hold a racer's files: a failed write takes away its own only."""
    target = local_root.local_path / "orders.lance"
    racer_files = _debris(target)
    bad = tmp_path / "late.csv"
    good_rows = "".join(f"{i},{i}\n" for i in range(200_000))
    bad.write_text("a,b\n" + good_rows + "1\n")
    result = invoke(*local_root.args, "create", "table", "orders", "--from", str(bad))
    assert result.exit_code == 2, result.stderr
    assert set(os.listdir(target / "data")) == racer_files


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
