"""The change feed (`scan --changes`, the data source's `readChanges`): every row inserted or
deleted between two `__manifest` versions, with the version that did it.

Histories are generated (writes, deletes, updates that move rows between partitions, merges,
compactions by `prune --compact`, a second spec version, writes that died before their
`__manifest` commit, restores). For every pair of versions (A, B), the changes read must add up to
what DuckDB finds between the namespace read back with pylance alone at A and at B: net inserts
= B EXCEPT ALL A, net deletes = A EXCEPT ALL B; the rows of each version are the changes of that
version read alone; `--net` gives the same net effect. What cannot be told (a pruned version) is
refused naming the version.
"""

from __future__ import annotations

import itertools
from collections import Counter

import duckdb
import lance
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pyarrow.parquet as pq
import pytest
from data import events
from helpers import SPEC1, Root, cli, copied_root, modules_loaded_by, ok, tree_snapshot
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from test_incremental import (
    COLUMNS,
    History,
    difference,
    manifest_versions,
    published_rows,
    source_rows,
)

from lancens_cli.errors import LancensError

ADDED = ("insert", "update_postimage")


def changes(root: Root, since: int, until: int | None = None, **extra: str) -> list[dict]:
    """The data source's change feed, planned and read as Spark's driver and tasks do."""
    options = {"root": root.uri, "sinceVersion": str(since), "readChanges": "true", **extra}
    if until is not None:
        options["versionAsOf"] = str(until)
    return source_rows(options)


def net_of(rows: list[dict]) -> tuple[list[tuple], list[tuple]]:
    """The net inserts and deletes that change rows add up to, sorted as `difference` sorts."""
    balance: Counter = Counter()
    for row in rows:
        balance[tuple(row[c] for c in COLUMNS)] += 1 if row["_change_type"] in ADDED else -1
    added = [key for key, n in balance.items() for _ in range(max(n, 0))]
    removed = [key for key, n in balance.items() for _ in range(max(-n, 0))]
    return sorted(added, key=repr), sorted(removed, key=repr)


class ChangingHistory(History):
    """`History` with the row changes too: delete, update (moving rows), merge, restore."""

    def apply(self, step: tuple) -> None:
        kind = step[0]
        if kind == "delete":
            ok(self.root, "delete", "--where", self.some_ids(step[1], 7), "--yes")
        elif kind == "update":
            where = self.some_ids(step[1], 5)
            ok(self.root, "update", "--set", "country = 'ZZ'", "--where", where, "--yes")
        elif kind == "merge":
            self.merge(step[1])
        elif kind == "evolve" and not self.evolved:
            ok(self.root, "evolve-schema", "--add", "note string")
            self.evolved = True
        elif kind == "restore":
            versions = manifest_versions(self.root)
            if len(versions) > 2:
                back = versions[step[1] % (len(versions) - 1)]
                ok(self.root, "restore", "--to-version", str(back), "--yes")
        else:
            super().apply(step)

    evolved = False

    def some_ids(self, seed: int, every: int) -> str:
        """A condition on every `every`-th id written so far."""
        ids = range(seed % every, max(self.next_id, 1), every)
        return f"id IN ({', '.join(map(str, ids))})"

    def merge(self, seed: int) -> None:
        """Upsert: half the rows change an existing id's customer, half are new ids."""
        now = published_rows(self.root, manifest_versions(self.root)[-1])
        ids = sorted(now.column("id").to_pylist())[seed % 3 :: 4][:5]
        fresh = list(range(self.next_id, self.next_id + 3))
        self.next_id += 3
        table = events(len(ids) + len(fresh), seed=seed, start=0)
        table = table.set_column(0, "id", pa.array(ids + fresh, table.schema.field("id").type))
        if "note" in self.schema_names():  # a merge gives every column
            table = table.append_column("note", pa.nulls(table.num_rows, pa.string()))
        path = self.tmp / f"merge{self.next_id}.parquet"
        pq.write_table(table, path)
        ok(self.root, "merge", "--from", str(path), "--on", "id")

    def dead_write(self, seed: int) -> None:
        """`History.dead_write`, with NULL for a column the namespace gained."""
        manifest = lance.dataset(str(self.root.local_path / "__manifest")).to_table().to_pylist()
        tables = [r for r in manifest if r["object_type"] == "table" and "$" in r["object_id"]]
        if not tables:
            return
        location = str(self.root.local_path / tables[seed % len(tables)]["location"])
        rows = events(3, seed=seed, start=900_000 + self.next_id)
        self.next_id += 3
        schema = lance.dataset(location).schema
        columns = [
            rows.column(f.name) if f.name in rows.column_names else pa.nulls(3, f.type)
            for f in schema
        ]
        lance.write_dataset(pa.Table.from_arrays(columns, schema=schema), location, mode="append")

    def schema_names(self) -> list[str]:
        from lancens_cli.service.namespace import Namespace
        from lancens_cli.service.partitioned.layout import layout_of

        layout = layout_of(Namespace.from_properties({"root": self.root.uri}).snapshot())
        return layout.schema.names if layout is not None else []


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"),
            st.integers(1, 30),
            st.integers(0, 99),
            st.sampled_from([2024, 2025, 2026]),
        ),
        st.tuples(st.sampled_from(["delete", "update", "merge", "restore"]), st.integers(0, 99)),
        st.just(("compact",)),
        st.just(("spec",)),
        st.just(("evolve",)),
        st.tuples(st.just("dead"), st.integers(0, 99)),
    ),
    min_size=4,
    max_size=9,
)


def _shown(row: dict) -> str:
    """A change row by the columns every version has, and what changed it."""
    return repr([row[c] for c in (*COLUMNS, "_change_type", "_commit_version")])


def _new_root(tmp) -> Root:
    (tmp / "ns").mkdir()
    root = Root(str(tmp / "ns"), {}, tmp / "ns")
    schema = tmp / "schema.parquet"
    pq.write_table(events(1), schema)
    ok(root, "add-partition-spec", "--schema", str(schema), *SPEC1)
    return root


@settings(
    max_examples=8,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # a failure is shown as drawn
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(
    [("update", 1), ("spec",), ("merge", 2), ("dead", 3), ("delete", 4), ("compact",),
     ("evolve",), ("restore", 1), ("write", 5, 6, 2026), ("update", 3)]
)  # fmt: skip
@given(steps)
def test_every_pair_of_versions_changes_by_what_duckdb_finds_between(tmp_path_factory, history):
    tmp = tmp_path_factory.mktemp("changes")
    root = _new_root(tmp)
    partitioned_since = manifest_versions(root)[-1]  # before: not yet a partitioned namespace
    built = ChangingHistory(root, tmp)
    ok(root, "write", "--from", built.rows(20, 0, 2025))
    for step in history:
        built.apply(step)
    versions = [v for v in manifest_versions(root) if v >= partitioned_since]
    reads = {v: published_rows(root, v) for v in versions}
    reads[0] = reads[versions[0]].slice(0, 0)
    each = {v: changes(root, v - 1, v) for v in versions if v > partitioned_since}
    for a, b in itertools.combinations([0, *versions], 2):
        if b == partitioned_since:
            continue
        rows = changes(root, a, b)
        expected = (difference(reads[b], reads[a]), difference(reads[a], reads[b]))
        assert net_of(rows) == expected, (history, a, b)
        assert {r["_commit_version"] for r in rows} <= set(range(a + 1, b + 1))
        # the rows of each version are that version's changes read alone
        by_version = [r for v in range(a + 1, b + 1) for r in each.get(v, [])]
        assert sorted(map(_shown, rows)) == sorted(map(_shown, by_version)), (history, a, b)


def test_scan_changes_through_the_cli_names_each_version_and_nets_them(partitioned, files):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(30)))
    start = manifest_versions(root)[-1]
    ok(root, "delete", "--where", "id < 3", "--yes")
    ok(root, "update", "--set", "country = 'ZZ'", "--where", "id = 10", "--yes")
    ok(root, "write", "--from", files("b.parquet", events(2, seed=1, start=100)))
    ok(root, "delete", "--where", "id = 100", "--yes")
    end = manifest_versions(root)[-1]
    shown = ok(root, "--json", "scan", "--changes", "--since-version", str(start)).json()
    names = shown["columns"]
    assert names[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    rows = [dict(zip(names, row, strict=True)) for row in shown["rows"]]
    kinds = Counter((r["_commit_version"], r["_change_type"]) for r in rows)
    assert kinds == {
        (start + 1, "delete"): 3,
        (start + 2, "delete"): 1,
        (start + 2, "insert"): 1,
        (start + 3, "insert"): 2,
        (end, "delete"): 1,
    }
    updated = [r for r in rows if r["id"] == 10]
    assert {(r["_change_type"], r["country"]) for r in updated} == {("insert", "ZZ")} | {
        ("delete", next(r["country"] for r in updated if r["_change_type"] == "delete"))
    }
    net = ok(root, "--json", "scan", "--changes", "--net", "--since-version", str(start)).json()
    assert net["columns"] == [*COLUMNS, "_change_type"]
    got = sorted((row[0], row[-1]) for row in net["rows"])
    assert got == [(0, "delete"), (1, "delete"), (2, "delete"), (10, "delete"), (10, "insert"),
                   (101, "insert")]  # fmt: skip
    only = ok(
        root, "scan", "--changes", "--since-version", str(start), "--count",
        "--where", "_change_type = 'delete' AND id < 50",
    )  # fmt: skip
    assert only.stdout.strip() == "4"


def test_a_compaction_changes_nothing_and_a_pruned_version_is_refused_by_number(partitioned, files):
    root = partitioned
    for i in range(3):
        ok(root, "write", "--from", files(f"{i}.parquet", events(10, seed=i, start=100 * i)))
    ok(root, "delete", "--where", "id IN (0, 4, 8, 104, 200)", "--yes")
    before = manifest_versions(root)[-1]
    ok(root, "prune", "--compact", "--yes")
    after = manifest_versions(root)[-1]
    assert after > before
    assert changes(root, before, after) == []
    ok(root, "prune", "--older-than", "0s", "--force", "--yes")
    oldest = manifest_versions(root)[0]
    result = cli(root, "scan", "--changes", "--since-version", "1", "--count")
    assert result.exit_code == 3, result.stderr
    assert "version" in result.stderr and "\n" not in result.stderr.strip()
    assert "Traceback" not in result.stderr
    assert changes(root, oldest, after) == []


def test_the_plain_incremental_read_says_the_change_feed_reads_a_delete(partitioned, files):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(20)))
    start = manifest_versions(root)[-1]
    ok(root, "delete", "--where", "id = 1", "--yes")
    result = cli(root, "scan", "--since-version", str(start), "--count")
    assert result.exit_code == 2
    assert "--changes" in result.stderr, result.stderr
    with pytest.raises(LancensError) as refused:
        from test_incremental import incremental

        incremental(root, start)
    assert "readChanges" in refused.value.message


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--changes"], "--since-version"),
        (["--net", "--since-version", "1"], "--changes"),
        (["--changes", "--since-version", "1", "--columns", "nope"], "unknown column"),
        (["--changes", "--net", "--since-version", "1", "--columns", "_commit_version"], "unknown"),
        (["--changes", "--since-version", "1", "--where", "nope = 1"], "nope"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(partitioned, files, args, words):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(10)))
    before = tree_snapshot(root.local_path)
    result = cli(root, "scan", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert words in result.stderr and "Traceback" not in result.stderr
    assert tree_snapshot(root.local_path) == before


def test_stable_row_ids_pair_an_update_as_its_pre_and_post_image(tmp_path):
    """One table read alone, written by another tool with stable row ids: Lance keeps a row's
    id when it updates it, so the feed pairs the old and new values."""
    folder = tmp_path / "root"
    folder.mkdir()
    root = Root(str(folder), {}, folder)
    table = pa.table({"id": pa.array(range(8), pa.int64()), "name": [f"n{i}" for i in range(8)]})
    dataset = lance.write_dataset(
        table, str(folder / "t.lance"), enable_stable_row_ids=True, max_rows_per_file=4
    )
    dataset.update({"name": "'renamed'"}, where="id IN (1, 6)")
    dataset.delete("id = 2")
    lance.write_dataset(table.slice(0, 1), str(folder / "t.lance"), mode="append")
    dataset = lance.dataset(str(folder / "t.lance"))
    dataset.optimize.compact_files(target_rows_per_fragment=100)  # moves: no change
    shown = ok(root, "--json", "scan", "t", "--changes", "--since-version", "1").json()
    rows = [dict(zip(shown["columns"], row, strict=True)) for row in shown["rows"]]
    got = sorted((r["_commit_version"], r["_change_type"], r["id"], r["name"]) for r in rows)
    assert got == [
        (2, "update_postimage", 1, "renamed"),
        (2, "update_postimage", 6, "renamed"),
        (2, "update_preimage", 1, "n1"),
        (2, "update_preimage", 6, "n6"),
        (3, "delete", 2, "n2"),
        (4, "insert", 0, "n0"),
    ]


@pytest.mark.spark
def test_a_users_pyspark_job_reads_the_change_feed_and_the_cli_nets_it_on_spark(
    partitioned, files, spark
):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(40)))
    start = manifest_versions(root)[-1]
    ok(root, "delete", "--where", "id < 5", "--yes")
    ok(root, "update", "--set", "country = 'ZZ'", "--where", "id BETWEEN 10 AND 12", "--yes")
    end = manifest_versions(root)[-1]
    expected = net_of(changes(root, start))
    df = (
        spark.read.format("lancens")
        .option("root", root.uri)
        .option("readChanges", "true")
        .option("sinceVersion", str(start))
        .load()
    )
    rows = [r.asDict() for r in df.collect()]
    assert {r["_commit_version"] for r in rows} == {start + 1, end}
    assert net_of(rows) == expected
    assert df.filter("_change_type = 'delete'").count() == 8  # the same DataFrame, reused
    net = ok(root, "--json", "scan", "--changes", "--net", "--since-version", str(start),
             "--engine", "spark").json()  # fmt: skip
    got = sorted((row[0], row[-1]) for row in net["rows"])
    want = [(k[0], "insert") for k in expected[0]] + [(k[0], "delete") for k in expected[1]]
    assert got == sorted(want)


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    """Spec on g; ten rows written, three deleted, one updated, a merge of one row changed and
    one new: `__manifest` versions 3 to 6, and the feed from 0 in DuckDB's hands."""
    folder = tmp_path_factory.mktemp("small")
    rows = pa.table(
        {
            "id": pa.array(range(10), pa.int64()),
            "g": ["a" if i % 2 == 0 else "b" for i in range(10)],
            "v": pa.array([float(i) for i in range(10)]),
        }
    )
    pq.write_table(rows.schema.empty_table(), folder / "schema.parquet")
    pq.write_table(rows, folder / "rows.parquet")
    merged = pa.table({"id": pa.array([5, 20], pa.int64()), "g": ["b", "b"], "v": [50.0, 200.0]})
    pq.write_table(merged, folder / "merge.parquet")
    (folder / "root").mkdir()
    root = Root(str(folder / "root"), {}, folder / "root")
    ok(root, "add-partition-spec", "--schema", str(folder / "schema.parquet"), "--field", "g")
    ok(root, "write", "--from", str(folder / "rows.parquet"))
    ok(root, "delete", "--where", "id < 3", "--yes")
    ok(root, "update", "--set", "v = v + 1", "--where", "id = 4", "--yes")
    ok(root, "merge", "--from", str(folder / "merge.parquet"), "--on", "id")
    everything = ok(root, "--json", "scan", "--changes", "--since-version", "0").json()
    con = duckdb.connect()
    con.register("feed", pa.Table.from_pylist(
        [dict(zip(everything["columns"], r, strict=True)) for r in everything["rows"]]
    ))  # fmt: skip
    return root, con


@pytest.mark.parametrize(
    "where",
    [
        "_change_type = 'delete' OR id > 5",
        "NOT (_change_type = 'insert' AND g = 'a')",
        "_commit_version = 4",
        "_change_type = 'delete'",
        "v > 4 AND _commit_version >= 5",
    ],
)
@pytest.mark.parametrize("columns", [None, "id", "_change_type", "_commit_version,id"])
def test_conditions_and_columns_of_the_feed_select_what_duckdb_selects(small_root, where, columns):
    """A condition on the change columns, alone or mixed with the rows' own, with any columns
    returned (or only change columns), and counted."""
    root, con = small_root
    shown = columns or "id, g, v, _change_type, _commit_version, _commit_timestamp"
    want = con.execute(f"SELECT {shown} FROM feed WHERE {where}").fetchall()
    args = ["scan", "--changes", "--since-version", "0", "--where", where]
    args += ["--columns", columns] if columns else []
    got = ok(root, "--json", *args).json()["rows"]
    plain = [tuple(v.isoformat() if hasattr(v, "isoformat") else v for v in r) for r in want]
    assert sorted(map(tuple, got), key=repr) == sorted(plain, key=repr)
    assert ok(root, *args, "--count").stdout.strip() == str(len(want))


def test_net_changes_are_written_as_files(small_root, tmp_path):
    root, con = small_root
    ok(root, "scan", "--changes", "--since-version", "3", "--net", "--to", str(tmp_path / "net"))
    written = pq.read_table(tmp_path / "net")
    assert written.column_names == ["id", "g", "v", "_change_type"]
    deleted = written.filter(pa.compute.equal(written.column("_change_type"), "delete"))
    assert sorted(deleted.column("id").to_pylist()) == [0, 1, 2, 4, 5]


def test_a_feed_written_as_files_gathers_its_pieces_into_row_groups(small_root, tmp_path):
    """Every version's pieces (a few rows each) in one row group, not one row group a piece."""
    root, con = small_root
    ok(root, "scan", "--changes", "--since-version", "0", "--to", str(tmp_path / "all"))
    (written,) = (tmp_path / "all").glob("*.parquet")
    meta = pq.ParquetFile(written).metadata
    assert (meta.num_row_groups, meta.num_rows) == (
        1,
        con.execute("SELECT count(*) FROM feed").fetchone()[0],
    )
    versions = con.execute("SELECT count(DISTINCT _commit_version) FROM feed").fetchone()[0]
    assert versions > 1


def test_a_feed_without_a_condition_loads_no_sql_parser(small_root, tmp_path):
    """A feed read from cron pays for what it uses: sqlglot (a tenth of a second of a whole
    process) loads for a `--where` only, and Spark never for a feed read in this process."""
    root, con = small_root
    args = ["--root", root.uri, "scan", "--changes", "--since-version", "0"]
    _, loaded = modules_loaded_by([*args, "--to", str(tmp_path / "all")], {"sqlglot", "pyspark"})
    assert loaded == []
    assert (
        pq.read_table(tmp_path / "all").num_rows
        == con.execute("SELECT count(*) FROM feed").fetchone()[0]
    )
    _, loaded = modules_loaded_by([*args, "--where", "id > 5", "--count"], {"sqlglot"})
    assert loaded == ["sqlglot"]


def test_row_groups_are_bounded_in_rows_and_bytes(monkeypatch):
    from lancens_cli.pipeline import local_read

    batches = [pa.record_batch({"x": pa.array(range(i, i + 3), pa.int64())}) for i in range(10)]
    monkeypatch.setattr(local_read, "_GROUP_ROWS", 7)
    groups = list(local_read.row_groups(iter(batches)))
    assert [sum(b.num_rows for b in g) for g in groups] == [6, 6, 6, 6, 6]
    assert [b for g in groups for b in g] == batches
    monkeypatch.setattr(local_read, "_GROUP_BYTES", batches[0].nbytes * 3)
    monkeypatch.setattr(local_read, "_GROUP_ROWS", 1 << 20)
    assert [len(g) for g in local_read.row_groups(iter(batches))] == [3, 3, 3, 1]


def test_one_table_read_alone_follows_its_renamed_columns(tmp_path):
    """Lance keeps a column's field id when it is renamed: the versions before are read
    through it, not by name."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    folder = tmp_path / "root"
    folder.mkdir()
    path = str(folder / "t.lance")
    dataset = lance.write_dataset(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]},
                                           schema=schema), path)  # fmt: skip
    dataset.delete("id = 1")
    dataset.alter_columns({"path": "name", "name": "label"})
    dataset.delete("id = 2")
    lance.dataset(path).alter_columns({"path": "id", "name": "key"})
    root = Root(str(folder), {}, folder)
    shown = ok(root, "--json", "scan", "t", "--changes", "--since-version", "0").json()
    assert shown["columns"][:2] == ["key", "label"]
    got = sorted((r[2], r[0], r[1]) for r in shown["rows"])
    assert got == [("delete", 1, "a"), ("delete", 2, "b"),
                   ("insert", 1, "a"), ("insert", 2, "b"), ("insert", 3, "c")]  # fmt: skip


def test_a_partition_table_on_a_branch_is_read_from_before_its_fork(small_root, tmp_path):
    root, _ = small_root
    copy = copied_root(root, tmp_path / "copy")
    pq.write_table(pa.table({"id": pa.array([30], pa.int64()), "g": ["a"], "v": [3.0]}),
                   tmp_path / "more.parquet")  # fmt: skip
    ok(copy, "write", "--from", str(tmp_path / "more.parquet"), "--branch", "dev")
    listed = ok(copy, "--json", "partitions").json()["partitions"]
    (table,) = [p["table"] for p in listed if p.get("read_branch") == "dev"]
    shown = ok(copy, "--json", "scan", table, "--changes", "--since-version", "0").json()
    rows = [dict(zip(shown["columns"], r, strict=True)) for r in shown["rows"]]
    balance = Counter()
    for r in rows:
        balance[r["id"]] += 1 if r["_change_type"] in ADDED else -1
    live = ok(copy, "--json", "scan", table).json()["rows"]
    assert sorted(k for k, n in balance.items() for _ in range(n)) == sorted(r[0] for r in live)


def test_a_condition_on_the_rows_keeps_an_updates_image_named_as_such(tmp_path):
    folder = tmp_path / "root"
    folder.mkdir()
    table = pa.table({"id": pa.array(range(8), pa.int64()), "name": [f"n{i}" for i in range(8)]})
    dataset = lance.write_dataset(
        table, str(folder / "t.lance"), enable_stable_row_ids=True, max_rows_per_file=4
    )
    dataset.update({"name": "'renamed'"}, where="id IN (1, 6)")
    root = Root(str(folder), {}, folder)
    args = ("--json", "scan", "t", "--changes", "--since-version", "1")
    only = ok(root, *args, "--where", "name = 'n1'").json()["rows"]
    assert [(r[0], r[2]) for r in only] == [(1, "update_preimage")]


@pytest.mark.spark
def test_net_changes_of_rows_holding_maps_are_the_same_on_spark_as_in_process(tmp_path, spark):
    """Spark can neither group nor compare a map (EXCEPT ALL refuses one); a net feed over a
    map column, a struct holding a map, a list of maps, a map of microsecond timestamps and
    one keyed by bytes nets on Spark as the in-process engine nets it: equal rows cancel, a
    row changed inside a map (by a microsecond too) does not."""
    import datetime as dt

    folder = tmp_path / "root"
    folder.mkdir()
    root = Root(str(folder), {}, folder)
    tags = pa.map_(pa.string(), pa.int64())
    stamps = pa.map_(pa.string(), pa.timestamp("us"))
    start = dt.datetime(2024, 1, 1, 0, 0, 0, 1)
    table = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "tags": pa.array([[("a", i), ("b", -i)] if i % 3 else None for i in range(6)], tags),
            "inner": pa.array(
                [{"m": [(f"k{i}", i)], "n": i} for i in range(6)],
                pa.struct([("m", tags), ("n", pa.int64())]),
            ),
            "many": pa.array([[[("x", i)], []] for i in range(6)], pa.list_(tags)),
            "stamps": pa.array([[("t", start)]] * 6, stamps),
            "bytes": pa.array([[(b"k", i)] for i in range(6)], pa.map_(pa.binary(), pa.int64())),
        }
    )
    path = str(folder / "t.lance")
    dataset = lance.write_dataset(table, path, max_rows_per_file=2)
    dataset.delete("id IN (1, 3, 4)")
    lance.write_dataset(table.filter(pa.compute.field("id") == 1), path, mode="append")  # back
    changed = table.filter(pa.compute.field("id") == 4).set_column(
        1, "tags", pa.array([[("a", 4), ("b", 5)]], tags)
    )
    lance.write_dataset(changed, path, mode="append")  # id 4 back, one map value changed
    later = start + dt.timedelta(microseconds=1)
    moved = table.filter(pa.compute.field("id") == 3).set_column(
        4, "stamps", pa.array([[("t", later)]], stamps)
    )
    lance.write_dataset(moved, path, mode="append")  # id 3 back, a microsecond later
    lance.write_dataset(table.slice(5, 1), path, mode="append")  # id 5 twice now
    args = ("--json", "scan", "t", "--changes", "--net", "--since-version", "1")
    here = ok(root, *args, "--engine", "local").json()
    there = ok(root, *args, "--engine", "spark").json()
    assert here["columns"] == there["columns"]
    assert here["columns"] == ["id", "tags", "inner", "many", "stamps", "bytes", "_change_type"]
    got = sorted((r[0], r[-1], repr(r[1:-1])) for r in there["rows"])
    assert got == sorted((r[0], r[-1], repr(r[1:-1])) for r in here["rows"])
    assert [(i, kind) for i, kind, _ in got] == [
        (3, "delete"), (3, "insert"), (4, "delete"), (4, "insert"), (5, "insert")
    ]  # fmt: skip
    assert sorted(map(repr, there["rows"])) == sorted(map(repr, here["rows"]))


def test_a_table_compacted_with_an_index_reads_its_changes(tmp_path):
    """pylance cannot build the operation of a compaction that rewrote an index (it raises
    TypeError): the version's operation is unknown, so its rows are compared by value (a
    move), and the feed, `diff` and `versions` read on."""
    (tmp_path / "r").mkdir()
    path = str(tmp_path / "r" / "t.lance")
    dataset = lance.write_dataset(pa.table({"id": list(range(50)), "s": ["a"] * 50}), path)
    for i in range(3):
        added = pa.table({"id": list(range(50 + 10 * i, 60 + 10 * i)), "s": ["b"] * 10})
        dataset = lance.write_dataset(added, path, mode="append")
    dataset.create_scalar_index("id", "BTREE")
    dataset.optimize.compact_files(target_rows_per_fragment=1000)
    root = Root(str(tmp_path / "r"), {}, tmp_path / "r")
    feed = ok(root, "--json", "scan", "t", "--changes", "--since-version", "1", "--engine",
              "local", "--columns", "id,_change_type").json()  # fmt: skip
    assert sorted(map(tuple, feed["rows"])) == [(i, "insert") for i in range(50, 80)]
    diff = ok(root, "--json", "diff", "t", "--from-version", "1").json()
    assert [v["rows_delta"] for v in diff["versions"]][-1] == 0
    assert ok(root, "versions", "t").stdout.count("\n") >= 6
