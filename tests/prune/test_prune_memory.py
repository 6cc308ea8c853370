"""Memory bounded in the number of tables: what a prune over many tables holds per table.

The figures themselves come from `bench/bench_prune.py --memory-tables`; these tests pin the
mechanisms behind them: a bounded number of tasks in flight, the report written as it is
encoded.
"""

from __future__ import annotations

import io
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.cli.output import write_json
from lancens_cli.models import Streamed
from lancens_cli.parallel import AHEAD_PER_WORKER, completed_map, in_order
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.report import PruneReport, TableResult


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(), max_size=200), st.integers(min_value=1, max_value=8))
def test_every_item_is_handed_on_once_with_its_position(items, workers):
    found = sorted(completed_map(lambda x: x * 2, items, workers))
    assert found == [(i, x * 2) for i, x in enumerate(items)]
    assert in_order(lambda x: x * 2, items, workers) == [x * 2 for x in items]


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
    """`prune --json` writes the tables one at a time: the same document, byte for byte."""
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
    assert out.getvalue() == json.dumps(whole, indent=2, default=str) + "\n"
    assert plain["tables"][5] == report.tables[5].to_json()
    assert len(plain["tables"]) == 300


def test_an_empty_streamed_list_is_an_empty_json_list():
    out = io.StringIO()
    write_json({"tables": Streamed([], str)}, out)
    assert json.loads(out.getvalue()) == {"tables": []}
