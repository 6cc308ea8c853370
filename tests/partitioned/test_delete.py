"""`lancens delete --where` as users run it, against DuckDB over the same source rows.

A namespace of every type (typed_rows.py: extremes, NaN, NULLs everywhere, an embedding, nested
types) written under two partition specs is copied for each condition, generated (hypothesis)
and written by hand; the dry run's count must be DuckDB's count of the condition, and after the
delete every reader sees exactly the rows for which the condition is not true (DuckDB's
`(cond) IS NOT TRUE`), unchanged, published in one `__manifest` commit. Writers racing the delete
in other processes lose nothing and it deletes exactly what the order of the commits says; a
killed delete publishes all or nothing and a rerun completes it; bad input changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import signal
import subprocess
import sys
import time

import duckdb
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events, partitioned_root
from helpers import (
    Root,
    cli,
    copied_root,
    json_cli_process,
    manifest,
    ok,
    published_rows,
    tree_snapshot,
)
from hypothesis import given
from typed_rows import conditions, few_examples, make_rows

from lancens_cli.errors import ConcurrentModificationError


def _version(root: Root) -> int:
    return int(manifest(root).version)


def _expect(con, where: str) -> tuple[int, list[int]]:
    """DuckDB: the rows the condition holds for, and the ids of those it does not."""
    gone = con.execute(f"SELECT count(*) FROM t WHERE {where}").fetchone()[0]
    kept = con.execute(f"SELECT id FROM t WHERE ({where}) IS NOT TRUE ORDER BY id").fetchall()
    return gone, [r[0] for r in kept]


def _deleted_as_duckdb_says(template, tmp_path, where: str, name: str) -> dict:
    root, source, con = template
    copy = copied_root(root, tmp_path / name)
    gone, kept = _expect(con, where)
    dry = ok(copy, "--json", "delete", "--where", where, "--dry-run")
    planned = json.loads(dry.stdout)
    assert planned["rows_deleted"] == gone, where
    before = _version(copy)
    done = json.loads(ok(copy, "--json", "delete", "--where", where, "--yes").stdout)
    assert done["rows_deleted"] == gone, where
    # the dry run names the tables that lose rows, not every table it read
    losing = sum(1 for p in done["partitions"] if p["rows_deleted"])
    read = len(planned["partitions"])
    words = f"from {losing} partition table{'s' * (losing != 1)} ({read} partition table"
    assert words in dry.stderr, (where, dry.stderr)
    assert _version(copy) == before + (1 if gone else 0), where  # one commit, or none
    seen = published_rows(copy).sort_by("id")
    assert seen.column("id").to_pylist() == kept, where
    expected = source.filter(pa.array([i in set(kept) for i in source["id"].to_pylist()]))
    expected = expected.sort_by("id")
    for column in ("emb", "st", "dec", "f64", "attrs"):  # the rows kept are the rows written
        mine, theirs = (
            json.dumps(t.column(column).to_pylist(), default=str) for t in (seen, expected)
        )
        assert mine == theirs, column  # NaN alike
    again = json.loads(ok(copy, "--json", "delete", "--where", where, "--yes").stdout)
    assert again["rows_deleted"] == 0 and _version(copy) == before + (1 if gone else 0)
    return planned


@pytest.mark.parametrize(
    "where",
    [
        "d >= DATE '2020-01-01'",
        "flag = true",
        "flag IS NULL AND i32 > 0",
        "s = 'ünï' OR s = 'tab\there' OR s = ''",
        "ts < TIMESTAMP '2000-01-01 00:00:00'",
        "id IN (3, 1004, 1149)",
        "emb IS NULL",
        "dec < 0",
        "i64 = 9223372036854775807 OR i8 = -128",
        "id >= 0",
    ],
)
def test_a_delete_leaves_what_duckdb_leaves(template, tmp_path, where):
    planned = _deleted_as_duckdb_says(template, tmp_path, where, "copy")
    if where == "flag = true":  # the partition values decide it where they can
        assert planned["partitions_matched"] < planned["partitions_total"]
        assert any(p["filter"] == "true" for p in planned["partitions"])


def test_generated_conditions_delete_what_duckdb_deletes(template, tmp_path):
    count = iter(range(1000))

    @few_examples(12)
    @given(conditions())
    def check(where):
        _deleted_as_duckdb_says(template, tmp_path, where, f"copy{next(count)}")

    check()


@pytest.mark.parametrize(
    "where, words",
    [
        ("nope = 1", "--where: unknown column 'nope'"),
        ("", "--where: give the condition"),
        ("upper(s) = 'a'", "cannot apply"),
        ("f64 > 1.5", "a float column"),  # Spark's float order (NaN), not promised by Lance
        ("id = ", "--where"),
        ("d = DATE 'not a date'", "--where"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(template, tmp_path, where, words):
    copy = copied_root(template[0], tmp_path / "copy")
    before = tree_snapshot(copy.local_path)
    for extra in ((), ("--dry-run",)):
        result = cli(copy, "delete", "--where", where, "--yes", *extra)
        assert result.exit_code == 2, (where, result.stderr)
        assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.stderr
    assert tree_snapshot(copy.local_path) == before


def test_a_root_that_is_not_partitioned_is_refused(tmp_path):
    root = Root(str(tmp_path / "plain"), {}, tmp_path / "plain")
    ok(root, "init")
    result = cli(root, "delete", "--where", "id = 1", "--yes")
    assert result.exit_code == 2 and "not a partitioned namespace" in result.stderr


def test_without_yes_off_a_terminal_nothing_is_deleted(template, tmp_path):
    copy = copied_root(template[0], tmp_path / "copy")
    before = tree_snapshot(copy.local_path)
    result = cli(copy, "delete", "--where", "id >= 0")
    assert result.exit_code == 5 and "without --yes" in result.stderr
    assert tree_snapshot(copy.local_path) == before


# --- other writers ---------------------------------------------------------------------------


def _events_root(tmp_path, rows: int = 2000, *fields: str) -> tuple[Root, pa.Table]:
    first = events(rows, seed=1)
    root = partitioned_root(tmp_path, first.schema, *(fields or ("year(event_date)", "country")))
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "write", "--from", str(tmp_path / "first.parquet"))
    return root, first


def test_writers_racing_a_delete_lose_nothing_and_it_deletes_in_commit_order(tmp_path):
    root, first = _events_root(tmp_path)
    batches = []
    for w in range(3):
        rows = events(400, seed=100 + w, start=10_000 * (w + 1))
        pq.write_table(rows, tmp_path / f"w{w}.parquet")
        batches.append(rows)
    procs = [
        json_cli_process(root, "write", "--from", str(tmp_path / f"w{w}.parquet")) for w in range(3)
    ]
    procs.insert(1, json_cli_process(root, "delete", "--where", "country = 'DE'", "--yes"))
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outs.append(json.loads(out))
    deleted_at = outs[1]["manifest_version"]
    written_at = [o["manifest_version"] for i, o in enumerate(outs) if i != 1]
    expected = {r["id"] for r in first.to_pylist() if r["country"] != "DE"}
    for rows, version in zip(batches, written_at, strict=True):
        for r in rows.to_pylist():
            if r["country"] != "DE" or version > deleted_at:
                expected.add(r["id"])
    seen = published_rows(root)["id"].to_pylist()
    assert len(seen) == len(set(seen)) and set(seen) == expected
    de_before = sum(1 for r in first.to_pylist() if r["country"] == "DE")
    de_racing = sum(
        1
        for rows, version in zip(batches, written_at, strict=True)
        for r in rows.to_pylist()
        if r["country"] == "DE" and version < deleted_at
    )
    assert outs[1]["rows_deleted"] == de_before + de_racing


def test_a_matching_partition_created_meanwhile_fails_the_delete(tmp_path):
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.delete import delete_rows, plan_delete

    root, first = _events_root(tmp_path)
    ns = Namespace(NamespaceConfig.from_properties({"root": root.uri}))
    plan = plan_delete(ns, "customer_id < 50")
    new = events(50, seed=9, start=50_000, first=dt.date(2030, 1, 1))
    pq.write_table(new, tmp_path / "new.parquet")
    ok(root, "write", "--from", str(tmp_path / "new.parquet"))  # a new year: new partitions
    before = sorted(published_rows(root)["id"].to_pylist())
    version = _version(root)
    with pytest.raises(ConcurrentModificationError, match="created while the change ran"):
        delete_rows(Namespace(NamespaceConfig.from_properties({"root": root.uri})), plan)
    assert _version(root) == version
    assert sorted(published_rows(root)["id"].to_pylist()) == before
    done = json.loads(ok(root, "--json", "delete", "--where", "customer_id < 50", "--yes").stdout)
    expected = [
        r["id"] for r in pa.concat_tables([first, new]).to_pylist() if r["customer_id"] >= 50
    ]
    assert sorted(published_rows(root)["id"].to_pylist()) == sorted(expected)
    assert done["rows_deleted"] == len(before) - len(expected)


@pytest.mark.slow
def test_a_killed_delete_publishes_all_or_nothing_and_a_rerun_completes_it(tmp_path):
    (tmp_path / "t").mkdir()
    root, first = _events_root(tmp_path / "t", 4000, "bucket(48, id)", "country")
    where = "customer_id < 200"
    gone = {r["id"] for r in first.to_pylist() if r["customer_id"] < 200}
    before = {r["id"] for r in first.to_pylist()}
    started = time.monotonic()
    timed = json_cli_process(
        copied_root(root, tmp_path / "timed"), "delete", "--where", where, "--yes"
    )
    timed.communicate(timeout=300)
    runtime = time.monotonic() - started
    rng = random.Random(5)
    outcomes = set()
    for trial in range(6):
        copy = copied_root(root, tmp_path / f"trial{trial}")
        proc = json_cli_process(copy, "delete", "--where", where, "--yes")
        time.sleep(rng.uniform(0.3, 0.98) * runtime)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.communicate()
        seen = published_rows(copy)["id"].to_pylist()
        assert len(seen) == len(set(seen))
        assert set(seen) in (before, before - gone), trial  # all or nothing
        outcomes.add(set(seen) == before)
        rerun = json.loads(ok(copy, "--json", "delete", "--where", where, "--yes").stdout)
        assert set(published_rows(copy)["id"].to_pylist()) == before - gone
        assert rerun["rows_deleted"] == (len(gone) if set(seen) == before else 0)
        fix = cli(copy, "check", "--fix", "--grace-minutes", "0")
        assert fix.exit_code in (0, 1), fix.stderr
        assert set(published_rows(copy)["id"].to_pylist()) == before - gone
        for row in manifest(copy).to_table(filter="object_type = 'table'").to_pylist():
            lance.dataset(str(copy.local_path / row["location"]), version=row["read_version"])
    print(f"delete ran {runtime:.1f}s; outcomes: {outcomes}")


# --- one table -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_table(tmp_path_factory):
    """A root with one plain table of every type (from Parquet), and DuckDB over its rows."""
    folder = tmp_path_factory.mktemp("delete_table")
    rows = make_rows(300, 3, 0)
    pq.write_table(rows, folder / "rows.parquet")
    root = Root(str(folder / "root"), {}, folder / "root")
    ok(root, "init")
    ok(root, "create", "table", "t", "--from", str(folder / "rows.parquet"))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", rows)
    return root, rows, con


def _table_ids(root: Root) -> list[int]:
    table = lance.dataset(str(root.local_path / "t.lance")).to_table(columns=["id"])
    return sorted(table.column("id").to_pylist())


def test_one_table_loses_what_duckdb_says(one_table, tmp_path):
    root, _, con = one_table
    count = iter(range(1000))

    @few_examples(10)
    @given(conditions())
    def check(where):
        copy = copied_root(root, tmp_path / f"copy{next(count)}")
        gone, kept = _expect(con, where)
        dry = json.loads(ok(copy, "--json", "delete", "t", "--where", where, "--dry-run").stdout)
        assert dry["rows_deleted"] == gone, where
        done = json.loads(ok(copy, "--json", "delete", "t", "--where", where, "--yes").stdout)
        assert done["rows_deleted"] == gone and _table_ids(copy) == kept, where
        assert done["version"] == done["version_before"] + (1 if gone else 0), where

    check()


def test_one_table_racing_an_appender_keeps_every_row_the_commit_order_keeps(tmp_path):
    root = Root(str(tmp_path / "root"), {}, tmp_path / "root")
    ok(root, "init")
    first = pa.table({"id": list(range(1000)), "grp": [i % 3 for i in range(1000)]})
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "create", "table", "t", "--from", str(tmp_path / "first.parquet"))
    appender = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import lance, pyarrow as pa, sys\n"
            "for b in range(12):\n"
            "    ids = list(range(10_000 * (b + 1), 10_000 * (b + 1) + 50))\n"
            "    ds = lance.write_dataset(pa.table({'id': ids, 'grp': [i % 3 for i in ids]}),\n"
            "                             sys.argv[1], mode='append')\n"
            "    print(b, ds.version, flush=True)\n",
            str(root.local_path / "t.lance"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)
    done = json.loads(ok(root, "--json", "delete", "t", "--where", "grp = 1", "--yes").stdout)
    out, _ = appender.communicate(timeout=120)
    assert appender.returncode == 0
    landed = {int(b): int(v) for b, v in (line.split() for line in out.splitlines())}
    expected = {i for i in range(1000) if i % 3 != 1}
    for batch, version in landed.items():
        ids = range(10_000 * (batch + 1), 10_000 * (batch + 1) + 50)
        expected |= {i for i in ids if i % 3 != 1 or version > done["version"]}
    assert set(_table_ids(root)) == expected and len(_table_ids(root)) == len(expected)
    earlier = [b for b, v in landed.items() if v < done["version"]]  # batches it judged too
    ones = sum(
        1 for b in earlier for i in range(10_000 * (b + 1), 10_000 * (b + 1) + 50) if i % 3 == 1
    )
    assert done["rows_deleted"] == 333 + ones


def test_one_table_refuses_a_partition_table_and_a_pinned_one(template, tmp_path):
    copy = copied_root(template[0], tmp_path / "copy")
    table = json.loads(ok(copy, "--json", "partitions").stdout)["partitions"][0]["table"]
    before = tree_snapshot(copy.local_path)
    result = cli(copy, "delete", table, "--where", "id = 1", "--yes")
    assert result.exit_code == 2 and "is a partition table" in result.stderr
    assert tree_snapshot(copy.local_path) == before


def test_one_table_beside_partitions_is_deleted_from(template, tmp_path):
    copy = copied_root(template[0], tmp_path / "copy")
    pq.write_table(make_rows(40, 5, 0), tmp_path / "plain.parquet")
    ok(copy, "create", "table", "plain", "--from", str(tmp_path / "plain.parquet"))
    done = json.loads(ok(copy, "--json", "delete", "plain", "--where", "id < 10", "--yes").stdout)
    assert done["rows_deleted"] == 10
    left = lance.dataset(str(copy.local_path / done["location"])).to_table(columns=["id"])
    assert sorted(left.column("id").to_pylist()) == list(range(10, 40))


def test_a_failed_delete_shows_nothing_of_an_older_spec_table_without_a_read_version(tmp_path):
    """A table another tool left unpinned (NULL `read_version`) in an earlier spec version: the
    delete pins it before it commits there, so a delete that fails publishes nothing."""
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.delete import delete_rows, plan_delete

    root, first = _events_root(tmp_path)
    ok(root, "add-partition-spec", "--field", "country")
    de = [
        r["object_id"]
        for r in manifest(root).to_table(filter="object_type = 'table'").to_pylist()
        if r["object_id"].startswith("v1") and r.get("partition_field_country") == "DE"
    ]
    assert de
    for object_id in de:
        manifest(root).update({"read_version": "NULL"}, where=f"object_id = '{object_id}'")
    count = published_rows(root).num_rows
    ns = Namespace(NamespaceConfig.from_properties({"root": root.uri}))
    plan = plan_delete(ns, "country = 'DE'")
    new = events(30, seed=3, start=70_000, countries=("DE",))
    pq.write_table(new, tmp_path / "new.parquet")
    ok(root, "write", "--from", str(tmp_path / "new.parquet"))  # a new spec v2 DE partition
    with pytest.raises(ConcurrentModificationError):
        delete_rows(Namespace(NamespaceConfig.from_properties({"root": root.uri})), plan)
    assert published_rows(root).num_rows == count + 30


def _count(root: Root, *where: str) -> int:
    args = ("--where", *where) if where else ()
    return int(ok(root, "scan", "--count", "--engine", "local", *args).stdout)


def test_delete_update_and_merge_on_every_store(any_root, tmp_path):
    """The three row changes on local disk, S3 (moto) and GCS (fake-gcs-server), read back
    as a reader reads the namespace."""
    rows = events(600, seed=4)
    pq.write_table(rows.schema.empty_table(), tmp_path / "schema.parquet")
    ok(any_root, "add-partition-spec", "--schema", str(tmp_path / "schema.parquet"),
       "--field", "country")  # fmt: skip
    pq.write_table(rows, tmp_path / "rows.parquet")
    wrote = ok(any_root, "--json", "write", "--from", str(tmp_path / "rows.parquet")).json()
    listed = rows.to_pylist()
    de = sum(1 for r in listed if r["country"] == "DE")
    fr = sum(1 for r in listed if r["country"] == "FR")
    ok(any_root, "delete", "--where", "country = 'DE'", "--yes")
    assert _count(any_root) == 600 - de
    ok(any_root, "update", "--set", "customer_id = -1", "--where", "country = 'FR'", "--yes")
    assert _count(any_root, "customer_id = -1") == fr
    merged = events(5, seed=9, start=90_000)
    again = pa.Table.from_pylist([{**listed[0], "customer_id": -2}], schema=rows.schema)
    pq.write_table(pa.concat_tables([merged, again]), tmp_path / "merge.parquet")
    ok(any_root, "merge", "--from", str(tmp_path / "merge.parquet"), "--on", "id")
    assert _count(any_root) == 600 - de + (5 if listed[0]["country"] != "DE" else 6)
    assert _count(any_root, "customer_id = -2") == 1
    # the change feed of the three, read back from the same store
    feed = json.loads(
        ok(
            any_root,
            "--json",
            "scan",
            "--changes",
            "--since-version",
            str(wrote["manifest_version"]),
            "--net",
        ).stdout  # fmt: skip
    )
    kinds = [row[-1] for row in feed["rows"]]
    assert kinds.count("delete") == de + fr + (0 if listed[0]["country"] == "DE" else 1)
    assert kinds.count("insert") == fr + 5 + 1
