"""What a catalog-wide step holds in Arrow memory: measured by a counting memory pool, not by
the process's size, so the figures are the same on any machine.

At a million rows every copy of a column is tens of MiB: the location verdicts of `ls`,
`describe` and every command that opens a table must judge the rows where they lie, holding
only what the judgement itself needs (a sorted copy of the plain locations to find repeats),
and keep nothing of a row they accepted by its spelling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa
import pytest

from lancens_cli.service.namespace import Namespace
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
def test_the_location_verdicts_copy_no_rows(tmp_path, make):
    rows = make(ROWS)
    locations = rows.column("location").nbytes
    ns = Namespace.from_properties({"root": str(tmp_path)})
    with counted_pool() as held:
        verdicts = RowLocations(ns.storage, rows)
        kept, most = held()
        assert verdicts.by_spelling_alone and not verdicts.refused
        del verdicts  # its arrays go back to the counted pool while it is still the default
    # the rows accepted as they are, kept as masks over the columns they already are
    assert kept < locations / 20, f"{kept} bytes kept of {locations} bytes of locations"
    # a sorted copy of the plain locations (and its order): never a copy of the rows
    assert most < 2.5 * locations, f"{most} bytes at once for {locations} bytes of locations"
