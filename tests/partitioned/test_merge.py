"""`lancens merge --from FILE --on KEY` as users run it: an upsert checked against a model.

The namespace of every type under two specs (conftest `template`) gets a source of changed
existing rows (some moved to another partition by a new partition value, some under the older
spec) and new rows; after the merge every reader sees exactly what a dictionary keyed by the
key says (matched rows replaced or kept, unmatched ones inserted or left out), every column of
every row, in one `__manifest` commit. A key twice in the source, or matching two rows, and a
source lacking a column are refused in one line, nothing changed.
"""

from __future__ import annotations

import datetime as dt
import json

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import (
    Root,
    cli,
    copied_root,
    manifest,
    modules_loaded_by,
    ok,
    published_rows,
    tree_snapshot,
    written_partitions,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from typed_rows import make_rows


def _source(source: pa.Table, tmp_path) -> tuple[pa.Table, str]:
    """Changed copies of every seventh existing row (a third also with a new partition value:
    `flag` flipped, `d` moved a year) and 20 new rows."""
    changed = []
    for i, row in enumerate(source.to_pylist()[::7]):
        row = {**row, "s": f"merged {i}", "i64": -i}
        if i % 3 == 0:
            row["flag"] = not row["flag"] if row["flag"] is not None else True
            row["d"] = dt.date(2030, 1, 1)
        changed.append(row)
    new = make_rows(20, 99, 50_000)
    table = pa.concat_tables([pa.Table.from_pylist(changed, schema=source.schema), new])
    path = tmp_path / "source.parquet"
    pq.write_table(table, path)
    return table, str(path)


def _cells(rows: list[dict]) -> str:
    return json.dumps(sorted(rows, key=lambda r: r["id"]), default=str)  # NaN alike


@pytest.mark.parametrize(
    "when_matched, when_not_matched",
    [("update", "insert"), ("update", "ignore"), ("ignore", "insert"), ("ignore", "ignore")],
)
def test_a_merge_leaves_what_the_model_says(template, tmp_path, when_matched, when_not_matched):
    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    source, path = _source(existing, tmp_path)
    model = {r["id"]: r for r in existing.to_pylist()}
    for row in source.to_pylist():
        if (
            row["id"] in model
            and when_matched == "update"
            or row["id"] not in model
            and when_not_matched == "insert"
        ):
            model[row["id"]] = row
    args = (
        "merge", "--from", path, "--on", "id",
        "--when-matched", when_matched, "--when-not-matched", when_not_matched,
    )  # fmt: skip
    dry = json.loads(ok(copy, "--json", *args, "--dry-run").stdout)
    version = int(manifest(copy).version)
    done = json.loads(ok(copy, "--json", *args).stdout)
    matched = sum(1 for r in source.to_pylist() if r["id"] < 50_000)
    assert dry["rows_matched"] == done["rows_matched"] == matched
    assert written_partitions(dry) == written_partitions(done)
    assert done["rows_updated"] == (matched if when_matched == "update" else 0)
    assert done["rows_inserted"] == (20 if when_not_matched == "insert" else 0)
    changes = done["rows_updated"] + done["rows_inserted"]
    assert int(manifest(copy).version) == version + (1 if changes else 0)
    assert _cells(published_rows(copy).to_pylist()) == _cells(list(model.values()))
    assert cli(copy, "check").exit_code == 0  # every row in the partition its values select


def test_a_key_twice_in_the_source_or_matching_twice_is_refused(template, tmp_path):
    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    twice = existing.slice(0, 2)
    pq.write_table(pa.concat_tables([twice, twice.slice(0, 1)]), tmp_path / "twice.parquet")
    before = tree_snapshot(copy.local_path)
    result = cli(copy, "merge", "--from", str(tmp_path / "twice.parquet"), "--on", "id")
    assert result.exit_code == 2 and "more than once" in result.stderr, result.stderr
    assert tree_snapshot(copy.local_path) == before
    # the same row written twice: its key matches two rows of the namespace
    pq.write_table(existing.slice(3, 1), tmp_path / "again.parquet")
    ok(copy, "write", "--from", str(tmp_path / "again.parquet"))
    before = tree_snapshot(copy.local_path)
    result = cli(copy, "merge", "--from", str(tmp_path / "again.parquet"), "--on", "id")
    assert result.exit_code == 2 and "matches rows" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert tree_snapshot(copy.local_path) == before


@pytest.mark.parametrize(
    "args, words",
    [
        (("--on", "nope"), "--on: unknown column 'nope'"),
        (("--on", ""), "--on: name the key"),
        (("--on", "id", "--when-matched", "delete"), "--when-matched"),
        (("--on", "id", "--when-not-matched", "upsert"), "--when-not-matched"),
    ],
)
def test_bad_options_are_one_line_exit_2(template, tmp_path, args, words):
    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    pq.write_table(existing.slice(0, 3), tmp_path / "rows.parquet")
    before = tree_snapshot(copy.local_path)
    result = cli(copy, "merge", "--from", str(tmp_path / "rows.parquet"), *args)
    assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    pq.write_table(existing.slice(0, 3).drop_columns(["s"]), tmp_path / "lacking.parquet")
    result = cli(copy, "merge", "--from", str(tmp_path / "lacking.parquet"), "--on", "id")
    assert result.exit_code == 2 and "the input lacks s" in result.stderr
    assert tree_snapshot(copy.local_path) == before


def test_a_write_landing_while_the_merge_runs_fails_it(template, tmp_path, monkeypatch):
    """A row another writer publishes after the keys were matched could hold a source key the
    merge would insert again: the merge fails, nothing of it published, and a rerun matches."""
    from lancens_cli.service.partitioned.update import Replacement

    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    new = make_rows(1, 7, 80_000)
    pq.write_table(new, tmp_path / "new.parquet")
    commit = Replacement.commit

    def racing(self, guard, progress=None):
        ok(copy, "write", "--from", str(tmp_path / "new.parquet"))  # the same key, first
        return commit(self, guard, progress)

    monkeypatch.setattr(Replacement, "commit", racing)
    result = cli(copy, "merge", "--from", str(tmp_path / "new.parquet"), "--on", "id")
    assert result.exit_code == 4 and "changed while the merge ran" in result.stderr
    ids = published_rows(copy).column("id").to_pylist()
    assert ids.count(80_000) == 1  # the writer's row, once
    monkeypatch.setattr(Replacement, "commit", commit)
    done = json.loads(ok(copy, "--json", "merge", "--from", str(tmp_path / "new.parquet"),
                         "--on", "id").stdout)  # fmt: skip
    assert (done["rows_matched"], done["rows_inserted"]) == (1, 0)
    assert published_rows(copy).column("id").to_pylist().count(80_000) == 1


@pytest.mark.parametrize(
    "where",
    [None, "flag = true", "i32 > 0 AND s IS NOT NULL", "d < DATE '2025-01-01' OR flag IS NULL"],
)
def test_deleting_what_the_source_lacks_leaves_what_duckdb_says(template, tmp_path, where):
    """`--delete-not-matched-by-source [--where PRED]`: the merge's model, less the rows PRED
    holds for (DuckDB decides, over the rows as they were) whose id the source lacks."""
    root, existing, con = template
    copy = copied_root(root, tmp_path / "copy")
    source, path = _source(existing, tmp_path)
    lacking = set(existing.column("id").to_pylist()) - set(source.column("id").to_pylist())
    held = {r[0] for r in con.execute(f"SELECT id FROM t WHERE {where or 'true'}").fetchall()}
    model = {r["id"]: r for r in existing.to_pylist() if r["id"] not in lacking & held}
    model.update({r["id"]: r for r in source.to_pylist()})
    args = ["merge", "--from", path, "--on", "id", "--delete-not-matched-by-source", "--yes"]
    args += ["--where", where] if where else []
    done = json.loads(ok(copy, "--json", *args).stdout)
    assert done["rows_deleted"] == len(lacking & held)
    assert _cells(published_rows(copy).to_pylist()) == _cells(list(model.values()))
    assert cli(copy, "check").exit_code == 0


def test_deleting_what_the_source_lacks_is_asked_for_and_checked_first(template, tmp_path):
    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    pq.write_table(existing.slice(0, 3), tmp_path / "rows.parquet")
    before = tree_snapshot(copy.local_path)
    merge = ("merge", "--from", str(tmp_path / "rows.parquet"), "--on", "id")
    for extra, code, words in [
        (("--delete-not-matched-by-source",), 5, "without --yes"),
        (("--where", "i32 > 0"), 2, "--delete-not-matched-by-source"),
        (("--delete-not-matched-by-source", "--where", "nope > 0", "--yes"), 2, "nope"),
        (("--delete-not-matched-by-source", "--where", "a", "--where", "b"), 2, "give one"),
    ]:
        result = cli(copy, *merge, *extra)
        assert result.exit_code == code and words in result.stderr, (extra, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert tree_snapshot(copy.local_path) == before
    dry = json.loads(ok(copy, "--json", *merge, "--delete-not-matched-by-source",
                        "--dry-run").stdout)  # fmt: skip
    assert dry["rows_deleted"] == existing.num_rows - 3
    assert tree_snapshot(copy.local_path) == before


@pytest.mark.slow
def test_a_killed_merge_publishes_all_or_nothing_and_a_rerun_completes_it(tmp_path):
    """A merge that replaces, moves, inserts and deletes what the source lacks, killed at
    random moments: a reader sees the rows before or the rows after, never a mix; a rerun
    finishes; the change feed of the rerun's version adds up to the difference."""
    import random
    import signal
    import time

    from data import events, partitioned_root
    from helpers import json_cli_process

    (tmp_path / "t").mkdir()
    first = events(3000, seed=1)
    root = partitioned_root(tmp_path / "t", first.schema, "bucket(32, id)", "country")
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "write", "--from", str(tmp_path / "first.parquet"))
    listed = first.to_pylist()
    changed = [{**r, "country": "JP"} for r in listed[::5]]  # moved to another partition
    fresh = events(50, seed=2, start=100_000).to_pylist()
    pq.write_table(pa.Table.from_pylist(changed + fresh, schema=first.schema),
                   tmp_path / "source.parquet")  # fmt: skip
    merge = ("merge", "--from", str(tmp_path / "source.parquet"), "--on", "id",
             "--delete-not-matched-by-source", "--where", "customer_id < 100", "--yes")  # fmt: skip
    source_ids = {r["id"] for r in changed + fresh}
    old = {r["id"]: r["country"] for r in listed}
    new = {i: c for i, c in old.items() if i in source_ids or not _customer_below(listed, i)}
    new.update({r["id"]: r["country"] for r in changed + fresh})
    started = time.monotonic()
    json_cli_process(copied_root(root, tmp_path / "timed"), *merge).communicate(timeout=300)
    runtime = time.monotonic() - started
    rng = random.Random(5)
    for trial in range(5):
        copy = copied_root(root, tmp_path / f"trial{trial}")
        proc = json_cli_process(copy, *merge)
        time.sleep(rng.uniform(0.3, 1.05) * runtime)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.communicate()
        seen = published_rows(copy).to_pylist()
        assert len(seen) == len({r["id"] for r in seen}), trial  # each row once
        assert {r["id"]: r["country"] for r in seen} in (old, new), trial  # all or nothing
        before = int(manifest(copy).version)
        ok(copy, *merge)
        assert {r["id"]: r["country"] for r in published_rows(copy).to_pylist()} == new
        feed = json.loads(ok(copy, "--json", "scan", "--changes", "--net", "--since-version",
                             str(before), "--columns", "id,_change_type").stdout)  # fmt: skip
        added = {r[0] for r in feed["rows"] if r[1] == "insert"}
        removed = {r[0] for r in feed["rows"] if r[1] == "delete"}
        if {r["id"]: r["country"] for r in seen} == old:  # the rerun made the whole change
            assert removed - added == set(old) - set(new), trial
            assert added - removed == set(new) - set(old), trial


def _customer_below(rows: list[dict], row_id: int) -> bool:
    return next(r["customer_id"] for r in rows if r["id"] == row_id) < 100


def test_source_rows_with_a_null_key_are_never_the_same_key(tmp_path):
    """A NULL key matches nothing, as in SQL: two source rows with one are two new rows, in a
    partitioned namespace and in one table alike; a real key twice is still refused."""
    schema = pa.schema(
        [pa.field("id", pa.int64()), pa.field("g", pa.string()), ("v", pa.float64())]
    )
    rows = pa.table({"id": [1, 2, None], "g": ["a", "b", "a"], "v": [1.0, 2.0, 3.0]}, schema=schema)
    source = pa.table(
        {"id": [None, None, 1], "g": ["a", "b", "b"], "v": [10.0, 20.0, 30.0]}, schema=schema
    )
    pq.write_table(schema.empty_table(), tmp_path / "schema.parquet")
    pq.write_table(rows, tmp_path / "rows.parquet")
    pq.write_table(source, tmp_path / "source.parquet")
    (tmp_path / "ns").mkdir()
    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    ok(root, "add-partition-spec", "--schema", str(tmp_path / "schema.parquet"), "--field", "g")
    ok(root, "write", "--from", str(tmp_path / "rows.parquet"))
    (tmp_path / "flat").mkdir()
    flat = Root(str(tmp_path / "flat"), {}, tmp_path / "flat")
    ok(flat, "create", "table", "t", "--from", str(tmp_path / "rows.parquet"))
    want = sorted(
        [(2, "b", 2.0), (None, "a", 3.0), (None, "a", 10.0), (None, "b", 20.0), (1, "b", 30.0)],
        key=repr,
    )
    for target, args in ((root, ()), (flat, ("t",))):
        done = json.loads(
            ok(
                target,
                "--json",
                "merge",
                *args,
                "--from",
                str(tmp_path / "source.parquet"),
                "--on",
                "id",
            ).stdout  # fmt: skip
        )
        assert (done["rows_matched"], done["rows_inserted"]) == (1, 2)
    got = [(r["id"], r["g"], r["v"]) for r in published_rows(root).to_pylist()]
    assert sorted(got, key=repr) == want
    table = lance.dataset(str(tmp_path / "flat" / "t.lance")).to_table()
    columns = [table.column(c).to_pylist() for c in ("id", "g", "v")]
    assert sorted(zip(*columns, strict=True), key=repr) == want
    twice = pa.table(
        {"id": [None, 5, 5], "g": ["a", "a", "b"], "v": [0.0, 0.0, 0.0]}, schema=schema
    )
    pq.write_table(twice, tmp_path / "twice.parquet")
    result = cli(root, "merge", "--from", str(tmp_path / "twice.parquet"), "--on", "id")
    assert result.exit_code == 2 and "{'id': 5} more than once" in result.stderr, result.stderr


@pytest.mark.parametrize("kind", [pa.int8(), pa.int64(), pa.uint64()])
def test_an_integer_key_matches_as_the_join_of_any_other_key_does(kind):
    """One integer key is looked up in the source's keys (IntegerKeys); any other key is joined.
    Both find the same rows of each table: NULLs on either side match nothing, extremes
    match themselves."""
    import random

    from lancens_cli.service.partitioned import merge as m
    from lancens_cli.store.known_rows import ADDRESS_COLUMN

    rng = random.Random(str(kind))
    low, high = (0, 2**64 - 1) if kind == pa.uint64() else (-(2**63), 2**63 - 1)
    if kind == pa.int8():
        low, high = -128, 127
    pool = [low, high, 0, 1, *(rng.randint(low, high) for _ in range(40))]
    # unique keys, as `require_unique` leaves a source
    source = pa.table({"k": pa.array([*rng.sample(sorted(set(pool)), 20), None], kind)})
    wanted = source.append_column(m._SEEN, pa.repeat(True, source.num_rows))

    def tables():
        made = []
        for _ in range(3):
            values = [rng.choice([*pool, None]) for _ in range(60)]
            read = pa.table({"k": pa.array(values, kind)})
            read = read.append_column(ADDRESS_COLUMN, pa.array(range(60), pa.uint64()))
            made.append(m._Found(None, read.schema, {}, read=read))
        return made

    rng_state = rng.getstate()
    joined = tables()
    m._match_batch(joined, [0, 1, 2], wanted, ["k"])
    rng.setstate(rng_state)
    looked_up = tables()
    lookup = m.IntegerKeys.of(wanted, ["k"])
    assert lookup is not None
    for one in looked_up:
        m._match_integers(one, lookup, "k")
    for a, b in zip(joined, looked_up, strict=True):
        assert sorted(a.keys.column("k").to_pylist()) == sorted(b.keys.column("k").to_pylist())
        assert None not in b.keys.column("k").to_pylist()


@pytest.mark.parametrize("kind", [pa.int8(), pa.int32(), pa.int64(), pa.uint64()])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_integer_keys_hold_exactly_the_source_keys_however_their_slots_collide(kind, data):
    """The slot filter only skips a search: a table key is held exactly when the source has
    it, for dense keys that fill every slot, keys a multiple of a power of two apart, and
    the type's extremes."""
    from lancens_cli.service.partitioned import merge as m

    info = np.iinfo(kind.to_pandas_dtype())
    low, high = int(info.min), int(info.max)
    step = data.draw(st.sampled_from([1, 2**8, 2**16, 2**20, 2**40]).filter(lambda s: s < high))
    start = data.draw(st.integers(low, high))
    count = data.draw(st.integers(0, 70_000))
    spaced = [v for v in range(start, start + step * count, step) if low <= v <= high][:70_000]
    extremes = data.draw(st.lists(st.sampled_from([low, high, 0, -1 if low else 1]), max_size=4))
    source = sorted(set(spaced) | set(extremes))
    values = data.draw(
        st.lists(st.one_of(st.integers(low, high), st.sampled_from(source or [0])), max_size=300)
    )
    values += [v + d for v in source[:50] for d in (-1, 1) if low <= v + d <= high]
    lookup = m.IntegerKeys.of(pa.table({"k": pa.array(source, kind)}), ["k"])
    assert lookup is not None
    held = lookup.holds(pa.array(values, kind).to_numpy())
    assert held.tolist() == [v in set(source) for v in values]


def test_a_merge_by_id_loads_no_sql_parser_no_sql_engine_and_no_spark(template, tmp_path):
    """A merge renders Lance filters but reads no condition and evaluates no expression:
    sqlglot (a tenth of a second's import), DataFusion and Spark stay out of its process, so
    a merge from cron pays for the merge."""
    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    source, path = _source(existing, tmp_path)
    args = [*copy.args, "--json", "merge", "--from", path, "--on", "id", "--engine", "local"]
    report, loaded = modules_loaded_by(args, {"sqlglot", "datafusion", "pyspark"})
    assert json.loads(report)["source_rows"] == source.num_rows
    assert loaded == []
