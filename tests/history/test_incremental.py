"""Incremental reads: the rows a partitioned namespace gained between two `__manifest` versions.

Histories are generated (appends to old and new partitions, a second spec version, compactions
by `prune --compact` that merge old and new rows into one fragment, writes that died before
their `__manifest` commit); for every pair of versions (A, B) the data source's incremental read
(`sinceVersion` A, `versionAsOf` B) must equal the multiset difference of the time-travel reads
at B and at A, computed by DuckDB over rows read with pylance alone. The reader is driven
through the data source's own reader (planning and reading as Spark's driver and tasks call
them); the CLI is proven on a real local Spark below. What cannot be told as appends (a delete,
an overwrite, a restore) is refused naming the partition; a pruned version is exit 3.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json

import duckdb
import lance
import pyarrow as pa
import pytest
from data import events
from helpers import SPEC1, Root, cli, ok, tree_snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lancens_cli.errors import LancensError

COLUMNS = ["id", "event_date", "country", "customer_id"]


# --------------------------------------------------------------------------- the oracle


def published_rows(root: Root, version: int) -> pa.Table:
    """Every row `__manifest` version V publishes, read with pylance alone."""
    manifest = lance.dataset(str(root.local_path / "__manifest"), version=version)
    tables = []
    for row in manifest.to_table().to_pylist():
        if row["object_type"] != "table" or "$" not in row["object_id"]:
            continue
        location = str(root.local_path / row["location"])
        if row.get("read_tag") is not None:
            table = lance.dataset(location, version=row["read_tag"])
        elif row.get("read_branch") is not None:
            table = lance.dataset(location).checkout_version(
                (row["read_branch"], row["read_version"])
            )
        else:
            table = lance.dataset(location, version=row["read_version"])
        tables.append(table.to_table(columns=COLUMNS))
    if not tables:
        return events(0).select(COLUMNS)
    return pa.concat_tables(tables)


def difference(after: pa.Table, before: pa.Table) -> list[tuple]:
    """DuckDB's multiset difference `after EXCEPT ALL before`, sorted."""
    con = duckdb.connect()
    con.register("b", after)
    con.register("a", before)
    rows = con.execute("SELECT * FROM b EXCEPT ALL SELECT * FROM a").fetchall()
    return sorted(rows, key=repr)


def incremental(root: Root, since: int, until: int | None = None, **extra: str) -> list[tuple]:
    """The data source's incremental read, planned and read as Spark's driver and tasks do."""
    options = {"root": root.uri, "sinceVersion": str(since), **extra}
    if until is not None:
        options["versionAsOf"] = str(until)
    rows = [tuple(r[c] for c in COLUMNS) for r in source_rows(options)]
    return sorted(rows, key=repr)


def source_rows(options: dict[str, str]) -> list[dict]:
    """Every row the data source reads with `options`, planned and read as Spark's driver and
    tasks call its reader (no Spark); our errors as they cross Spark's process boundary."""
    from lancens_cli.pipeline.read import LancensReader, source_schema
    from lancens_cli.pipeline.read_plan import READ_OPTIONS
    from lancens_cli.pipeline.source_options import SourceOptions
    from lancens_cli.pipeline.task_failures import TaskFailure, surfaced

    opts = SourceOptions.parse(options, READ_OPTIONS)
    reader = LancensReader(opts, source_schema(opts))
    rows: list[dict] = []
    try:
        for piece in reader.partitions():
            for batch in reader.read(piece):
                rows += batch.to_pylist()
    except TaskFailure as failure:  # our error, as it crosses Spark's process boundary
        raise surfaced(failure) from None
    return rows


def manifest_versions(root: Root) -> list[int]:
    return sorted(
        int(v["version"]) for v in lance.dataset(str(root.local_path / "__manifest")).versions()
    )


# --------------------------------------------------------------------------- histories


class History:
    """A partitioned root and the steps a hypothesis draw applies to it."""

    def __init__(self, root: Root, tmp) -> None:
        self.root = root
        self.tmp = tmp
        self.next_id = 0
        self.spec2 = False

    def rows(self, n: int, seed: int, year: int) -> str:
        table = events(n, seed=seed, start=self.next_id, first=dt.date(year, 1, 1), days=300)
        self.next_id += n
        path = self.tmp / f"rows{self.next_id}.parquet"
        import pyarrow.parquet as pq

        pq.write_table(table, path)
        return str(path)

    def apply(self, step: tuple) -> None:
        kind = step[0]
        if kind == "write":
            _, n, seed, year = step
            ok(self.root, "write", "--from", self.rows(n, seed, year))
        elif kind == "compact":
            ok(self.root, "prune", "--compact", "--yes")
        elif kind == "spec" and not self.spec2:
            ok(self.root, "add-partition-spec", "--field", "country")
            self.spec2 = True
        elif kind == "dead":
            self.dead_write(step[1])

    def dead_write(self, seed: int) -> None:
        """A write that committed a partition table version and died before `__manifest`."""
        manifest = lance.dataset(str(self.root.local_path / "__manifest")).to_table().to_pylist()
        tables = [r for r in manifest if r["object_type"] == "table" and "$" in r["object_id"]]
        if not tables:
            return
        row = tables[seed % len(tables)]
        location = str(self.root.local_path / row["location"])
        rows = events(3, seed=seed, start=900_000 + self.next_id)
        self.next_id += 3
        schema = lance.dataset(location).schema
        lance.write_dataset(rows.select(schema.names), location, mode="append")


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"),
            st.integers(1, 30),
            st.integers(0, 99),
            st.sampled_from([2024, 2025, 2026]),
        ),
        st.just(("compact",)),
        st.just(("spec",)),
        st.tuples(st.just("dead"), st.integers(0, 99)),
    ),
    min_size=3,
    max_size=8,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps)
def test_every_pair_of_versions_reads_exactly_the_rows_appended_between(tmp_path_factory, history):
    tmp = tmp_path_factory.mktemp("inc")
    (tmp / "ns").mkdir()
    root = Root(str(tmp / "ns"), {}, tmp / "ns")
    ok(root, "add-partition-spec", "--schema", str(_schema_file(tmp)), *SPEC1)
    built = History(root, tmp)
    for step in history:
        built.apply(step)
    versions = manifest_versions(root)
    reads = {v: published_rows(root, v) for v in versions}
    for a, b in itertools.combinations(versions, 2):
        assert incremental(root, a, b) == difference(reads[b], reads[a]), (history, a, b)
    assert incremental(root, versions[-1]) == []  # nothing since the newest


def _schema_file(tmp) -> str:
    import pyarrow.parquet as pq

    path = tmp / "schema.parquet"
    pq.write_table(events(1), path)
    return str(path)


def test_a_compaction_of_old_and_new_rows_reads_only_the_new_window(partitioned, files):
    root = partitioned
    one_day = {"first": dt.date(2025, 3, 1), "days": 1, "countries": ("US",)}
    ok(root, "write", "--from", files("a.parquet", events(7, **one_day)))
    ok(root, "write", "--from", files("b.parquet", events(5, seed=1, start=100, **one_day)))
    start = manifest_versions(root)[-1]
    ok(root, "write", "--from", files("c.parquet", events(4, seed=2, start=200, **one_day)))
    ok(root, "write", "--from", files("d.parquet", events(3, seed=3, start=300, **one_day)))
    ok(root, "prune", "--compact", "--yes")  # one fragment: 12 old rows, then 7 new ones
    end = manifest_versions(root)[-1]
    (location,) = {r["location"] for r in _tables(root)}
    assert len(lance.dataset(str(root.local_path / location)).get_fragments()) == 1
    got = incremental(root, start, end)
    assert [r[0] for r in got] == [*range(200, 204), *range(300, 303)]
    assert got == difference(published_rows(root, end), published_rows(root, start))
    # with a filter: the window is still applied by row address, not by position after it
    filtered = incremental(root, start, end, where="id >= 201")
    assert [r[0] for r in filtered] == [201, 202, 203, 300, 301, 302]


def _tables(root: Root) -> list[dict]:
    manifest = lance.dataset(str(root.local_path / "__manifest")).to_table().to_pylist()
    return [r for r in manifest if r["object_type"] == "table" and "$" in r["object_id"]]


@pytest.mark.parametrize("change", ["delete", "overwrite", "restore"])
def test_what_is_no_append_is_refused_naming_the_partition(partitioned, files, change):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(40)))
    start = manifest_versions(root)[-1]
    ok(root, "write", "--from", files("b.parquet", events(20, seed=1, start=100)))
    table = _tables(root)[0]
    location = str(root.local_path / table["location"])
    if change == "restore":
        ok(root, "restore", "--to-version", str(start - 1), "--yes")
        words = "(a restore)"
    else:
        dataset = lance.dataset(location, version=table["read_version"])
        if change == "delete":
            dataset.delete("id >= 0")
        else:
            lance.write_dataset(dataset.to_table(), location, mode="overwrite")
        words = f"({change}) changed rows in place"
        _publish_latest(root, table)
    with pytest.raises(LancensError) as refused:
        incremental(root, start)
    assert refused.value.exit_code == 2
    message = refused.value.message
    assert words in message, message
    assert "partition table v1." in message and "\n" not in message


def _publish_latest(root: Root, table: dict) -> None:
    """Publish the table's newest version as another tool would (its own __manifest commit)."""
    from lancens_cli.service.namespace import Namespace

    ns = Namespace.from_properties({"root": root.uri})
    latest = lance.dataset(str(root.local_path / table["location"])).version

    def plan(snapshot, edit):
        edit.replace(table["object_id"], read_version=latest)
        return snapshot.version + 1

    ns.manifest.mutate(plan)


def test_versions_out_of_range_are_refused(partitioned, files):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(10)))
    last = manifest_versions(root)[-1]
    with pytest.raises(LancensError) as missing:
        incremental(root, 999)
    assert missing.value.exit_code == 3
    assert "readable versions are 1 to" in missing.value.message
    with pytest.raises(LancensError) as after:
        incremental(root, last, last - 1)
    assert after.value.exit_code == 2
    assert "is after the version read" in after.value.message
    assert incremental(root, last) == []


# --------------------------------------------------------------------------- through the CLI


@pytest.mark.spark
def test_scan_since_version_on_spark_counts_and_prints_the_new_rows(
    partitioned, files, monkeypatch, tmp_path
):
    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(60)))
    start = manifest_versions(root)[-1]
    ok(root, "write", "--from", files("b.parquet", events(25, seed=1, start=1000)))
    ok(root, "prune", "--compact", "--yes")
    ok(root, "write", "--from", files("c.parquet", events(5, seed=2, start=2000)))
    new_ids = [*range(1000, 1025), *range(2000, 2005)]
    count = ok(root, "scan", "--since-version", str(start), "--count")
    assert count.stdout.strip() == str(len(new_ids))
    rows = ok(root, "scan", "--since-version", str(start), "--columns", "id", "--json").json()
    assert sorted(r[0] if isinstance(r, list) else r["id"] for r in rows["rows"]) == new_ids
    where = ok(root, "scan", "--since-version", str(start), "--where", "id >= 2000", "--count")
    assert where.stdout.strip() == "5"
    moment = lance.dataset(str(root.local_path / "__manifest")).versions()[start - 1]["timestamp"]
    since = moment.astimezone(dt.UTC).isoformat()
    by_time = ok(root, "scan", "--since-timestamp", since, "--count")
    assert by_time.stdout.strip() == str(len(new_ids))
    out = tmp_path / "new"
    ok(root, "scan", "--since-version", str(start), "--to", str(out))
    import pyarrow.parquet as pq

    assert sorted(pq.read_table(out).column("id").to_pylist()) == new_ids


@pytest.mark.spark
@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--since-version", "999"], 3, "readable versions are"),
        (["--since-version", "3", "--version-as-of", "2"], 2, "is after the version read"),
        (["--since-version", "1", "--since-timestamp", "2025-01-01"], 2, "not both"),
        (["--since-timestamp", "nope"], 2, "not ISO 8601"),
    ],
)
def test_scan_since_bad_input_is_one_line_before_spark(partitioned, files, args, code, words):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(10)))
    ok(root, "write", "--from", files("b.parquet", events(10, seed=1, start=100)))
    before = tree_snapshot(root.local_path)
    result = cli(root, "scan", *args, "--count")
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert words in result.stderr and "Traceback" not in result.stderr
    assert "starting Spark" not in result.stderr  # refused before Spark starts
    assert tree_snapshot(root.local_path) == before


def test_json_of_refusal_is_an_error_object(partitioned, files):
    root = partitioned
    ok(root, "write", "--from", files("a.parquet", events(10)))
    result = cli(root, "--json", "scan", "--since-version", "999", "--count")
    assert result.exit_code == 3
    assert json.loads(result.stdout or result.stderr.splitlines()[-1])["error"]["code"]
