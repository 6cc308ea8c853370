"""Behaviour of every `lancens` command, on a local root and on S3 (moto).

Most cases go through `invoke` (in-process, through the console script's entry point);
a few go through `run_cli` (a real subprocess) where the process boundary matters (stdin not a
terminal, piped output). Fixtures that the tool must *find* (V1-only tables, junk directories,
deletion files, tags) are made directly with pylance / boto3, never through the tool.
"""

from __future__ import annotations

import csv
import json
import os
import re

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import (
    Root,
    child_names,
    cli,
    invoke,
    object_tags,
    ok,
    put_object,
    run_cli,
    tree_snapshot,
    uri,
)

V2_DIR = re.compile(r"^[0-9a-f]{8}_(?P<id>.+)$")
COMPAT_MODE = "compatibility (V1 + V2)"
V2_MODE = "V2 (manifest only)"
V1_MODE = "V1 (directory listing only)"


# --- storage helpers (independent of lancens_cli) -------------------------------------------


def children(root: Root, rel: str = "") -> set[str]:
    """Names directly below `rel` (files and directories)."""
    if root.local_path is not None:
        path = root.local_path / rel if rel else root.local_path
        return set(os.listdir(path)) if path.is_dir() else set()
    return child_names(root, rel)


def exists(root: Root, rel: str) -> bool:
    if root.local_path is not None:
        return (root.local_path / rel).exists()
    parent, _, name = rel.rpartition("/")
    return name in children(root, parent)


def put_file(root: Root, rel: str, data: bytes = b"not lance") -> None:
    if root.local_path is not None:
        path = root.local_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return
    put_object(root, rel, data)


def snapshot(root: Root) -> dict:
    """Every object below the root with its content, to prove nothing changed."""
    if root.local_path is not None:
        return tree_snapshot(root.local_path)
    return object_tags(root)


def write_lance(root: Root, rel: str, table: pa.Table, **kwargs) -> lance.LanceDataset:
    return lance.write_dataset(
        table, uri(root, rel), storage_options=root.storage_options or None, **kwargs
    )


def open_lance(root: Root, rel: str) -> lance.LanceDataset:
    return lance.dataset(uri(root, rel), storage_options=root.storage_options or None)


def rows(n: int, offset: int = 0) -> pa.Table:
    return pa.table(
        {"id": list(range(offset, offset + n)), "city": [f"c{i % 3}" for i in range(n)]}
    )


# --- CLI helpers -------------------------------------------------------------------------------


def js(root: Root, *args: str, extra: tuple[str, ...] = ()):
    result = cli(root, "--json", *args, extra=extra)
    assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def fails(root: Root, code: int, *args: str, extra: tuple[str, ...] = (), match: str | None = None):
    result = cli(root, *args, extra=extra)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    if match is not None:
        assert match.lower() in result.stderr.lower(), result.stderr
    assert "Traceback" not in result.stderr
    return result


def listing(root: Root, *args: str, extra: tuple[str, ...] = ()) -> dict[str, dict]:
    """`ls --json` as {id: entry}."""
    doc = js(root, "ls", *args, extra=extra)
    ids = [e["id"] for e in doc["entries"]]
    assert len(ids) == len(set(ids)), f"duplicate ids in listing: {ids}"
    return {e["id"]: e for e in doc["entries"]}


def describe(root: Root, *args: str, extra: tuple[str, ...] = ()) -> dict:
    return js(root, "describe", *args, extra=extra)


@pytest.fixture
def ns(any_root: Root) -> Root:
    ok(any_root, "init")
    return any_root


@pytest.fixture
def lns(local_root: Root) -> Root:
    ok(local_root, "init")
    return local_root


@pytest.fixture
def files(tmp_path):
    """The same 6 rows as Parquet, CSV, JSON lines and a Lance dataset."""
    src = tmp_path / "src"
    src.mkdir()
    table = pa.table({"id": list(range(6)), "city": ["Oslo", "Lima", "Pune"] * 2})
    pq.write_table(table, src / "orders.parquet")
    with open(src / "orders.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "city"])
        writer.writerows(zip(table["id"].to_pylist(), table["city"].to_pylist(), strict=True))
    with open(src / "orders.jsonl", "w") as handle:
        for row in table.to_pylist():
            handle.write(json.dumps(row) + "\n")
    lance.write_dataset(table, str(src / "orders_ds"))
    return {
        "parquet": str(src / "orders.parquet"),
        "csv": str(src / "orders.csv"),
        "jsonl": str(src / "orders.jsonl"),
        "lance": str(src / "orders_ds"),
    }


# --- init ------------------------------------------------------------------------------------


def test_init_creates_local_root_and_is_idempotent(tmp_path):
    root = Root(str(tmp_path / "a" / "b" / "ns"), {}, tmp_path / "a" / "b" / "ns")
    assert not root.local_path.exists()
    first = js(root, "init")
    assert root.local_path.is_dir()
    assert [c["action"] for c in first["changes"]] == ["create"]
    again = js(root, "init")
    assert [c["action"] for c in again["changes"]] == ["exists"]
    assert os.listdir(root.local_path) == []  # init writes no __manifest


def test_init_on_s3_needs_the_bucket(s3_root):
    assert [c["action"] for c in js(s3_root, "init")["changes"]] == ["exists"]
    missing = Root("s3://no-such-bucket-lancens/ns", s3_root.storage_options, None)
    fails(missing, 3, "init", match="does not exist")


def test_commands_on_missing_local_root_fail_not_found(tmp_path):
    root = Root(str(tmp_path / "nope"), {}, tmp_path / "nope")
    fails(root, 3, "ls", match="does not exist")
    fails(root, 3, "create", "table", "t", "--declare")
    assert not root.local_path.exists()


# --- ls ----------------------------------------------------------------------------------------


def test_ls_sources_and_states(ns, files):
    ok(ns, "create", "table", "made", "--from", files["parquet"])
    ok(ns, "create", "table", "reserved", "--declare")
    ok(ns, "create", "namespace", "sales")
    ok(ns, "create", "table", "sales.orders", "--from", files["parquet"])
    write_lance(ns, "legacy.lance", rows(4))
    put_file(ns, "junk.lance/README.txt")

    entries = listing(ns)
    assert set(entries) == {"made", "reserved", "sales", "legacy", "junk"}
    assert entries["made"] == {
        "id": "made",
        "kind": "table",
        "location": "made.lance",
        "source": "both",
        "state": "ok",
    }
    assert entries["reserved"]["state"] == "declared"
    assert entries["reserved"]["source"] == "both"
    assert entries["legacy"] == {
        "id": "legacy",
        "kind": "table",
        "location": "legacy.lance",
        "source": "directory",
        "state": "ok",
    }
    assert entries["junk"]["source"] == "directory"
    assert entries["junk"]["state"] == "not a Lance table"
    assert entries["sales"]["kind"] == "namespace"
    assert entries["sales"]["source"] == "manifest"

    deep = listing(ns, "--recursive")
    assert set(deep) == set(entries) | {"sales.orders"}
    orders = deep["sales.orders"]
    assert orders["source"] == "manifest" and orders["state"] == "ok"
    assert V2_DIR.match(orders["location"]).group("id") == "sales$orders"
    assert list(deep) == sorted(deep, key=lambda i: i.replace(".", "$"))

    child = listing(ns, "sales")
    assert set(child) == {"sales.orders"}


def test_ls_missing_state_when_the_directory_is_gone(lns, files):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--from", files["parquet"])
    location = listing(lns, "a")["a.t"]["location"]
    import shutil

    shutil.rmtree(lns.local_path / location)
    assert listing(lns, "a")["a.t"]["state"] == "missing"


def test_a_listing_made_in_chunks_reads_as_one_made_whole(lns, monkeypatch):
    """A long page's entries are made a chunk at a time (ls --json of a million tables holds
    one chunk); with a chunk of 3 the listing, its states and its pages read exactly as with
    one chunk: manifest rows, directory-only tables, a row a directory also holds (listed
    once, by the row's name) and a deregistered directory among them."""
    from lancens_cli.service.catalog import listing

    for i in range(5):
        ok(lns, "create", "namespace", f"ns{i}")
        ok(lns, "create", "table", f"t{i}", "--declare")
    for i in range(4):
        write_lance(lns, f"dir{i}.lance", rows(3))  # directory-only (V1) tables
    write_lance(lns, "gone.lance", rows(2))
    ok(lns, "deregister", "gone")
    ok(lns, "register", "shared", "dir0.lance")  # a row a directory also holds

    def pages(limit: int | None) -> list[list[dict]]:
        found, token = [], None
        while True:
            args = ["ls", *(["--limit", str(limit)] if limit else [])]
            doc = js(lns, *args, *(["--page-token", token] if token else []))
            found.append(doc["entries"])
            token = doc["next_page_token"]
            if token is None:
                return found

    whole = {limit: pages(limit) for limit in (None, 4, 7)}
    monkeypatch.setattr(listing, "ENTRY_CHUNK", 3)
    assert {limit: pages(limit) for limit in (None, 4, 7)} == whole
    entries = {e["id"]: e for e in whole[None][0]}
    assert len(entries) == 5 + 5 + 3 + 1, sorted(entries)  # dir0 is listed as `shared`
    assert entries["dir1"]["source"] == "directory" and entries["dir1"]["state"] == "ok"
    assert entries["shared"]["source"] == "both" and "gone" not in entries
    assert [e["id"] for e in whole[None][0]] == sorted(entries)


def test_ls_pagination(lns):
    for name in ("n1", "n2", "n3", "n4", "n5"):
        ok(lns, "create", "namespace", name)
    ok(lns, "create", "namespace", "n2.inner")
    ok(lns, "create", "table", "n1.t", "--declare")

    seen, token, pages = [], None, 0
    while True:
        args = ["ls", "--limit", "2"] + (["--page-token", token] if token else [])
        doc = js(lns, *args)
        pages += 1
        assert len(doc["entries"]) <= 2
        seen += [e["id"] for e in doc["entries"]]
        token = doc["next_page_token"]
        if token is None:
            break
        assert token == doc["entries"][-1]["id"]
        assert pages < 10
    assert seen == ["n1", "n2", "n3", "n4", "n5"]
    assert pages == 3

    # Recursive pages walk the whole tree in id order, without repeats.
    seen, token = [], None
    while True:
        args = ["ls", "-R", "--limit", "3"] + (["--page-token", token] if token else [])
        doc = js(lns, *args)
        seen += [e["id"] for e in doc["entries"]]
        token = doc["next_page_token"]
        if token is None:
            break
    assert seen == ["n1", "n1.t", "n2", "n2.inner", "n3", "n4", "n5"]

    # A full last page says there is no more.
    assert js(lns, "ls", "--limit", "5")["next_page_token"] is None
    assert js(lns, "ls", "--page-token", "n5")["entries"] == []

    # Plain output: the rows on stdout, the hint on stderr.
    plain = ok(lns, "ls", "--limit", "2")
    assert [line.split("\t")[0] for line in plain.stdout.splitlines()] == ["n1", "n2"]
    assert "--page-token n2" in plain.stderr


def test_ls_errors(lns):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--declare")
    fails(lns, 3, "ls", "nope", match="nope")
    fails(lns, 2, "ls", "a.t", match="not a namespace")
    assert cli(lns, "ls", "--limit", "0").exit_code == 2


def test_ls_plain_and_no_state(lns, files):
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    out = ok(lns, "ls").stdout.splitlines()
    assert out == ["t\ttable\tt.lance\tboth\tok"]
    assert listing(lns, "--no-state")["t"]["state"] == ""


# --- describe ----------------------------------------------------------------------------------


def test_describe_root(lns, files):
    empty = describe(lns)
    assert empty["mode"] == COMPAT_MODE
    assert empty["namespaces"] == 0 and empty["tables"] == 0
    assert empty["manifest"] is None  # nothing written yet

    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "namespace", "a.b")
    ok(lns, "create", "table", "a.b.t", "--declare")
    ok(lns, "create", "table", "top", "--from", files["parquet"])
    write_lance(lns, "legacy.lance", rows(2))
    doc = describe(lns)
    assert doc["namespaces"] == 2
    assert doc["tables"] == 3  # a.b.t, top (manifest + dir, counted once), legacy (dir only)
    assert doc["manifest"]["version"] == 4
    assert doc["manifest"]["rows"] == 4
    assert doc["manifest"]["extra_columns"] == []
    config = doc["config"]
    assert config["manifest_enabled"] == "true" and config["dir_listing_enabled"] == "true"
    assert config["root"].endswith(lns.uri.split("://")[-1])


def test_describe_namespace_properties(lns):
    ok(lns, "create", "namespace", "sales", "--property", "owner=ann", "--property", "tier=gold")
    ok(lns, "create", "namespace", "sales.eu")
    ok(lns, "create", "table", "sales.t", "--declare")
    doc = describe(lns, "sales")
    assert doc == {
        "id": "sales",
        "properties": {"owner": "ann", "tier": "gold"},
        "namespaces": 1,
        "tables": 1,
    }
    assert describe(lns, "sales.eu")["properties"] == {}
    plain = ok(lns, "describe", "sales").stdout.splitlines()
    assert "properties.owner\tann" in plain
    fails(lns, 3, "describe", "nope.t", match="nope")


def test_describe_table_details(ns, files):
    ok(ns, "create", "table", "t", "--from", files["parquet"], "--property", "team=x")
    ds = open_lance(ns, "t.lance")
    ds.delete("id < 2")
    ds = open_lance(ns, "t.lance")
    ds.tags.create("first", 1)

    doc = describe(ns, "t")
    assert doc["id"] == "t" and doc["location"] == "t.lance"
    assert doc["source"] == "both" and doc["state"] == "ok"
    assert doc["properties"] == {"team": "x"}
    assert doc["uri"].endswith("t.lance")
    d = doc["details"]
    assert d["version"] == 2 and d["latest_version"] == 2
    assert d["rows"] == 4
    assert d["fragments"] == 1 and d["data_files"] == 1
    assert d["deleted_rows"] == 2
    assert len(d["deletion_files"]) == 1
    deletion = d["deletion_files"][0]
    assert deletion["fragment"] == 0 and deletion["deleted_rows"] == 2
    assert deletion["path"].startswith("_deletions/") and deletion["path"].endswith(".arrow")
    assert deletion["type"] == "arrow"
    assert exists(ns, "t.lance/" + deletion["path"])
    assert d["tags"] == {"first": 1}
    assert d["schema"] == [
        {"name": "id", "type": "int64", "nullable": True},
        {"name": "city", "type": "string", "nullable": True},
    ]
    assert d["manifest_naming_scheme"] == "V2"
    assert "deletion_files" in d["writer_feature_flags"]["names"]
    assert d["bytes_on_storage"] > 0
    assert re.fullmatch(r"2\.\d+", d["data_storage_version"])
    assert d["indices"] == [] and d["branches"] == [] and d["base_paths"] == []
    assert doc["versions"] is None

    versions = describe(ns, "t", "--versions")["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    assert [v["rows"] for v in versions] == [6, 4]


def test_describe_bitmap_deletion_file(lns):
    ds = write_lance(lns, "big.lance", pa.table({"id": list(range(20000))}))
    ds.delete("id % 2 = 0")
    details = describe(lns, "big")["details"]
    assert details["rows"] == 10000 and details["deleted_rows"] == 10000
    (deletion,) = details["deletion_files"]
    assert deletion["type"] == "bitmap" and deletion["path"].endswith(".bin")


def test_describe_root_shows_indexes_and_retries(lns):
    ok(lns, "--indexes", "--commit-retries", "3", "create", "namespace", "a")
    doc = js(lns, "--commit-retries", "3", "describe")
    assert doc["config"]["commit_retries"] == "3"
    names = {i["name"] for i in doc["manifest"]["indexes"]}
    assert names == {"object_id_btree", "object_type_bitmap", "base_objects_label_list"}
    assert describe(lns)["config"]["commit_retries"] == "20"


def test_describe_v1_manifest_naming_scheme_and_indices(lns):
    ds = write_lance(lns, "old.lance", rows(5), enable_v2_manifest_paths=False)
    ds.create_scalar_index("id", "BTREE")
    doc = describe(lns, "old")
    assert doc["source"] == "directory"
    assert doc["details"]["manifest_naming_scheme"] == "V1"
    assert doc["details"]["rows"] == 5
    assert [i["fields"] for i in doc["details"]["indices"]] == [["id"]]


def test_describe_declared_table_and_namespace_as_table(lns):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--declare")
    doc = describe(lns, "a.t")
    assert doc["state"] == "declared" and doc["details"] is None
    assert V2_DIR.match(doc["location"]).group("id") == "a$t"
    fails(lns, 3, "describe", "a.missing", match="does not exist")


# --- create ------------------------------------------------------------------------------------


def test_create_namespace_rules(lns):
    change = js(lns, "create", "namespace", "a", "--property", "k=v")["changes"]
    assert change == [
        {
            "action": "create",
            "kind": "namespace",
            "id": "a",
            "location": None,
            "dry_run": False,
            "detail": None,
        }
    ]
    ok(lns, "create", "namespace", "a.b")
    fails(lns, 3, "create", "namespace", "x.y", match="x")
    fails(lns, 4, "create", "namespace", "a", match="already exists")
    again = js(lns, "create", "namespace", "a", "--exist-ok", "--property", "k=other")
    assert again["changes"][0]["action"] == "exists"
    assert describe(lns, "a")["properties"] == {"k": "v"}
    ok(lns, "create", "table", "t", "--declare")
    fails(lns, 4, "create", "namespace", "t", match="already exists")
    fails(lns, 2, "create", "namespace", "bad$name", match="$")
    fails(lns, 2, "create", "namespace", "a", "--property", "novalue")
    assert set(listing(lns, "-R")) == {"a", "a.b", "t"}


def test_create_table_from_every_format(lns, files):
    ok(lns, "create", "namespace", "src")
    for fmt, path in files.items():
        ok(lns, "create", "table", f"src.{fmt}", "--from", path)
    ok(lns, "create", "table", "csv_forced", "--from", files["csv"], "--format", "csv")
    for ident in ["src.parquet", "src.csv", "src.jsonl", "src.lance", "csv_forced"]:
        doc = describe(lns, ident)
        assert doc["state"] == "ok", ident
        assert doc["details"]["rows"] == 6, ident
        assert [f["name"] for f in doc["details"]["schema"]] == ["id", "city"], ident
        table = open_lance(lns, doc["location"]).to_table()
        assert sorted(table["id"].to_pylist()) == list(range(6)), ident
        assert sorted(table["city"].to_pylist()) == sorted(["Oslo", "Lima", "Pune"] * 2), ident


def test_create_table_from_bad_sources(lns, tmp_path):
    missing = str(tmp_path / "nope.parquet")
    fails(lns, 2, "create", "table", "t", "--from", missing, match="does not exist")
    odd = tmp_path / "data.xyz"
    odd.write_text("1,2\n")
    fails(lns, 2, "create", "table", "t", "--from", str(odd), match="--format")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"this is not parquet")
    fails(lns, 2, "create", "table", "t", "--from", str(broken), match="broken.parquet")
    plain_dir = tmp_path / "plain_dir"
    plain_dir.mkdir()
    fails(lns, 2, "create", "table", "t", "--from", str(plain_dir), match="not a Lance dataset")
    assert children(lns) == set()


def test_create_table_from_schema_file(lns, tmp_path):
    schema = {
        "fields": [
            {"name": "id", "type": {"type": "int64"}, "nullable": False},
            {"name": "name", "type": {"type": "utf8"}},
            {
                "name": "vec",
                "type": {
                    "type": "fixed_size_list",
                    "length": 3,
                    "fields": [{"name": "item", "type": {"type": "float32"}}],
                },
            },
        ]
    }
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    ok(lns, "create", "table", "empty", "--schema", str(path))
    doc = describe(lns, "empty")
    assert doc["details"]["rows"] == 0
    assert [(f["name"], f["nullable"]) for f in doc["details"]["schema"]] == [
        ("id", False),
        ("name", True),
        ("vec", True),
    ]
    arrow = open_lance(lns, "empty.lance").schema
    assert arrow.field("id").type == pa.int64()
    assert arrow.field("name").type == pa.string()
    assert arrow.field("vec").type == pa.list_(pa.field("item", pa.float32()), 3)

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    fails(lns, 2, "create", "table", "b1", "--schema", str(bad), match="not valid JSON")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"fields": [{"name": "x", "type": {"type": "quaternion"}}]}))
    fails(lns, 2, "create", "table", "b2", "--schema", str(unknown), match="quaternion")
    assert set(listing(lns)) == {"empty"}


def test_create_table_declare_and_properties(ns):
    ok(ns, "create", "namespace", "a")
    change = js(ns, "create", "table", "a.t", "--declare", "--property", "owner=bo")["changes"]
    location = change[0]["location"]
    assert V2_DIR.match(location).group("id") == "a$t"
    assert ".lance-reserved" in children(ns, location)
    assert "_versions" not in children(ns, location)
    entry = listing(ns, "a")["a.t"]
    assert entry["state"] == "declared" and entry["location"] == location
    assert describe(ns, "a.t")["properties"] == {"owner": "bo"}

    ok(ns, "create", "table", "root_decl", "--declare")
    assert ".lance-reserved" in children(ns, "root_decl.lance")


def test_create_table_exists_and_exist_ok(lns, files):
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    before = snapshot(lns)
    fails(lns, 4, "create", "table", "t", "--from", files["csv"], match="already exists")
    again = js(lns, "create", "table", "t", "--from", files["csv"], "--exist-ok")
    assert again["changes"][0]["action"] == "exists"
    assert snapshot(lns) == before
    assert describe(lns, "t")["details"]["rows"] == 6
    ok(lns, "create", "namespace", "n")
    fails(lns, 4, "create", "table", "n", "--declare", match="already exists")


def test_create_table_argument_rules(lns, files, tmp_path):
    fails(lns, 2, "create", "table", "t", match="exactly one")
    both = ("--declare", "--from", files["parquet"])
    fails(lns, 2, "create", "table", "t", *both, match="exactly one")
    fails(lns, 3, "create", "table", "nope.t", "--from", files["parquet"], match="nope")
    fails(lns, 2, "create", "table", "__manifest", "--declare", match="reserved")
    fails(lns, 2, "create", "table", "a/b", "--declare")
    fails(lns, 2, "create", "table", "..", "--declare")
    fails(lns, 2, "create", "namespace", "a%2Fb", match="encoded separator")
    fails(lns, 2, "create", "namespace", " a", match="whitespace")
    # Nothing was left behind by the refusals.
    assert children(lns) == set()


def test_create_dry_run_changes_nothing(ns, files):
    before = snapshot(ns)
    doc = js(ns, "create", "namespace", "a", "--dry-run")
    assert doc["dry_run"] is True and doc["changes"][0]["dry_run"] is True
    plain = ok(ns, "create", "table", "t", "--from", files["parquet"], "--dry-run").stdout
    assert plain.startswith("would create\ttable\tt\tt.lance")
    ok(ns, "create", "table", "d", "--declare", "--dry-run")
    assert snapshot(ns) == before
    assert listing(ns) == {}

    ok(ns, "create", "namespace", "a")
    before = snapshot(ns)
    ok(ns, "create", "table", "a.t", "--from", files["parquet"], "--dry-run")
    ok(ns, "create", "namespace", "a.b", "--dry-run")
    assert snapshot(ns) == before
    assert set(listing(ns, "-R")) == {"a"}

    # The other mutating commands too, on a root V1 table that a rename would move.
    ok(ns, "create", "table", "t", "--from", files["parquet"])
    before = snapshot(ns)
    moving = js(ns, "rename", "t", "a.t", "--dry-run")["changes"][0]
    assert moving["dry_run"] is True and "t.lance" in moving["detail"]
    ok(ns, "drop", "a", "--dry-run")
    ok(ns, "drop", "t", "--dry-run")
    ok(ns, "deregister", "t", "--dry-run")
    assert snapshot(ns) == before


# --- rename ------------------------------------------------------------------------------------


def test_rename_v2_table_keeps_location(lns, files):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--from", files["parquet"])
    location = describe(lns, "a.t")["location"]
    change = js(lns, "rename", "a.t", "a.u")["changes"][0]
    assert change["location"] == location
    entries = listing(lns, "a")
    assert set(entries) == {"a.u"}
    assert entries["a.u"]["location"] == location
    assert describe(lns, "a.u")["details"]["rows"] == 6
    fails(lns, 3, "describe", "a.t")


def test_rename_root_v1_table_moves_to_v2_directory(ns, files):
    ok(ns, "create", "table", "t", "--from", files["parquet"])
    assert "t.lance" in children(ns)
    change = js(ns, "rename", "t", "u")["changes"][0]
    location = change["location"]
    assert V2_DIR.match(location).group("id") == "u"
    top = children(ns)
    assert "t.lance" not in top
    assert location in top
    assert "u.lance" not in top
    entries = listing(ns)
    assert set(entries) == {"u"}
    assert entries["u"] == {
        "id": "u",
        "kind": "table",
        "location": location,
        "source": "manifest",
        "state": "ok",
    }
    doc = describe(ns, "u")
    assert doc["details"]["rows"] == 6
    assert "lancens.renamed_from" not in doc["properties"]
    assert "lancens.rename_to" not in doc["properties"]
    fails(ns, 3, "describe", "t")
    assert open_lance(ns, location).count_rows() == 6


def test_rename_v1_only_directory_table(lns):
    write_lance(lns, "legacy.lance", rows(3))
    change = js(lns, "rename", "legacy", "modern")["changes"][0]
    assert V2_DIR.match(change["location"]).group("id") == "modern"
    assert "legacy.lance" not in children(lns)
    entries = listing(lns)
    assert set(entries) == {"modern"}
    assert entries["modern"]["source"] == "manifest"
    assert describe(lns, "modern")["details"]["rows"] == 3


def test_rename_keep_location(lns, files):
    ok(lns, "create", "table", "t", "--from", files["parquet"], "--property", "p=1")
    change = js(lns, "rename", "t", "u", "--keep-location")["changes"][0]
    assert change["location"] == "t.lance"
    assert "t.lance" in children(lns)
    entries = listing(lns)
    assert set(entries) == {"u"}
    assert entries["u"]["location"] == "t.lance"
    doc = describe(lns, "u")
    assert doc["details"]["rows"] == 6
    assert doc["properties"] == {"p": "1"}
    fails(lns, 3, "describe", "t")


def test_create_after_keep_location_rename_does_not_share_the_directory(lns, files):
    """After `rename t u --keep-location`, u owns t.lance; a new `t` must not share it.

    The name `t` is free (no row, and t.lance is u's location), so the create succeeds (exit 0,
    not 4) and the new table gets a V2 directory of its own."""
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    ok(lns, "rename", "t", "u", "--keep-location")
    before = set(os.listdir(lns.local_path / "t.lance"))
    result = cli(lns, "create", "table", "t", "--declare")
    assert result.exit_code == 0, result
    assert set(os.listdir(lns.local_path / "t.lance")) == before  # u's directory untouched
    entries = listing(lns)
    tables = [e for e in entries.values() if e["kind"] == "table"]
    locations = [e["location"] for e in tables]
    assert len(locations) == len(set(locations)), f"two tables share a directory: {tables}"
    assert entries["t"]["state"] == "declared", entries["t"]
    assert V2_DIR.match(entries["t"]["location"]).group("id") == "t", entries["t"]
    assert entries["u"]["location"] == "t.lance"
    ok(lns, "drop", "t", "--yes")
    assert describe(lns, "u")["details"]["rows"] == 6


def test_declare_after_keep_data_drop_does_not_resurrect_the_kept_data(lns, files):
    """`drop --keep-data` forgets t; a later `create table t --declare` is a new, empty table.

    Nothing named `t` exists any more (the kept t.lance carries the deregistered marker), so the
    create succeeds (exit 0, not 4), in a V2 directory of its own."""
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    ok(lns, "drop", "t", "--keep-data")
    assert listing(lns) == {}
    result = cli(lns, "create", "table", "t", "--declare")
    assert result.exit_code == 0, result
    doc = describe(lns, "t")
    assert doc["state"] == "declared", f"declared table shows old data: {doc['details']}"
    assert doc["details"] is None
    assert V2_DIR.match(doc["location"]).group("id") == "t", doc["location"]
    assert set(listing(lns)) == {"t"}
    assert open_lance(lns, "t.lance").count_rows() == 6  # the kept files are still there


def test_rename_into_another_namespace(lns, files):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "namespace", "b")
    ok(lns, "create", "table", "root_t", "--from", files["parquet"])
    ok(lns, "create", "table", "a.t", "--from", files["csv"])
    a_location = describe(lns, "a.t")["location"]

    moved = js(lns, "rename", "root_t", "b.root_t")["changes"][0]["location"]
    assert V2_DIR.match(moved).group("id") == "b$root_t"
    assert "root_t.lance" not in children(lns)

    js(lns, "rename", "a.t", "b.t")
    entries = listing(lns, "-R")
    assert set(entries) == {"a", "b", "b.root_t", "b.t"}
    assert entries["b.t"]["location"] == a_location
    assert entries["b.root_t"]["location"] == moved
    assert describe(lns, "b.t")["details"]["rows"] == 6
    assert describe(lns, "b.root_t")["details"]["rows"] == 6

    # ... and back to the root: a manifest-only root table, location unchanged.
    js(lns, "rename", "b.t", "back")
    assert listing(lns)["back"]["location"] == a_location
    assert listing(lns)["back"]["source"] == "manifest"


def test_rename_namespace_renames_every_row_below(lns, files):
    ok(lns, "create", "namespace", "sales", "--property", "owner=ann")
    ok(lns, "create", "namespace", "sales.eu")
    ok(lns, "create", "table", "sales.eu.orders", "--from", files["parquet"])
    ok(lns, "create", "table", "sales.t", "--declare")
    ok(lns, "create", "namespace", "other")
    ok(lns, "create", "namespace", "sales2")  # shares a prefix, must not move
    ok(lns, "create", "table", "sales2.t", "--declare")
    before = listing(lns, "-R")
    top_before = children(lns)

    ok(lns, "rename", "sales", "shop")
    after = listing(lns, "-R")
    assert set(after) == {
        "other",
        "sales2",
        "sales2.t",
        "shop",
        "shop.eu",
        "shop.eu.orders",
        "shop.t",
    }
    assert after["sales2.t"] == before["sales2.t"]
    for old_id in ("sales.eu.orders", "sales.t"):
        new_id = "shop" + old_id[len("sales") :]
        assert after[new_id]["location"] == before[old_id]["location"]
        assert after[new_id]["state"] == before[old_id]["state"]
    assert children(lns) == top_before  # no data moved
    assert describe(lns, "shop")["properties"] == {"owner": "ann"}
    assert describe(lns, "shop.eu.orders")["details"]["rows"] == 6
    fails(lns, 3, "describe", "sales")
    fails(lns, 3, "ls", "sales")

    ok(lns, "rename", "shop.eu", "other.eu")
    assert set(listing(lns, "-R")) == {
        "other",
        "other.eu",
        "other.eu.orders",
        "sales2",
        "sales2.t",
        "shop",
        "shop.t",
    }


def test_rename_refusals_and_dry_run(lns, files):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    ok(lns, "create", "table", "u", "--declare")
    fails(lns, 4, "rename", "t", "u", match="already exists")
    fails(lns, 4, "rename", "t", "a", match="already exists")
    fails(lns, 3, "rename", "nope", "x")
    fails(lns, 3, "rename", "t", "missing.t")
    fails(lns, 2, "rename", "a", "a.inner", match="into itself")
    fails(lns, 2, "rename", "t", "t")
    before = snapshot(lns)
    doc = js(lns, "rename", "t", "v", "--dry-run")
    assert doc["dry_run"] is True
    js(lns, "rename", "a", "b", "--dry-run")
    assert snapshot(lns) == before
    assert set(listing(lns)) == {"a", "t", "u"}


# --- drop --------------------------------------------------------------------------------------


def test_drop_table(ns, files):
    ok(ns, "create", "table", "t", "--from", files["parquet"])
    ok(ns, "create", "namespace", "a")
    ok(ns, "create", "table", "a.t", "--from", files["parquet"])
    location = describe(ns, "a.t")["location"]

    doc = js(ns, "drop", "t", "--yes")
    assert doc["changes"][0]["location"] == "t.lance"
    assert not exists(ns, "t.lance")
    ok(ns, "drop", "a.t", "--yes")
    assert not exists(ns, location)
    assert set(listing(ns, "-R")) == {"a"}
    fails(ns, 3, "drop", "t", "--yes")
    fails(ns, 3, "describe", "t")


def test_drop_v1_only_directory_table(lns):
    write_lance(lns, "legacy.lance", rows(3))
    ok(lns, "drop", "legacy", "--yes")
    assert not exists(lns, "legacy.lance")
    assert listing(lns) == {}


def test_drop_namespace_needs_cascade(ns, files):
    ok(ns, "create", "namespace", "a")
    ok(ns, "create", "namespace", "a.b")
    ok(ns, "create", "table", "a.b.t", "--from", files["parquet"])
    ok(ns, "create", "table", "a.d", "--declare")
    ok(ns, "create", "namespace", "keep")
    locations = [e["location"] for e in listing(ns, "-R").values() if e["kind"] == "table"]
    before = snapshot(ns)
    fails(ns, 5, "drop", "a", "--yes", match="--cascade")
    assert snapshot(ns) == before

    doc = js(ns, "drop", "a", "--cascade", "--yes")
    dropped = [(c["kind"], c["id"]) for c in doc["changes"]]
    assert dropped[-1] == ("namespace", "a")
    assert set(dropped) == {
        ("namespace", "a"),
        ("namespace", "a.b"),
        ("table", "a.b.t"),
        ("table", "a.d"),
    }
    assert set(listing(ns, "-R")) == {"keep"}
    for location in locations:
        assert not exists(ns, location)
    fails(ns, 3, "describe", "a")

    # An empty namespace goes without --cascade and without --yes (no data is destroyed).
    ok(ns, "drop", "keep")
    assert listing(ns) == {}
    fails(ns, 2, "drop", "", match="root")


def test_drop_keep_data_root_v1_table(ns, files):
    ok(ns, "create", "table", "t", "--from", files["parquet"])
    before = set(children(ns, "t.lance"))
    doc = js(ns, "drop", "t", "--keep-data")
    assert doc["changes"][0]["detail"] == "data kept"
    after = children(ns, "t.lance")
    assert before <= after
    assert after - before == {".lance-deregistered"}
    assert open_lance(ns, "t.lance").count_rows() == 6
    assert listing(ns) == {}
    fails(ns, 3, "describe", "t")
    assert describe(ns)["tables"] == 0


def test_drop_keep_data_v2_table(lns, files):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--from", files["parquet"])
    location = describe(lns, "a.t")["location"]
    ok(lns, "drop", "a.t", "--keep-data")
    assert open_lance(lns, location).count_rows() == 6
    assert listing(lns, "a") == {}
    # The kept directory can be registered again under a new name.
    ok(lns, "register", "a.back", location)
    assert describe(lns, "a.back")["details"]["rows"] == 6


def test_drop_dry_run_changes_nothing(lns, files):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--from", files["parquet"])
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    before = snapshot(lns)
    doc = js(lns, "drop", "a", "--cascade", "--dry-run")
    assert doc["dry_run"] is True
    assert {c["id"] for c in doc["changes"]} == {"a", "a.t"}
    assert all(c["dry_run"] for c in doc["changes"])
    plain = ok(lns, "drop", "t", "--dry-run").stdout
    assert plain.startswith("would drop\ttable\tt\tt.lance")
    ok(lns, "drop", "t", "--keep-data", "--dry-run")
    assert snapshot(lns) == before
    assert set(listing(lns, "-R")) == {"a", "a.t", "t"}


def test_drop_refuses_without_yes_when_stdin_is_not_a_tty(lns, files):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--from", files["parquet"])
    before = snapshot(lns)
    result = run_cli(*lns.args, "drop", "a", "--cascade", input="y\n")
    assert result.exit_code == 5, result
    assert result.stdout == ""
    assert "--yes" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert snapshot(lns) == before
    # In-process too, for a single table.
    fails(lns, 5, "drop", "a.t", match="--yes")
    assert snapshot(lns) == before
    assert set(listing(lns, "-R")) == {"a", "a.t"}


# --- register / deregister ---------------------------------------------------------------------


def test_register_and_deregister(ns):
    write_lance(ns, "external/events", rows(7))
    ok(ns, "create", "namespace", "a")
    doc = js(ns, "register", "a.events", "external/events/")
    assert doc["changes"][0]["location"] == "external/events"
    entry = listing(ns, "a")["a.events"]
    assert entry["location"] == "external/events"
    assert entry["source"] == "manifest" and entry["state"] == "ok"
    assert describe(ns, "a.events")["details"]["rows"] == 7

    ok(ns, "deregister", "a.events")
    assert listing(ns, "a") == {}
    assert open_lance(ns, "external/events").count_rows() == 7
    fails(ns, 3, "deregister", "a.events")
    fails(ns, 3, "describe", "a.events")


def test_register_refusals(lns):
    write_lance(lns, "ext/t1", rows(2))
    put_file(lns, "notlance/file.txt")
    ok(lns, "create", "namespace", "a")
    fails(lns, 2, "register", "x", "/abs/path", match="relative")
    fails(lns, 2, "register", "x", "s3://bucket/ext/t1", match="relative")
    fails(lns, 2, "register", "x", "file:///tmp/ext/t1", match="relative")
    fails(lns, 2, "register", "x", "../outside", match="..")
    fails(lns, 2, "register", "x", "ext/../ext/t1", match="..")
    fails(lns, 2, "register", "x", "notlance", match="not a Lance table")
    fails(lns, 2, "register", "x", "nothing/here", match="not a Lance table")
    fails(lns, 3, "register", "missing.x", "ext/t1")
    before = snapshot(lns)
    js(lns, "register", "x", "ext/t1", "--dry-run")
    assert snapshot(lns) == before
    ok(lns, "register", "x", "ext/t1")
    fails(lns, 4, "register", "y", "ext/t1", match="already registered")
    fails(lns, 4, "register", "x", "ext/t1", match="already exists")
    fails(lns, 4, "register", "a", "ext/t1", match="already exists")
    assert set(listing(lns)) == {"a", "x"}
    # --allow-non-lance overrides the table check, never the location check.
    ok(lns, "register", "raw", "notlance", "--allow-non-lance")
    assert listing(lns)["raw"]["state"] == "not a Lance table"
    fails(lns, 2, "register", "raw2", "/abs", "--allow-non-lance")


def test_deregister_root_table_keeps_files_and_hides_the_directory(lns, files):
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    write_lance(lns, "legacy.lance", rows(2))
    before = snapshot(lns)
    js(lns, "deregister", "t", "--dry-run")
    assert snapshot(lns) == before

    ok(lns, "deregister", "t")
    assert ".lance-deregistered" in children(lns, "t.lance")
    assert open_lance(lns, "t.lance").count_rows() == 6
    ok(lns, "deregister", "legacy")
    assert ".lance-deregistered" in children(lns, "legacy.lance")
    assert listing(lns) == {}
    fails(lns, 3, "describe", "legacy")


# --- modes -------------------------------------------------------------------------------------


@pytest.fixture(params=["flag", "env"])
def how(request, monkeypatch):
    """Select a mode through the documented flag, or through the environment."""

    def select(flag: str, env_key: str) -> tuple[str, ...]:
        if request.param == "flag":
            return (flag,)
        monkeypatch.setenv(env_key, "false")
        return ()

    return select


def test_v2_only_mode(ns, files, how):
    extra = how("--no-dir-listing", "LANCENS_DIR_LISTING_ENABLED")
    assert describe(ns, extra=extra)["mode"] == V2_MODE
    write_lance(ns, "legacy.lance", rows(2))

    location = js(ns, "create", "table", "t", "--from", files["parquet"], extra=extra)
    location = location["changes"][0]["location"]
    assert V2_DIR.match(location).group("id") == "t"
    assert location in children(ns) and "t.lance" not in children(ns)
    entries = listing(ns, extra=extra)
    assert set(entries) == {"t"}  # legacy.lance is not looked at
    assert entries["t"]["source"] == "manifest"
    fails(ns, 3, "describe", "legacy", extra=extra)
    ok(ns, "create", "table", "legacy", "--declare", extra=extra)

    js(ns, "rename", "t", "u", extra=extra)
    assert listing(ns, extra=extra)["u"]["location"] == location
    ok(ns, "drop", "u", "--yes", extra=extra)
    assert not exists(ns, location)
    assert exists(ns, "legacy.lance")


def test_v1_only_mode(ns, files, how):
    extra = how("--no-manifest", "LANCENS_MANIFEST_ENABLED")
    assert describe(ns, extra=extra)["mode"] == V1_MODE

    location = js(ns, "create", "table", "t", "--from", files["parquet"], extra=extra)
    assert location["changes"][0]["location"] == "t.lance"
    assert "__manifest" not in children(ns)
    write_lance(ns, "legacy.lance", rows(2))
    entries = listing(ns, extra=extra)
    assert set(entries) == {"t", "legacy"}
    assert {e["source"] for e in entries.values()} == {"directory"}

    fails(ns, 1, "create", "namespace", "x", extra=extra, match="needs the manifest")
    fails(ns, 1, "create", "table", "x.y", "--declare", extra=extra, match="needs the manifest")
    fails(ns, 1, "rename", "t", "u", extra=extra, match="needs the manifest")
    fails(ns, 1, "register", "r", "legacy.lance", extra=extra, match="needs the manifest")
    assert "__manifest" not in children(ns)

    ok(ns, "drop", "t", "--yes", extra=extra)
    assert not exists(ns, "t.lance")
    assert set(listing(ns, extra=extra)) == {"legacy"}


def test_v1_only_mode_ignores_the_manifest(lns, files, monkeypatch):
    ok(lns, "create", "namespace", "a")
    ok(lns, "create", "table", "a.t", "--declare")
    ok(lns, "create", "table", "root", "--from", files["parquet"])
    monkeypatch.setenv("LANCENS_MANIFEST_ENABLED", "false")
    entries = listing(lns)
    assert set(entries) == {"root"}
    assert entries["root"]["source"] == "directory"


# --- merge rules (directory namespace spec) and existence (V1 directory namespace spec) ----------


def test_v1_directory_made_by_pylance_is_a_directory_table(ns):
    write_lance(ns, "legacy.lance", rows(3))
    entry = listing(ns)["legacy"]
    assert entry["source"] == "directory" and entry["state"] == "ok"
    doc = describe(ns, "legacy")
    assert doc["source"] == "directory" and doc["details"]["rows"] == 3
    assert doc["properties"] == {}
    fails(ns, 4, "create", "table", "legacy", "--declare", match="already exists")


def test_table_created_at_root_is_both(lns, files):
    ok(lns, "create", "table", "t", "--from", files["parquet"])
    assert children(lns) == {"t.lance", "__manifest"}
    assert listing(lns)["t"]["source"] == "both"
    assert describe(lns, "t")["source"] == "both"


def test_manifest_row_wins_over_same_named_directory(ns):
    write_lance(ns, "elsewhere/foo", rows(3))
    ok(ns, "register", "foo", "elsewhere/foo")
    # Another writer (pylance, V1 style) later makes a same-named <name>.lance directory.
    write_lance(ns, "foo.lance", rows(5, offset=100))
    entries = listing(ns)
    assert list(entries) == ["foo"]
    assert entries["foo"]["location"] == "elsewhere/foo"
    assert entries["foo"]["source"] == "manifest"
    doc = describe(ns, "foo")
    assert doc["location"] == "elsewhere/foo"
    assert doc["details"]["rows"] == 3
    # Dropping the manifest table drops its own location, not the same-named directory.
    ok(ns, "drop", "foo", "--yes")
    assert not exists(ns, "elsewhere/foo")
    assert open_lance(ns, "foo.lance").count_rows() == 5


def test_directory_claimed_by_a_manifest_row_is_listed_once(lns):
    """Deduplicated by location: a row `bar` at `foo.lance` hides the directory table `foo`."""
    write_lance(lns, "foo.lance", rows(4))
    ok(lns, "register", "bar", "foo.lance")
    entries = listing(lns)
    assert set(entries) == {"bar"}
    assert entries["bar"]["location"] == "foo.lance"
    assert entries["bar"]["source"] == "both"
    fails(lns, 3, "describe", "foo")
    assert describe(lns, "bar")["details"]["rows"] == 4
    assert describe(lns)["tables"] == 1


def test_describe_root_counts_a_shadowed_directory_once(lns):
    """The root's table count follows the same merge as `ls`: deduplicated by name too."""
    write_lance(lns, "elsewhere/foo", rows(3))
    ok(lns, "register", "foo", "elsewhere/foo")
    write_lance(lns, "foo.lance", rows(5))
    write_lance(lns, "bar.lance", rows(1))
    assert set(listing(lns)) == {"foo", "bar"}
    assert describe(lns)["tables"] == 2


def test_junk_directory_is_listed_but_not_loadable(ns):
    put_file(ns, "junk.lance/stray.txt")
    entry = listing(ns)["junk"]
    assert entry["source"] == "directory"
    assert entry["state"] == "not a Lance table"
    result = fails(ns, 1, "describe", "junk", match="not a Lance table")
    assert len(result.stderr.strip().splitlines()) == 1
    fails(ns, 4, "create", "table", "junk", "--declare", match="already exists")


def test_empty_junk_directory_is_a_table_that_cannot_be_loaded(lns):
    """The V1 spec: an *empty* table directory exists; loading it fails with a clear error."""
    (lns.local_path / "junk.lance").mkdir()
    entry = listing(lns)["junk"]
    assert entry["source"] == "directory"
    assert entry["state"] == "not a Lance table"
    result = fails(lns, 1, "describe", "junk", match="not a Lance table")
    assert result.stderr.startswith("lancens: error: ")


def test_empty_junk_directory_exists_for_create(lns):
    """The V1 spec: the empty directory counts as an existing table, so its name is taken."""
    (lns.local_path / "junk.lance").mkdir()
    fails(lns, 4, "create", "table", "junk", "--declare", match="already exists")
    assert os.listdir(lns.local_path / "junk.lance") == []


# --- options in either position, delimiter, subprocess smoke ----------------------------------


def test_options_after_the_command_and_delimiter(lns, files):
    result = invoke("ls", "--json", *lns.args)
    assert result.exit_code == 0 and json.loads(result.stdout)["entries"] == []
    ok(lns, "--delimiter", "/", "create", "namespace", "a")
    ok(lns, "--delimiter", "/", "create", "table", "a/t.x", "--from", files["parquet"])
    entries = listing(lns, "-R")
    assert set(entries) == {"a", 'a."t.x"'}  # default delimiter; the name holding it quoted
    slash = js(lns, "--delimiter", "/", "ls", "-R")
    assert [e["id"] for e in slash["entries"]] == ["a", "a/t.x"]
    assert js(lns, "--delimiter", "/", "describe", "a/t.x")["details"]["rows"] == 6


def test_subprocess_end_to_end(lns, files):
    """The console entry point as a user runs it: create, list (piped), describe, drop."""
    result = run_cli(*lns.args, "create", "table", "t", "--from", files["parquet"])
    assert result.exit_code == 0, result
    assert result.stdout == "create\ttable\tt\tt.lance\t-\n"
    result = run_cli(*lns.args, "ls")
    assert result.exit_code == 0 and result.stdout == "t\ttable\tt.lance\tboth\tok\n"
    result = run_cli("describe", "t", "--json", *lns.args)
    assert result.exit_code == 0 and json.loads(result.stdout)["details"]["rows"] == 6
    result = run_cli(*lns.args, "drop", "t", "--yes")
    assert result.exit_code == 0 and not exists(lns, "t.lance")
