"""`lancens update --set --where` as users run it, against DuckDB over the same source rows.

The namespace of every type under two specs (conftest `template`) is copied for each case; a
generated condition (hypothesis) with an assignment, also to a partition source column (the
row moves to the partition its new value selects), must leave exactly what DuckDB's `CASE WHEN
cond THEN expr ELSE col END` leaves, every other column of every row as it was, in one
`__manifest` commit. A writer racing the update loses nothing (the update fails and is rerun,
or is ordered after it); bad input is one line, exit 2, nothing changed.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import (
    cli,
    copied_root,
    json_cli_process,
    manifest,
    ok,
    published_rows,
    tree_snapshot,
    written_partitions,
)
from hypothesis import given
from hypothesis import strategies as st
from typed_rows import conditions, few_examples

ASSIGNMENTS = [  # (--set, the column, DuckDB's expression)
    ("i64 = 5", "i64", "5"),
    ("s = 'changed'", "s", "'changed'"),
    ("flag = true", "flag", "true"),  # a partition source column of spec v2
    ("d = DATE '2021-06-01'", "d", "DATE '2021-06-01'"),  # and of spec v1: rows move
    ("i8 = NULL", "i8", "NULL"),
    ("i32 = i32 - 1", "i32", "i32 - 1"),
]
UNTOUCHED = ("emb", "st", "dec", "f64", "attrs", "tags", "ts")


def _cells(table: pa.Table, column: str) -> str:
    return json.dumps(table.column(column).to_pylist(), default=str)  # NaN alike


def _updated_as_duckdb_says(template, tmp_path, where: str, assignment, name: str) -> None:
    root, source, con = template
    text, column, expression = assignment
    copy = copied_root(root, tmp_path / name)
    matched = con.execute(f"SELECT count(*) FROM t WHERE {where}").fetchall()[0][0]
    try:
        expected = con.sql(
            f"SELECT id, CASE WHEN ({where}) THEN {expression} ELSE {column} END AS v "
            "FROM t ORDER BY id"
        ).to_arrow_table()
    except duckdb.Error:  # a new value out of its type's range: refused, nothing changed
        before = tree_snapshot(copy.local_path)
        result = cli(copy, "update", "--set", text, "--where", where, "--yes")
        assert result.exit_code == 2 and "--set" in result.stderr, result.stderr
        assert tree_snapshot(copy.local_path) == before
        return
    planned = ok(copy, "--json", "update", "--set", text, "--where", where, "--dry-run")
    assert json.loads(planned.stdout)["rows_updated"] == matched, where
    version = int(manifest(copy).version)
    done = json.loads(ok(copy, "--json", "update", "--set", text, "--where", where, "--yes").stdout)
    assert written_partitions(json.loads(planned.stdout)) == written_partitions(done), where
    assert done["rows_updated"] == matched, where
    assert int(manifest(copy).version) == version + (1 if matched else 0), where
    seen = published_rows(copy).sort_by("id")
    assert seen.column("id").to_pylist() == expected.column("id").to_pylist(), where
    got = seen.column(column)
    want = expected.column("v").cast(got.type)
    assert json.dumps(got.to_pylist(), default=str) == json.dumps(want.to_pylist(), default=str)
    ordered = source.sort_by("id")
    for other in UNTOUCHED:
        assert _cells(seen, other) == _cells(ordered, other), (where, other)
    assert cli(copy, "check").exit_code == 0  # every row in the partition its values select


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=[a[1] for a in ASSIGNMENTS])
def test_an_update_leaves_what_duckdb_leaves(template, tmp_path, assignment):
    _updated_as_duckdb_says(template, tmp_path, "i32 > 0 OR s IS NULL", assignment, "copy")


def test_generated_updates_leave_what_duckdb_leaves(template, tmp_path):
    count = iter(range(1000))

    @few_examples(10)
    @given(conditions(), st.sampled_from(ASSIGNMENTS))
    def check(where, assignment):
        _updated_as_duckdb_says(template, tmp_path, where, assignment, f"copy{next(count)}")

    check()


@pytest.mark.parametrize(
    "sets, words",
    [
        (["nope = 1"], "unknown column 'nope'"),
        (["i64 = "], "write it as 'column = expression'"),
        (["i64"], "write it as 'column = expression'"),
        (["i64 = 1", "i64 = 2"], "set twice"),
        (["i64 = no_such_column + 1"], "--set"),
        (["i32 = 'not a number'"], "--set"),
        (["d = 12"], "--set"),
        (["i64 = i64 + 9223372036854775807"], "beyond int64"),  # DataFusion would wrap it
        (["i32 = i32 * i32"], "beyond int32"),
        (["i64 = unnest(make_array(i64, i64))"], "one value per row"),
    ],
)
def test_bad_assignments_are_one_line_exit_2_and_change_nothing(template, tmp_path, sets, words):
    copy = copied_root(template[0], tmp_path / "copy")
    before = tree_snapshot(copy.local_path)
    args = [arg for text in sets for arg in ("--set", text)]
    for extra in ((), ("--dry-run",)):
        result = cli(copy, "update", *args, "--where", "id >= 0", "--yes", *extra)
        assert result.exit_code == 2, (sets, result.stderr)
        assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert tree_snapshot(copy.local_path) == before


def test_a_condition_update_cannot_apply_exactly_says_so_in_its_own_words(template, tmp_path):
    copy = copied_root(template[0], tmp_path / "copy")
    before = tree_snapshot(copy.local_path)
    result = cli(copy, "update", "--set", "i64 = 1", "--where", "upper(s) = 'A'", "--yes")
    assert result.exit_code == 2 and "cannot apply" in result.stderr, result.stderr
    assert "nothing was changed" in result.stderr and "deleted" not in result.stderr
    assert tree_snapshot(copy.local_path) == before


def test_writers_racing_an_update_lose_nothing(tmp_path):
    first = events(2000, seed=1)
    root = partitioned_root(tmp_path, first.schema, "year(event_date)", "country")
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "write", "--from", str(tmp_path / "first.parquet"))
    batches = []
    for w in range(3):
        rows = events(300, seed=50 + w, start=10_000 * (w + 1))
        pq.write_table(rows, tmp_path / f"w{w}.parquet")
        batches.append(rows)
    update = ("update", "--set", "customer_id = -1", "--where", "country = 'DE'", "--yes")
    procs = [
        json_cli_process(root, "write", "--from", str(tmp_path / f"w{w}.parquet")) for w in range(3)
    ]
    procs.insert(1, json_cli_process(root, *update))
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        outs.append((proc.returncode, out, err))
    code, out, err = outs.pop(1)
    assert all(c == 0 for c, _, _ in outs), outs
    if code == 4:  # a partition it read changed meanwhile: nothing published, run it again
        assert "run it again" in err
        out = ok(root, "--json", *update).stdout
    else:
        assert code == 0, err
    updated_at = json.loads(out)["manifest_version"]
    rows = {r["id"]: r for r in published_rows(root).to_pylist()}
    everything = first.to_pylist()
    for batch, (_, written, _) in zip(batches, outs, strict=True):
        late = json.loads(written)["manifest_version"] > updated_at
        everything += [{**r, "late": late} for r in batch.to_pylist()]
    assert len(rows) == len(everything) == published_rows(root).num_rows  # none lost or twice
    for r in everything:
        changed = r["country"] == "DE" and not r.get("late")
        assert rows[r["id"]]["customer_id"] == (-1 if changed else r["customer_id"]), r


def test_rows_moved_counts_rows_that_change_table(template, tmp_path):
    root, source, _ = template
    copy = copied_root(root, tmp_path / "copy")
    stays = ok(copy, "--json", "update", "--set", "i64 = 5", "--where", "id >= 1000", "--yes")
    assert json.loads(stays.stdout)["rows_moved"] == 0  # spec v2 rows, no partition value changed
    older = sum(1 for i in source.column("id").to_pylist() if i < 1000)
    moved = ok(copy, "--json", "update", "--set", "i64 = 6", "--where", "id < 1000", "--yes")
    assert json.loads(moved.stdout)["rows_moved"] == older  # spec v1 rows go to the current spec
    flipped = ok(
        copy, "--json", "update", "--set", "flag = NOT flag", "--where", "flag IS NOT NULL", "--yes"
    )
    done = json.loads(flipped.stdout)
    assert done["rows_moved"] == done["rows_updated"] > 0
    assert cli(copy, "check").exit_code == 0


def test_a_repeated_where_and_a_branch_published_partition_are_refused(tmp_path):
    first = events(200, seed=1)
    root = partitioned_root(tmp_path, first.schema, "country")
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "write", "--from", str(tmp_path / "first.parquet"))
    before = tree_snapshot(root.local_path)
    for command in (("delete",), ("update", "--set", "customer_id = 1")):
        twice = cli(root, *command, "--where", "id < 3", "--where", "id > 1", "--yes")
        assert twice.exit_code == 2 and "give one condition" in twice.stderr
    assert tree_snapshot(root.local_path) == before
    ok(root, "write", "--from", str(tmp_path / "first.parquet"), "--branch", "dev")
    before = tree_snapshot(root.local_path)
    for command in (("delete",), ("update", "--set", "customer_id = 1")):
        for extra in (("--dry-run",), ("--yes",)):
            refused = cli(root, *command, "--where", "id < 100", *extra)
            assert refused.exit_code == 5 and "published on branch 'dev'" in refused.stderr
    assert tree_snapshot(root.local_path) == before


@pytest.mark.slow
def test_a_killed_update_publishes_all_or_nothing_and_a_rerun_completes_it(tmp_path):
    """An update that moves rows (a partition source column changes) killed at random moments:
    a reader sees every row once, all old or all new; a rerun finishes; `check --fix` then
    leaves the same rows."""
    import random
    import signal
    import time

    (tmp_path / "t").mkdir()
    first = events(4000, seed=1)
    root = partitioned_root(tmp_path / "t", first.schema, "bucket(48, id)", "country")
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "write", "--from", str(tmp_path / "first.parquet"))
    update = ("update", "--set", "country = 'JP'", "--where", "customer_id < 200", "--yes")
    moving = {r["id"] for r in first.to_pylist() if r["customer_id"] < 200}
    old = {r["id"]: r["country"] for r in first.to_pylist()}
    new = {i: ("JP" if i in moving else c) for i, c in old.items()}
    started = time.monotonic()
    timed = json_cli_process(copied_root(root, tmp_path / "timed"), *update)
    timed.communicate(timeout=300)
    runtime = time.monotonic() - started
    rng = random.Random(11)
    for trial in range(6):
        copy = copied_root(root, tmp_path / f"trial{trial}")
        proc = json_cli_process(copy, *update)
        time.sleep(rng.uniform(0.3, 1.05) * runtime)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.communicate()
        seen = published_rows(copy).to_pylist()
        assert len(seen) == len({r["id"] for r in seen}) == 4000, trial  # each row once
        countries = {r["id"]: r["country"] for r in seen}
        assert countries in (old, new), trial  # all or nothing
        ok(copy, *update)
        assert {r["id"]: r["country"] for r in published_rows(copy).to_pylist()} == new
        fix = cli(copy, "check", "--fix", "--grace-minutes", "0")
        assert fix.exit_code in (0, 1), fix.stderr
        assert {r["id"]: r["country"] for r in published_rows(copy).to_pylist()} == new


def test_the_change_feed_of_an_update_holds_every_column_embeddings_too(template, tmp_path):
    """Rows of every type (an embedding, a list, a map, nested structs, NULLs, NaN): the net
    change feed of an update that moves rows is the matched rows' old values deleted and their
    new values inserted, every column as the namespace reads it."""
    root, source, con = template
    copy = copied_root(root, tmp_path / "copy")
    where = "i32 > 0 OR s IS NULL"
    before = int(manifest(copy).version)
    old = [r for r in published_rows(copy).to_pylist() if r["id"] in _ids(con, where)]
    ok(copy, "update", "--set", "d = DATE '2021-06-01'", "--where", where, "--yes")
    new = [r for r in published_rows(copy).to_pylist() if r["id"] in _ids(con, where)]
    # in this process: Spark has no EXCEPT ALL over a map column (the template has one)
    args = ("--changes", "--net", "--since-version", str(before), "--engine", "local")
    feed = ok(copy, "--json", "scan", *args)
    shown = feed.json()
    rows = [dict(zip(shown["columns"], r, strict=True)) for r in shown["rows"]]
    assert "emb" in shown["columns"] and shown["columns"][-1] == "_change_type"

    def cells(found: list[dict], kind: str | None = None) -> str:
        picked = [{k: v for k, v in r.items() if k != "_change_type"} for r in found
                  if kind is None or r["_change_type"] == kind]  # fmt: skip
        return json.dumps(sorted(picked, key=lambda r: r["id"]), default=str)

    scanned = ok(copy, "--json", "scan", "--where", where).json()
    as_scanned = [dict(zip(scanned["columns"], r, strict=True)) for r in scanned["rows"]]
    assert cells(rows, "insert") == cells(as_scanned)  # the new values, as a read shows them
    assert len([r for r in rows if r["_change_type"] == "delete"]) == len(old) == len(new)


def _ids(con, where: str) -> set[int]:
    return {r[0] for r in con.execute(f"SELECT id FROM t WHERE {where}").fetchall()}
