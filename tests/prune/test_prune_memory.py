"""Memory bounded in the number of tables: what a prune over many tables holds per table.

The figures themselves come from `bench/bench_prune.py --memory-tables`; these tests pin the
mechanisms behind them: a bounded number of tasks in flight, the report written as it is
encoded.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.cli.output import write_json
from lancens_cli.models import Streamed
from lancens_cli.parallel import AHEAD_PER_WORKER, completed_map, ordered, ordered_chain
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import TablePlan
from lancens_cli.service.prune.report import PruneReport, TableResult
from lancens_cli.service.prune.result_log import ResultLog


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(), max_size=200), st.integers(min_value=1, max_value=8))
def test_every_item_is_handed_on_once_with_its_position(items, workers):
    found = sorted(completed_map(lambda x: x * 2, items, workers))
    assert found == [(i, x * 2) for i, x in enumerate(items)]
    assert list(ordered(lambda x: x * 2, items, workers)) == [x * 2 for x in items]
    # every item's results, several each (or none), item after item
    chained = ordered_chain(lambda x: [x] * (x % 3), items, workers)
    assert list(chained) == [x for x in items for _ in range(x % 3)]


def test_a_chain_stopped_early_starts_no_more_items_and_gathers_a_bounded_few():
    started: list[int] = []
    lock = threading.Lock()

    def work(item: int) -> list[int]:
        with lock:
            started.append(item)
        time.sleep(0.2 if item == 0 else 0.001)  # the first is slow: the rest wait behind it
        return [item, item]

    chain = ordered_chain(work, list(range(1_000)), 2)
    assert [next(chain), next(chain)] == [0, 0]
    chain.close()
    stopped = len(started)
    time.sleep(0.1)
    assert len(started) == stopped <= 1 + 2 * AHEAD_PER_WORKER


def test_a_few_items_per_worker_are_in_flight_however_many_there_are():
    """Started but not yet handed on: never more than the window."""
    lock = threading.Lock()
    started = 0
    consumed = 0
    most = 0

    def work(item: int) -> int:
        nonlocal started, most
        with lock:
            started += 1
            most = max(most, started - consumed)
        return item

    for _ in completed_map(work, range(5_000), 3):
        with lock:
            consumed += 1
    assert started == 5_000
    assert most <= 3 * AHEAD_PER_WORKER


def test_one_slow_item_leaves_no_worker_idle():
    """The others keep finishing while the first item takes its time."""
    release = threading.Event()

    def work(item: int) -> int:
        if item == 0:
            release.wait(timeout=30)
        return item

    seen = []
    for _, value in completed_map(work, range(200), 2):
        seen.append(value)
        if len(seen) == 199:
            release.set()
    assert seen[-1] == 0
    assert sorted(seen) == list(range(200))


def test_a_failing_item_raises_its_error_and_no_more_are_started():
    started = []

    def work(item: int) -> int:
        started.append(item)
        if item == 10:
            raise ValueError("item 10")
        return item

    with pytest.raises(ValueError, match="item 10"):
        for _ in completed_map(work, range(10_000), 2):
            pass
    assert len(started) <= 11 + 2 * AHEAD_PER_WORKER


def test_a_streamed_report_prints_what_a_whole_one_does():
    """`prune --json` writes the tables one at a time: the same document, each table compact
    on a line of its own, everything else as `json.dumps(indent=2)` writes it."""
    policy = PrunePolicy()
    report = PruneReport("file:///root", policy, False)
    for i in range(300):
        result = TableResult(f"t{i}", f"t{i}.lance", notes=[f"note {i}"])
        result.kept = [{"version": 1, "reasons": ["latest"]}]
        report.tables.append(result)
    plain = report.to_json()
    assert isinstance(plain["tables"], Streamed)
    whole = {**plain, "tables": [t.to_json() for t in report.tables]}
    out = io.StringIO()
    write_json(plain, out)
    assert json.loads(out.getvalue()) == whole
    lines = out.getvalue().splitlines()
    start = lines.index('  "tables": [')
    tables = [json.loads(line.strip().rstrip(",")) for line in lines[start + 1 : start + 301]]
    assert tables == whole["tables"] and lines[start + 301] == "  ],"
    rest = {k: v for k, v in whole.items() if k != "tables"}
    pretty = json.dumps(rest, indent=2, default=str).splitlines()
    assert [line for line in lines if not line.startswith("    {")][:4] == pretty[:4]
    assert plain["tables"][5] == report.tables[5].to_json()
    assert len(plain["tables"]) == 300


def test_an_empty_streamed_list_is_an_empty_json_list():
    out = io.StringIO()
    write_json({"tables": Streamed([], str)}, out)
    assert json.loads(out.getvalue()) == {"tables": []}


RESULTS = st.builds(
    TableResult,
    st.one_of(st.none(), st.text(max_size=12)),
    st.text(min_size=1, max_size=30),  # any text, newlines and quotes too
    st.sampled_from(["nothing to do", "pruned", "failed", "gone"]),
    st.lists(st.integers(1, 2**40), max_size=4),
    st.dictionaries(st.text(max_size=8), st.lists(st.integers(1, 99), max_size=3), max_size=2),
    st.lists(st.integers(1, 99), max_size=3),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 2**62),
    st.lists(
        st.fixed_dictionaries(
            {"version": st.integers(1, 99), "reasons": st.lists(st.text(max_size=20))}
        ),
        max_size=3,
    ),
    st.lists(st.text(max_size=40), max_size=3),
    st.one_of(st.none(), st.text(max_size=40)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(RESULTS, max_size=40))
def test_the_result_log_gives_back_every_result_in_order_however_it_is_read(results):
    log = ResultLog()
    for result in results:
        log.append(result)
    wanted = [r.to_json() for r in results]
    assert len(log) == len(results)
    assert [r.to_json() for r in log] == wanted
    assert [r.to_json() for r in log] == wanted  # read again from the start
    # two readings at once (a view counting while the report prints) keep their own places
    pairs = [(a.to_json(), len([b for b in log])) for a in log]
    assert pairs == [(w, len(results)) for w in wanted]


def test_the_result_log_writes_blocks_and_reads_back_while_it_grows():
    """Past a block of lines the log writes them out; a reading started meanwhile gives back
    what was appended before it, and a new one everything, in order."""
    from lancens_cli.service.prune.result_log import BLOCK

    log = ResultLog()
    note = "x" * 500
    many = BLOCK // 400 * 3  # three blocks and more of lines
    for i in range(many // 2):
        log.append(TableResult(f"t{i}", f"t{i}.lance", notes=[note]))
    early = iter(log)
    first = next(early)
    for i in range(many // 2, many):
        log.append(TableResult(f"t{i}", f"t{i}.lance", notes=[note]))
    assert log._end > BLOCK  # written out as it grew, not only when read
    assert [first.location] + [r.location for r in early] == [
        f"t{i}.lance" for i in range(many // 2)
    ]
    assert [r.location for r in log] == [f"t{i}.lance" for i in range(many)]


def test_a_prune_run_holds_only_the_results_in_flight(tmp_path, monkeypatch, new_objects):
    """The tables' results go to the run's `ResultLog` as each table is done, and each table
    is planned as its work starts: whenever a result is written, no more results or plans
    than the tables in flight are held in memory, not all of them."""
    import lance
    import pyarrow as pa

    from lancens_cli.models import Identifier
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.prune import run as prune_run

    tables = 48
    for i in range(tables):
        for mode in ("create", "append"):
            lance.write_dataset(pa.table({"a": [i]}), tmp_path / f"t{i:02d}.lance", mode=mode)
    held: list[int] = []
    plans: list[int] = []
    real_append = ResultLog.append

    def counting_append(self, result):
        held.append(new_objects(TableResult))
        plans.append(new_objects(TablePlan))
        real_append(self, result)

    monkeypatch.setattr(ResultLog, "append", counting_append)
    ns = Namespace.from_properties({"root": str(tmp_path)})
    policy = PrunePolicy(older_than=timedelta(0), grace=timedelta(0), force=True)
    # one worker finishes its tables in order: nothing waits behind a slower one
    report = prune_run.prune(ns, [Identifier(())], policy, parallel=1)
    assert len(held) == tables
    assert max(held) <= AHEAD_PER_WORKER + 2  # the window of in-flight tables, and this one
    assert max(plans) <= AHEAD_PER_WORKER + 2
    assert sorted(t.location for t in report.tables) == [f"t{i:02d}.lance" for i in range(tables)]
    assert report.totals()["versions_removed"] == tables


def test_results_stay_in_memory_when_the_temporary_directory_cannot_take_them(
    tmp_path, monkeypatch
):
    """No temporary directory at all, or one that fills up halfway: every result is still
    given back, in order."""
    results = [TableResult(f"t{i}", f"t{i}.lance", notes=[f"n{i}"]) for i in range(6)]

    full = ResultLog()
    for result in results[:3]:
        full.append(result)
    real_pwrite = os.pwrite
    calls = []

    def filling_up(fd, data, offset):
        """The disk fills up in the middle of a line: part of it is written, then no more."""
        calls.append(offset)
        if len(calls) == 1:
            return real_pwrite(fd, data[: len(data) // 2], offset)
        raise OSError(28, "No space left on device")

    assert [r.to_json() for r in full] == [r.to_json() for r in results[:3]]  # written
    monkeypatch.setattr(os, "pwrite", filling_up)
    for result in results[3:]:
        full.append(result)
    read_while_full = [r.to_json() for r in full]  # the pending lines are written: they fail
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert len(calls) == 2  # half the lines, then the failure: all went to memory
    assert read_while_full == [r.to_json() for r in results]
    full.append(TableResult("t6", "t6.lance"))
    assert [r.location for r in full] == [f"t{i}.lance" for i in range(7)]
    assert len(full) == 7

    def no_space(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tempfile.TemporaryFile", no_space)
    none = ResultLog()
    for result in results:
        none.append(result)
    assert [r.to_json() for r in none] == [r.to_json() for r in results]


def test_a_prune_without_a_usable_temporary_directory_reports_every_table(tmp_path, monkeypatch):
    """No temporary file can be made (a read-only or full temporary directory): the run is
    the same, its report whole."""
    import lance
    import pyarrow as pa
    from helpers import Root, invoke

    root = tmp_path / "ns"
    for i in range(3):
        for mode in ("create", "append"):
            lance.write_dataset(pa.table({"a": [i]}), root / f"t{i}.lance", mode=mode)
    time.sleep(1.1)
    ns = Root(str(root), {}, root)

    def read_only(*_args, **_kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("tempfile.TemporaryFile", read_only)
    result = invoke(*ns.args, "--json", "prune", "--older-than", "1s", "--force", "--yes")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert [t["location"] for t in report["tables"]] == [f"t{i}.lance" for i in range(3)]
    assert report["totals"]["versions_removed"] == 3
