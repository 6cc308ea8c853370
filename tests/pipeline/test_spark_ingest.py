"""`lancens ingest` and writes through the `lancens` Spark data source, on a real local Spark.

Rows are read back with pylance at the versions `__manifest` publishes; the reference
`DirectoryNamespace` opens every partition table; failures (a failing task, a killed driver,
bad input) publish nothing and leave no files once `check --fix` has run.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import data
import lance
import lance_namespace as ln
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from helpers import invoke, ok, root_fs, run_cli, tree_snapshot
from lance.namespace import DirectoryNamespace

pytestmark = pytest.mark.spark

SPEC = ["--field", "year(event_date) as event_year", "--field", "bucket(8, customer_id) as cb"]
MASTER = ["--master", "local[2]"]
# Iceberg's golden value: murmur3_32 of the long 34 is 2017239379 (spec, Appendix B)
GOLDEN_BUCKET_34 = (2017239379 & 0x7FFFFFFF) % 8
# This file's events: two years from 2023-06-01, 100 customers, no FR.
events = functools.partial(
    data.events, first=dt.date(2023, 6, 1), days=700, countries=("US", "DE", None), customers=100
)


def schema_file(tmp_path: Path, nullable_id: bool = True) -> str:
    schema = events(1).schema
    if not nullable_id:
        schema = schema.set(0, schema.field(0).with_nullable(False))
    path = tmp_path / "schema.parquet"
    pq.write_table(pa.Table.from_batches([], schema), path)
    return str(path)


@pytest.fixture
def partitioned(local_root, tmp_path, spark):
    ok(local_root, "add-partition-spec", "--schema", schema_file(tmp_path), *SPEC)
    return local_root


def write_parquet(tmp_path: Path, name: str, table: pa.Table) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return str(path)


def table_rows(root) -> list[dict]:
    ds = lance.dataset(str(root.local_path / "__manifest"))
    rows = ds.to_table(filter="object_type = 'table'").to_pylist()
    return sorted(rows, key=lambda r: r["object_id"])


def manifest_version(root) -> int:
    return lance.dataset(str(root.local_path / "__manifest")).version


def published(root) -> dict[str, pa.Table]:
    """Each partition table's rows at the read_version `__manifest` publishes."""
    found = {}
    for row in table_rows(root):
        if row["object_id"].startswith("v1$"):
            ds = lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])
            found[row["object_id"]] = (row, ds.to_table())
    return found


def published_ids(root) -> list[int]:
    return sorted(i for _, t in published(root).values() for i in t.column("id").to_pylist())


def assert_rows_in_their_partitions(root) -> None:
    """Every row lies in the partition its transforms give; the reference opens each table."""
    from lancens_cli.partition.murmur import bucket_of, hash_array

    reference = DirectoryNamespace(**{**root.properties, "dir_listing_enabled": "false"})
    seen_golden = False
    for object_id, (row, rows) in published(root).items():
        years = {d.year for d in rows.column("event_date").to_pylist()}
        assert years == {row["partition_field_event_year"]}
        buckets = set(bucket_of(hash_array(rows.column("customer_id")), 8).to_pylist())
        assert buckets == {row["partition_field_cb"]}
        if 34 in rows.column("customer_id").to_pylist():
            assert row["partition_field_cb"] == GOLDEN_BUCKET_34
            seen_golden = True
        described = reference.describe_table(ln.DescribeTableRequest(id=object_id.split("$")))
        opened = lance.dataset(described.location, version=row["read_version"])
        assert opened.count_rows() == rows.num_rows
    assert seen_golden


def test_ingest_reads_back_in_the_right_partitions(partitioned, tmp_path):
    source = events(3000, seed=1)
    path = write_parquet(tmp_path, "in/a.parquet", source)
    before = manifest_version(partitioned)
    result = ok(partitioned, "--json", "ingest", path, *MASTER)
    report = result.json()
    assert report["rows"] == 3000
    assert (
        report["partitions_touched"] == report["partitions_created"] == len(table_rows(partitioned))
    )
    assert report["manifest_version"] == manifest_version(partitioned) == before + 1
    assert published_ids(partitioned) == list(range(3000))
    assert_rows_in_their_partitions(partitioned)
    check = ok(partitioned, "--json", "check")
    assert check.json()["healthy"]


def test_parquet_and_orc_rows_reach_the_tasks_without_the_jvm(partitioned, tmp_path, spark):
    """Parquet and ORC are read by the tasks with pyarrow, row group by row group: Spark runs
    one job over row-group ids (no Parquet scan in its stages), and every row is published
    once, in its partition, with nanosecond timestamps kept exactly."""
    import pyarrow.orc as orc

    source = events(5000, seed=3)
    parquet = tmp_path / "in" / "a.parquet"
    parquet.parent.mkdir()
    pq.write_table(source.slice(0, 3000), parquet, row_group_size=400)  # 8 row groups
    orc.write_table(source.slice(3000), str(tmp_path / "in" / "b.orc"), stripe_size=64 * 1024)
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    ok(partitioned, "ingest", str(parquet), *MASTER)
    ok(partitioned, "ingest", str(tmp_path / "in" / "b.orc"), *MASTER)
    stages = [
        tracker.getStageInfo(s).name
        for job in set(tracker.getJobIdsForGroup()) - jobs_before
        for s in tracker.getJobInfo(job).stageIds
        if tracker.getStageInfo(s) is not None
    ]
    assert stages and all("arrow_ingest.py" in name for name in stages), stages
    assert published_ids(partitioned) == list(range(5000))
    assert_rows_in_their_partitions(partitioned)


def test_append_twice_is_the_union_and_overwrite_replaces_touched_partitions(partitioned, tmp_path):
    first = write_parquet(tmp_path, "a.parquet", events(2000, seed=2))
    second = write_parquet(tmp_path, "b.parquet", events(2000, seed=3, start=2000))
    ok(partitioned, "ingest", first, *MASTER)
    ok(partitioned, "ingest", second, *MASTER)
    assert published_ids(partitioned) == list(range(4000))
    assert_rows_in_their_partitions(partitioned)
    before = {oid: t for oid, (_, t) in published(partitioned).items()}

    # an overwrite with rows of 2024 only: the 2024 partitions hold just them, the rest stay
    replacement = events(500, seed=4, start=10_000)
    keep = [d.year == 2024 for d in replacement.column("event_date").to_pylist()]
    replacement = replacement.filter(pa.array(keep))
    path = write_parquet(tmp_path, "c.parquet", replacement)
    report = ok(partitioned, "--json", "ingest", path, "--mode", "overwrite", *MASTER).json()
    assert report["mode"] == "overwrite"
    after = published(partitioned)
    for object_id, (row, rows) in after.items():
        if row["partition_field_event_year"] == 2024:
            assert all(i >= 10_000 for i in rows.column("id").to_pylist())
        else:
            assert rows.equals(before[object_id]), object_id
    new_ids = sorted(replacement.column("id").to_pylist())
    assert [i for i in published_ids(partitioned) if i >= 10_000] == new_ids
    untouched = [
        t for t in before.values() if 2024 not in {d.year for d in t["event_date"].to_pylist()}
    ]
    assert sum(t.num_rows for t in untouched) + len(new_ids) == len(published_ids(partitioned))
    assert_rows_in_their_partitions(partitioned)


def test_csv_json_directories_globs_and_dry_run(partitioned, tmp_path):
    data = events(600, seed=5)
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    for i in range(2):
        pcsv.write_csv(data.slice(i * 300, 300), csv_dir / f"part-{i}.csv")
    json_path = tmp_path / "rows.jsonl"
    more = events(200, seed=6, start=600)
    json_path.write_text(
        "".join(
            json.dumps({k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.items()})
            + "\n"
            for r in more.to_pylist()
        )
    )
    before = tree_snapshot(partitioned.local_path)
    dry = ok(partitioned, "--json", "ingest", str(csv_dir), "--dry-run", *MASTER).json()
    assert dry["dry_run"] and dry["rows"] == 600 and dry["partitions_created"] > 0
    assert tree_snapshot(partitioned.local_path) == before
    report = ok(partitioned, "--json", "ingest", str(csv_dir), *MASTER).json()
    assert report["rows"] == 600 and report["partitions_touched"] == dry["partitions_touched"]
    ok(partitioned, "ingest", str(tmp_path / "*.jsonl"), "--format", "json", *MASTER)
    assert published_ids(partitioned) == list(range(800))
    assert_rows_in_their_partitions(partitioned)


def test_plain_table_create_append_overwrite(partitioned, tmp_path):
    path = write_parquet(tmp_path, "t.parquet", events(100, seed=7))
    created = ok(partitioned, "--json", "ingest", path, "--into", "plain", *MASTER).json()
    assert created["mode"] == "create" and created["rows"] == 100
    ok(partitioned, "ingest", path, "--into", "plain", *MASTER)
    described = ok(partitioned, "--json", "describe", "plain").json()
    assert described["details"]["rows"] == 200
    ok(partitioned, "ingest", path, "--into", "plain", "--mode", "overwrite", *MASTER)
    described = ok(partitioned, "--json", "describe", "plain").json()
    assert described["details"]["rows"] == 100 and described["details"]["version"] == 3
    ids = [r["object_id"] for r in table_rows(partitioned)]
    assert "plain" in ids
    reference = DirectoryNamespace(**{**partitioned.properties, "dir_listing_enabled": "false"})
    assert reference.describe_table(ln.DescribeTableRequest(id=["plain"])).location


def test_a_table_created_from_parquet_with_maps_takes_what_spark_and_lance_write(
    partitioned, tmp_path
):
    """Parquet names a map's entries after its column; the table `create --from` makes of it
    still takes the rows an ingest writes from the same file, and those Lance reads back."""
    maps = pa.map_(pa.string(), pa.int64())
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "m": pa.array([[("a", 1)], [], None], maps),
            "deep": pa.array([{"m": [("b", 2)]}, None, {"m": None}], pa.struct([("m", maps)])),
        }
    )
    path = write_parquet(tmp_path, "maps.parquet", rows)
    assert "('m')" in str(pq.read_schema(path).field("m").type)  # entries named after `m`
    ok(partitioned, "create", "table", "maps", "--from", path)
    ok(partitioned, "ingest", path, "--into", "maps", *MASTER)
    table = str(partitioned.local_path / "maps.lance")
    lance.write_dataset(lance.dataset(table).to_table(), table, mode="append")
    got = lance.dataset(table).to_table().sort_by("id")
    assert got.column("m").to_pylist() == [[("a", 1)]] * 4 + [[]] * 4 + [None] * 4
    assert got.column("deep").to_pylist()[::4] == rows.column("deep").to_pylist()


def test_failed_task_publishes_nothing_and_leaves_no_files(partitioned, tmp_path, spark):
    from pyspark.sql.functions import udf
    from pyspark.sql.types import LongType

    ok(partitioned, "ingest", write_parquet(tmp_path, "a.parquet", events(500, seed=8)), *MASTER)
    before = tree_snapshot(partitioned.local_path)
    version = manifest_version(partitioned)

    @udf(LongType())
    def explode(value):
        if value == 1234:
            raise ValueError("injected task failure")
        return value

    frame = spark.read.parquet(write_parquet(tmp_path, "b.parquet", events(2000, seed=9)))
    frame = frame.repartition(4).withColumn("id", explode("id") + 1000)
    with pytest.raises(Exception, match="injected task failure"):
        frame.write.format("lancens").option("root", partitioned.uri).mode("append").save()
    assert manifest_version(partitioned) == version
    ok(partitioned, "check", "--fix", "--grace-minutes", "0")
    assert tree_snapshot(partitioned.local_path) == before


def test_bad_input_is_one_line_exit_2_and_changes_nothing(local_root, tmp_path, spark):
    ok(local_root, "add-partition-spec", "--schema", schema_file(tmp_path, False), *SPEC)
    good = events(50, seed=10)
    cases = {
        # text is cast to the id's integers as `write` casts it: here one is no integer
        "mismatch": good.set_column(0, "id", pa.array([*map(str, range(49)), "x49"])),
        "unknown": good.append_column("extra", pa.array(range(50))),
        "null": good.set_column(0, "id", pa.array([None, *range(1, 50)], pa.int64())),
    }
    before = tree_snapshot(local_root.local_path)
    for name, table in cases.items():
        path = write_parquet(tmp_path, f"{name}.parquet", table)
        result = invoke(*local_root.args, "ingest", path, *MASTER)
        assert result.exit_code == 2, (name, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("lancens: error")]
        assert len(errors) == 1 and "Traceback" not in result.stderr, (name, result.stderr)
        assert len(result.stderr.strip().splitlines()) <= 2, result.stderr  # note + error
        assert tree_snapshot(local_root.local_path) == before, name
    assert "NULL" in errors[0] or "nullable" in errors[0]
    missing = invoke(*local_root.args, "ingest", str(tmp_path / "nope.parquet"), *MASTER)
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    unparseable = tmp_path / "bad.csv"
    unparseable.write_text("id,event_date,country,customer_id\nx1,2024-01-01,US,3\n")
    result = invoke(*local_root.args, "ingest", str(unparseable), *MASTER)
    assert result.exit_code == 2 and "cannot be read" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # the progress note and the error
    assert tree_snapshot(local_root.local_path) == before
    good_path = write_parquet(tmp_path, "good.parquet", good)
    inside = invoke(*local_root.args, "ingest", good_path, "--into", "v1.x.dataset", *MASTER)
    assert inside.exit_code == 2 and "partitioned namespace" in inside.stderr
    assert tree_snapshot(local_root.local_path) == before


@pytest.mark.parametrize(
    "store", [pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs)]
)
def test_ingest_on_an_object_store(store, tmp_path, spark, request):
    """Ingest into an S3 (moto) or GCS (fake-gcs-server) root, from a local file and from a
    folder in the same bucket; every row lands once."""
    root = request.getfixturevalue(f"{store}_root")
    ok(root, "add-partition-spec", "--schema", schema_file(tmp_path), *SPEC)
    local = write_parquet(tmp_path, "a.parquet", events(400, seed=11))
    report = ok(root, "--json", "ingest", local, *MASTER).json()
    assert report["rows"] == 400
    fs, base = root_fs(root)
    bucket = base.split("/")[0]
    fs.put_file(
        write_parquet(tmp_path, "b.parquet", events(300, seed=12, start=400)),
        f"{bucket}/input/b.parquet",
    )
    scheme = root.uri.split("://")[0]
    remote = ok(root, "--json", "ingest", f"{scheme}://{bucket}/input/", *MASTER).json()
    assert remote["rows"] == 300
    ns = DirectoryNamespace(**{**root.properties, "dir_listing_enabled": "false"})

    def published_on_store() -> list[int]:
        ids = []
        for row in invoke(*root.args, "--json", "partitions").json()["partitions"]:
            request = ln.DescribeTableRequest(id=row["table"].split("."))
            uri, options = ns.describe_table(request).location, root.storage_options
            ds = lance.dataset(uri, version=row["read_version"], storage_options=options)
            ids += ds.to_table(columns=["id"]).column("id").to_pylist()
        return sorted(ids)

    assert published_on_store() == list(range(700))
    # CSVs in the bucket with a field that is no integer, and a row of too many fields: exit 2
    # in one line naming the file, as a local file's is, and nothing published
    header = "id,event_date,country,customer_id\n1,2024-01-01,US,3\n"
    for name, row, words in (
        ("word.csv", "x,2024-01-01,US,4", "conversion error to int64: invalid value 'x'"),
        ("wide.csv", "2,2024-01-01,US,4,5", "wide.csv cannot be read: CSV parse error"),
    ):
        bad = tmp_path / name
        bad.write_text(header + row + "\n")
        fs.put_file(str(bad), f"{bucket}/bad-{name}/{name}")
        refused = invoke(*root.args, "ingest", f"{scheme}://{bucket}/bad-{name}/", *MASTER)
        assert refused.exit_code == 2, refused.stderr
        last = refused.stderr.strip().splitlines()[-1]
        assert name in last and words in last and "Traceback" not in refused.stderr, last
    assert published_on_store() == list(range(700))
    # CSVs in the bucket into a new table: a column only the second file holds is kept (as
    # text: the new table's types come from the first file), and a 0-byte file holds no rows
    for name, text in (("1.csv", "id,n\n1,10\n"), ("2.csv", "id,n,tag\n2,20,x\n"), ("3.csv", "")):
        (tmp_path / name).write_text(text)
        fs.put_file(str(tmp_path / name), f"{bucket}/mixed/{name}")
    ok(root, "ingest", f"{scheme}://{bucket}/mixed/", "--into", "mixed", *MASTER)
    scanned = ok(root, "--json", "scan", "mixed", "--engine", "local").json()
    assert scanned["columns"] == ["id", "n", "tag"]
    assert sorted(scanned["rows"]) == [[1, 10, None], [2, 20, "x"]]


@pytest.mark.slow
def test_concurrent_write_loses_nothing(partitioned, tmp_path, spark):
    path = write_parquet(tmp_path, "big.parquet", events(20_000, seed=13))
    extra = [
        write_parquet(tmp_path, f"w{i}.parquet", events(300, seed=20 + i, start=100_000 + i * 300))
        for i in range(3)
    ]
    failures = []

    def writes():
        for item in extra:
            result = run_cli(*partitioned.args, "write", "--from", item)
            if result.exit_code != 0:
                failures.append(result.stderr)

    thread = threading.Thread(target=writes)
    thread.start()
    frame = spark.read.parquet(path).repartition(8)
    for _ in range(3):
        frame.write.format("lancens").option("root", partitioned.uri).mode("append").save()
        frame = frame.withColumn("id", frame["id"] + 20_000)
    thread.join()
    assert not failures
    expected = sorted([*range(60_000), *range(100_000, 100_900)])
    assert published_ids(partitioned) == expected
    assert_rows_in_their_partitions(partitioned)


@pytest.mark.slow
def test_real_process_ingest_and_killed_driver(partitioned, tmp_path):
    path = write_parquet(tmp_path, "a.parquet", events(200, seed=14))
    env = {"LANCENS_SPARK_MASTER": "local[2]"}
    done = run_cli(*partitioned.args, "--json", "ingest", path, env=env)
    assert done.exit_code == 0, done.stderr
    assert done.json()["rows"] == 200
    before = tree_snapshot(partitioned.local_path)

    # a job that fails in its tasks: one line, no JVM stack trace, nothing changed
    unparseable = tmp_path / "bad.csv"
    unparseable.write_text("id,event_date,country,customer_id\n1,2024-01-01,US,3\nx,y,z,w\n")
    failed = run_cli(*partitioned.args, "ingest", str(unparseable), env=env)
    assert failed.exit_code == 2, failed.stderr
    lines = failed.stderr.splitlines()
    assert len([line for line in lines if line.startswith("lancens: error")]) == 1
    assert not [line for line in lines if line.startswith("\tat ") or "Exception" in line], lines
    assert tree_snapshot(partitioned.local_path) == before
    version = manifest_version(partitioned)

    inputs = tmp_path / "many"
    for i in range(40):
        write_parquet(tmp_path, f"many/{i}.parquet", events(5000, seed=100 + i, start=i * 5000))
    marker = f"lancens-killed-driver-{uuid.uuid4().hex}"
    process = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *partitioned.args, "ingest", str(inputs)],
        env={**os.environ, **env, "LANCENS_TEST_JOB": marker},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    known = set(tree_snapshot(partitioned.local_path))
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if set(_file_names(partitioned.local_path)) - known:
                break  # tasks are writing fragments
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        # PySpark's worker daemon runs in a process group of its own; it notices the JVM's death
        # and ends its workers, which may still be finishing a file until then.
        wait_until_no_process_has(marker)
    assert manifest_version(partitioned) == version
    debris = set(tree_snapshot(partitioned.local_path)) - known
    assert debris  # it was killed mid-job
    ok(partitioned, "check", "--fix", "--grace-minutes", "0")
    after = tree_snapshot(partitioned.local_path)
    assert after == before, sorted(set(after) ^ set(before))


def wait_until_no_process_has(marker: str, timeout: float = 60) -> None:
    """Wait until no process of this user carries `marker` in its environment."""
    deadline = time.monotonic() + timeout
    needle = f"LANCENS_TEST_JOB={marker}".encode()
    while True:
        alive = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    alive.append(int(entry.name))
            except OSError:
                continue
        if not alive:
            return
        assert time.monotonic() < deadline, f"processes of the killed job still run: {alive}"
        time.sleep(0.1)


def _file_names(root: Path) -> list[str]:
    return [
        os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names
    ]


def _writer_tasks(root, table: pa.Table, parts: int = 2):
    """The data source's driver and task code, called directly (no Spark job): a writer made
    from one snapshot and the commit messages of `parts` tasks."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lancens_cli.pipeline.source_options import SourceOptions
    from lancens_cli.pipeline.write_commit import LancensWriter

    opts = SourceOptions.parse({"root": root.uri})
    writer = LancensWriter(opts, from_arrow_schema(table.schema), False)
    size = -(-table.num_rows // parts)
    messages = [writer.write(iter(table.slice(i * size, size).to_batches())) for i in range(parts)]
    return writer, messages


def test_new_partition_a_concurrent_writer_created_first_keeps_every_row(partitioned, tmp_path):
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.write import write_partitioned

    ours = events(400, seed=30)
    writer, messages = _writer_tasks(partitioned, ours)
    # meanwhile `write` creates the same partitions (its rows have other ids)
    theirs = events(300, seed=31, start=1000)
    write_partitioned(Namespace.from_properties(partitioned.properties), theirs)
    created_by_them = {r["location"] for r in table_rows(partitioned)}
    writer.commit(messages)
    assert published_ids(partitioned) == sorted([*range(400), *range(1000, 1300)])
    assert_rows_in_their_partitions(partitioned)
    # our partitions went into their tables; our losing directories are gone
    locations = {r["location"] for r in table_rows(partitioned)}
    assert created_by_them <= locations
    on_disk = {p.name for p in partitioned.local_path.iterdir() if p.name != "__manifest"}
    assert on_disk == locations
    assert ok(partitioned, "--json", "check").json()["healthy"]


def test_abort_removes_what_the_tasks_wrote(partitioned, tmp_path):
    ok(partitioned, "write", "--from", write_parquet(tmp_path, "a.parquet", events(300, seed=32)))
    before = tree_snapshot(partitioned.local_path)
    writer, messages = _writer_tasks(partitioned, events(500, seed=33, start=5000))
    assert tree_snapshot(partitioned.local_path) != before  # fragments and new directories
    writer.abort([messages[0], None])  # the second task "failed": its message is missing
    writer.abort(messages)
    assert tree_snapshot(partitioned.local_path) == before


def test_commit_after_a_spec_change_publishes_nothing(partitioned, tmp_path):
    def tables_only(tree: dict) -> set[str]:
        return {k for k in tree if not k.startswith("__manifest")}

    ok(partitioned, "write", "--from", write_parquet(tmp_path, "a.parquet", events(200, seed=34)))
    before = tree_snapshot(partitioned.local_path)
    writer, messages = _writer_tasks(partitioned, events(300, seed=35, start=1000))
    ok(partitioned, "add-partition-spec", "--field", "country")
    version = manifest_version(partitioned)
    with pytest.raises(Exception, match="was added during the job"):
        writer.commit(messages)
    writer.abort(messages)  # Spark aborts after a failed commit
    assert manifest_version(partitioned) == version
    assert tables_only(tree_snapshot(partitioned.local_path)) == tables_only(before)
    assert published_ids(partitioned) == list(range(200))


def test_check_removes_unreferenced_data_files_of_partition_tables_only(local_root, tmp_path):
    ok(local_root, "add-partition-spec", "--schema", schema_file(tmp_path), *SPEC)
    ok(local_root, "write", "--from", write_parquet(tmp_path, "a.parquet", events(100, seed=40)))
    plain = write_parquet(tmp_path, "p.parquet", events(10, seed=41))
    ok(local_root, "create", "table", "plain", "--from", plain)
    before = tree_snapshot(local_root.local_path)
    row = next(r for r in table_rows(local_root) if r["object_id"].startswith("v1$"))
    table_dir = local_root.local_path / row["location"]
    # a dead task's fragment, and the staging file of a data file killed half-way
    lance.fragment.write_fragments(events(5, seed=42), str(table_dir))
    (table_dir / "data" / "half-written.lance#1").write_bytes(b"LANC")
    (local_root.local_path / "plain.lance" / "data" / "users-file.lance").write_bytes(b"x")
    young = invoke(*local_root.args, "--json", "check")
    codes = [f["code"] for f in young.json()["findings"]]
    assert codes == ["unreferenced_data_file", "unreferenced_data_file"]
    assert not any(f["fixable"] for f in young.json()["findings"])
    ok(local_root, "check", "--fix", "--grace-minutes", "0")
    after = tree_snapshot(local_root.local_path)
    assert set(after) - set(before) == {"plain.lance/data/users-file.lance"}  # not a partition's


def test_ingest_branch_writes_each_partition_tables_branch(partitioned, tmp_path):
    """`ingest --branch dev`: the rows land on branch dev of each partition table (new ones
    too), read_branch + read_version are published in one __manifest commit, main is as it was,
    and `scan` reads the branch."""
    ok(partitioned, "ingest", write_parquet(tmp_path, "a.parquet", events(600, seed=1)), *MASTER)
    main_before = {
        row["object_id"]: lance.dataset(str(partitioned.local_path / row["location"])).version
        for row in table_rows(partitioned)
    }
    more = write_parquet(tmp_path, "b.parquet", events(400, seed=2, start=10_000))
    version = manifest_version(partitioned)
    report = ok(partitioned, "--json", "ingest", more, "--branch", "dev", *MASTER).json()
    assert report["rows"] == 400 and report["manifest_version"] == version + 1
    touched = {p["table"] for p in report["partitions"]}
    rows_seen = []
    for row in table_rows(partitioned):
        ds = lance.dataset(str(partitioned.local_path / row["location"]))
        if row["object_id"] in touched:
            assert row["read_branch"] == "dev"
            rows_seen += (
                ds.checkout_version(("dev", row["read_version"])).to_table()["id"].to_pylist()
            )
        else:
            assert row["read_branch"] is None
            rows_seen += ds.checkout_version(row["read_version"]).to_table()["id"].to_pylist()
        if row["object_id"] in main_before:  # main untouched
            assert ds.version == main_before[row["object_id"]]
        else:  # created by the branch write: nothing on main
            assert ds.count_rows() == 0
    expected = [*range(600), *range(10_000, 10_400)]
    assert sorted(rows_seen) == expected
    scanned = ok(partitioned, "--json", "scan", "--columns", "id", "--limit", "100000").json()
    assert sorted(r[0] for r in scanned["rows"]) == expected
    assert ok(partitioned, "--json", "check").json()["healthy"]
    refused = invoke(*partitioned.args, "ingest", more, "--branch", "dev", "--into", "t", *MASTER)
    assert refused.exit_code == 2 and "--into" in refused.stderr
