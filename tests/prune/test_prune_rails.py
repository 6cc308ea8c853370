"""`prune`'s rails and debris: bad input is refused before anything on disk changes (the lease
included); the debris `check` reports past the grace is what prune removes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke, tree_snapshot


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "ns"
    path.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "t.parquet")
    assert (
        invoke(
            "--root", str(path), "create", "table", "t", "--from", str(tmp_path / "t.parquet")
        ).exit_code
        == 0
    )
    return path


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--older-than", "1000000d"], 2, "--older-than: '1000000d' is out of range"),
        (["--older-than", "9999999999d"], 2, "--older-than: '9999999999d' is out of range"),
        (["--grace", "99999999999999999999w"], 2, "--grace:"),
        (["--older-than", "7"], 2, "not a duration"),
        (["--retain", "0"], 2, "--retain"),
        (["nosuch"], 3, "does not exist"),
        (["t.nested"], 3, "does not exist"),
    ],
)
def test_bad_input_changes_nothing_on_disk(root, args, code, words):
    before = tree_snapshot(root)
    result = invoke("--root", str(root), "prune", "--yes", *args)
    assert result.exit_code == code, result.stderr
    assert words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert tree_snapshot(root) == before


def test_a_root_table_write_that_never_committed_is_removed_past_the_grace(root):
    import json
    import os

    ghost = root / "ghost.lance" / "data"
    ghost.mkdir(parents=True)
    (ghost / "0.lance").write_bytes(b"never committed")
    for path in (ghost / "0.lance", ghost, ghost.parent):
        os.utime(path, (1e9, 1e9))  # long past the grace
    checked = json.loads(invoke("--root", str(root), "check", "--json").stdout)
    assert [f["code"] for f in checked["findings"]] == ["abandoned_table_write"]
    result = invoke("--root", str(root), "prune", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    debris = json.loads(result.stdout)["debris"]
    assert [(d["code"], d["action"]) for d in debris] == [("abandoned_table_write", "deleted")]
    assert not (root / "ghost.lance").exists()
    assert invoke("--root", str(root), "check").exit_code == 0


@pytest.mark.s3
def test_on_s3_the_sweep_removes_a_killed_appends_file(s3_bucket, s3_options, tmp_path):
    """The unreferenced data file a killed append leaves, by the object's own timestamp."""
    import json

    import lance

    args = ["--root", f"s3://{s3_bucket}/ns", *[f"-s{k}={v}" for k, v in s3_options.items()]]
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "t.parquet")
    assert invoke(*args, "init").exit_code == 0
    assert (
        invoke(*args, "create", "table", "t", "--from", str(tmp_path / "t.parquet")).exit_code == 0
    )
    uri = f"s3://{s3_bucket}/ns/t.lance"
    options = {k: str(v) for k, v in s3_options.items()}
    lance.fragment.write_fragments(pa.table({"id": [3]}), uri, storage_options=options)  # no commit
    result = invoke(*args, "prune", "--yes", "--grace", "0s", "--force", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["totals"]["unreferenced_removed"] == 1
    names = {
        f.path
        for f in lance.dataset(uri, storage_options=options).get_fragments()[0].metadata.files
    }
    assert len(names) == 1
    assert lance.dataset(uri, storage_options=options).to_table().num_rows == 2
    again = json.loads(invoke(*args, "check", "--json", "--grace-minutes", "0").stdout)
    assert again["findings"] == [], again["findings"]


@pytest.mark.parametrize("appends", [0, 2])
def test_locally_the_sweep_removes_a_killed_appends_file_past_the_grace_only(root, appends):
    """A table without tags is planned from its own listing and latest manifest: the sweep
    must still find the file a killed append left in `data/`, with or without old versions
    expired in the same run, and leave it while it is younger than the grace."""
    import json

    import lance

    uri = str(root / "t.lance")
    for i in range(appends):
        lance.write_dataset(pa.table({"id": [10 + i]}), uri, mode="append")
    rows = lance.dataset(uri).to_table().num_rows
    lance.fragment.write_fragments(pa.table({"id": [3]}), uri)  # written, never committed
    young = invoke("--root", str(root), "prune", "--yes", "--json", "--older-than", "0s", "--force")
    assert young.exit_code == 0, young.stderr
    assert json.loads(young.stdout)["totals"]["unreferenced_removed"] == 0
    assert len(list((root / "t.lance" / "data").iterdir())) == appends + 2
    old = invoke(
        "--root", str(root), "prune", "--yes", "--json", "--grace", "0s", "--force",
        "--older-than", "0s", "--full",
    )  # fmt: skip
    assert old.exit_code == 0, old.stderr
    assert json.loads(old.stdout)["totals"]["unreferenced_removed"] == 1
    ds = lance.dataset(uri)
    kept = {f.path for fr in ds.get_fragments() for f in fr.metadata.files}
    assert {p.name for p in (root / "t.lance" / "data").iterdir()} == kept
    assert ds.to_table().num_rows == rows
