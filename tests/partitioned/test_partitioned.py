"""Partitioned namespaces through the CLI: add-partition-spec, evolution, write, runtime
properties, the guard against the reference writer and its repair, and bad input."""

from __future__ import annotations

import json
import random

import lance
import lance_namespace as ln
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events, random_predicate
from helpers import (
    SPEC1,
    cli,
    invoke,
    manifest,
    ok,
    partition_tables,
    published_rows,
    run_cli,
    tree_snapshot,
)


def test_first_spec_makes_the_root_partitioned(partitioned):
    ds = manifest(partitioned)
    metadata = ds.metadata
    assert json.loads(metadata["partition_spec_v1"]) == {
        "id": 1,
        "fields": [
            {
                "field_id": "event_year",
                "source_ids": [1],
                "transform": {"type": "year"},
                "result_type": {"type": "int32"},
            },
            {
                "field_id": "country",
                "source_ids": [2],
                "transform": {"type": "identity"},
                "result_type": {"type": "utf8"},
            },
        ],
    }
    schema = json.loads(metadata["schema"])
    assert [(f["name"], f["metadata"]["lance:field_id"]) for f in schema["fields"]] == [
        ("id", "0"),
        ("event_date", "1"),
        ("country", "2"),
        ("customer_id", "3"),
    ]
    assert int(metadata["lance.namespace.manifest.writer_feature_flags"]) & 1024
    columns = {f.name: f.type for f in ds.schema}
    assert columns["read_version"] == pa.uint64()
    assert columns["read_branch"] == columns["read_tag"] == pa.string()
    assert columns["partition_field_event_year"] == pa.int32()
    assert columns["partition_field_country"] == pa.string()
    rows = ds.to_table().to_pylist()
    assert [(r["object_id"], r["object_type"]) for r in rows] == [("v1", "namespace")]
    described = json.loads(ok(partitioned, "describe", "v1", "--json").stdout)
    assert json.loads(described["properties"]["partition_spec"]) == json.loads(
        metadata["partition_spec_v1"]
    )


def test_dry_run_shows_the_spec_and_changes_nothing(local_root, files):
    schema = files("schema.parquet", events(1))
    before = tree_snapshot(local_root.local_path)
    result = ok(local_root, "add-partition-spec", "--schema", schema, *SPEC1, "--dry-run", "--json")
    plan = json.loads(result.stdout)
    assert plan["dry_run"] and plan["action"] == "create" and plan["version"] == 1
    assert [c["name"] for c in plan["new_manifest_columns"]] == [
        "read_version",
        "read_branch",
        "read_tag",
        "partition_field_event_year",
        "partition_field_country",
    ]
    assert tree_snapshot(local_root.local_path) == before


def test_evolution_reuses_field_ids_and_adds_columns(partitioned):
    result = ok(
        partitioned,
        "add-partition-spec",
        "--field",
        "country as nation",  # same definition as v1's `country`: its id is reused
        "--field",
        "bucket(8, customer_id)",
        "--json",
    )
    change = json.loads(result.stdout)
    assert change["action"] == "evolve" and change["version"] == 2
    assert change["reused_field_ids"] == ["country"]
    assert [f["field_id"] for f in change["spec"]["fields"]] == ["country", "customer_id_bucket"]
    assert [c["name"] for c in change["new_manifest_columns"]] == [
        "partition_field_customer_id_bucket"
    ]
    ds = manifest(partitioned)
    assert {"partition_spec_v1", "partition_spec_v2"} <= set(ds.metadata)
    assert "partition_field_customer_id_bucket" in ds.schema.names
    assert {r["object_id"] for r in ds.to_table().to_pylist()} == {"v1", "v2"}
    # the same spec again is no new version
    again = json.loads(
        ok(partitioned, "add-partition-spec", "--field", "country", "--field",
           "bucket(8, customer_id)", "--json").stdout
    )  # fmt: skip
    assert again["action"] == "exists" and again["version"] == 2
    # an id that names another field is never reused for a new definition
    taken = cli(partitioned, "add-partition-spec", "--field", "bucket(4, id) as country")
    assert taken.exit_code == 2 and "never reused" in taken.stderr


def test_write_creates_partitions_and_records_read_versions(partitioned, files):
    data = events(3000, seed=1)
    result = ok(partitioned, "write", "--from", files("a.parquet", data), "--json")
    report = json.loads(result.stdout)
    expected = {
        (d.year, c)
        for d, c in zip(data["event_date"].to_pylist(), data["country"].to_pylist(), strict=True)
    }
    assert {(p["values"]["event_year"], p["values"]["country"]) for p in report["partitions"]} == (
        expected
    )
    assert sum(p["rows"] for p in report["partitions"]) == 3000
    tables = partition_tables(partitioned)
    assert len(tables) == len(expected)
    for row in tables:
        assert row["read_version"] == 1
        ds = lance.dataset(str(partitioned.local_path / row["location"]))
        got = ds.to_table()
        assert {d.year for d in got["event_date"].to_pylist()} == {
            row["partition_field_event_year"]
        }
        assert set(got["country"].to_pylist()) == {row["partition_field_country"]}
    # values are inherited: the year namespace and the table carry the year
    namespaces = {
        r["object_id"]: r
        for r in manifest(partitioned).to_table(filter="object_type = 'namespace'").to_pylist()
    }
    for row in tables:
        year_ns = "$".join(row["object_id"].split("$")[:2])
        assert (
            namespaces[year_ns]["partition_field_event_year"] == row["partition_field_event_year"]
        )
        assert namespaces[year_ns]["partition_field_country"] is None
    years = {r["partition_field_event_year"] for r in tables}
    assert len([n for n in namespaces if n.count("$") == 1]) == len(years)

    ok(partitioned, "write", "--from", files("b.parquet", events(1000, seed=2, start=3000)))
    seen = published_rows(partitioned)
    assert sorted(seen["id"].to_pylist()) == list(range(4000))
    assert {r["read_version"] for r in partition_tables(partitioned)} <= {1, 2}


def test_runtime_properties_and_root_summary(partitioned, files):
    ok(partitioned, "write", "--from", files("a.parquet", events(200, seed=3)))
    table = partition_tables(partitioned)[0]
    year_ns, country_ns = table["object_id"].split("$")[1:3]
    year = json.loads(ok(partitioned, "describe", f"v1.{year_ns}", "--json").stdout)
    assert year["properties"] == {"partition.event_year": str(table["partition_field_event_year"])}
    country = json.loads(ok(partitioned, "describe", f"v1.{year_ns}.{country_ns}", "--json").stdout)
    expected = table["partition_field_country"]
    assert country["properties"] == {"partition.country": "null" if expected is None else expected}
    root = json.loads(ok(partitioned, "describe", "--json").stdout)
    summary = root["manifest"]["partitioning"]
    assert summary["spec_versions"] == [1]
    assert summary["partitions"] == len(partition_tables(partitioned))
    listing = json.loads(ok(partitioned, "ls", "--json").stdout)
    assert listing["partitioning"]["partitions"] == summary["partitions"]
    assert [f["name"] for f in listing["partitioning"]["schema"]["fields"]][:2] == [
        "id",
        "event_date",
    ]


def test_reference_and_lancedb_open_every_partition_table(partitioned, files):
    import lancedb
    from lance.namespace import DirectoryNamespace

    ok(partitioned, "write", "--from", files("a.parquet", events(500, seed=4)))
    reference = DirectoryNamespace(root=partitioned.uri)
    db = lancedb.connect_namespace("dir", {"root": partitioned.uri})
    for row in partition_tables(partitioned):
        ident = row["object_id"].split("$")
        described = reference.describe_table(ln.DescribeTableRequest(id=ident))
        assert described.location.rstrip("/").endswith(row["location"])
        table = db.open_table(ident[-1], namespace_path=ident[:-1])
        assert (
            table.count_rows()
            == lance.dataset(str(partitioned.local_path / row["location"])).count_rows()
        )


def test_the_reference_writer_is_refused_and_a_rewrite_is_repaired(partitioned, files):
    from lance.namespace import DirectoryNamespace

    ok(partitioned, "write", "--from", files("a.parquet", events(800, seed=5)))
    before = {r["object_id"]: r for r in manifest(partitioned).to_table().to_pylist()}
    reference = DirectoryNamespace(root=partitioned.uri)
    with pytest.raises(Exception, match="feature flags"):
        reference.create_namespace(ln.CreateNamespaceRequest(id=["intruder"]))
    assert {r["object_id"]: r for r in manifest(partitioned).to_table().to_pylist()} == before

    # A writer that ignores the flag (simulated: the flag removed, then a reference write)
    # drops every partition column.
    ds = manifest(partitioned)
    ds.update_metadata({"lance.namespace.manifest.writer_feature_flags": "0"})
    DirectoryNamespace(root=partitioned.uri).create_namespace(
        ln.CreateNamespaceRequest(id=["intruder"])
    )
    assert "partition_field_country" not in manifest(partitioned).schema.names

    # a write now would misplace rows: refused until the repair
    before_write = tree_snapshot(partitioned.local_path)
    refused = run_cli(*partitioned.args, "write", "--from", files("b.parquet", events(10)))
    assert refused.exit_code == 5 and "check --fix" in refused.stderr
    assert tree_snapshot(partitioned.local_path) == before_write

    found = json.loads(cli(partitioned, "check", "--json").stdout)
    codes = {f["code"] for f in found["findings"]}
    assert {"partition_guard_missing", "partition_columns_missing"} <= codes
    assert cli(partitioned, "check").exit_code == 1
    ok(partitioned, "check", "--fix")
    after = {r["object_id"]: r for r in manifest(partitioned).to_table().to_pylist()}
    columns = ("partition_field_event_year", "partition_field_country")
    for object_id, row in before.items():
        assert tuple(after[object_id][c] for c in columns) == tuple(row[c] for c in columns)
    assert "intruder" in after
    assert int(manifest(partitioned).metadata["lance.namespace.manifest.writer_feature_flags"])
    assert cli(partitioned, "check").exit_code == 0
    # read_version is pinned again: what readers see does not move with the next unpublished
    # table version
    assert all(t["read_version"] == 1 for t in partition_tables(partitioned))
    ok(partitioned, "write", "--from", files("c.parquet", events(300, seed=6, start=800)))
    assert sorted(published_rows(partitioned)["id"].to_pylist()) == list(range(1100))


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["add-partition-spec", "--field", "weekday(event_date)"], 2, "unknown transform"),
        (["add-partition-spec", "--field", "year(nope)"], 2, "not in the namespace schema"),
        (["add-partition-spec", "--field", "hour(event_date)"], 2, "hour"),
        (["add-partition-spec", "--field", "bucket(4, event_date) -> int64"], 2, "int32"),
        (["add-partition-spec", "--field", "expr(now(), event_date) -> int32 as x"], 2, "now"),
        (["add-partition-spec", "--field", "expr(col0 +, event_date) -> int32 as x"], 2, ""),
        (["add-partition-spec", "--field", "expr(col0, event_date) -> int32 as x"], 2, ""),
        (["add-partition-spec", "--spec", "{in}/bad.json"], 2, "not valid JSON"),
        (
            ["add-partition-spec", "--field", "expr(col0 * 1.5, customer_id) -> float64 as f"],
            2,
            "NaN",
        ),
        (["add-partition-spec"], 2, "--field"),
        (["write", "--from", "{in}/wrong.parquet"], 2, "columns"),
        (["write", "--from", "{in}/nope.parquet"], 2, ""),
    ],
)
def test_bad_input_changes_nothing(partitioned, tmp_path, args, code, words):
    (tmp_path / "bad.json").write_text("{nope")
    pq.write_table(pa.table({"other": [1]}), tmp_path / "wrong.parquet")
    args = [a.replace("{in}", str(tmp_path)) for a in args]
    before = tree_snapshot(partitioned.local_path)
    result = run_cli(*partitioned.args, *args)
    assert result.exit_code == code, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert words in result.stderr
    assert tree_snapshot(partitioned.local_path) == before


def test_write_needs_a_partitioned_root(local_root, files):
    result = cli(local_root, "write", "--from", files("a.parquet", events(10)))
    assert result.exit_code == 2 and "add-partition-spec" in result.stderr


# --- partitions --where ------------------------------------------------------------------------


@pytest.fixture
def two_versions(local_root, files):
    """Appendix A/D: v1 by event_date, v2 by year(event_date) and country; data under both."""
    schema = files("schema.parquet", events(1))
    ok(local_root, "add-partition-spec", "--schema", schema, "--field", "event_date")
    ok(local_root, "write", "--from", files("v1.parquet", events(600, seed=11)))
    ok(local_root, "add-partition-spec", *SPEC1)
    ok(local_root, "write", "--from", files("v2.parquet", events(600, seed=12, start=600)))
    return local_root


def _matching_tables(root, where: str) -> set[str]:
    """Brute force: the tables holding at least one row the predicate selects (Lance's SQL)."""
    found = set()
    for row in partition_tables(root):
        ds = lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])
        if ds.count_rows(filter=where) > 0:
            found.add(row["object_id"].replace("$", "."))
    return found


def test_appendix_d_across_two_spec_versions(two_versions):
    where = "event_date = DATE '2025-01-10' AND country = 'US'"
    result = ok(two_versions, "partitions", "--where", where, "--json")
    selection = json.loads(result.stdout)
    query = selection["manifest_query"]
    assert "object_id LIKE 'v1$%' AND partition_field_event_date = DATE '2025-01-10'" in query
    assert "object_id LIKE 'v2$%' AND partition_field_event_year = 2025" in query
    assert "partition_field_country = 'US'" in query
    assert "country = 'US'" in selection["residual"]["v1"]
    got = {(p["spec_version"], tuple(sorted(p["values"].items()))) for p in selection["partitions"]}
    assert got == {
        (1, (("event_date", "2025-01-10"),)),
        (2, (("country", "US"), ("event_year", 2025))),
    }
    assert _matching_tables(two_versions, where) <= {p["table"] for p in selection["partitions"]}
    explained = cli(two_versions, "partitions", "--where", where, "--explain")
    assert "SELECT object_id, location, read_version" in explained.stderr
    assert selection["partitions_total"] == len(partition_tables(two_versions))


def test_pruning_never_drops_a_partition_with_a_matching_row(two_versions):
    rng = random.Random(5)
    dates = ["2024-11-03", "2024-12-31", "2025-01-01", "2025-02-14", "2025-02-28"]
    atoms = [
        lambda: (
            f"event_date {rng.choice(['=', '<', '<=', '>', '>=', '!='])} DATE '{rng.choice(dates)}'"
        ),
        lambda: f"country {rng.choice(['=', '!='])} '{rng.choice(['US', 'DE', 'XX'])}'",
        lambda: "country IS NULL" if rng.random() < 0.5 else "country IS NOT NULL",
        lambda: f"country IN ('US', '{rng.choice(['FR', 'DE'])}')",
        lambda: (
            f"event_date BETWEEN DATE '{rng.choice(dates[:2])}' AND DATE '{rng.choice(dates[2:])}'"
        ),
        lambda: f"customer_id < {rng.randrange(500)}",
    ]

    total = len(partition_tables(two_versions))
    pruned_any = False
    for _ in range(25):
        where = random_predicate(rng, atoms)
        selection = json.loads(ok(two_versions, "partitions", "--where", where, "--json").stdout)
        kept = {p["table"] for p in selection["partitions"]}
        assert _matching_tables(two_versions, where) <= kept, where
        pruned_any |= len(kept) < total
    assert pruned_any


@pytest.mark.s3
def test_partitioned_namespace_on_s3(s3_root, files):
    schema = files("schema.parquet", events(1))
    ok(s3_root, "add-partition-spec", "--schema", schema, *SPEC1)
    data = events(1500, seed=21)
    ok(s3_root, "write", "--from", files("a.parquet", data))
    ok(s3_root, "write", "--from", files("b.parquet", events(500, seed=22, start=1500)))
    selection = json.loads(ok(s3_root, "partitions", "--where", "country = 'US'", "--json").stdout)
    assert {p["values"]["country"] for p in selection["partitions"]} == {"US"}
    everything = json.loads(ok(s3_root, "partitions", "--json").stdout)["partitions"]
    rows = 0
    for p in everything:
        uri = f"{s3_root.uri}/{p['location']}"
        ds = lance.dataset(uri, version=p["read_version"], storage_options=s3_root.storage_options)
        rows += ds.count_rows()
    assert rows == 2000
    assert cli(s3_root, "check").exit_code == 0
    described = json.loads(ok(s3_root, "describe", "--json").stdout)
    assert described["manifest"]["partitioning"]["partitions"] == len(everything)


def test_schema_from_json_or_a_table_and_spec_from_a_file(local_root, tmp_path, files):
    schema = {
        "fields": [
            {"name": "id", "nullable": False, "type": {"type": "int64"}},
            {"name": "event_date", "nullable": True, "type": {"type": "date32"}},
            {"name": "country", "nullable": True, "type": {"type": "utf8"}},
            {"name": "customer_id", "nullable": True, "type": {"type": "int64"}},
        ]
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    spec = {
        "fields": [
            {
                "field_id": "customer_bucket",
                "source_ids": [3],
                "transform": {"type": "bucket", "num_buckets": 8},
                "result_type": {"type": "int32"},
            }
        ]
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    args = ["add-partition-spec", "--schema", str(tmp_path / "schema.json")]
    ok(local_root, *args, "--spec", str(tmp_path / "spec.json"))
    stored = json.loads(manifest(local_root).metadata["partition_spec_v1"])
    assert stored == {"id": 1, **spec}
    ok(local_root, "write", "--from", files("a.parquet", events(400, seed=31)))
    buckets = {r["partition_field_customer_bucket"] for r in partition_tables(local_root)}
    assert buckets <= set(range(8)) and len(buckets) == 8

    other = tmp_path / "other"
    other.mkdir()
    table = partition_tables(local_root)[0]["object_id"].replace("$", ".")
    like = invoke("--root", str(other), "add-partition-spec", "--field", "country")
    assert like.exit_code == 2 and "--schema" in like.stderr
    lance.write_dataset(events(5), str(other / "t.lance"))
    ok(type(local_root)(str(other), {}, other), "add-partition-spec", "--like", "t", "--field",
       "country")  # fmt: skip
    names = [f["name"] for f in json.loads(manifest(type(local_root)(str(other), {}, other))
             .metadata["schema"])["fields"]]  # fmt: skip
    assert names == ["id", "event_date", "country", "customer_id"]
    assert table.startswith("v1.")


def test_a_users_namespace_is_never_taken_for_a_spec_version(local_root, files):
    # made before the root was partitioned (afterwards `create` refuses v<N>: see
    # tests/partitioned/test_partition_refusals.py)
    ok(local_root, "create", "namespace", "v2")
    ok(local_root, "create", "table", "v2.foo", "--schema", _schema_file(local_root))
    ok(local_root, "add-partition-spec", "--schema", files("s.parquet", events(1)), *SPEC1)
    partitioned = local_root
    result = cli(partitioned, "add-partition-spec", "--field", "bucket(4, id)")
    assert result.exit_code == 4 and "v2" in result.stderr
    assert "partition_spec_v2" not in manifest(partitioned).metadata


def _schema_file(root) -> str:
    path = root.local_path.parent / "t.json"
    path.write_text(
        json.dumps({"fields": [{"name": "a", "nullable": True, "type": {"type": "int64"}}]})
    )
    return str(path)


def test_racing_spec_additions_each_get_their_own_version(partitioned):
    import subprocess
    import sys

    fields = [["--field", "bucket(4, id)"], ["--field", "truncate(2, country) as c2"]]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lancens_cli", *partitioned.args, "add-partition-spec",
             *f, "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for f in fields
    ]  # fmt: skip
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    metadata = manifest(partitioned).metadata
    for answer in answers:
        stored = json.loads(metadata[f"partition_spec_v{answer['version']}"])
        assert stored == answer["spec"], "each reports the version that holds its fields"
    assert sorted(a["version"] for a in answers) == [2, 3]
    namespaces = {r["object_id"] for r in manifest(partitioned).to_table().to_pylist()}
    assert {"v1", "v2", "v3"} <= namespaces
    assert cli(partitioned, "check").exit_code == 0
