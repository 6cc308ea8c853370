"""What the Spark commands refuse without Spark is refused before Spark starts: one line, exit 2,
nothing written, in seconds instead of a Spark start.

`ingest` follows `write`'s rule for an input lacking a column a partition field takes its value
from (refused unless `--allow-missing-columns`, dry run too) and checks the columns it can know
without Spark (Parquet footers, CSV headers); `join --where` is checked as `scan --where` is;
an incremental `scan` or `join` across a restore or an overwrite is refused from the catalog and
the tables' transactions alone. Each command runs in-process with the Spark session start
replaced by one that records it: a refusal must not start Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from data import events
from helpers import SPEC1, Root, cli, invoke, ok, tree_snapshot
from join_reference import ON, brute_join, build, orders_and_customers, result_rows

pytestmark = pytest.mark.usefixtures("shared_master")


@pytest.fixture
def spark_starts(monkeypatch) -> list[str]:
    """The commands whose Spark session was asked for (none, for a refusal)."""
    started: list[str] = []

    def refuse(*_args, **_kwargs):
        started.append("spark")
        raise AssertionError("Spark was started")

    for command in ("ingest", "scan", "join"):
        monkeypatch.setattr(f"lancens_cli.cli.{command}.spark_session", refuse)
    return started


@pytest.fixture
def root(local_root: Root, files) -> Root:
    """A partitioned root (year(event_date), country) holding two writes."""
    ok(local_root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    ok(local_root, "write", "--from", files("a.parquet", events(40)))
    ok(local_root, "write", "--from", files("b.parquet", events(20, seed=1, start=100)))
    return local_root


def _one_line(result, code: int, *words: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("lancens: error: ") and "Traceback" not in result.stderr
    for word in words:
        assert word in line, line
    return line


def _csv(path: Path, table: pa.Table) -> str:
    pcsv.write_csv(table, path)
    return str(path)


# --- ingest: one rule for a missing partition source column ------------------------------------


@pytest.mark.parametrize("kind", ["parquet", "csv"])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_ingest_refuses_an_input_lacking_a_partition_source_as_write_does(
    root, tmp_path, spark_starts, kind, dry_run
):
    rows = events(30, seed=5, start=500).drop_columns(["country"])
    if kind == "parquet":
        path = str(tmp_path / "in.parquet")
        pq.write_table(rows, path)
    else:
        path = _csv(tmp_path / "in.csv", rows)
    before = tree_snapshot(root.local_path)

    ingested = cli(root, "ingest", path, *dry_run)
    written = cli(root, "write", "--from", path, *dry_run) if kind == "parquet" else None

    line = _one_line(ingested, 2, "the input lacks country", "--allow-missing-columns")
    if written is not None:  # the same words as `write`'s
        assert _one_line(written, 2) == line
    assert "starting Spark" not in ingested.stderr and spark_starts == []
    assert tree_snapshot(root.local_path) == before
    as_json = cli(root, "--json", "ingest", path, *dry_run)
    assert as_json.exit_code == 2 and as_json.stdout == ""
    assert json.loads(as_json.stderr)["error"]["name"] == "InvalidInput"


@pytest.mark.spark
def test_ingest_with_allow_missing_columns_fills_null_and_says_so(root, tmp_path, spark):
    rows = events(30, seed=5, start=500).drop_columns(["country", "customer_id"])
    path = _csv(tmp_path / "in.csv", rows)

    done = cli(root, "--json", "ingest", path, "--allow-missing-columns")

    assert done.exit_code == 0, done.stderr
    doc = done.json()
    assert doc["filled_with_null"] == ["country", "customer_id"] and doc["rows"] == 30
    assert {p["values"]["country"] for p in doc["partitions"]} == {None}
    text = cli(root, "ingest", path, "--allow-missing-columns")
    assert text.exit_code == 0, text.stderr
    assert "ingest: the input lacks country, customer_id: filled with NULL" in text.stderr


@pytest.mark.spark
def test_a_json_source_lacking_a_partition_source_is_refused_before_the_job(root, tmp_path, spark):
    """JSON keys are known only from Spark's inference pass: refused then, nothing written."""
    path = tmp_path / "in.json"
    path.write_text(
        "".join(json.dumps({"id": i, "event_date": "2024-11-02"}) + "\n" for i in range(5))
    )
    before = tree_snapshot(root.local_path)

    done = cli(root, "ingest", str(path))

    assert done.exit_code == 2, done.stderr
    assert "the input lacks country" in done.stderr and "Traceback" not in done.stderr
    assert tree_snapshot(root.local_path) == before


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (
            events(5).append_column("extra", pa.array(["x"] * 5)),
            "columns the target schema has not",
        ),
        (  # no cast reaches text from a struct (an integer is cast, as `write` casts it)
            events(5).set_column(2, "country", pa.array([{"code": 1}] * 5)),
            "column 'country' is struct<code: int64>",
        ),
    ],
)
def test_ingest_refuses_columns_the_target_cannot_take_before_spark(
    root, tmp_path, spark_starts, table, words
):
    path = str(tmp_path / "in.parquet")
    pq.write_table(table, path)
    before = tree_snapshot(root.local_path)
    _one_line(cli(root, "ingest", path), 2, words)
    assert spark_starts == [] and tree_snapshot(root.local_path) == before


# --- join --where: checked as scan --where is ---------------------------------------------------


@pytest.fixture(scope="module")
def joined(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("joined")
    orders, customers = orders_and_customers(300, 100)
    orders = orders.append_column(
        "day", pa.array([None] * orders.num_rows, pa.date32())
    )  # a date column to compare with
    left = build(tmp, "orders", orders, ["bucket(4, customer_id) as cb"])
    right = build(tmp, "customers", customers, ["bucket(4, customer_id) as cb"])
    return left, right, orders, customers


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("l.customer_id = 'abc'", "'abc' is not a int64 value for column l_customer_id"),
        ("order_id = 'abc'", "'abc' is not a int64 value for column order_id"),
        ("day = '2025-02-30'", "'2025-02-30' is not a valid date for column day"),
        ("amount > 5 AND", "cannot parse"),
        ("nope > 1", "unknown column 'nope'"),
    ],
)
def test_join_where_mistakes_are_one_line_before_spark(joined, spark_starts, where, words):
    left, right, _, _ = joined
    for args in ((), ("--json",)):
        done = invoke(*args, "join", left, right, *ON, "--where", where, "--count")
        assert done.exit_code == 2 and done.stdout == "", done.stderr
        assert words in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
    assert spark_starts == []


@pytest.mark.spark
def test_join_where_names_a_side_as_columns_does(joined, spark):
    """`l.<col>` / `r.<col>` in --where name a side's column, as in --columns."""
    left, right, orders, customers = joined
    qualified = invoke(
        "join",
        left,
        right,
        *ON,
        "--where",
        "l.customer_id < 50 AND r.name <> 'customer 7'",
        "--limit",
        "0",
        "--json",
    )
    assert qualified.exit_code == 0, qualified.stderr
    names = sorted(qualified.json()["columns"])  # brute_join's order
    key, name = names.index("l_customer_id"), names.index("name")
    expected = [
        r
        for r in brute_join(orders, customers, ["customer_id"], ["customer_id"], "inner")
        if int(r[key]) < 50 and r[name] != "customer 7"
    ]
    assert expected and result_rows(qualified.json()) == expected


# --- incremental reads across a restore or an overwrite: refused from the catalog -------------


def _restored(root: Root, files) -> int:
    """`__manifest` version of the second write, then a restore to the first: a read since the
    second cannot be told as appends."""
    second = ok(root, "versions", "__manifest", "--json").json()["versions"][-1]["version"]
    ok(root, "write", "--from", files("c.parquet", events(10, seed=2, start=300)))
    ok(root, "restore", "--to-version", str(second - 1), "--yes")
    return second


def _overwritten(root: Root, tmp_path: Path) -> int:
    """`__manifest` version before an overwrite of every partition's rows (another writer)."""
    import lance
    from helpers import partition_tables

    second = ok(root, "versions", "__manifest", "--json").json()["versions"][-1]["version"]
    row = partition_tables(root)[0]
    dataset = lance.dataset(str(root.local_path / row["location"]))
    lance.write_dataset(dataset.to_table().slice(0, 1), dataset.uri, mode="overwrite")
    from lancens_cli.service.namespace import Namespace

    ns = Namespace.from_properties({"root": root.uri})
    latest = lance.dataset(str(root.local_path / row["location"])).version

    def plan(snapshot, edit):
        edit.replace(row["object_id"], read_version=latest)
        return snapshot.version + 1

    ns.manifest.mutate(plan)
    return second


@pytest.mark.parametrize("history", ["restore", "overwrite"])
def test_incremental_scan_and_join_are_refused_before_spark(
    root, files, tmp_path, spark_starts, history
):
    since = _restored(root, files) if history == "restore" else _overwritten(root, tmp_path)
    words = "a restore" if history == "restore" else "(overwrite) changed rows in place"
    before = tree_snapshot(root.local_path)

    scanned = cli(root, "scan", "--since-version", str(since), "--count")
    on = ("--on", "l.customer_id = r.customer_id")  # storage-partitioned
    joined = invoke("join", root.uri, root.uri, *on, "--since-version", str(since), "--count")
    shuffled = invoke(
        "join", root.uri, root.uri, "--on", "l.id = r.id", "--since-version", str(since)
    )

    for done in (scanned, joined, shuffled):
        _one_line(done, 2, "cannot be told as appends" if history == "restore" else words)
        assert "starting Spark" not in done.stderr
    assert spark_starts == [] and tree_snapshot(root.local_path) == before


def test_incremental_refusals_speak_in_the_cli_flags(root, spark_starts):
    last = ok(root, "versions", "__manifest", "--json").json()["versions"][-1]["version"]
    after = cli(root, "scan", "--since-version", str(last), "--version-as-of", str(last - 1))
    _one_line(after, 2, f"--since-version {last} is after the version read ({last - 1})")
    both = cli(root, "scan", "--since-version", "1", "--since-timestamp", "2025-01-01")
    _one_line(both, 2, "give --since-version or --since-timestamp, not both")
    joined = invoke(
        "join",
        root.uri,
        root.uri,
        "--on",
        "l.id = r.id",
        "--since-version",
        str(last),
        "--version-as-of",
        str(last - 1),
    )
    _one_line(joined, 2, f"--since-version {last} is after")
    for done in (after, both, joined):
        assert "sinceVersion" not in done.stderr and "sinceTimestamp" not in done.stderr
    assert spark_starts == []
