"""The Lance session prune's opens share (store/lance_session.py) holds nothing it read: a
version removed and committed again under the same file name reads as it is now."""

from __future__ import annotations

import lance
import pyarrow as pa

from lancens_cli.store.lance_session import shared_session


def test_a_version_written_again_under_the_same_name_reads_anew(tmp_path):
    uri = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"id": [1]}), uri)
    lance.write_dataset(pa.table({"id": [2]}), uri, mode="append")
    first = lance.dataset(uri, session=shared_session())
    assert first.version == 2 and sorted(first.to_table()["id"].to_pylist()) == [1, 2]
    newest = min((uri / "_versions").glob("*.manifest"))  # V2 names count down
    newest.unlink()  # as prune removes a dead write's version
    lance.write_dataset(pa.table({"id": [3, 4]}), uri, mode="append")  # version 2 again
    again = lance.dataset(uri, session=shared_session())
    assert again.version == 2
    assert sorted(again.to_table()["id"].to_pylist()) == [1, 3, 4]
    assert shared_session() is shared_session()
