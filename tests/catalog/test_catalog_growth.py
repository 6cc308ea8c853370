"""Catalog-wide steps grow linearly with the catalog: counted, not timed.

A step that compares every row with every other (the slice per row that once made `ls` of 300k
tables take minutes) shows as work that grows with the square of the rows. Each command is run
in this process on a root of N and of 4N table rows, and the Python and C function calls it
makes are counted (`sys.setprofile`): four times the rows may cost at most about four times the
calls, however fast or loaded the machine is. The rows' table directories exist (a copy each of
nothing but a folder), so that the compatibility-mode listing has them to merge too.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lancens_cli.models import Identifier
from lancens_cli.service.catalog.listing import list_namespace
from lancens_cli.service.check import check
from lancens_cli.service.namespace import Namespace
from lancens_cli.store import link_record
from lancens_cli.store.row_verdicts import RowLocations

SMALL = 1_000
GROWTH = 4
SLACK = 1.3  # a linear step's calls grow 4x; a quadratic one's 16x


def catalog(base: Path, n: int) -> Namespace:
    """A V2 root of `n` table rows, names alike in their prefixes (`t1`, `t10`, `t100`...), with
    a nested namespace's rows among them."""
    root = base / f"n{n}"
    root.mkdir()
    ns = Namespace.from_properties({"root": str(root)})
    ns.manifest.mutate(lambda snapshot, edit: None)  # an empty catalog

    def rows(snapshot, edit):
        edit.add(namespace_row("team"))
        for i in range(n):
            object_id = f"t{i}" if i % 10 else f"team$t{i}"
            location = f"t{i}.lance"
            (root / location).mkdir()
            edit.add(
                {
                    "object_id": object_id,
                    "object_type": "table",
                    "location": location,
                    "metadata": None,
                    "base_objects": None,
                }
            )

    ns.manifest.mutate(rows)
    return ns


def namespace_row(object_id: str) -> dict:
    return {
        "object_id": object_id,
        "object_type": "namespace",
        "location": None,
        "metadata": None,
        "base_objects": None,
    }


def calls(step: Callable[[], object]) -> int:
    count = 0

    def counted(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(counted)
    try:
        step()
    finally:
        sys.setprofile(None)
    return count


STEPS: dict[str, Callable[[Namespace], object]] = {
    "ls, the first page": lambda ns: list_namespace(
        ns, Identifier(()), limit=100, with_state=False
    ),
    "ls, everything": lambda ns: list_namespace(ns, Identifier(()), with_state=False),
    "ls --recursive": lambda ns: list_namespace(
        ns, Identifier(()), recursive=True, with_state=False
    ),
    "the location verdicts": lambda ns: RowLocations(
        ns.storage, ns.snapshot().columns("object_id", "object_type", "location")
    ),
    "check": lambda ns: check(ns, Identifier(())),
}


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> tuple[Namespace, Namespace]:
    base = tmp_path_factory.mktemp("growth")
    built = catalog(base, SMALL), catalog(base, SMALL * GROWTH)
    # settled: a listing of either root keeps its links for the next (store/link_record.py),
    # however soon after building a step runs
    time.sleep(link_record.SETTLED_NS / 1e9)
    return built


@pytest.mark.parametrize("name", list(STEPS))
def test_a_catalog_wide_step_grows_linearly(roots, name):
    small, large = roots
    step = STEPS[name]
    step(small)  # imports and caches of the first call are not the rows' cost
    step(large)  # nor the one listing of a root whose links are then kept
    few = calls(lambda: step(Namespace.from_properties({"root": small.storage.uri()})))
    many = calls(lambda: step(Namespace.from_properties({"root": large.storage.uri()})))
    assert many <= few * GROWTH * SLACK, f"{name}: {few} calls at {SMALL} rows, {many} at 4x"
