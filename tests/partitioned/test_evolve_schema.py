"""`lancens evolve-schema` through the CLI: add, rename, widen and drop columns of a partitioned
namespace; specs keep working by source field id; refusals change nothing; a killed evolution
leaves a readable state and a rerun finishes it; random-predicate pruning over an evolved
namespace with three spec versions."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import random
import signal
import subprocess
import sys
import time

import lance
import pyarrow as pa
import pytest
from data import events, random_predicate
from helpers import cli, manifest, ok, partition_tables, tree_snapshot

from lancens_cli.partition.spec import Transform
from lancens_cli.partition.transforms import apply_transform

# This file's events: 200 customers, an int32 customer_id (widened by the tests).
rows = functools.partial(events, customers=200, customer_type=pa.int32())


@pytest.fixture
def evolvable(local_root, files):
    schema = files("schema.parquet", rows(1, 0))
    spec = ["--field", "year(event_date) as event_year", "--field", "bucket(8, customer_id)"]
    ok(local_root, "add-partition-spec", "--schema", schema, *spec)
    ok(local_root, "write", "--from", files("v1.parquet", rows(200, 1)))
    return local_root


def schema_fields(root) -> list[tuple[str, str, str]]:
    fields = json.loads(manifest(root).metadata["schema"])["fields"]
    return [(f["name"], f["type"]["type"], f["metadata"]["lance:field_id"]) for f in fields]


def published(root) -> list[lance.LanceDataset]:
    return [
        lance.dataset(str(root.local_path / r["location"]), version=r["read_version"])
        for r in partition_tables(root)
    ]


def test_add_rename_widen_drop(evolvable, files):
    before = sum(d.count_rows() for d in published(evolvable))
    result = ok(
        evolvable,
        "evolve-schema",
        "--add",
        "score float64",
        "--rename",
        "country=nation",
        "--widen",
        "customer_id=int64",
        "--widen",
        "event_date=timestamp",
        "--json",
    )
    out = json.loads(result.stdout)
    assert [c["outcome"] for c in out["changes"]] == ["applied"] * 4
    assert out["tables_brought"] == len(partition_tables(evolvable)) > 1
    assert out["manifest_commits"] == 2  # the schema, then every read_version at once
    assert schema_fields(evolvable) == [
        ("id", "int64", "0"),
        ("event_date", "timestamp:us", "1"),
        ("nation", "utf8", "2"),
        ("customer_id", "int64", "3"),
        ("score", "float64", "4"),
    ]
    for ds in published(evolvable):
        assert ds.schema.names == ["id", "event_date", "nation", "customer_id", "score"]
        assert ds.schema.field("customer_id").type == pa.int64()
        assert ds.to_table(columns=["score"]).column(0).null_count == ds.count_rows()
    assert sum(d.count_rows() for d in published(evolvable)) == before
    assert ok(evolvable, "check", "--json").json()["findings"] == []

    # the same command again: every change is in place, nothing is committed
    again = ok(evolvable, "evolve-schema", "--add", "score float64", "--rename", "country=nation")
    assert "already" in again.stdout and "0 __manifest commit" in again.stderr

    # a drop; field ids are never reused, even by a column of a dropped column's name
    ok(evolvable, "evolve-schema", "--drop", "score")
    ok(evolvable, "evolve-schema", "--add", "score utf8")
    assert schema_fields(evolvable)[-1] == ("score", "utf8", "5")

    # write follows the current schema: new names, missing new columns NULL
    new = rows(50, 2, start=1000, country="nation")
    ok(evolvable, "write", "--from", files("new.parquet", new))
    assert sum(d.count_rows() for d in published(evolvable)) == before + 50
    old_name = rows(5, 3, start=2000)
    refused = cli(evolvable, "write", "--from", files("old.parquet", old_name))
    assert refused.exit_code == 2 and "country" in refused.stderr


def test_dropped_source_reads_null_and_a_new_spec_is_accepted(evolvable, files):
    ok(evolvable, "evolve-schema", "--drop", "event_date")
    ok(evolvable, "write", "--from", files("a.parquet", rows(40, 4, 500).drop(["event_date"])))
    nulls = [r for r in partition_tables(evolvable) if r["partition_field_event_year"] is None]
    assert (
        nulls
        and sum(
            lance.dataset(str(evolvable.local_path / r["location"])).count_rows() for r in nulls
        )
        == 40
    )  # the spec's NULL partition
    selection = ok(evolvable, "partitions", "--where", "customer_id = 7", "--json").json()
    assert selection["partitions"]
    ok(evolvable, "add-partition-spec", "--field", "country", "--field", "bucket(8, customer_id)")
    spec = json.loads(manifest(evolvable).metadata["partition_spec_v2"])
    assert spec["fields"][0]["source_ids"] == [2]
    assert spec["fields"][1]["field_id"] == "customer_id_bucket"  # reused by definition
    ok(evolvable, "write", "--from", files("b.parquet", rows(30, 5, 900).drop(["event_date"])))
    assert ok(evolvable, "check", "--json").json()["findings"] == []


def test_dry_run_changes_nothing(evolvable):
    before = tree_snapshot(evolvable.local_path)
    result = ok(evolvable, "evolve-schema", "--add", "x int32", "--drop", "country", "--dry-run")
    assert "would be brought" in result.stderr
    assert tree_snapshot(evolvable.local_path) == before


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--drop", "nope"], 2, "not in the namespace schema"),
        (["--rename", "nope=x"], 2, "not in the namespace schema"),
        (["--add", "x notatype"], 2, "unknown type"),
        (["--add", "x"], 2, "'name type'"),
        (["--add", "country utf8"], 2, "already"),
        (["--add", "id int32"], 2, "already"),
        (["--rename", "country=id"], 2, "exists already"),
        (["--widen", "customer_id=int16"], 5, "not a widening"),
        (["--widen", "country=int64"], 5, "not a widening"),
        (["--widen", "id=float64"], 5, "not a widening"),
        (["--rename", "country"], 2, "old=new"),
        (
            ["--drop", "id", "--drop", "event_date", "--drop", "country", "--drop", "customer_id"],
            5,
            "every column",
        ),
    ],
)
def test_refusals_change_nothing(evolvable, args, code, words):
    before = tree_snapshot(evolvable.local_path)
    result = cli(evolvable, "evolve-schema", *args)
    assert result.exit_code == code, result.stderr
    assert words in result.stderr and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert tree_snapshot(evolvable.local_path) == before


def test_widening_a_partition_value_source_is_refused(local_root, files):
    schema = files("s.parquet", rows(1, 0))
    ok(local_root, "add-partition-spec", "--schema", schema, "--field", "customer_id")
    ok(local_root, "write", "--from", files("a.parquet", rows(20, 1)))
    before = tree_snapshot(local_root.local_path)
    result = cli(local_root, "evolve-schema", "--widen", "customer_id=int64")
    assert result.exit_code == 5 and "identity" in result.stderr
    ok(local_root, "add-partition-spec", "--field", "bucket(4, event_date)")
    result = cli(local_root, "evolve-schema", "--widen", "event_date=timestamp")
    assert result.exit_code == 5 and "hash to different buckets" in result.stderr
    ok(local_root, "add-partition-spec", "--field", "bucket(4, customer_id)")
    assert tree_snapshot(local_root.local_path) != before
    ok(local_root, "evolve-schema", "--widen", "customer_id=int64")


def test_needs_a_partitioned_root(local_root):
    ok(local_root, "init")
    result = cli(local_root, "evolve-schema", "--drop", "x")
    assert result.exit_code == 2 and "not a partitioned namespace" in result.stderr


@pytest.mark.parametrize(
    ("kind", "narrow", "wide"),
    [
        ("bucket", pa.array([5, -3, 2**31 - 1, None], pa.int32()), pa.int64()),
        ("bucket", pa.array([1, 2], pa.int8()), pa.int64()),
        ("year", pa.array([dt.date(2024, 12, 31), dt.date(1969, 1, 1)], pa.date32()), None),
        ("month", pa.array([dt.date(2024, 12, 31), dt.date(1969, 1, 1)], pa.date32()), None),
        ("day", pa.array([dt.date(2024, 12, 31), dt.date(1969, 1, 1)], pa.date32()), None),
    ],
)
def test_widened_values_keep_their_partition(kind, narrow, wide):
    """Type-promotion resistance: the partition of a value does not move when widened."""
    wide = wide or pa.timestamp("us")
    transform = Transform(kind, num_buckets=16 if kind == "bucket" else None)
    a = apply_transform(transform, [narrow], len(narrow))
    b = apply_transform(transform, [narrow.cast(wide)], len(narrow))
    assert a.to_pylist() == b.to_pylist()


def _evolve_args() -> list[str]:
    return [
        "evolve-schema",
        "--rename",
        "country=nation",
        "--widen",
        "customer_id=int64",
        "--add",
        "score float64",
    ]


def test_a_killed_evolution_stays_readable_and_a_rerun_finishes(local_root, files):
    schema = files("schema.parquet", rows(1, 0))
    spec = ["--field", "bucket(32, id)"]
    ok(local_root, "add-partition-spec", "--schema", schema, *spec)
    ok(local_root, "write", "--from", files("v1.parquet", rows(400, 1)))
    expected = sum(d.count_rows() for d in published(local_root))
    env = {**os.environ, "LANCE_LOG": "error"}
    rng = random.Random(7)
    for attempt in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "lancens_cli", *local_root.args, *_evolve_args()],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(1.0, 3.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # readers: every published version opens, all rows are there, through the schema
        assert sum(d.count_rows() for d in published(local_root)) == expected, attempt
        current = [f[0] for f in schema_fields(local_root)]
        for ds in published(local_root):
            assert ds.schema.names in (["id", "event_date", "country", "customer_id"], current)
    ok(local_root, *_evolve_args())
    assert all(d.schema.names[-1] == "score" for d in published(local_root))
    assert sum(d.count_rows() for d in published(local_root)) == expected
    # a kill during a column rewrite may leave its data files: debris that check --fix clears
    findings = cli(local_root, "check", "--json").json()["findings"]
    assert {f["code"] for f in findings} <= {"unreferenced_data_file", "abandoned_table_write"}
    ok(local_root, "check", "--fix", "--grace-minutes", "0")
    assert ok(local_root, "check", "--json").json()["findings"] == []
    assert sum(d.count_rows() for d in published(local_root)) == expected


def _matching(root, where: str) -> set[str]:
    found = set()
    for row, ds in zip(partition_tables(root), published(root), strict=True):
        if ds.count_rows(filter=where) > 0:
            found.add(row["object_id"].replace("$", "."))
    return found


@pytest.fixture
def three_specs(local_root, files):
    """v1 year(event_date), bucket(customer_id int32); renamed, widened; v2 by nation and
    month(event_date); event_date dropped (v1's and v2's source NULL); v3 bucket(4, id)."""
    ok(
        local_root,
        "add-partition-spec",
        "--schema",
        files("s.parquet", rows(1, 0)),
        "--field",
        "year(event_date) as event_year",
        "--field",
        "bucket(8, customer_id)",
    )
    ok(local_root, "write", "--from", files("1.parquet", rows(300, 11)))
    ok(
        local_root,
        "evolve-schema",
        "--rename",
        "country=nation",
        "--widen",
        "customer_id=int64",
        "--widen",
        "event_date=timestamp",
    )
    ok(
        local_root,
        "add-partition-spec",
        "--field",
        "nation",
        "--field",
        "month(event_date) as event_month",
    )
    second = rows(300, 12, 300, country="nation")
    second = second.set_column(
        1, "event_date", second.column("event_date").cast(pa.timestamp("us"))
    )
    ok(local_root, "write", "--from", files("2.parquet", second))
    ok(local_root, "evolve-schema", "--drop", "event_date", "--add", "score float64")
    ok(local_root, "add-partition-spec", "--field", "bucket(4, id)")
    third = rows(300, 13, 600, country="nation").drop(["event_date"])
    ok(local_root, "write", "--from", files("3.parquet", third))
    return local_root


def test_pruning_over_an_evolved_namespace(three_specs):
    rng = random.Random(9)
    atoms = [
        lambda: f"nation {rng.choice(['=', '!='])} '{rng.choice(['US', 'DE', 'XX'])}'",
        lambda: "nation IS NULL" if rng.random() < 0.5 else "nation IS NOT NULL",
        lambda: f"nation IN ('US', '{rng.choice(['FR', 'DE'])}')",
        lambda: f"customer_id {rng.choice(['=', '<', '>=', '!='])} {rng.randrange(200)}",
        lambda: f"customer_id IN ({rng.randrange(200)}, {rng.randrange(200)})",
        lambda: f"id {rng.choice(['=', '<', '>'])} {rng.randrange(900)}",
        lambda: "score IS NULL",
    ]

    total = len(partition_tables(three_specs))
    assert {r["object_id"].split("$")[0] for r in partition_tables(three_specs)} == {
        "v1",
        "v2",
        "v3",
    }
    pruned_any = False
    for _ in range(25):
        where = random_predicate(rng, atoms)
        selection = ok(three_specs, "partitions", "--where", where, "--json").json()
        kept = {p["table"] for p in selection["partitions"]}
        assert _matching(three_specs, where) <= kept, where
        pruned_any |= len(kept) < total
    assert pruned_any
    assert ok(three_specs, "check", "--json").json()["findings"] == []


def test_scan_reads_a_table_of_an_earlier_generation_through_the_schema(
    local_root,
    files,
    spark,
    monkeypatch,
):
    """What a kill between the schema commit and the publish leaves: `schema` is the new one,
    one table is still published at its pre-evolution version (set back here through the
    project's own __manifest commit path). `scan` reads it by field id."""
    from helpers import invoke

    from lancens_cli.service.namespace import Namespace

    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
    ok(local_root, "add-partition-spec", "--schema", files("s.parquet", rows(1, 0)),
       "--field", "bucket(4, id)")  # fmt: skip
    data = rows(120, 21)
    ok(local_root, "write", "--from", files("a.parquet", data))
    ok(local_root, "evolve-schema", "--rename", "country=nation", "--widen", "customer_id=int64",
       "--drop", "event_date", "--add", "event_date utf8")  # fmt: skip
    lagging = partition_tables(local_root)[0]
    ns = Namespace.from_properties({"root": local_root.uri})

    def set_back(snapshot, edit):
        edit.replace(lagging["object_id"], read_version=1)

    ns.manifest.mutate(set_back)
    behind = cli(local_root, "check", "--json")
    assert behind.exit_code == 1
    assert [f["code"] for f in behind.json()["findings"]] == ["partition_schema_behind"]
    for where, expected in (
        ("nation = 'US'", [r["id"] for r in data.to_pylist() if r["country"] == "US"]),
        ("customer_id < 50", [r["id"] for r in data.to_pylist() if r["customer_id"] < 50]),
        ("event_date IS NULL", data.column("id").to_pylist()),
    ):
        result = invoke(*local_root.args, "scan", "--where", where, "--json")
        assert result.exit_code == 0, result.stderr
        out = json.loads(result.stdout)
        names = out.get("columns")
        got = sorted(r[0] if isinstance(r, list) else r["id"] for r in out["rows"])
        assert got == sorted(expected), (where, names)
    ok(local_root, "evolve-schema")  # no option: brings the lagging table
    assert ok(local_root, "check", "--json").json()["findings"] == []


def test_writes_racing_an_evolution_lose_nothing(local_root, files):
    """`write` processes publish while `evolve-schema --add` runs: every write either lands
    (all its rows readable, at the new schema once evolve finishes) or is refused whole;
    no row of any landed write is lost and the tables all reach the new schema."""
    import threading

    from helpers import run_cli

    schema = files("schema.parquet", rows(1, 0))
    ok(local_root, "add-partition-spec", "--schema", schema, "--field", "bucket(8, id)")
    ok(local_root, "write", "--from", files("first.parquet", rows(100, 1, start=0)))
    batches = [files(f"w{i}.parquet", rows(50, 10 + i, start=10_000 + i * 50)) for i in range(6)]
    outcomes: dict[int, int] = {}

    def writer() -> None:
        for i, batch in enumerate(batches):
            outcomes[i] = run_cli(*local_root.args, "write", "--from", batch).exit_code

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.5)
    evolved = run_cli(*local_root.args, "evolve-schema", "--add", "score float64")
    thread.join()
    assert evolved.exit_code in (0, 3, 4), evolved.stderr
    assert set(outcomes.values()) <= {0, 3, 4}, outcomes
    for _ in range(3):  # a rerun brings whatever a racing write published since
        if run_cli(*local_root.args, "evolve-schema", "--add", "score float64").exit_code == 0:
            break
    expected = set(range(100)) | {
        i
        for b, code in outcomes.items()
        if code == 0
        for i in range(10_000 + b * 50, 10_050 + b * 50)
    }
    seen = set()
    for ds in published(local_root):
        assert ds.schema.names[-1] == "score"
        seen |= set(ds.to_table(columns=["id"])["id"].to_pylist())
    assert seen == expected
    findings = ok(local_root, "check", "--json").json()["findings"]
    assert {f["code"] for f in findings} <= {"abandoned_table_write", "unreferenced_data_file"}


def test_a_write_into_a_lagging_table_says_what_to_run(local_root, files):
    """A partition table still published at an earlier schema generation (an evolution killed
    before its publish; set back here through the project's own commit path) makes `write`
    fail in words naming `evolve-schema`, publishing nothing; after it, the write lands."""
    from lancens_cli.service.namespace import Namespace

    ok(local_root, "add-partition-spec", "--schema", files("s.parquet", rows(1, 0)),
       "--field", "bucket(2, id)")  # fmt: skip
    ok(local_root, "write", "--from", files("a.parquet", rows(40, 3)))
    ok(local_root, "evolve-schema", "--add", "score float64")
    lagging = partition_tables(local_root)[0]
    ns = Namespace.from_properties({"root": local_root.uri})
    ns.manifest.mutate(lambda snapshot, edit: edit.replace(lagging["object_id"], read_version=1))
    before = [(r["object_id"], r["read_version"]) for r in partition_tables(local_root)]
    more = files("b.parquet", rows(40, 4, start=1000))
    failed = cli(local_root, "write", "--from", more)
    assert failed.exit_code == 1
    assert "evolve-schema" in failed.stderr and ".rs:" not in failed.stderr, failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
    assert [(r["object_id"], r["read_version"]) for r in partition_tables(local_root)] == before
    ok(local_root, "evolve-schema")
    ok(local_root, "write", "--from", more)
    ids = set()
    for ds in published(local_root):
        ids |= set(ds.to_table(columns=["id"])["id"].to_pylist())
    assert ids == set(range(40)) | set(range(1000, 1040))
