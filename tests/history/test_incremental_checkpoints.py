"""Checkpoints a pipeline can keep: the `__manifest` version `write` prints, `--since-version 0`
(from the start), and incremental reads of one table (`scan ID --since-version A`, the data
source's `load("ns.t")` with `sinceVersion`): the rows the table gained after its own version A,
refused across an overwrite, a delete or a restore as a namespace read is.

Reads are driven through the data source's own reader (as Spark's driver and tasks call it), and
once through the CLI on a real local Spark; what they return is compared with the rows written.
"""

from __future__ import annotations

import lance
import pytest
from data import events
from helpers import Root, cli, invoke, ok

from lancens_cli.errors import LancensError


def read(root: Root, identifier: str | None = None, **options: str) -> list[int]:
    """The ids an incremental (or whole) read returns, planned and read as Spark does."""
    from lancens_cli.pipeline.read import LancensReader, source_schema
    from lancens_cli.pipeline.read_plan import READ_OPTIONS
    from lancens_cli.pipeline.source_options import SourceOptions
    from lancens_cli.pipeline.task_failures import TaskFailure, surfaced

    given = {"root": root.uri, **options}
    if identifier is not None:
        given["path"] = identifier
    opts = SourceOptions.parse(given, READ_OPTIONS)
    reader = LancensReader(opts, source_schema(opts))
    ids: list[int] = []
    try:
        for piece in reader.partitions():
            for batch in reader.read(piece):
                ids += batch.column("id").to_pylist()
    except TaskFailure as failure:  # our error, as it crosses Spark's process boundary
        raise surfaced(failure) from None
    return sorted(ids)


def refused(root: Root, identifier: str | None = None, **options: str) -> LancensError:
    with pytest.raises(LancensError) as caught:
        read(root, identifier, **options)
    return caught.value


# --------------------------------------------------------------------------- write's checkpoint


def test_write_prints_the_manifest_version_it_made_and_a_read_since_it_sees_what_follows(
    partitioned, files
):
    first = ok(partitioned, "write", "--from", files("a.parquet", events(30)))
    (line,) = first.stderr.splitlines()
    made = int(line.rsplit("__manifest version ", 1)[1])
    versions = ok(partitioned, "versions", "__manifest", "--json").json()["versions"]
    assert made == versions[-1]["version"]
    second = ok(partitioned, "write", "--from", files("b.parquet", events(7, start=100)), "--json")
    assert second.json()["manifest_version"] == made + 1
    assert second.stderr.splitlines()[-1].endswith(f", __manifest version {made + 1}")

    assert read(partitioned, sinceVersion=str(made)) == list(range(100, 107))
    dry = ok(partitioned, "write", "--from", files("c.parquet", events(3, start=200)), "--dry-run")
    assert dry.stderr.splitlines()[-1].endswith("; nothing changed")


# --------------------------------------------------------------------------- version 0


def test_since_version_0_is_every_row_of_the_namespace(partitioned, files):
    ok(partitioned, "write", "--from", files("a.parquet", events(30)))
    ok(partitioned, "write", "--from", files("b.parquet", events(5, start=100)))

    assert (
        read(partitioned, sinceVersion="0")
        == read(partitioned)
        == sorted([*range(30), *range(100, 105)])
    )
    last = ok(partitioned, "versions", "__manifest", "--json").json()["versions"][-1]["version"]
    assert read(partitioned, sinceVersion="0", versionAsOf=str(last - 1)) == list(range(30))


# --------------------------------------------------------------------------- one table


@pytest.fixture
def table(partitioned, files) -> str:
    """A plain table `staging.raw` of the partitioned root (ids 0..19), at its version 1; the
    location's dataset is appended to, overwritten, restored by other writers below."""
    ok(partitioned, "create", "namespace", "staging")
    ok(partitioned, "create", "table", "staging.raw", "--from", files("t.parquet", events(20)))
    return "staging.raw"


def _dataset(root: Root, identifier: str):
    rows = lance.dataset(str(root.local_path / "__manifest")).to_table().to_pylist()
    (row,) = [r for r in rows if r["object_id"] == identifier.replace(".", "$")]
    return lance.dataset(str(root.local_path / row["location"]))


def _append(root: Root, identifier: str, start: int, n: int) -> None:
    lance.write_dataset(events(n, start=start), _dataset(root, identifier).uri, mode="append")


def test_one_table_is_read_from_its_own_version(partitioned, table):
    _append(partitioned, table, 100, 5)  # version 2
    _append(partitioned, table, 200, 3)  # version 3

    assert read(partitioned, table, sinceVersion="1") == [*range(100, 105), *range(200, 203)]
    assert read(partitioned, table, sinceVersion="2") == list(range(200, 203))
    assert read(partitioned, table, sinceVersion="3") == []
    assert read(partitioned, table, sinceVersion="0") == read(partitioned, table)
    moment = _dataset(partitioned, table).versions()[1]["timestamp"]  # version 2's commit
    assert read(partitioned, table, sinceTimestamp=moment.isoformat()) == list(range(200, 203))
    missing = refused(partitioned, table, sinceVersion="9")
    assert missing.exit_code == 3 and "table staging.raw version 9 does not exist" in str(missing)


def test_one_table_compacted_counts_each_new_row_once(partitioned, table):
    _append(partitioned, table, 100, 5)
    dataset = _dataset(partitioned, table)
    dataset.optimize.compact_files(target_rows_per_fragment=1_000)  # old and new rows together
    _append(partitioned, table, 200, 2)

    assert read(partitioned, table, sinceVersion="1") == [*range(100, 105), 200, 201]


@pytest.mark.parametrize("change", ["overwrite", "delete", "restore"])
def test_one_table_refuses_what_cannot_be_told_as_appends(partitioned, table, change):
    _append(partitioned, table, 100, 5)  # version 2
    dataset = _dataset(partitioned, table)
    if change == "overwrite":
        lance.write_dataset(events(4, start=300), dataset.uri, mode="overwrite")
    elif change == "delete":
        dataset.delete("id < 3")
    else:
        lance.dataset(dataset.uri, version=1).restore()
    words = {
        "overwrite": "version 3 (overwrite) changed rows in place",
        "delete": "version 3 (delete) changed rows in place",
        "restore": "version 3 restored version 1, from before the start (a restore)",
    }[change]

    error = refused(partitioned, table, sinceVersion="2")

    assert error.exit_code == 2 and str(error).startswith("table staging.raw: "), str(error)
    assert words in str(error)
    assert read(partitioned, table, sinceVersion="3") == []  # from after it: nothing new yet


def test_the_data_source_speaks_in_its_options_and_the_cli_in_its_flags(partitioned, table):
    _append(partitioned, table, 100, 5)
    for identifier in (None, table):
        both = refused(partitioned, identifier, sinceVersion="1", sinceTimestamp="2025-01-01")
        assert "give sinceVersion or sinceTimestamp, not both" in str(both)

    cli_both = cli(partitioned, "scan", table, "--since-version", "1", "--since-timestamp", "x")
    assert cli_both.exit_code == 2
    assert "give --since-version or --since-timestamp, not both" in cli_both.stderr
    assert "sinceVersion" not in cli_both.stderr


@pytest.mark.spark
def test_scan_of_one_table_since_its_version_on_spark(partitioned, table, spark, monkeypatch):
    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
    _append(partitioned, table, 100, 5)
    _append(partitioned, table, 200, 3)

    count = ok(partitioned, "scan", table, "--since-version", "1", "--count")
    rows = ok(partitioned, "scan", table, "--since-version", "2", "--columns", "id", "--json")
    whole = ok(partitioned, "scan", table, "--since-version", "0", "--count")

    assert count.stdout.strip() == "8" and whole.stdout.strip() == "28"
    assert sorted(r[0] for r in rows.json()["rows"]) == [200, 201, 202]
    frame = (
        spark.read.format("lancens")
        .option("root", partitioned.uri)
        .option("sinceVersion", "2")
        .load(table)
    )
    assert sorted(r["id"] for r in frame.select("id").collect()) == [200, 201, 202]
    dataset = _dataset(partitioned, table)
    dataset.delete("id = 200")
    gone = invoke(*partitioned.args, "scan", table, "--since-version", "2", "--count")
    assert gone.exit_code == 2 and "starting Spark" not in gone.stderr
    assert "version 4 (delete) changed rows in place" in gone.stderr


def test_a_table_in_a_root_without_a_partition_spec_reads_incrementally(local_root, files):
    ok(local_root, "create", "table", "t", "--from", files("t.parquet", events(4)))
    _append(local_root, "t", 50, 2)
    assert read(local_root, "t", sinceVersion="1") == [50, 51]
