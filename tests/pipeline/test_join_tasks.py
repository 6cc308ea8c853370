"""How `join` spreads its partition groups over Spark tasks (pipeline/join_tasks.pack)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lancens_cli.pipeline.join_tasks import pack


@given(sizes=st.lists(st.integers(0, 10**9), max_size=60), tasks=st.integers(1, 12))
def test_every_group_runs_once_and_no_task_is_loaded_past_the_largest_group(sizes, tasks):
    packed = pack(sizes, tasks)
    assert sorted(i for p in packed for i in p) == list(range(len(sizes)))
    assert len(packed) == min(tasks, len(sizes)) and all(packed)
    assert all(p == sorted(p) for p in packed)
    if sizes:
        loads = [sum(max(sizes[i], 1) for i in p) for p in packed]
        even = sum(max(s, 1) for s in sizes) / len(packed)
        assert max(loads) <= even + max(max(s, 1) for s in sizes)  # greedy's bound


def test_a_skewed_group_gets_a_task_of_its_own():
    # one partition holding most rows (a skewed identity partition) and many small ones
    sizes = [5_000_000] + [100_000] * 20
    packed = pack(sizes, 2)
    assert [0] in packed
    assert pack([], 4) == []
