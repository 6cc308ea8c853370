"""`update ID` and `merge ID`: rows of one plain table changed, as users run them.

A table of every type (typed_rows.py) is updated with generated conditions and assignments, and
the result checked against DuckDB's CASE over the same rows; merges (with and without deleting
what the source lacks) against a model keyed by id. Another writer committing first makes the
update read again on top of it; a partition table, a pinned table and bad input are refused in
one line with nothing changed.
"""

from __future__ import annotations

import json

import duckdb
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Root, cli, copied_root, ok, tree_snapshot
from hypothesis import given
from hypothesis import strategies as st
from typed_rows import conditions, few_examples, make_rows

ASSIGNMENTS = [  # (--set, the column, DuckDB's expression)
    ("i64 = 5", "i64", "5"),
    ("s = 'changed'", "s", "'changed'"),
    ("flag = NOT flag", "flag", "NOT flag"),
    ("d = DATE '2021-06-01'", "d", "DATE '2021-06-01'"),
    ("i32 = i32 - 1", "i32", "i32 - 1"),
]


@pytest.fixture(scope="module")
def plain_table(tmp_path_factory):
    """A root with one plain table of every type (from Parquet, its map too: Parquet names a
    map's entries after the column, and the table must still take rows Lance reads back),
    and DuckDB over its rows."""
    folder = tmp_path_factory.mktemp("plain")
    rows = make_rows(200, 5, 0)
    pq.write_table(rows, folder / "rows.parquet")
    root = Root(str(folder / "root"), {}, folder / "root")
    ok(root, "init")
    ok(root, "create", "table", "t", "--from", str(folder / "rows.parquet"))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", rows)
    return root, rows, con


def _rows(root: Root) -> pa.Table:
    return lance.dataset(str(root.local_path / "t.lance")).to_table().sort_by("id")


def _json(values: list) -> str:
    return json.dumps(values, default=str)  # NaN alike


def test_generated_updates_of_one_table_leave_what_duckdb_leaves(plain_table, tmp_path):
    root, rows, con = plain_table
    count = iter(range(1000))

    @few_examples(10)
    @given(conditions(), st.sampled_from(ASSIGNMENTS))
    def check(where, assignment):
        text, column, expression = assignment
        copy = copied_root(root, tmp_path / f"copy{next(count)}")
        matched = con.execute(f"SELECT count(*) FROM t WHERE {where}").fetchall()[0][0]
        args = ("update", "t", "--set", text, "--where", where)
        try:
            expected = con.sql(
                f"SELECT id, CASE WHEN ({where}) THEN {expression} ELSE {column} END AS v "
                "FROM t ORDER BY id"
            ).to_arrow_table()
        except duckdb.Error:  # a new value out of its type's range: refused, nothing changed
            before = tree_snapshot(copy.local_path)
            result = cli(copy, *args, "--yes")
            assert result.exit_code == 2 and "--set" in result.stderr, result.stderr
            assert tree_snapshot(copy.local_path) == before
            return
        dry = json.loads(ok(copy, "--json", *args, "--dry-run").stdout)
        assert dry["rows_updated"] == matched, where
        done = json.loads(ok(copy, "--json", *args, "--yes").stdout)
        assert done["rows_updated"] == matched, where
        assert done["version"] == done["version_before"] + (1 if matched else 0)
        seen = _rows(copy)
        assert seen.column("id").to_pylist() == expected.column("id").to_pylist(), where
        got = seen.column(column)
        assert _json(got.to_pylist()) == _json(expected.column("v").cast(got.type).to_pylist())
        for other in ("emb", "st", "dec", "f64", "tags", "ts", "attrs"):
            assert _json(seen.column(other).to_pylist()) == _json(
                rows.sort_by("id").column(other).to_pylist()
            ), (where, other)

    check()


@pytest.mark.parametrize("deleting", [None, "", "i32 > 0"])
def test_a_merge_into_one_table_leaves_what_the_model_says(plain_table, tmp_path, deleting):
    root, rows, con = plain_table
    copy = copied_root(root, tmp_path / "copy")
    changed = [{**r, "s": f"merged {r['id']}"} for r in rows.to_pylist()[::9]]
    fresh = make_rows(7, 77, 90_000)
    source = pa.concat_tables([pa.Table.from_pylist(changed, schema=rows.schema), fresh])
    pq.write_table(source, tmp_path / "source.parquet")
    model = {r["id"]: r for r in rows.to_pylist()}
    args = ["merge", "t", "--from", str(tmp_path / "source.parquet"), "--on", "id"]
    if deleting is not None:
        held = {
            r[0] for r in con.execute(f"SELECT id FROM t WHERE {deleting or 'true'}").fetchall()
        }
        lacking = set(model) - set(source.column("id").to_pylist())
        model = {k: v for k, v in model.items() if k not in lacking & held}
        args += ["--delete-not-matched-by-source", "--yes"]
        args += ["--where", deleting] if deleting else []
    model.update({r["id"]: r for r in source.to_pylist()})
    dry = json.loads(ok(copy, "--json", *args, "--dry-run").stdout)
    done = json.loads(ok(copy, "--json", *args).stdout)
    for result in (dry, done):
        assert (result["rows_matched"], result["rows_inserted"]) == (len(changed), 7)
    assert done["rows_deleted"] == dry["rows_deleted"] == rows.num_rows + 7 - len(model)
    seen = sorted(_rows(copy).to_pylist(), key=lambda r: r["id"])
    assert _json(seen) == _json(sorted(model.values(), key=lambda r: r["id"]))


def test_a_writer_committing_first_is_updated_too(plain_table, tmp_path, monkeypatch):
    """The update is a compare-and-swap on the version it read: a writer that commits first
    makes it read again, so the writer's matching rows get their new values too."""
    from lancens_cli.service.catalog.table_rows import update as table_update

    root, rows, _ = plain_table
    copy = copied_root(root, tmp_path / "copy")
    pq.write_table(make_rows(5, 8, 70_000).drop_columns(["attrs"]), tmp_path / "extra.parquet")
    extra = pq.read_table(tmp_path / "extra.parquet")  # lists named as the table names them
    real = table_update.replacement
    raced = []

    def racing(line, predicate, fragments):
        if not raced:
            raced.append(True)
            lance.write_dataset(extra, str(copy.local_path / "t.lance"), mode="append")
        return real(line, predicate, fragments)

    monkeypatch.setattr(table_update, "replacement", racing)
    done = json.loads(
        ok(copy, "--json", "update", "t", "--set", "s = 'x'", "--where", "id >= 0", "--yes").stdout
    )
    assert done["rows_updated"] == rows.num_rows + 5
    seen = _rows(copy)
    assert seen.num_rows == rows.num_rows + 5
    assert set(seen.column("s").to_pylist()) == {"x"}


@pytest.mark.parametrize("when", ["while it reads", "as it commits"])
def test_an_update_is_made_once_whenever_another_writer_commits(plain_table, tmp_path, when):
    """`i64 = i64 + 1` applied twice would add 2. A writer committing while the update works
    out its rows makes it work them out again (the writer's rows updated too); one committing
    in the instant before the commit is one Lance puts the update on top of (its rows as
    written). Either way every row read is updated exactly once and no row is lost."""
    from lancens_cli.service.catalog.table_rows import delete as table_delete
    from lancens_cli.service.catalog.table_rows import update as table_update

    root, rows, _ = plain_table
    copy = copied_root(root, tmp_path / "copy")
    extra = make_rows(5, 8, 70_000).drop_columns(["attrs"])
    pq.write_table(extra, tmp_path / "extra.parquet")
    extra = pq.read_table(tmp_path / "extra.parquet")  # lists named as the table names them
    raced: list[bool] = []

    def race() -> None:
        if not raced:
            raced.append(True)
            lance.write_dataset(extra, str(copy.local_path / "t.lance"), mode="append")

    patch = pytest.MonkeyPatch()
    if when == "while it reads":
        real = table_update.replacement
        patch.setattr(table_update, "replacement", lambda *a: (race(), real(*a))[1])
    else:
        commit = lance.LanceDataset.commit

        def racing_commit(*args, **kwargs):
            race()
            return commit(*args, **kwargs)

        patch.setattr(table_delete.lance.LanceDataset, "commit", staticmethod(racing_commit))
    try:
        where = "i64 > -1000000 AND i64 < 1000000"  # not the extremes: `+ 1` stays in int64
        args = ("update", "t", "--set", "i64 = i64 + 1", "--where", where, "--yes")
        done = json.loads(ok(copy, "--json", *args).stdout)
    finally:
        patch.undo()
    seen = {r["id"]: r["i64"] for r in _rows(copy).to_pylist()}
    before = {r["id"]: r["i64"] for r in rows.to_pylist()}
    added = {r["id"]: r["i64"] for r in extra.to_pylist()}
    assert set(seen) == set(before) | set(added)
    picked = lambda v: v is not None and -1_000_000 < v < 1_000_000  # noqa: E731
    assert all(seen[i] == (v + 1 if picked(v) else v) for i, v in before.items())
    again = when == "while it reads"
    assert all(seen[i] == (v + 1 if again and picked(v) else v) for i, v in added.items())
    updated = sum(map(picked, before.values())) + (sum(map(picked, added.values())) if again else 0)
    assert done["rows_updated"] == updated
    assert any(map(picked, added.values()))  # the writer's rows are ones the update would pick


@pytest.mark.parametrize(
    "args, words",
    [
        (["update", "t", "--set", "nope = 1", "--where", "id > 0", "--yes"], "unknown column"),
        (["update", "t", "--set", "i64 = 1", "--where", "nope > 0", "--yes"], "nope"),
        (["update", "t", "--set", "i32 = i32 * i32", "--where", "id >= 0", "--yes"], "beyond"),
        (["merge", "t", "--from", "SOURCE", "--on", "nope"], "unknown column 'nope'"),
        (["merge", "t", "--from", "TWICE", "--on", "id"], "more than once"),
        (["merge", "t", "--from", "SOURCE", "--on", "id", "--delete-not-matched-by-source"],
         "without --yes"),
    ],
)  # fmt: skip
def test_bad_input_to_one_table_is_one_line_and_changes_nothing(plain_table, tmp_path, args, words):
    root, rows, _ = plain_table
    copy = copied_root(root, tmp_path / "copy")
    pq.write_table(rows.slice(0, 3), tmp_path / "source.parquet")
    pq.write_table(pa.concat_tables([rows.slice(0, 2), rows.slice(0, 1)]), tmp_path / "t.parquet")
    files = {"SOURCE": str(tmp_path / "source.parquet"), "TWICE": str(tmp_path / "t.parquet")}
    before = tree_snapshot(copy.local_path)
    result = cli(copy, *[files.get(a, a) for a in args])
    assert result.exit_code in (2, 5) and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert tree_snapshot(copy.local_path) == before


def test_a_partition_table_is_changed_through_its_namespace(template, tmp_path):
    copy = copied_root(template[0], tmp_path / "copy")
    table = json.loads(ok(copy, "--json", "partitions").stdout)["partitions"][0]["table"]
    pq.write_table(template[1].slice(0, 2), tmp_path / "rows.parquet")
    before = tree_snapshot(copy.local_path)
    for args in (
        ["update", table, "--set", "i64 = 1", "--where", "id = 1", "--yes"],
        ["merge", table, "--from", str(tmp_path / "rows.parquet"), "--on", "id"],
    ):
        result = cli(copy, *args)
        assert result.exit_code == 2 and "is a partition table" in result.stderr, result.stderr
    assert tree_snapshot(copy.local_path) == before


@pytest.mark.parametrize("stable", [True, False])
def test_an_update_keeps_the_stable_row_ids_it_rewrites_and_the_feed_pairs_them(tmp_path, stable):
    """A table written with Lance's stable row ids (by pylance or lancedb): the rows `update`
    writes anew keep their ids, as Lance's own update keeps them, so the change feed gives
    each one's old and new values as a pair; without stable ids they are a delete and an
    insert. Either way every row reads as the update says."""
    (tmp_path / "r").mkdir()
    path = str(tmp_path / "r" / "t.lance")
    rows = make_rows(60, 3, 0).select(["id", "s", "i64", "emb"])
    lance.write_dataset(rows.slice(0, 30), path, enable_stable_row_ids=stable)
    lance.write_dataset(rows.slice(30), path, mode="append")
    before = lance.dataset(path).to_table(with_row_id=True)
    ids_before = dict(zip(before["id"].to_pylist(), before["_rowid"].to_pylist(), strict=True))
    root = Root(str(tmp_path / "r"), {}, tmp_path / "r")
    picked = [i for i in ids_before if i % 7 == 0]
    where = f"id IN ({', '.join(map(str, picked))})"
    ok(root, "update", "t", "--set", "i64 = -1", "--where", where, "--yes")
    after = lance.dataset(path).to_table(with_row_id=True)
    updated = set(picked)
    assert sorted(after["id"].to_pylist()) == sorted(ids_before)
    for row in after.to_pylist():
        old = rows.filter(pa.compute.equal(rows["id"], row["id"])).to_pylist()[0]
        assert row["i64"] == (-1 if row["id"] in updated else old["i64"])
        assert (row["s"], row["emb"]) == (old["s"], old["emb"])
        if stable:
            assert row["_rowid"] == ids_before[row["id"]]
    feed = ok(root, "--json", "scan", "t", "--changes", "--since-version", "2", "--engine",
              "local", "--columns", "id,i64,_change_type").json()  # fmt: skip
    got = sorted(map(tuple, feed["rows"]), key=repr)
    olds = {r["id"]: r["i64"] for r in rows.to_pylist()}
    kinds = ("update_preimage", "update_postimage") if stable else ("delete", "insert")
    want = [(i, olds[i], kinds[0]) for i in updated] + [(i, -1, kinds[1]) for i in updated]
    assert got == sorted(want, key=repr)
