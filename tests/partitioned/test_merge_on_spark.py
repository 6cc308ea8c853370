"""`lancens merge` on Spark, as users run it on a large source: the same namespace afterwards
as the in-process merge leaves (itself checked against a model and DuckDB in test_merge.py),
every column of every type, the embedding included, in one `__manifest` commit.

The source is given as Spark reads it: a directory of Parquet files (read by pyarrow in the
tasks) and a glob of CSV files (pyarrow in the tasks). Refusals happen before anything is written,
and a job whose tasks fail publishes nothing and leaves no file behind.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import (
    cli,
    copied_root,
    manifest,
    ok,
    published_rows,
    tree_snapshot,
    written_partitions,
)
from typed_rows import make_rows

pytestmark = pytest.mark.spark


def _source(existing: pa.Table) -> pa.Table:
    """Changed copies of every seventh existing row (a third moved to another partition) and
    20 new rows."""
    changed = []
    for i, row in enumerate(existing.to_pylist()[::7]):
        row = {**row, "s": f"merged {i}", "i64": -i}
        if i % 3 == 0:
            row["flag"] = not row["flag"] if row["flag"] is not None else True
            row["d"] = dt.date(2030, 1, 1)
        changed.append(row)
    return pa.concat_tables(
        [pa.Table.from_pylist(changed, schema=existing.schema), make_rows(20, 99, 50_000)]
    )


def _parquet_directory(table: pa.Table, folder) -> str:
    folder.mkdir()
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), folder / "part-0.parquet", row_group_size=7)
    pq.write_table(table.slice(half), folder / "part-1.parquet")
    return str(folder)


def _cells(table: pa.Table) -> str:
    return json.dumps(sorted(table.to_pylist(), key=lambda r: r["id"]), default=str)


@pytest.mark.parametrize(
    "when_matched, when_not_matched, unmatched",
    [
        ("update", "insert", ()),
        ("ignore", "insert", ()),
        ("update", "ignore", ("--delete-not-matched-by-source", "--where", "i32 > 0", "--yes")),
        ("ignore", "ignore", ("--delete-not-matched-by-source", "--where", "flag = true", "--yes")),
    ],
)
def test_a_merge_on_spark_leaves_what_the_merge_in_this_process_leaves(
    template, tmp_path, spark, when_matched, when_not_matched, unmatched
):
    root, existing, _ = template
    source = _source(existing)
    folder = _parquet_directory(source, tmp_path / "source")
    pq.write_table(source, tmp_path / "source.parquet")
    args = ("merge", "--on", "id", "--when-matched", when_matched,
            "--when-not-matched", when_not_matched, *unmatched)  # fmt: skip
    here = copied_root(root, tmp_path / "here")
    local = json.loads(ok(here, "--json", *args, "--from", str(tmp_path / "source.parquet")).stdout)
    there = copied_root(root, tmp_path / "there")
    version = int(manifest(there).version)
    dry = json.loads(ok(there, "--json", *args, "--from", folder, "--dry-run").stdout)
    assert int(manifest(there).version) == version
    done = json.loads(ok(there, "--json", *args, "--from", folder).stdout)
    assert int(manifest(there).version) == version + 1  # one commit
    if when_matched == when_not_matched == "ignore":
        assert done["rows_deleted"] and not any(p["rows_written"] for p in done["partitions"])
    counts = ("source_rows", "rows_matched", "rows_updated", "rows_inserted", "rows_deleted")
    for key in counts:
        assert dry[key] == done[key] == local[key], key
    assert _cells(published_rows(there)) == _cells(published_rows(here))
    assert written_partitions(dry) == written_partitions(done) == written_partitions(local)
    assert (
        sum(p["rows_written"] for p in dry["partitions"])
        == done["rows_updated"] + done["rows_inserted"]
    )
    assert cli(there, "check").exit_code == 0


def test_a_glob_of_csv_files_is_merged_through_sparks_reader(template, tmp_path, spark):
    """CSV holds no lists, maps or structs: a namespace of scalars gets a CSV source."""
    from data import events, partitioned_root

    (tmp_path / "ns").mkdir()
    first = events(400, seed=3)
    root = partitioned_root(tmp_path / "ns", first.schema, "bucket(4, id)", "country")
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "write", "--from", str(tmp_path / "first.parquet"))
    import pyarrow.csv as pcsv

    changed = first.slice(0, 30).set_column(
        first.schema.get_field_index("country"), "country", pa.array(["JP"] * 30)
    )
    fresh = events(10, seed=4, start=10_000)
    quoted = pa.array(['say "hi", twice'] * 10)  # RFC 4180: written and read with "" inside
    fresh = fresh.set_column(first.schema.get_field_index("country"), "country", quoted)
    pcsv.write_csv(changed, tmp_path / "a.csv")
    pcsv.write_csv(fresh, tmp_path / "b.csv")
    here = copied_root(root, tmp_path / "here")
    pq.write_table(pa.concat_tables([changed, fresh]), tmp_path / "source.parquet")
    ok(here, "merge", "--from", str(tmp_path / "source.parquet"), "--on", "id")
    done = json.loads(
        ok(root, "--json", "merge", "--from", str(tmp_path / "*.csv"), "--on", "id").stdout
    )
    assert (done["rows_matched"], done["rows_inserted"]) == (30, 10)
    assert _cells(published_rows(root)) == _cells(published_rows(here))
    countries = [r["country"] for r in published_rows(root).to_pylist()]
    assert countries.count("JP") == 30 and countries.count('say "hi", twice') == 10


def test_refusals_on_spark_change_nothing(template, tmp_path, spark):
    """A key twice, a source lacking a column, and rows a task cannot write (an embedding of
    the wrong size, among rows that would be inserted): exit 2 or the job's failure in one
    line, nothing published, no file left."""
    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    before = tree_snapshot(copy.local_path)
    spark_merge = ("merge", "--engine", "spark", "--on", "id")
    twice = existing.slice(0, 2)
    pq.write_table(pa.concat_tables([twice, twice.slice(0, 1)]), tmp_path / "twice.parquet")
    result = cli(copy, *spark_merge, "--from", str(tmp_path / "twice.parquet"))
    assert result.exit_code == 2 and "more than once" in result.stderr, result.stderr
    pq.write_table(existing.slice(0, 3).drop_columns(["s"]), tmp_path / "lacking.parquet")
    result = cli(copy, *spark_merge, "--from", str(tmp_path / "lacking.parquet"))
    assert result.exit_code == 2 and "the input lacks s" in result.stderr, result.stderr
    (tmp_path / "mixed").mkdir()  # the second file lacks a column the first holds
    pq.write_table(existing.slice(0, 3), tmp_path / "mixed" / "a.parquet")
    pq.write_table(existing.slice(3, 3).drop_columns(["s"]), tmp_path / "mixed" / "b.parquet")
    result = cli(copy, "merge", "--on", "id", "--from", str(tmp_path / "mixed"))
    assert result.exit_code == 2 and "the input lacks s (in " in result.stderr, result.stderr
    result = cli(copy, *spark_merge, "--from", str(tmp_path / "twice.parquet"), "t")
    assert result.exit_code == 2 and "drop ID" in result.stderr
    import pyarrow.feather as feather

    feather.write_feather(existing.slice(0, 3), tmp_path / "rows.arrow")
    result = cli(copy, *spark_merge, "--from", str(tmp_path / "rows.arrow"))
    assert result.exit_code == 2 and "merged in this process" in result.stderr, result.stderr
    assert tree_snapshot(copy.local_path) == before
    rows = make_rows(30, 7, 90_000).to_pylist()
    rows[17]["emb"] = [1.0, 2.0, 3.0]  # the namespace's embedding holds 4 floats
    loose = pa.schema([f.with_type(pa.list_(pa.float32())) if f.name == "emb" else f
                       for f in existing.schema])  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, schema=loose), tmp_path / "bad.parquet")
    result = cli(copy, *spark_merge, "--from", str(tmp_path / "bad.parquet"))
    assert result.exit_code != 0 and "emb" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert tree_snapshot(copy.local_path) == before


@pytest.mark.s3
def test_a_merge_on_spark_from_and_into_s3(s3_root, tmp_path, spark):
    """A root on S3 (moto) merged from a folder in the same bucket: the keys read from the
    objects, the rows written by the tasks, every id once with the source's values."""
    from data import events
    from helpers import root_fs

    first = events(300, seed=21)
    pq.write_table(first, tmp_path / "first.parquet")
    pq.write_table(first.schema.empty_table(), tmp_path / "schema.parquet")
    ok(s3_root, "add-partition-spec", "--schema", str(tmp_path / "schema.parquet"),
       "--field", "bucket(4, id)", "--field", "country")  # fmt: skip
    ok(s3_root, "write", "--from", str(tmp_path / "first.parquet"))
    changed = first.slice(0, 50).set_column(
        first.schema.get_field_index("country"), "country", pa.array(["JP"] * 50)
    )
    source = pa.concat_tables([changed, events(25, seed=22, start=5_000)])
    pq.write_table(source, tmp_path / "source.parquet")
    fs, base = root_fs(s3_root)
    bucket = base.split("/")[0]
    fs.put_file(str(tmp_path / "source.parquet"), f"{bucket}/input/source.parquet")
    done = json.loads(ok(s3_root, "--json", "merge", "--from", f"s3://{bucket}/input/",
                         "--on", "id").stdout)  # fmt: skip
    assert (done["rows_matched"], done["rows_inserted"]) == (50, 25)
    expected = {r["id"]: [r["id"], r["country"], r["customer_id"]] for r in first.to_pylist()}
    expected.update(
        {r["id"]: [r["id"], r["country"], r["customer_id"]] for r in source.to_pylist()}
    )
    scanned = json.loads(ok(s3_root, "--json", "scan", "--engine", "local",
                            "--columns", "id,country,customer_id").stdout)  # fmt: skip
    assert sorted(scanned["rows"]) == sorted(expected.values())


def test_an_arrow_file_over_the_size_limit_is_merged_in_this_process(template, tmp_path):
    """Spark reads no Arrow file: under --engine auto a large one stays here."""
    import pyarrow.feather as feather

    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    feather.write_feather(_source(existing), tmp_path / "source.arrow")
    done = ok(copy, "--json", "merge", "--from", str(tmp_path / "source.arrow"), "--on", "id",
              "--local-max-bytes", "100")  # fmt: skip
    assert "starting Spark" not in done.stderr
    assert json.loads(done.stdout)["rows_inserted"] == 20


def test_a_write_landing_while_spark_starts_is_matched_against(template, tmp_path, monkeypatch):
    """The keys are matched against what the namespace publishes once Spark is up: a write
    that lands while it starts is no conflict, and its row is matched like any other."""
    import lancens_cli.cli.merge as merge_command

    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    late = make_rows(1, 5, 70_000)
    pq.write_table(late, tmp_path / "late.parquet")
    started = merge_command.spark_session

    def starting(*args, **kwargs):
        ok(copy, "write", "--from", str(tmp_path / "late.parquet"))
        return started(*args, **kwargs)

    monkeypatch.setattr(merge_command, "spark_session", starting)
    source = pa.concat_tables([existing.slice(0, 4), late]).set_column(
        existing.schema.get_field_index("s"), "s", pa.array(["late"] * 5)
    )
    pq.write_table(source, tmp_path / "source.parquet")
    done = json.loads(ok(copy, "--json", "merge", "--engine", "spark", "--from",
                         str(tmp_path / "source.parquet"), "--on", "id").stdout)  # fmt: skip
    assert (done["rows_matched"], done["rows_inserted"]) == (5, 0)
    seen = {r["id"]: r["s"] for r in published_rows(copy).to_pylist()}
    assert all(seen[i] == "late" for i in source.column("id").to_pylist())
    assert len(seen) == existing.num_rows + 1


@pytest.mark.slow
def test_a_killed_merge_on_spark_publishes_all_or_nothing_and_a_rerun_completes_it(tmp_path):
    """A merge on Spark (its own local Spark, as from cron) that replaces, moves, inserts and
    deletes, killed at random moments while Spark starts, its tasks write or it commits: a
    reader sees the rows before or after, never a mix; `check --fix` removes what a dead job
    wrote; a rerun finishes."""
    import random
    import signal
    import time

    from data import events, partitioned_root
    from helpers import json_cli_process

    (tmp_path / "t").mkdir()
    first = events(3000, seed=1)
    root = partitioned_root(tmp_path / "t", first.schema, "bucket(16, id)", "country")
    pq.write_table(first, tmp_path / "first.parquet")
    ok(root, "write", "--from", str(tmp_path / "first.parquet"))
    listed = first.to_pylist()
    changed = [{**r, "country": "JP"} for r in listed[::5]]
    fresh = events(50, seed=2, start=100_000).to_pylist()
    (tmp_path / "source").mkdir()
    source = pa.Table.from_pylist(changed + fresh, schema=first.schema)
    pq.write_table(source.slice(0, 300), tmp_path / "source" / "a.parquet")
    pq.write_table(source.slice(300), tmp_path / "source" / "b.parquet")
    pq.write_table(source, tmp_path / "source.parquet")
    merge = ("merge", "--from", str(tmp_path / "source"), "--on", "id",
             "--delete-not-matched-by-source", "--where", "customer_id < 100", "--yes")  # fmt: skip
    old = {r["id"]: r["country"] for r in listed}
    kept = {r["id"] for r in changed + fresh}
    new = {i: c for i, c in old.items() if i in kept or _customer(listed, i) >= 100}
    new.update({r["id"]: r["country"] for r in changed + fresh})
    started = time.monotonic()
    timed = json_cli_process(copied_root(root, tmp_path / "timed"), *merge)
    assert timed.wait(timeout=300) == 0
    runtime = time.monotonic() - started
    rng = random.Random(8)
    for trial in range(3):
        copy = copied_root(root, tmp_path / f"trial{trial}")
        proc = json_cli_process(copy, *merge)
        time.sleep(rng.uniform(0.5, 1.0) * runtime)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        seen = published_rows(copy).to_pylist()
        assert len(seen) == len({r["id"] for r in seen}), trial  # each row once
        assert {r["id"]: r["country"] for r in seen} in (old, new), trial  # all or nothing
        ok(copy, "check", "--fix", "--grace-minutes", "0")
        assert cli(copy, "check").exit_code == 0, trial
        ok(copy, "merge", "--from", str(tmp_path / "source.parquet"), *merge[3:])
        assert {r["id"]: r["country"] for r in published_rows(copy).to_pylist()} == new


def _customer(rows: list[dict], row_id: int) -> int:
    return next(r["customer_id"] for r in rows if r["id"] == row_id)


def test_a_partition_created_while_the_tasks_write_fails_the_merge_in_words(
    template, tmp_path, spark, monkeypatch
):
    """A write that creates a partition after the keys were matched (it could hold a source
    key) fails the merge with exit 4, in words; nothing of the merge is published and `check`
    finds nothing wrong."""
    import lancens_cli.pipeline.merge_job as job

    root, existing, _ = template
    copy = copied_root(root, tmp_path / "copy")
    late = make_rows(1, 6, 80_000).to_pylist()
    late[0]["d"] = dt.date(2041, 5, 5)  # a year no partition holds yet
    pq.write_table(pa.Table.from_pylist(late, schema=existing.schema), tmp_path / "late.parquet")
    publish = job._published

    def racing(*args, **kwargs):
        ok(copy, "write", "--from", str(tmp_path / "late.parquet"))
        return publish(*args, **kwargs)

    monkeypatch.setattr(job, "_published", racing)
    pq.write_table(_source(existing), tmp_path / "source.parquet")
    version = int(manifest(copy).version)
    result = cli(copy, "merge", "--engine", "spark", "--from", str(tmp_path / "source.parquet"),
                 "--on", "id")  # fmt: skip
    assert result.exit_code == 4, result.stderr
    assert "changed while the merge ran" in result.stderr, result.stderr
    assert int(manifest(copy).version) == version + 1  # the write's commit only
    assert len(published_rows(copy)) == existing.num_rows + 1
    ok(copy, "check")
