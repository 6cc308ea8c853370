"""A partitioned root's pages of `ls` come from the kept sorted listing too: once a whole
listing kept it, a page reads neither the whole catalog nor the root, and every page (its
partition values, each spec's namespace with its partition count, the root's partitioning)
reads as a whole listing that found no index, before and after every change a user makes."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import CatalogReads, Root, ls_json, ls_pages, ok, small_and_quick_listings

from lancens_cli.service.catalog import listing_index

SETTLE_S = 0.15


@pytest.fixture(autouse=True)
def _small_and_quick(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    small_and_quick_listings(monkeypatch, tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Root:
    """Partitioned by bucket(4, id), then by country as well: partition tables of two specs."""
    made = partitioned_root(tmp_path, events(1).schema, "bucket(4, id)")
    _write(made, tmp_path, events(80, seed=1))
    ok(made, "add-partition-spec", "--field", "bucket(4, id)", "--field", "country")
    _write(made, tmp_path, events(80, seed=2, start=1000))
    time.sleep(SETTLE_S)
    return made


def _write(root: Root, tmp_path: Path, rows) -> None:
    source = tmp_path / f"rows-{time.monotonic_ns()}.parquet"
    pq.write_table(rows, source)
    ok(root, "write", "--from", str(source))


def _whole(root: Root, tmp_path: Path, *extra: str) -> dict:
    """A whole listing that finds no index (nor keeps one where the pages look)."""
    return ls_json(
        root, *extra, env={"XDG_CACHE_HOME": str(tmp_path / f"fresh-{time.monotonic_ns()}")}
    )


def _same_pages(root: Root, tmp_path: Path, *extra: str) -> None:
    """Every page of `ls -R`, and `ls` of the specs (a listing without a limit, of a few
    entries), read as a whole listing that found no index."""
    whole = _whole(root, tmp_path, "-R", *extra)
    for limit in (1, 3, 7):
        pages = ls_pages(root, limit, "-R", *extra)
        assert [e for page in pages for e in page["entries"]] == whole["entries"], limit
        assert all(len(page["entries"]) == limit for page in pages[:-1])
        assert all(page["partitioning"] == whole["partitioning"] for page in pages)
    assert ls_json(root, *extra) == _whole(root, tmp_path, *extra)


def test_a_page_of_a_partitioned_root_costs_a_page(
    root: Root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = ls_json(root, "-R")  # keeps the index
    specs_only = ls_json(root)  # a few entries, of a big catalog: kept too
    for recursive in (False, True):
        assert Path(listing_index._file_of(str(root.local_path), recursive)).exists()
    tables = [e for e in whole["entries"] if e["kind"] == "table"]
    assert {e["spec_version"] for e in tables} == {1, 2}
    assert all(e["partition"] for e in tables)
    specs = [e for e in whole["entries"] if e["kind"] == "namespace"]
    assert [(e["id"], e["current"]) for e in specs] == [("v1", False), ("v2", True)]
    reads = CatalogReads(monkeypatch)
    for limit in (1, 3, 7):
        pages = ls_pages(root, limit, "-R")
        assert [e for page in pages for e in page["entries"]] == whole["entries"], limit
        assert all(page["partitioning"] == whole["partitioning"] for page in pages)
    assert ls_json(root) == specs_only
    assert [e["id"] for e in specs_only["entries"]] == ["v1", "v2"]
    assert reads.count == 0


def _written(root: Root, tmp_path: Path) -> None:
    _write(root, tmp_path, events(40, seed=3, start=5000, countries=("JP",)))


def _deleted(root: Root, tmp_path: Path) -> None:
    ok(root, "delete", "--where", "country = 'DE'", "--yes")


def _new_spec(root: Root, tmp_path: Path) -> None:
    ok(root, "add-partition-spec", "--field", "country")


def _dropped(root: Root, tmp_path: Path) -> None:
    table = next(e for e in _whole(root, tmp_path, "-R")["entries"] if e["kind"] == "table")
    ok(root, "drop", table["id"], "--yes")


@pytest.mark.parametrize("change", [_written, _deleted, _new_spec, _dropped])
def test_pages_of_a_partitioned_root_follow_every_change(
    root: Root, tmp_path: Path, change
) -> None:
    ls_pages(root, 3, "-R")
    ls_json(root)
    for recursive in (False, True):
        assert Path(listing_index._file_of(str(root.local_path), recursive)).exists()
    change(root, tmp_path)
    _same_pages(root, tmp_path)  # at once
    time.sleep(SETTLE_S)
    _same_pages(root, tmp_path)  # kept again after the change, and read
    _same_pages(root, tmp_path)


def test_a_listing_of_every_row_never_takes_the_index(root: Root, tmp_path: Path) -> None:
    """`--all` lists the namespaces between a spec and its partition tables, which the index
    does not hold."""
    ls_pages(root, 3, "-R")
    whole = _whole(root, tmp_path, "-R", "--all")
    shown = {e["id"] for e in ls_json(root, "-R")["entries"]}
    levels = [e for e in whole["entries"] if e["id"] not in shown]
    assert levels and all(e["kind"] == "namespace" for e in levels)
    _same_pages(root, tmp_path, "--all")
