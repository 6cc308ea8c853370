"""`prune`'s bad input is refused before anything on disk changes (the lease included)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import invoke, tree_snapshot


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
