"""`update` and `merge` delete the rows they replace by the addresses their read found, not by
evaluating their filter on every fragment again (store/known_rows.py); what readers see must
be what the filter would have left.

The namespace is built as users build one: several writes (many fragments per partition
table), a `delete --where` before (deletion files already there, so offsets count deleted
rows too), and a dead writer's append to a partition table that `__manifest` never published
(the commit sets it aside and deletes on the published version). Every outcome is checked
against a model of the rows; that the address path ran is checked by a Lance fragment delete
that fails when asked to evaluate a filter. The deletions themselves are compared with
Lance's own filter deletes on the same fragments.
"""

from __future__ import annotations

import json

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import copied_root, manifest, ok, partition_tables, published_rows
from hypothesis import given
from hypothesis import strategies as st

from lancens_cli.store.known_rows import KnownRows
from lancens_cli.store.partition_tables import _deletions


@pytest.fixture(scope="module")
def busy_template(tmp_path_factory):
    """Four writes of 200 rows into `bucket(4, customer_id)`, a delete of every fifth id, and
    an unpublished append (ids from 90,000) to the first partition table."""
    tmp_path = tmp_path_factory.mktemp("busy")
    root = partitioned_root(tmp_path, events(1).schema, "bucket(4, customer_id)")
    for batch in range(4):
        path = tmp_path / f"w{batch}.parquet"
        pq.write_table(events(200, seed=batch, start=batch * 200), path)
        ok(root, "write", "--from", str(path))
    fifths = ", ".join(str(i) for i in range(0, 800, 5))
    ok(root, "delete", "--where", f"id IN ({fifths})", "--yes")
    first = partition_tables(root)[0]
    lance.write_dataset(
        events(10, seed=9, start=90_000).cast(events(1).schema),
        str(root.local_path / first["location"]),
        mode="append",
    )
    return root


@pytest.fixture
def busy_root(busy_template, tmp_path):
    """A copy of `busy_template` for one test to change."""
    return copied_root(busy_template, tmp_path / "copy"), tmp_path


def _model(root) -> dict[int, dict]:
    return {row["id"]: row for row in published_rows(root).to_pylist()}


def _no_filter_deletes(monkeypatch) -> list[str]:
    """Fragment deletes by filter fail the test from here on: the rows are known."""
    asked: list[str] = []

    def refuse(self, predicate):
        asked.append(predicate)
        raise AssertionError(f"a fragment evaluated the filter {predicate!r}")

    monkeypatch.setattr(lance.fragment.LanceFragment, "delete", refuse)
    return asked


def _cells(rows) -> str:
    return json.dumps(sorted(rows, key=lambda r: r["id"]), default=str)


def test_a_merge_deletes_what_it_matched_by_address(busy_root, monkeypatch):
    root, folder = busy_root
    model = _model(root)
    live = sorted(model)
    changed = [{**model[i], "country": "XX"} for i in live[::3]]  # every third live row
    moved = [{**model[i], "customer_id": (model[i]["customer_id"] or 0) + 1} for i in live[1::7]]
    new = events(5, seed=7, start=50_000).to_pylist()
    source = changed + [m for m in moved if m["id"] not in {c["id"] for c in changed}] + new
    path = folder / "source.parquet"
    pq.write_table(pa.Table.from_pylist(source, schema=events(1).schema), path)
    for row in source:
        model[row["id"]] = row
    _no_filter_deletes(monkeypatch)
    version = int(manifest(root).version)
    done = json.loads(ok(root, "--json", "merge", "--from", str(path), "--on", "id").stdout)
    assert done["rows_updated"] == len(source) - 5 and done["rows_inserted"] == 5
    assert int(manifest(root).version) == version + 1
    after = published_rows(root).to_pylist()
    assert _cells(after) == _cells(model.values())  # the dead writer's rows stay unseen
    assert not any(row["id"] >= 90_000 for row in after)


def test_an_update_deletes_what_it_read_by_address(busy_root, monkeypatch):
    root, _ = busy_root
    model = _model(root)
    for row in model.values():
        if row["country"] == "DE":
            row["customer_id"] = (row["customer_id"] or 0) + 7  # moves most rows
    _no_filter_deletes(monkeypatch)
    ok(root, "update", "--set", "customer_id = coalesce(customer_id, 0) + 7", "--where",
       "country = 'DE'", "--yes")  # fmt: skip
    assert _cells(published_rows(root).to_pylist()) == _cells(model.values())


@pytest.mark.parametrize("joined_at_once", [150, 4_000_000])
def test_a_merge_on_two_keys_with_nulls_matches_as_sql_does(busy_root, monkeypatch, joined_at_once):
    """(country, id), a text key with NULLs among it: a NULL never matches, so such a source
    row is new; the tables' keys are matched a few tables at a time or all at once."""
    from lancens_cli.service.partitioned import merge

    monkeypatch.setattr(merge, "_JOINED_AT_ONCE", joined_at_once)
    root, folder = busy_root
    rows = published_rows(root).to_pylist()
    source = [{**row, "customer_id": -row["id"]} for row in rows[::4]]
    path = folder / "source.parquet"
    pq.write_table(pa.Table.from_pylist(source, schema=events(1).schema), path)
    by_key = {(r["country"], r["id"]): r for r in rows if r["country"] is not None}
    nulls = [r for r in rows if r["country"] is None]
    for row in source:
        if row["country"] is None:
            nulls.append(row)
        else:
            by_key[(row["country"], row["id"])] = row
    done = json.loads(ok(root, "--json", "merge", "--from", str(path), "--on", "country,id").stdout)
    assert done["rows_inserted"] == sum(1 for r in source if r["country"] is None)
    expected = sorted(json.dumps(r, default=str) for r in [*by_key.values(), *nulls])
    after = sorted(json.dumps(r, default=str) for r in published_rows(root).to_pylist())
    assert after == expected


def test_a_merge_that_also_deletes_what_the_source_lacks_evaluates_its_filter(busy_root):
    """The rows the source lacks are found by a condition: that delete keeps its filter."""
    root, folder = busy_root
    model = _model(root)
    keep = sorted(model)[:50]
    path = folder / "source.parquet"
    pq.write_table(pa.Table.from_pylist([model[i] for i in keep], schema=events(1).schema), path)
    ok(root, "merge", "--from", str(path), "--on", "id", "--delete-not-matched-by-source",
       "--yes")  # fmt: skip
    assert _cells(published_rows(root).to_pylist()) == _cells([model[i] for i in keep])


def _fragments_and_rows(tmp_path, seed: int) -> lance.LanceDataset:
    """A table of five fragments with some rows deleted already."""
    uri = str(tmp_path / f"t{seed}.lance")
    for part in range(5):
        rows = pa.table({"id": pa.array(range(part * 40, part * 40 + 40), pa.int64())})
        lance.write_dataset(rows, uri, mode="append" if part else "create")
    dataset = lance.dataset(uri)
    dataset.delete(f"id % 7 = {seed % 7}")
    return lance.dataset(uri)


@given(st.sets(st.integers(0, 199), max_size=120))
def test_deleting_by_address_leaves_what_the_filter_leaves(tmp_path_factory, ids):
    folder = tmp_path_factory.mktemp("by-address")
    dataset = _fragments_and_rows(folder, len(ids))
    predicate = f"id IN ({', '.join(map(str, sorted(ids)))})" if ids else "false"
    read = dataset.to_table(filter=predicate, with_row_address=True)
    known = KnownRows("t", dataset.version, read.column("_rowaddr"))
    by_filter = _deletions(dataset, predicate)
    by_address = _deletions(dataset, predicate, known)
    assert by_address[1] == by_filter[1] and by_address[2] == by_filter[2] == read.num_rows

    def deleted(updated: list) -> dict[int, int]:
        return {fragment.id: fragment.num_deletions for fragment in updated}

    assert deleted(by_address[0]) == deleted(by_filter[0])
    operation = lance.LanceOperation.Delete(by_address[0], by_address[1], predicate)
    if by_address[2]:
        after = lance.LanceDataset.commit(dataset.uri, operation, read_version=dataset.version)
        before = dataset.to_table()["id"]
        gone = pc.is_in(before, value_set=pa.array(sorted(ids), pa.int64()))
        expected = before.filter(pc.invert(gone)).to_pylist()
        assert sorted(after.to_table()["id"].to_pylist()) == sorted(expected)


def test_addresses_are_grouped_by_fragment():
    addresses = pa.array([(3 << 32) | 5, 7, (3 << 32) | 1, 2, (1 << 32)], pa.uint64())
    grouped = KnownRows(
        "t", 1, pa.chunked_array([addresses[:2], addresses[2:]])
    ).offsets_by_fragment()
    assert grouped == {0: [7, 2], 1: [0], 3: [5, 1]}


def test_addresses_are_used_only_on_the_table_and_version_they_were_read_from():
    """A touch re-pointed to another table (its row published anew meanwhile), or committed
    on another version, deletes by its filter."""
    from lancens_cli.service.partitioned.placement import PartitionTouch
    from lancens_cli.store.partition_tables import _known_here

    known = KnownRows("v1.a.dataset", 3, pa.array([5], pa.uint64()))
    touch = PartitionTouch(values=(), rows=None, location="v1.a.dataset", known_rows=known)
    assert _known_here(touch, 3) is known
    assert _known_here(touch, 4) is None
    touch.location = "v1.b.dataset"
    assert _known_here(touch, 3) is None
