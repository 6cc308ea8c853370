"""Tables' states and lines kept in a temporary file (spill.py, service/prune/state_spill.py).

A prune or `versions` over a million tables once held every table's state (about 2 KB each)
until the clone map was known, and a prune its record's entries (the last run's and the next).
These pin what replaced that: what is read back is what was stored, however the temporary
directory behaves (none, full halfway), from several threads at once; a state holding an open
dataset is the very object stored; and a run over many tables never holds a state or a record
entry per table in memory.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.service.prune.protect import TableState
from lancens_cli.service.prune.record import Entry, Seen
from lancens_cli.service.prune.state_spill import SpilledStates
from lancens_cli.spill import SpilledList, SpilledMap, SpillFile
from lancens_cli.store.version_files import DirTimes, VersionInfo

LOCATIONS = [f"t{i}.lance" for i in range(6)] + ["ns/a/t.lance", "é.lance"]
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def states(draw: st.DrawFn) -> TableState:
    location = draw(st.sampled_from(LOCATIONS))
    versions = sorted(draw(st.sets(st.integers(1, 10**12), max_size=4)))
    infos = [VersionInfo(v, WHEN + timedelta(seconds=v % 10**6)) for v in versions]
    tags = draw(st.dictionaries(st.text(min_size=1, max_size=5), st.integers(1, 9), max_size=2))
    bases = draw(st.lists(st.sampled_from(LOCATIONS), max_size=2))
    digest = draw(st.text(max_size=8))
    dirs = DirTimes([("_versions", 5), ("data", 7)]) if draw(st.booleans()) else None
    seen = Seen(digest, None, dirs, WHEN, draw(st.integers(0, 99))) if digest else None
    recorded = None
    if draw(st.booleans()):
        recorded = Entry(digest, "p", "d", tuple(bases), None, WHEN, dirs)
    return TableState(
        location, draw(st.none() | st.text(max_size=6)), infos, tags, {}, bases,
        data_files=draw(st.none() | st.integers(0, 9)), seen=seen, recorded=recorded,
    )  # fmt: skip


def _same(a: TableState, b: TableState) -> bool:
    return a == b and dict(a.tags) == dict(b.tags) and tuple(a.bases) == tuple(b.bases)


def _fill_up_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """The temporary directory takes `writes` writes, then part of one, then no more."""
    real_pwrite = os.pwrite
    calls = []

    def filling_up(fd: int, data: bytes, offset: int) -> int:
        calls.append(offset)
        if len(calls) <= writes:
            return real_pwrite(fd, data, offset)
        if len(calls) == writes + 1:
            return real_pwrite(fd, data[: len(data) // 2], offset)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", filling_up)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["set", "del"]), states()), max_size=60),
    st.sampled_from(["file", "fills up", "no directory"]),
    st.integers(0, 3),
)
def test_stored_states_read_back_as_stored_however_the_directory_behaves(ops, disk, writes):
    """Against a dict: every state read back equals the one stored last, and what the run
    asks without reading states (base paths, recorded) agrees, after every operation."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr("lancens_cli.spill.BLOCK", 64)  # a write every state or two
        if disk == "no directory":
            monkeypatch.setattr("tempfile.TemporaryFile", _no_directory)
        stored = SpilledStates()
        if disk == "fills up":
            _fill_up_after(monkeypatch, writes)
        model: dict[str, TableState] = {}
        for op, state in ops:
            if op == "set":
                stored[state.location] = state
                model[state.location] = state
            elif state.location in model:
                del stored[state.location]
                del model[state.location]
            else:
                with pytest.raises(KeyError):
                    del stored[state.location]
            assert sorted(stored) == sorted(model) and len(stored) == len(model)
        for location, state in model.items():
            assert location in stored
            assert _same(stored[location], state)
            assert stored.bases_of(location) == tuple(state.bases)
            assert stored.is_recorded(location) == (state.recorded is not None)
        assert dict(stored.with_bases()) == {
            location: tuple(s.bases) for location, s in model.items() if s.bases
        }
        assert stored.get("absent.lance") is None and "absent.lance" not in stored
        stored.clear()
        assert len(stored) == 0 and not list(stored.with_bases())


def _no_directory(*_args: object, **_kwargs: object) -> None:
    raise OSError(30, "Read-only file system")


def test_a_state_holding_an_open_dataset_is_the_very_object_stored():
    """A handle is no file's: the state is kept as it is, and a change to it (a cleanup
    dropping the handle) is seen; stored again without it, it goes to the file."""
    handle = object()
    state = TableState("t.lance", "t", [VersionInfo(1, WHEN)], {}, {}, (), handle=handle)
    stored = SpilledStates()
    stored["t.lance"] = state
    assert stored["t.lance"] is state
    stored["t.lance"].handle = None
    assert state.handle is None
    stored["t.lance"] = state.planned()
    again = stored["t.lance"]
    assert again is not state and again.versions == () and again.location == "t.lance"


def test_states_stored_and_read_from_many_threads_at_once():
    stored = SpilledStates()
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(300):
                location = f"w{worker}/t{i}.lance"
                version = VersionInfo(i + 1, WHEN)
                stored[location] = TableState(location, None, [version], {}, {}, ())
                assert stored[f"w{worker}/t{i // 2}.lance"].location == f"w{worker}/t{i // 2}.lance"
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(stored) == 8 * 300
    assert all(stored[f"w{w}/t299.lance"].latest == 300 for w in range(8))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(max_size=30), max_size=80),
    st.sampled_from(["file", "fills up", "no directory"]),
    st.integers(0, 3),
)
def test_a_spilled_list_reads_back_every_item_in_order_as_often_as_asked(items, disk, writes):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr("lancens_cli.spill.BLOCK", 32)
        if disk == "no directory":
            monkeypatch.setattr("tempfile.TemporaryFile", _no_directory)
        kept: SpilledList[str] = SpilledList()
        if disk == "fills up":
            _fill_up_after(monkeypatch, writes)
        for item in items:
            kept.append(item)
        assert list(kept) == items and list(kept) == items
        assert len(kept) == len(items)
        assert [kept[i] for i in range(-len(items), len(items))] == items + items
        assert kept[1:5:2] == items[1:5:2]
        with pytest.raises(IndexError):
            kept[len(items)]


def test_versions_of_many_tables_never_holds_a_state_per_table(tmp_path, monkeypatch, new_objects):
    """Whenever a table's state is stored, the states alive in memory are those in flight,
    not every table's read so far; and the lines are the same without a temporary file."""
    import lance
    import pyarrow as pa
    from helpers import Root, invoke

    tables = 40
    for i in range(tables):
        for mode in ("create", "append"):
            lance.write_dataset(pa.table({"a": [i]}), tmp_path / f"t{i:02d}.lance", mode=mode)
    alive: list[int] = []
    real_set = SpilledStates.__setitem__

    def counting_set(self: SpilledStates, location: str, state: TableState) -> None:
        real_set(self, location, state)
        alive.append(new_objects(TableState))

    monkeypatch.setattr(SpilledStates, "__setitem__", counting_set)
    root = Root(str(tmp_path), {}, tmp_path)
    time.sleep(1.1)
    spilled = invoke(*root.args, "--json", "versions", "--older-than", "1s", "--force")
    assert spilled.exit_code == 0, spilled.stderr
    assert len(alive) >= 2 * tables  # read, then planned
    assert max(alive) <= 8  # the states in flight, never one per table read so far
    lines = json.loads(spilled.stdout)
    assert [t["location"] for t in lines["tables"]] == [f"t{i:02d}.lance" for i in range(tables)]
    assert lines["expiring"] == tables and all(t["expiring"] == 1 for t in lines["tables"])

    monkeypatch.setattr("tempfile.TemporaryFile", _no_directory)
    held = invoke(*root.args, "--json", "versions", "--older-than", "1s", "--force")
    assert held.exit_code == 0, held.stderr
    assert json.loads(held.stdout) == lines


@pytest.mark.parametrize("result", ["prune", "versions"])
def test_a_piped_report_is_made_a_line_at_a_time(result, monkeypatch):
    """Piped, a prune's or `versions`' lines are made as they are written: the first line
    is out before the second table is read back, and every table gives its line."""
    from lancens_cli.cli.output import plain_lines
    from lancens_cli.service.prune import result_log
    from lancens_cli.service.prune.policy import PrunePolicy
    from lancens_cli.service.prune.report import PruneReport, TableResult
    from lancens_cli.service.versions import NamespaceVersions, TableSummary

    count, read = 5_000, []
    if result == "prune":  # a run's results, as it keeps them
        log = result_log.ResultLog()
        for i in range(count):
            log.append(TableResult(f"t{i}", f"t{i}.lance"))
        real = TableResult.from_json
        monkeypatch.setattr(
            result_log.TableResult, "from_json", lambda plain: read.append(1) or real(plain)
        )
        report: Any = PruneReport("/r", PrunePolicy(), True, log)
    else:  # `versions`' lines, as it keeps them
        lines: SpilledList[TableSummary] = SpilledList()
        for i in range(count):
            lines.append(TableSummary(f"t{i}", f"t{i}.lance", 1, 0, {}, None))
        real_get = SpillFile.get
        monkeypatch.setattr(SpillFile, "get", lambda self, p: read.append(1) or real_get(self, p))
        report = NamespaceVersions(PrunePolicy(), lines)
    piped = plain_lines(report)
    assert next(piped).split("\t")[0] == "t0" and len(read) == 1
    assert sum(1 for _ in piped) == count - 1 and len(read) == count


def test_a_state_stored_again_is_never_missing_to_another_thread():
    """A table's state stored anew (read, then planned) while another thread asks whether
    the table is there (a clone's digest): the answer is always yes."""
    stored = SpilledStates()
    with_handle = TableState("c", None, [VersionInfo(1, WHEN)], {}, {}, (), handle=object())
    stored["c"] = with_handle
    done = threading.Event()

    def restore() -> None:
        while not done.is_set():  # between memory (a handle) and the file, back and forth
            stored["c"] = with_handle.planned()
            stored["c"] = with_handle

    thread = threading.Thread(target=restore)
    thread.start()
    try:
        misses = sum("c" not in stored for _ in range(50_000))
    finally:
        done.set()
        thread.join()
    assert misses == 0


def test_a_list_past_what_a_place_can_say_holds_the_rest_in_memory():
    kept: SpilledList[str] = SpilledList()
    kept.append("first")
    real_put = kept._file.put
    # as if 4 GiB were written before it: the place no longer fits 64 bits
    kept._file.put = lambda item: (real_put(item) or 0) | 1 << 64  # type: ignore[method-assign]
    kept.append("second")
    assert list(kept) == ["first", "second"] and kept[1] == "second"


KEYS = st.sampled_from(["a", "b", "ab", "t1.lance", "t2.lance", "ns/t.lance", "é", ""])


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("set"), KEYS, st.integers()),
            st.tuples(st.just("read"), KEYS, st.just(0)),
        ),
        max_size=60,
    ),
    st.sampled_from(["file", "fills up", "no directory"]),
    st.integers(0, 3),
    st.booleans(),
)
def test_a_spilled_map_answers_as_a_dict_does(ops, disk, writes, alike):
    """Against a dict, writes and reads interleaved: a key written again counts once with
    its last value; keys alike in hash (`alike`: every key's hash its length) are told
    apart; every answer is the same however the temporary directory behaves."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr("lancens_cli.spill.BLOCK", 32)
        if disk == "no directory":
            monkeypatch.setattr("tempfile.TemporaryFile", _no_directory)
        if alike:
            monkeypatch.setattr("lancens_cli.spill._hash", len)
        kept: SpilledMap[int] = SpilledMap()
        if disk == "fills up":
            _fill_up_after(monkeypatch, writes)
        model: dict[str, int] = {}
        for op, key, value in ops:
            if op == "set":
                kept[key] = value
                model[key] = value
                continue
            assert kept.get(key) == model.get(key) and (key in kept) == (key in model)
            assert len(kept) == len(model) and sorted(kept) == sorted(model)
            assert sorted(kept.pairs()) == sorted(model.items())
        assert dict(kept.items()) == model and 7 not in kept  # type: ignore[comparison-overlap]
        with pytest.raises(KeyError):
            kept["absent"]


def test_a_spilled_map_written_from_many_threads_keeps_every_write():
    kept: SpilledMap[tuple[int, int]] = SpilledMap()

    def work(worker: int) -> None:
        for i in range(500):
            kept[f"w{worker}/t{i % 400}.lance"] = (worker, i)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kept) == 8 * 400
    assert all(
        kept[f"w{w}/t{i}.lance"] == (w, i + 400 if i < 100 else i)
        for w in range(8)
        for i in range(400)
    )


def test_a_prune_record_of_many_tables_never_holds_an_entry_per_table(
    tmp_path, monkeypatch, new_objects
):
    """A run with the last run's record reads it and writes the next one without an entry
    per table alive, and still skips every unchanged table, with and without a temporary
    file."""
    import lance
    import pyarrow as pa
    from helpers import Root, invoke

    from lancens_cli.service.prune.record import PruneRecord
    from lancens_cli.service.prune.report import UNCHANGED

    tables = 30
    for i in range(tables):
        lance.write_dataset(pa.table({"a": [i]}), tmp_path / f"t{i:02d}.lance")
    alive: list[int] = []
    real_save = PruneRecord.save

    def counting_save(self: PruneRecord, storage: Any) -> None:
        alive.append(new_objects(Entry))
        real_save(self, storage)

    monkeypatch.setattr(PruneRecord, "save", counting_save)
    root = Root(str(tmp_path), {}, tmp_path)
    flags = ("--json", "prune", "--older-than", "1h", "--yes")

    def skipped() -> set[str]:
        result = invoke(*root.args, *flags)
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        return {t["location"] for t in report["tables"] if UNCHANGED in t["notes"]}

    everything = {f"t{i:02d}.lance" for i in range(tables)}
    assert skipped() == set()  # the first run leaves the record
    assert skipped() == everything
    assert len(alive) == 2 and max(alive) <= 2  # neither the record read nor the next one
    monkeypatch.setattr("tempfile.TemporaryFile", _no_directory)
    assert skipped() == everything
