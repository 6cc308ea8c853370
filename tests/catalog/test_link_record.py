"""A root's links are recorded by the pass that lists its tables, and judged from the record
only while the root cannot have changed: a link made after the listing is never missed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from lancens_cli.service.namespace import Namespace
from lancens_cli.store import link_record
from lancens_cli.store.containment import LocalResolver
from lancens_cli.store.row_verdicts import RowLocations


def _settled_root(base: Path) -> Namespace:
    """A root with one table and one link out of it, whose times have settled."""
    root = base / "root"
    root.mkdir()
    lance.write_dataset(pa.table({"v": [1]}), str(root / "a.lance"))
    outside = base / "outside.lance"
    lance.write_dataset(pa.table({"v": [2]}), str(outside))
    os.symlink(outside, root / "out.lance")
    time.sleep(link_record.SETTLED_NS / 1e9 + 0.2)
    return Namespace.from_properties({"root": str(root)})


def _verdicts(ns: Namespace, rows: list[tuple[str, str, str]]) -> RowLocations:
    return RowLocations(ns.storage, rows)


def test_the_listing_records_the_links_the_location_pass_then_reads(tmp_path: Path) -> None:
    ns = _settled_root(tmp_path)
    root = os.path.realpath(ns.storage.uri())
    assert sorted(ns.storage.dir_names("", ".lance").text.to_pylist()) == ["a.lance", "out.lance"]
    assert link_record.recorded_links(root) == frozenset({"out.lance"})
    verdicts = _verdicts(ns, [("a", "table", "a.lance"), ("b", "table", "out.lance")])
    assert verdicts.problem("a") is None
    refused = verdicts.problem("b")
    assert refused is not None and "outside the root" in refused.reason


def test_a_link_made_after_the_listing_is_seen(tmp_path: Path) -> None:
    ns = _settled_root(tmp_path)
    root = os.path.realpath(ns.storage.uri())
    ns.storage.dir_names("", ".lance")
    os.symlink(tmp_path / "outside.lance", Path(root) / "late.lance")
    assert link_record.recorded_links(root) is None  # the root's times moved
    assert "late.lance" in LocalResolver(root).links_in(root)
    refused = _verdicts(ns, [("late", "table", "late.lance")]).problem("late")
    assert refused is not None and "outside the root" in refused.reason


@pytest.mark.parametrize("change", ["add", "remove"])
def test_a_changed_root_is_listed_again(tmp_path: Path, change: str) -> None:
    """Replacing the root's link by a directory of the same name (or the reverse) moves its
    times, so the record is not taken, even inside the same second."""
    ns = _settled_root(tmp_path)
    root = Path(os.path.realpath(ns.storage.uri()))
    ns.storage.dir_names("", ".lance")
    if change == "add":
        os.symlink(tmp_path / "outside.lance", root / "a2.lance")
        expected = {"out.lance", "a2.lance"}
    else:
        os.unlink(root / "out.lance")
        (root / "out.lance").mkdir()
        expected = set()
    assert LocalResolver(str(root)).links_in(str(root)) == frozenset(expected)


def test_a_root_changed_just_before_its_listing_keeps_no_record(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    os.symlink(tmp_path, root / "link.lance")
    ns = Namespace.from_properties({"root": str(root)})
    ns.storage.dir_names("", ".lance")
    assert link_record.recorded_links(os.path.realpath(root)) is None
