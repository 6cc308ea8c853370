"""How `join` spreads its partition groups over Spark tasks (pipeline/join_tasks.pack)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.pipeline.join_tasks import hash_join, pack


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


# --- the join a task runs, against DuckDB -------------------------------------------------------

KEY_TYPES = {
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "string": (pa.string(), st.text(max_size=3)),
    "date": (pa.date32(), st.dates()),
    "large_string": (pa.large_string(), st.text(max_size=3)),
    "binary": (pa.binary(), st.binary(max_size=3)),
    "timestamp": (pa.timestamp("us"), st.datetimes()),
    "float64": (pa.float64(), st.floats(allow_nan=False, width=32)),
}


def _table(draw, names: list[str], key_type: str, rows: int, keys: list) -> pa.Table:
    kind, _ = KEY_TYPES[key_type]
    key = pa.array([draw(st.sampled_from(keys)) for _ in range(rows)], kind)
    other = pa.array(
        [draw(st.one_of(st.none(), st.floats(allow_nan=False))) for _ in range(rows)], pa.float64()
    )
    return pa.table({names[0]: key, names[1]: other})


@st.composite
def two_sides(draw):
    key_type = draw(st.sampled_from(sorted(KEY_TYPES)))
    _, values = KEY_TYPES[key_type]
    keys = [None, *draw(st.lists(values, min_size=1, max_size=5))]  # duplicates and NULLs
    left = _table(draw, ["Key.Left", "value"], key_type, draw(st.integers(0, 30)), keys)
    if draw(st.booleans()):  # a dimension table: each key once (and any number of NULLs)
        unique = draw(st.lists(values, max_size=8, unique=True))
        nulls = [None] * draw(st.integers(0, 2))
        order = draw(st.permutations(unique + nulls))
        right = pa.table(
            {
                "KEY r": pa.array(order, KEY_TYPES[key_type][0]),
                "Score": pa.array([float(i) for i in range(len(order))]),
            }
        )
    else:
        right = _table(draw, ["KEY r", "Score"], key_type, draw(st.integers(0, 30)), keys)
    return left, right


@settings(max_examples=150, deadline=None)
@given(sides=two_sides(), how=st.sampled_from(["inner", "left"]))
def test_a_groups_join_equals_duckdbs(sides, how):
    """Every key type, NULL keys (matching nothing), duplicate keys on both sides or unique
    ones on the right (a dimension table), and column names SQL would misread (a dot,
    capitals, a space)."""
    left, right = sides
    joined = hash_join(left, right, ["Key.Left"], ["KEY r"], how)
    assert joined.column_names == ["Key.Left", "value", "KEY r", "Score"]
    assert joined.schema == pa.schema([*left.schema, *right.schema])
    connection = duckdb.connect()
    connection.register("l", left)
    connection.register("r", right)
    kind = "INNER" if how == "inner" else "LEFT"
    sql = f'SELECT l.*, r.* FROM l {kind} JOIN r ON l."Key.Left" = r."KEY r"'
    expected = connection.execute(sql).fetchall()
    assert _multiset(joined) == sorted(repr(row) for row in expected)


def _multiset(table) -> list[str]:
    return sorted(repr(tuple(row.values())) for row in table.to_pylist())


def _tables_held(context) -> set[str]:
    catalog = context.catalog()
    return {table for schema in catalog.names() for table in catalog.schema(schema).names()}


def test_the_reused_join_context_keeps_no_rows_and_survives_a_failed_join(monkeypatch):
    """Each thread keeps one DataFusion context for all its groups' joins: it must hold none
    of a join's rows afterwards, and a join that fails, at any step, must not break the next."""
    from lancens_cli.pipeline.join_tasks import _join_context

    left = pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]})
    right = pa.table({"k": [2, 3, 4], "w": [20.0, 30.0, 40.0]})
    assert hash_join(left, right, ["k"], ["k"], "inner").num_rows == 2
    context = _join_context()
    assert _tables_held(context) == set()

    mismatched = pa.table({"k": [[1], [2]], "w": [1.0, 2.0]})  # a list key DataFusion refuses
    with pytest.raises(Exception, match="DataFusion"):  # after both sides were registered
        hash_join(left, mismatched, ["k"], ["k"], "inner")
    assert _tables_held(context) == set()

    real, calls = context.from_arrow, []

    def right_side_fails(data, name=None):  # the left side registered, the right one not
        calls.append(name)
        if len(calls) == 2:
            raise MemoryError("the right side did not fit")
        return real(data, name=name)

    monkeypatch.setattr(context, "from_arrow", right_side_fails)
    with pytest.raises(MemoryError):
        hash_join(left, right, ["k"], ["k"], "inner")
    monkeypatch.undo()
    assert len(calls) == 2 and _tables_held(context) == set()

    joined = hash_join(left, right, ["k"], ["k"], "left")
    assert sorted(joined.column("w").to_pylist(), key=str) == [20.0, 30.0, None]
    assert _join_context() is context
