"""Table versions opened once and lent to one thread at a time (store/opened_versions.py)."""

from __future__ import annotations

import threading
import time

import lance
import pyarrow as pa

from lancens_cli.config import NamespaceConfig
from lancens_cli.store import tables
from lancens_cli.store.opened_versions import OpenedVersions
from lancens_cli.store.storage import Storage


def _opens_counted(monkeypatch) -> list[tuple[str, object]]:
    opened: list[tuple[str, object]] = []
    real = tables.open_table

    def counted(storage, location, version=None):
        opened.append((location, version))
        return real(storage, location, version)

    monkeypatch.setattr(tables, "open_table", counted)
    return opened


def test_a_version_is_opened_once_lent_to_one_thread_at_a_time_and_bounded(tmp_path, monkeypatch):
    lance.write_dataset(pa.table({"x": [1, 2]}), tmp_path / "t.lance")
    lance.write_dataset(pa.table({"x": [3]}), tmp_path / "t.lance", mode="append")
    storage = Storage(NamespaceConfig(root="file://" + str(tmp_path)))
    opened = _opens_counted(monkeypatch)
    versions = OpenedVersions(most=2)

    with versions.lent(storage, "t.lance", 1, None) as first:
        assert first.count_rows() == 2
        # asked again while this thread holds it: another dataset, never the one lent
        with versions.lent(storage, "t.lance", 1, None) as second:
            assert second is not first and second.count_rows() == 2
    with versions.lent(storage, "t.lance", 1, None) as again:
        assert again in (first, second)
    assert opened == [("t.lance", 1), ("t.lance", 1)]

    held: list[object] = []

    def lend_in_a_thread() -> None:
        with versions.lent(storage, "t.lance", 2, None) as dataset:
            held.append(dataset)
            assert dataset.count_rows() == 3

    worker = threading.Thread(target=lend_in_a_thread)
    worker.start()
    worker.join()
    with versions.lent(storage, "t.lance", 2, None) as other:
        assert other is held[0]  # given back by the thread, lent here without opening it
    assert len(opened) == 3
    # two of version 1 at once: one waited, one more is opened; all three are given back,
    # and at most two wait to be lent: version 2, the least recently given back, went
    with versions.lent(storage, "t.lance", 1, None), versions.lent(storage, "t.lance", 1, None):
        pass
    assert len(opened) == 4
    with versions.lent(storage, "t.lance", 2, None):
        pass
    assert opened[-1] == ("t.lance", 2) and len(opened) == 5
    # none is lent a minute after it was opened, however often it was lent since
    clock = [time.monotonic() + 61]  # the datasets kept so far: too old
    monkeypatch.setattr(versions, "_clock", lambda: clock[0])
    with versions.lent(storage, "t.lance", 2, None):
        pass
    assert len(opened) == 6
    for _ in range(3):
        clock[0] += 25
        with versions.lent(storage, "t.lance", 2, None):
            pass
    assert len(opened) == 7  # lent at +25 s and +50 s, opened anew at +75 s
    # another user's storage options are another key
    other = Storage(NamespaceConfig(root="file://" + str(tmp_path), storage_options={"x": "1"}))
    with versions.lent(other, "t.lance", 2, None):
        pass
    assert len(opened) == 8


def test_a_version_lent_for_longer_than_a_minute_is_opened_anew_behind_a_fresh_one(
    tmp_path, monkeypatch
):
    """A dataset given back long after it was opened waits behind a fresher one of another
    version: asked for, it is found too old and dropped, and the version is opened anew (a
    walk of every waiting dataset once failed here, changed while it walked)."""
    lance.write_dataset(pa.table({"x": [1, 2]}), tmp_path / "t.lance")
    lance.write_dataset(pa.table({"x": [3]}), tmp_path / "t.lance", mode="append")
    storage = Storage(NamespaceConfig(root="file://" + str(tmp_path)))
    opened = _opens_counted(monkeypatch)
    clock = [0.0]
    versions = OpenedVersions(clock=lambda: clock[0])
    with versions.lent(storage, "t.lance", 1, None) as first:  # opened at 0 s
        clock[0] = 50.0
        with versions.lent(storage, "t.lance", 2, None) as fresh:  # opened at 50 s
            pass
        clock[0] = 55.0
    clock[0] = 65.0  # version 1, given back at 55 s, is too old; version 2 is not
    with versions.lent(storage, "t.lance", 1, None) as again:
        assert again is not first and again.count_rows() == 2
    with versions.lent(storage, "t.lance", 2, None) as later:
        assert later is fresh
    assert opened == [("t.lance", 1), ("t.lance", 2), ("t.lance", 1)]
