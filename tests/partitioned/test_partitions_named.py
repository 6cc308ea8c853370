"""Partition tables named by their values wherever they appear, found by them with
`--partition K=V`, and a partitioned root described with the counts and sizes a user means.

The namespace has two spec versions (identity + month, then bucket + truncate) and values an
operator's data has: `,`, `=`, quotes, unicode, NULL. What every command says a partition table
holds is checked against the table itself, read by pylance at its published version.
"""

from __future__ import annotations

import datetime as dt
import random

import lance
import pyarrow as pa
import pytest
import terminal
from helpers import cli, invoke, ok, run_cli, tree_snapshot

from lancens_cli.service.namespace import Namespace

COUNTRIES = ["US", "FR", "a,b", "x=y", 'q"t', "Zürich", None]


def event_rows(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "country": pa.array([rng.choice(COUNTRIES) for _ in range(n)], pa.string()),
            "event_date": pa.array(
                [dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(500)) for _ in range(n)],
                pa.date32(),
            ),
            "user_id": pa.array([rng.randrange(1000) for _ in range(n)], pa.int64()),
        }
    )


@pytest.fixture
def two_specs(local_root, files):
    """Spec v1 `country, month(event_date)` written once, then v2 `bucket(4, user_id),
    truncate(2, country)` written once."""
    schema = files("schema.parquet", event_rows(1, 0))
    ok(local_root, "add-partition-spec", "--schema", schema, "--field", "country",
       "--field", "month(event_date)")  # fmt: skip
    ok(local_root, "write", "--from", files("first.parquet", event_rows(120, 1)))
    ok(local_root, "add-partition-spec", "--field", "bucket(4, user_id)",
       "--field", "truncate(2, country)")  # fmt: skip
    ok(local_root, "write", "--from", files("second.parquet", event_rows(80, 2)))
    return local_root


def published(root, entry: dict) -> pa.Table:
    """The rows of a partition table at the version `__manifest` publishes, through pylance."""
    rows = {r["object_id"]: r for r in _manifest_rows(root)}
    row = rows[entry["id"].replace(".", "$")]
    return lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])


def _manifest_rows(root):
    return Namespace.from_properties(root.properties).snapshot().rows


def expected(spec_version: int, row: dict) -> dict:
    """The partition values a row gets, computed here (bucket: from the table's own rows)."""
    if spec_version == 1:
        date = row["event_date"]
        return {"country": row["country"], "event_date_month": date.month}
    country = row["country"]
    return {"country_trunc": country[:2] if country is not None else None}


def test_ls_names_partition_tables_by_their_values(two_specs):
    top = ok(two_specs, "ls", "--json").json()["entries"]
    specs = {e["id"]: e for e in top if "partitions" in e}
    assert specs["v1"]["spec"] == "country, month(event_date)" and not specs["v1"]["current"]
    assert specs["v2"]["spec"] == "bucket(4, user_id), truncate(2, country)"
    assert specs["v2"]["current"]
    every = ok(two_specs, "ls", "--recursive", "--json").json()["entries"]
    tables = [e for e in every if e["kind"] == "table"]
    assert not [e for e in every if e["kind"] == "namespace" and "." in e["id"]]  # levels hidden
    assert specs["v1"]["partitions"] == sum(1 for t in tables if t["spec_version"] == 1)
    assert specs["v2"]["partitions"] == sum(1 for t in tables if t["spec_version"] == 2)
    for table in tables:
        rows = published(two_specs, table).to_table().to_pylist()
        assert rows, table
        for row in rows:
            wanted = expected(table["spec_version"], row)
            assert {k: table["partition"][k] for k in wanted} == wanted, (table, row)
        if table["spec_version"] == 2:
            assert isinstance(table["partition"]["user_id_bucket"], int)
    levels = ok(two_specs, "ls", "--recursive", "--all", "--json").json()["entries"]
    assert any(e["kind"] == "namespace" and e["id"].count(".") == 1 for e in levels)
    text = ok(two_specs, "ls", "--recursive").stdout
    assert 'country="a,b"' in text and 'country="x=y"' in text and "country=Zürich" in text
    assert "country=null" in text


def test_a_partition_table_is_found_by_its_values(two_specs):
    tables = [
        e for e in ok(two_specs, "ls", "-R", "--json").json()["entries"] if e["kind"] == "table"
    ]
    for table in tables:
        values = table["partition"]
        asked = []
        for name, value in values.items():
            shown = "null" if value is None else str(value)
            if isinstance(value, str) and (set(value) & set(',="') or value == "null"):
                shown = '"' + value.replace('"', '\\"') + '"'
            asked += ["--partition", f"{name}={shown}"]
        spec = ["--spec-version", str(table["spec_version"])]
        found = ok(two_specs, "describe", *asked, *spec, "--json").json()
        assert found["id"] == table["id"] and found["partition"] == values
        assert found["spec_version"] == table["spec_version"]
        versions = ok(two_specs, "versions", *asked, *spec, "--json").json()
        assert versions["table"] == table["id"] and versions["partition"] == values


def test_a_partition_that_is_not_one_table_is_named_with_its_candidates(two_specs):
    before = tree_snapshot(two_specs.local_path)
    several = cli(two_specs, "describe", "--partition", "country=US", "--spec-version", "1")
    assert several.exit_code == 3, several.stderr
    assert "partition tables of spec v1 match" in several.stderr
    assert "country=US, event_date_month=" in several.stderr
    assert len(several.stderr.strip().splitlines()) == 1
    none = cli(two_specs, "versions", "--partition", "country=XX", "--spec-version", "1",
               "--partition", "event_date_month=1")  # fmt: skip
    assert none.exit_code == 3 and "no partition table of spec v1" in none.stderr
    assert "its partitions:" in none.stderr
    wrong = cli(two_specs, "prune", "--partition", "nope=1", "--yes")
    assert wrong.exit_code == 2 and "its fields: user_id_bucket, country_trunc" in wrong.stderr
    typed = cli(two_specs, "describe", "--partition", "user_id_bucket=one")
    assert typed.exit_code == 2 and "not a int32 value" in typed.stderr
    both = cli(two_specs, "describe", "v1", "--partition", "user_id_bucket=1")
    assert both.exit_code == 2
    assert tree_snapshot(two_specs.local_path) == before


def test_prune_versions_and_check_show_partition_values(two_specs):
    report = ok(two_specs, "prune", "--yes", "--full", "--json").json()
    partition_tables = [t for t in report["tables"] if t.get("spec_version")]
    assert len(partition_tables) == len(report["tables"])
    assert all(set(t["partition"]) for t in partition_tables)
    quiet = ok(two_specs, "prune", "--yes", "--json").json()  # answered from the record
    assert {t["table"]: t.get("partition") for t in quiet["tables"]} == {
        t["table"]: t["partition"] for t in partition_tables
    }
    summary = ok(two_specs, "versions", "--json").json()["tables"]
    assert all("partition" in t for t in summary)
    piped = ok(two_specs, "versions").stdout.splitlines()
    assert all("=" in line.split("\t")[1] for line in piped)
    row = next(r for r in _manifest_rows(two_specs) if r["object_id"].endswith("$dataset"))
    ns = Namespace.from_properties(two_specs.properties)
    ns.manifest.mutate(lambda s, e: e.replace(row["object_id"], read_version=99))
    checked = cli(two_specs, "check", "--json")
    assert checked.exit_code == 1
    finding = next(f for f in checked.json()["findings"] if f["code"].startswith("published"))
    assert finding["partition"] and finding["spec_version"] in (1, 2)


def test_describe_of_the_root_counts_what_users_made_and_sizes_the_partitions(two_specs, files):
    ok(two_specs, "create", "namespace", "team")
    ok(two_specs, "create", "table", "team.notes", "--from", files("n.parquet", event_rows(3, 9)))
    root = ok(two_specs, "describe", "--json").json()
    assert root["namespaces"] == 1 and root["tables"] == 1
    partitioning = root["manifest"]["partitioning"]
    assert partitioning["spec_fields"] == {
        "1": ["country", "month(event_date)"],
        "2": ["bucket(4, user_id)", "truncate(2, country)"],
    }
    tables = [
        e for e in ok(two_specs, "ls", "-R", "--json").json()["entries"] if "spec_version" in e
    ]
    assert partitioning["partitions"] == len(tables)
    assert partitioning["rows"] == 200 == sum(published(two_specs, t).count_rows() for t in tables)
    assert partitioning["bytes"] > 0
    piped = ok(two_specs, "describe").stdout
    assert "manifest.writer_feature_flags\t1024" in piped.splitlines()  # piped: the raw flag
    code, shown, stderr = terminal.on_terminal(*two_specs.args, "describe", stream="stdout")
    assert code == 0, stderr
    shown = terminal.shown(shown)
    assert "partitioned namespace writer (lancens)" in shown and "unknown(" not in shown
    assert "bucket(4, user_id), truncate(2, country)" in shown


def test_the_parent_of_real_roots_is_not_taken_for_an_empty_root(two_specs):
    parent = two_specs.local_path.parent
    listing = invoke("--root", str(parent), "ls")
    assert listing.exit_code == 0 and "namespace root" in listing.stderr
    assert f"--root {two_specs.local_path}" in listing.stderr
    checked = invoke("--root", str(parent), "check", "--json")
    assert checked.exit_code == 1
    assert [f["code"] for f in checked.json()["findings"]] == ["not_a_root"]


def test_partitions_shows_each_tables_rows_and_bytes_largest_first(two_specs):
    by_rows = ok(two_specs, "partitions", "--sort", "rows", "--json").json()["partitions"]
    counts = [p["rows"] for p in by_rows]
    assert counts == sorted(counts, reverse=True) and sum(counts) == 200
    for match in by_rows:
        entry = {"id": match["table"]}
        assert match["rows"] == published(two_specs, entry).count_rows()
        assert match["bytes"] > 0
    by_bytes = ok(two_specs, "partitions", "--sort", "bytes", "--json").json()["partitions"]
    sizes = [p["bytes"] for p in by_bytes]
    assert sizes == sorted(sizes, reverse=True)
    filtered = ok(two_specs, "partitions", "--where", "country = 'Zürich'", "--json").json()
    assert all(p["rows"] for p in filtered["partitions"])
    bare = ok(two_specs, "partitions", "--no-sizes", "--json").json()["partitions"]
    assert all(p["rows"] is None and p["bytes"] is None for p in bare)
    refused = cli(two_specs, "partitions", "--no-sizes", "--sort", "rows")
    assert refused.exit_code == 2 and "needs the sizes" in refused.stderr
    unknown = cli(two_specs, "partitions", "--sort", "size")
    assert unknown.exit_code == 2 and "one of table, rows, bytes" in unknown.stderr


def test_an_operator_pastes_what_ls_prints_into_describe_as_a_process(two_specs):
    """The real executable: a line of `ls --recursive` gives an id and values that `describe`
    takes back, by id and by `--partition`, in text and JSON."""
    line = next(
        line
        for line in run_cli(*two_specs.args, "ls", "--recursive").stdout.splitlines()
        if "\tv1" not in line and line.startswith("v1.")
    )
    table, values = line.split("\t")[0], line.split("\t")[-1]
    by_id = run_cli(*two_specs.args, "describe", table, "--json")
    assert by_id.exit_code == 0, by_id.stderr
    found = by_id.json()
    assert found["partition_text"] == values
    asked = []
    for name, value in found["partition"].items():
        shown = "null" if value is None else str(value)
        if isinstance(value, str) and set(value) & set(',="'):
            shown = '"' + value.replace('"', '\\"') + '"'
        asked += ["--partition", f"{name}={shown}"]
    again = run_cli(*two_specs.args, "describe", *asked, "--spec-version", "1")
    assert again.exit_code == 0, again.stderr
    assert f"id\t{table}" in again.stdout
