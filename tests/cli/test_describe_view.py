"""`describe` on a terminal shows sections, human sizes, dates and a schema tree; piped and
--json output stay exactly what they were (recorded below from the output before the change)."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import terminal
from helpers import run_cli

from lancens_cli.cli.describe_view import type_children

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def nested_table() -> pa.Table:
    """A deterministic table with a struct inside a struct and a list."""
    return pa.table(
        {
            "id": pa.array(range(100), pa.int64()),
            "name": [f"n{i}" for i in range(100)],
            "address": pa.array([{"city": "c", "geo": {"lat": 1.0, "lon": 2.0}}] * 100),
            "tags": pa.array([["a", "b"]] * 100, pa.list_(pa.string())),
        }
    )


@pytest.fixture
def root(tmp_path, local_root):
    source = tmp_path / "nested.parquet"
    pq.write_table(nested_table(), source)
    for args in (
        ["create", "namespace", "a", "--property", "owner=me"],
        ["create", "table", "a.t", "--from", str(source), "--property", "team=x"],
    ):
        made = run_cli(*local_root.args, *args)
        assert made.exit_code == 0, made.stderr
    return local_root


def on_terminal(*args: str) -> str:
    """What `lancens` showed with stdout on a terminal 110 columns wide."""
    code, stdout, stderr = terminal.on_terminal(*args, stream="stdout", columns=110)
    assert code == 0, stderr
    return terminal.shown(stdout).replace("\n\n", "\n")


# Today's piped output of `describe a.t` (the location's random prefix masked).
PIPED_TABLE = """\
id\ta.t
location\tHASH_a$t
uri\tROOT/HASH_a$t
source\tmanifest
state\tok
properties.team\tx
details.version\t1
details.latest_version\t1
details.rows\t100
details.fragments\t1
details.data_files\t1
details.deletion_files\t[]
details.deleted_rows\t0
details.bytes_on_storage\tBYTES
details.schema\t[{"name":"id","type":"int64","nullable":true},{"name":"name","type":"string",\
"nullable":true},{"name":"address","type":"struct<city: string, geo: struct<lat: double, lon: \
double>>","nullable":true},{"name":"tags","type":"list<element: string>","nullable":true}]
details.indices\t[]
details.tags\t{}
details.branches\t[]
details.base_paths\t[]
details.manifest_naming_scheme\tV2
details.reader_feature_flags.value\t0
details.reader_feature_flags.names\t[]
details.writer_feature_flags.value\t0
details.writer_feature_flags.names\t[]
details.data_storage_version\t2.2
details.config\t{}
details.metadata\t{}
versions\tVERSIONS
"""

PIPED_NAMESPACE = "id\ta\nproperties.owner\tme\nnamespaces\t0\ntables\t1\n"

PIPED_ROOT_KEYS = [
    "root",
    "mode",
    "config.root",
    "config.manifest_enabled",
    "config.dir_listing_enabled",
    "config.inline_optimization_enabled",
    "config.commit_retries",
    "namespaces",
    "tables",
    "manifest.version",
    "manifest.rows",
    "manifest.indexes",
    "manifest.reader_feature_flags",
    "manifest.writer_feature_flags",
    "manifest.metadata",
    "manifest.extra_columns",
    "manifest.data_storage_version",
]


def _masked(text: str, root) -> str:
    text = re.sub(r"[0-9a-f]{8}_a\$t", "HASH_a$t", text)
    text = text.replace(str(root.local_path), "ROOT")
    text = re.sub(r"(bytes_on_storage\t)\d+", r"\1BYTES", text)
    return re.sub(r"(?m)^(versions\t).*$", r"\1VERSIONS", text)


def test_piped_output_is_unchanged(root):
    table = run_cli(*root.args, "describe", "a.t")
    assert table.exit_code == 0 and table.stderr == ""
    assert _masked(table.stdout, root) == PIPED_TABLE
    assert table.stdout.rstrip().endswith("versions\t-")
    versions = run_cli(*root.args, "describe", "a.t", "--versions").stdout
    (line,) = [x for x in versions.splitlines() if x.startswith("versions\t")]
    assert re.fullmatch(
        r'versions\t\[\{"version":1,"timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z","rows":100,'
        r'"fragments":1,"deleted_rows":0\}\]',
        line,
    )
    assert run_cli(*root.args, "describe", "a").stdout == PIPED_NAMESPACE
    whole = run_cli(*root.args, "describe").stdout.splitlines()
    assert [line.split("\t")[0] for line in whole] == PIPED_ROOT_KEYS


def test_json_output_is_unchanged(root):
    doc = run_cli(*root.args, "describe", "a.t", "--versions", "--json").json()
    assert list(doc) == [
        "id",
        "location",
        "uri",
        "source",
        "state",
        "properties",
        "details",
        "versions",
    ]
    assert list(doc["details"]) == [
        "version",
        "latest_version",
        "rows",
        "fragments",
        "data_files",
        "deletion_files",
        "deleted_rows",
        "bytes_on_storage",
        "schema",
        "indices",
        "tags",
        "branches",
        "base_paths",
        "manifest_naming_scheme",
        "reader_feature_flags",
        "writer_feature_flags",
        "data_storage_version",
        "config",
        "metadata",
    ]
    assert doc["details"]["reader_feature_flags"] == {"value": 0, "names": []}
    assert doc["details"]["schema"][2] == {
        "name": "address",
        "type": "struct<city: string, geo: struct<lat: double, lon: double>>",
        "nullable": True,
    }
    assert isinstance(doc["details"]["bytes_on_storage"], int)
    assert list(doc["versions"][0]) == ["version", "timestamp", "rows", "fragments", "deleted_rows"]
    root_doc = run_cli(*root.args, "describe", "--json").json()
    assert list(root_doc) == ["root", "mode", "config", "namespaces", "tables", "manifest"]
    assert run_cli(*root.args, "describe", "a", "--json").json() == {
        "id": "a",
        "properties": {"owner": "me"},
        "namespaces": 0,
        "tables": 1,
    }


def test_terminal_view_of_a_table(root):
    size = run_cli(*root.args, "describe", "a.t", "--json").json()["details"]["bytes_on_storage"]
    shown = on_terminal(*root.args, "describe", "a.t", "--versions")
    titles = re.findall(r"╭─ (\w+) ─", shown)
    assert titles == ["table", "storage", "versions", "schema", "indexes"]
    assert f"{size / 1024:.1f} KiB" in shown  # a size a person reads, not bytes
    assert str(size) not in shown
    (row,) = [line for line in shown.splitlines() if _DATE.search(line)]  # the version table
    assert re.search(r"│\s+1 │ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z │\s+100 │", row)
    assert "details." not in shown and "feature_flags" not in shown
    assert "reader features" in shown and "property team" in shown
    lines = shown.splitlines()

    def column(name: str) -> tuple[int, int]:
        (at,) = [i for i, line in enumerate(lines) if re.search(rf"── {name}  ", line)]
        return at, lines[at].index(f"── {name}") + 3

    address, city, geo, lat = (column(n) for n in ("address", "city", "geo", "lat"))
    assert address[0] < city[0] < geo[0] < lat[0]  # in order, each child below its parent
    assert city[1] > address[1] and geo[1] == city[1] and lat[1] > geo[1]  # and indented
    assert column("element")[1] > column("tags")[1]  # a list's element under the list
    assert "struct<" not in shown  # the tree replaces the one-line type


def test_terminal_view_of_the_root_and_a_namespace(root):
    shown = on_terminal(*root.args, "describe")
    assert re.findall(r"╭─ (\w+) ─", shown) == ["root", "config", "manifest", "indexes"]
    assert "commit_retries" in shown and "extra columns" in shown
    namespace = on_terminal(*root.args, "describe", "a")
    assert re.findall(r"╭─ (\w+) ─", namespace) == ["namespace"]
    assert re.search(r"property owner\s+me", namespace)


@pytest.mark.parametrize(
    ("arrow_type", "children"),
    [
        (pa.int64(), None),
        (pa.timestamp("us", tz="UTC"), None),
        (pa.decimal128(10, 2), None),
        (
            pa.struct([pa.field("a", pa.int32(), nullable=False), ("b", pa.list_(pa.string()))]),
            [("a", "int32", False), ("b", "list<item: string>", True)],
        ),
        (pa.list_(pa.struct([("x", pa.float64())])), [("item", "struct<x: double>", True)]),
        (pa.list_(pa.float32(), 4), [("item", "float", True)]),
        (pa.large_list(pa.int8()), [("item", "int8", True)]),
        (pa.map_(pa.string(), pa.int64()), [("key", "string", False), ("value", "int64", True)]),
        (
            pa.struct(
                [("m", pa.map_(pa.string(), pa.struct([("p", pa.int8()), ("q", pa.int8())])))]
            ),
            [("m", "map<string, struct<p: int8, q: int8>>", True)],
        ),
    ],
)
def test_type_children(arrow_type, children):
    assert type_children(str(arrow_type)) == children
