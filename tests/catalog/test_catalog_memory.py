"""What a catalog-wide step holds in Arrow memory: measured by a counting memory pool, not by
the process's size, so the figures are the same on any machine.

At a million rows every copy of a column is tens of MiB: the location verdicts of `ls`,
`describe` and every command that opens a table must judge the rows where they lie, holding
only what the judgement itself needs (a sorted copy of the plain locations to find repeats),
and keep nothing of a row they accepted by its spelling.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.service.namespace import Namespace
from lancens_cli.store import arrow_text
from lancens_cli.store.row_verdicts import RowLocations

ROWS = 50_000


@contextmanager
def counted_pool() -> Iterator[Callable[[], tuple[int, int]]]:
    """Arrow's default pool, counted while the block runs: yields a function that gives the
    bytes held now (beyond those held at the start) and the most held at once."""
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    pa.set_memory_pool(pool)
    try:
        yield lambda: (pool.bytes_allocated(), pool.max_memory())
    finally:
        pa.set_memory_pool(previous)


def partitioned_rows(n: int) -> pa.Table:
    """A partitioned root's rows: each partition table below a namespace of its own."""
    ids, kinds, locations = [], [], []
    for i in range(n):
        name = f"v1$p{i:015d}"
        ids += [name, f"{name}$dataset"]
        kinds += ["namespace", "table"]
        locations += [None, f"{i:08x}_{name}$dataset"]
    return pa.table({"object_id": ids, "object_type": kinds, "location": locations})


def flat_rows(n: int) -> pa.Table:
    """A flat root's rows: every one a table at `<name>.lance`."""
    names = [f"table_{i:010d}" for i in range(n)]
    return pa.table(
        {
            "object_id": names,
            "object_type": ["table"] * n,
            "location": [f"{name}.lance" for name in names],
        }
    )


@pytest.mark.parametrize("make", [partitioned_rows, flat_rows], ids=["partitioned", "flat"])
def test_the_location_verdicts_copy_no_rows(tmp_path, make, monkeypatch):
    rows = make(ROWS)
    locations = rows.column("location").nbytes
    ns = Namespace.from_properties({"root": str(tmp_path)})
    # the sorted locations are compared in as many slices as at a million rows
    monkeypatch.setattr(arrow_text, "REPEATS_AT_ONCE", ROWS // 16)
    with counted_pool() as held:
        verdicts = RowLocations(ns.storage, rows)
        kept, most = held()
        assert verdicts.by_spelling_alone and not verdicts.refused
        del verdicts  # its arrays go back to the counted pool while it is still the default
    # the rows accepted as they are, kept as masks over the columns they already are
    assert kept < locations / 20, f"{kept} bytes kept of {locations} bytes of locations"
    # the plain locations, their order and a slice of them sorted: never a copy of the rows,
    # nor a sorted copy of every location
    assert most < 1.6 * locations, f"{most} bytes at once for {locations} bytes of locations"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.none() | st.sampled_from(["a", "b", "c", "ab", "é", "", "v1$x"]), max_size=40),
    st.integers(1, 5),
)
def test_repeats_found_a_slice_at_a_time_are_every_repeat(values, at_once):
    """However the sorted order is cut (slices of `at_once`, overlapping by one), and
    whether the values were read as one array or in chunks, each value is given once for
    each time it is there again, as counting them says; NULLs repeat nothing."""
    array = pa.array(values, pa.string())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrow_text, "REPEATS_AT_ONCE", at_once)
        found = arrow_text.sorted_repeats(array, pc.sort_indices(array)).to_pylist()
        chunked = pa.chunked_array([array[:3], array[3:]], pa.string())  # as a column is read
        one = arrow_text.contiguous(chunked)
        in_chunks = arrow_text.sorted_repeats(one, pc.sort_indices(one)).to_pylist()
    counts = Counter(v for v in values if v is not None)
    assert Counter(found) == Counter({v: n - 1 for v, n in counts.items() if n > 1})
    assert Counter(in_chunks) == Counter(found)
