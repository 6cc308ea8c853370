"""Every `__manifest` commit records the command that made it in Lance's transaction
properties: the operation, the options as typed (secrets masked) and what it changed, whichever
service made the commit; a Spark job's commit records the command that started it."""

from __future__ import annotations

import json

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke

from lancens_cli.store.commit_record import record_of


def records(root) -> dict[int, object]:
    ds = lance.dataset(str(root / "__manifest"))
    return {
        v["version"]: record_of(ds.read_transaction(v["version"]).transaction_properties)
        for v in ds.versions()
    }


def new_versions(root, before: int) -> list:
    return [r for v, r in sorted(records(root).items()) if v > before]


def latest(root) -> int:
    return lance.dataset(str(root / "__manifest")).version


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "city": [["Oslo", "Lima"][i % 2] for i in range(n)],
            "v": pa.FixedSizeListArray.from_arrays(pa.array([1.0] * (2 * n), pa.float32()), 2),
        }
    )


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "ns"
    pq.write_table(rows(0, 10), tmp_path / "rows.parquet")
    args = ("--root", str(path))
    assert invoke(*args, "init").exit_code == 0
    spec = ("add-partition-spec", "--schema", str(tmp_path / "rows.parquet"), "--field", "city")
    assert invoke(*args, *spec).exit_code == 0
    return path


def test_each_command_records_its_operation_options_and_changes(root, tmp_path):
    args = ("--root", str(root))
    first = records(root)
    assert {r.operation for r in first.values()} == {"add-partition-spec"}
    assert all(
        r.options == {"--field": ["city"], "--schema": str(tmp_path / "rows.parquet")}
        for r in first.values()
    )

    before = latest(root)
    assert invoke(*args, "write", "--from", str(tmp_path / "rows.parquet")).exit_code == 0
    (written,) = new_versions(root, before)
    assert written.operation == "write"
    assert written.options == {"--from": str(tmp_path / "rows.parquet")}
    assert written.changes["rows_added"] == 10 and written.changes["tables_added"] == 2

    before = latest(root)
    secret = "s3cr3t-value-123"
    made = invoke(
        *args,
        "-s",
        f"aws_secret_access_key={secret}",
        "create",
        "index",
        "--column",
        "id",
        "--type",
        "btree",
        "--name",
        "by_id",
    )
    assert made.exit_code == 0, made.stderr
    made = new_versions(root, before)
    assert {r.operation for r in made} == {"create index"}
    assert made[0].options == {"--column": "id", "--type": "btree", "--name": "by_id"}
    assert made[-1].changes == {"tables_republished": 2}
    assert all(secret not in json.dumps(r.options) for r in records(root).values())

    before = latest(root)
    assert invoke(*args, "evolve-schema", "--add", "note int32").exit_code == 0
    evolved = new_versions(root, before)
    assert {r.operation for r in evolved} == {"evolve-schema"}
    assert evolved[0].changes == {"metadata_keys": ["lancens.schema_history", "schema"]}
    assert evolved[-1].changes == {"tables_republished": 2}

    before = latest(root)
    assert invoke(*args, "restore", "--to-version", str(before - 3), "--yes").exit_code == 0
    (restored,) = new_versions(root, before)
    assert restored.operation == "restore" and restored.options["--to-version"] == str(before - 3)
    assert restored.message == f"lancens restore to version {before - 3}"

    before = latest(root)
    assert invoke(*args, "create", "namespace", "team", "--property", "k=v").exit_code == 0
    (created,) = new_versions(root, before)
    assert created.operation == "create namespace"
    assert created.options == {"ID": "team", "--property": ["k=v"]}
    assert created.changes == {"namespaces_added": 1}


def test_a_commit_of_another_writer_records_nothing_and_reads_as_unrecorded(root):
    ds = lance.dataset(str(root / "__manifest"))
    ds.update_metadata({"someone": "else"})
    record = records(root)[latest(root)]
    assert record.operation is None and record.options == {} and record.changes == {}


@pytest.mark.spark
def test_an_ingest_records_the_command_and_a_users_spark_job_its_own_write(spark, root, tmp_path):
    args = ("--root", str(root))
    pq.write_table(rows(100, 6), tmp_path / "more.parquet")
    before = latest(root)
    done = invoke(*args, "ingest", str(tmp_path / "more.parquet"), "--conf", "spark.x.secret=abc")
    assert done.exit_code == 0, done.stderr
    (ingested,) = new_versions(root, before)
    assert ingested.operation == "ingest" and ingested.changes["rows_added"] == 6
    assert ingested.options["SOURCE"] == [str(tmp_path / "more.parquet")]
    assert ingested.options["--conf"] == ["spark.x.secret=****"]

    before = latest(root)
    frame = spark.createDataFrame(rows(200, 4).drop_columns(["v"]).to_pandas())
    frame.write.format("lancens").option("root", str(root)).mode("append").save()
    (job,) = new_versions(root, before)
    assert job.operation == "spark write" and job.options == {"mode": "append"}
    assert job.changes["rows_added"] == 4


def test_versions_of_the_catalog_read_as_a_history_of_commands(root, tmp_path):
    """`versions __manifest` as `DESCRIBE HISTORY`: each version's command, its options and
    what it changed, in JSON and in a pipe; `rows` there are catalog rows, and say so."""
    args = ("--root", str(root))
    assert invoke(*args, "write", "--from", str(tmp_path / "rows.parquet")).exit_code == 0
    assert invoke(*args, "create", "index", "--column", "id", "--type", "btree").exit_code == 0
    ds = lance.dataset(str(root / "__manifest"))
    ds.update_metadata({"another": "writer"})
    shown = invoke(*args, "versions", "__manifest", "--json").json()["versions"]
    operations = [v["operation"] for v in shown]
    assert operations == [
        "add-partition-spec",
        "add-partition-spec",
        "write",
        "create index",
        "create index",
        "update config (not recorded)",
    ]
    write = shown[2]
    assert write["changes"] == {"namespaces_added": 2, "rows_added": 10, "tables_added": 2}
    assert write["options"] == {"--from": str(tmp_path / "rows.parquet")}
    assert "catalog_rows" in write and "rows" not in write
    piped = invoke(*args, "versions", "__manifest").stdout.splitlines()
    assert len({len(line.split("\t")) for line in piped}) == 1
    fields = piped[2].split("\t")
    assert "write" in fields and "+2 tables, +2 namespaces, +10 rows" in fields
    assert f"--from {tmp_path / 'rows.parquet'}" in fields
