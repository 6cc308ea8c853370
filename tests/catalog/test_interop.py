"""Interoperability with the reference `lance.namespace.DirectoryNamespace` (pylance) and lancedb.

Both ways, on a local directory and on S3 (moto): what `lancens` writes the reference lists,
describes and opens; what the reference writes `lancens` lists, describes, renames and drops, and
the reference then sees the result; a `__manifest` written alternately by both ends with exactly
the expected rows. Where the reference departs from the spec (at the root with dir listing on it,
pylance's `DirectoryNamespace` reads only the directory), root tables known only to the
manifest are checked through a reference with `dir_listing_enabled=false`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import lance
import lance_namespace as ln
import pyarrow as pa
import pyarrow.parquet as pq
from helpers import Root, invoke, object_tags, put_object, run_cli, uri
from lance.namespace import DirectoryNamespace
from lance_namespace.errors import NamespaceNotFoundError, TableNotFoundError

# --- helpers -----------------------------------------------------------------------------------


def v2_pattern(object_id: str) -> re.Pattern:
    return re.compile("^[0-9a-f]{8}_" + re.escape(object_id) + "$")


def ours(root: Root, *args: str, code: int = 0, extra: tuple[str, ...] = ()):
    """Run `lancens` in-process against `root`; assert the exit code."""
    result = invoke(*root.args, *extra, *args)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result


def ours_json(root: Root, *args: str, extra: tuple[str, ...] = ()):
    return ours(root, *args, "--json", extra=extra).json()


def listing(root: Root, namespace: str | None = None, recursive: bool = True) -> dict:
    args = ["ls"] + ([namespace] if namespace else []) + (["-R"] if recursive else [])
    return {e["id"]: e for e in ours_json(root, *args)["entries"]}


def ref(root: Root, **extra: str) -> DirectoryNamespace:
    """The reference namespace on the same root (string properties, `storage.*` included)."""
    return DirectoryNamespace(**{**root.properties, **{k: str(v) for k, v in extra.items()}})


def ref_nodir(root: Root) -> DirectoryNamespace:
    """The reference reading root tables from the manifest (it ignores it with dir listing on)."""
    return ref(root, dir_listing_enabled="false")


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def rows(n: int, offset: int = 0) -> pa.Table:
    return pa.table({"id": list(range(offset, offset + n)), "name": [f"r{i}" for i in range(n)]})


def parquet(tmp_path, n: int) -> str:
    path = tmp_path / f"src_{n}.parquet"
    if not path.exists():
        pq.write_table(rows(n), path)
    return str(path)


def tail(location: str) -> str:
    """The directory name of a table location (the reference answers with full URIs)."""
    return location.rstrip("/").rsplit("/", 1)[-1]


def count(root: Root, location: str) -> int:
    return lance.dataset(location, storage_options=root.storage_options).count_rows()


def ref_create(ns: DirectoryNamespace, ident: list[str], n: int) -> str:
    return ns.create_table(ln.CreateTableRequest(id=ident), ipc(rows(n))).location


def ref_tables(ns: DirectoryNamespace, *ident: str) -> list[str]:
    return sorted(ns.list_tables(ln.ListTablesRequest(id=list(ident))).tables)


def ref_namespaces(ns: DirectoryNamespace, *ident: str) -> list[str]:
    return sorted(ns.list_namespaces(ln.ListNamespacesRequest(id=list(ident))).namespaces)


def ref_describe(ns: DirectoryNamespace, *ident: str):
    return ns.describe_table(ln.DescribeTableRequest(id=list(ident)))


def ref_props(ns: DirectoryNamespace, *ident: str) -> dict:
    return ns.describe_namespace(ln.DescribeNamespaceRequest(id=list(ident))).properties or {}


def ref_table_exists(ns: DirectoryNamespace, *ident: str) -> bool:
    try:
        ns.table_exists(ln.TableExistsRequest(id=list(ident)))
        return True
    except TableNotFoundError:
        return False


def ref_namespace_exists(ns: DirectoryNamespace, *ident: str) -> bool:
    try:
        ns.namespace_exists(ln.NamespaceExistsRequest(id=list(ident)))
        return True
    except NamespaceNotFoundError:
        return False


def manifest(root: Root) -> lance.LanceDataset:
    return lance.dataset(uri(root, "__manifest"), storage_options=root.storage_options)


def manifest_rows(root: Root) -> dict[str, dict]:
    return {r["object_id"]: r for r in manifest(root).to_table().to_pylist()}


def write_external(root: Root, location: str, n: int) -> None:
    """A Lance table written straight into the root, known to no catalog yet."""
    lance.write_dataset(rows(n), uri(root, location), storage_options=root.storage_options)


def exists_on_storage(root: Root, location: str) -> bool:
    if root.local_path is not None:
        return (root.local_path / location).exists()
    return bool(object_tags(root, location))


_LANCEDB_SCRIPT = """
import json, sys
import lancedb
import pyarrow as pa
root, namespace, names, create = json.loads(sys.argv[1])
db = lancedb.connect_namespace("dir", root["properties"])
if create:  # lancedb creates through the namespace: declare_table, then its own write
    db.create_table(
        create, data=pa.table({"id": [1, 2]}), namespace_path=namespace,
        storage_options=root["storage"],
    )
out = {"tables": sorted(db.list_tables(namespace_path=namespace).tables), "rows": {}}
for name in names:
    # lancedb 0.40 does not hand the namespace's storage.* properties to the table it opens.
    table = db.open_table(name, namespace_path=namespace, storage_options=root["storage"])
    out["rows"][name] = table.count_rows()
print(json.dumps(out))
"""


def lancedb_run(
    root: Root, namespace: list[str], names: list[str], create: str | None = None
) -> dict:
    """Through lancedb: optionally create a 2-row table, list a namespace, count rows.

    In a subprocess: lancedb's native connect holds the GIL while it talks to storage, which
    would deadlock against the moto server running in this process.
    """
    arg = json.dumps(
        [{"properties": root.properties, "storage": root.storage_options}, namespace, names, create]
    )
    proc = subprocess.run(
        [sys.executable, "-c", _LANCEDB_SCRIPT, arg],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LANCE_LOG": "error"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def sibling(root: Root, name: str) -> Root:
    """A second, empty root next to `root` (same bucket or parent directory)."""
    if root.local_path is not None:
        path = root.local_path.parent / name
        path.mkdir()
        return Root(str(path), dict(root.storage_options), path)
    return Root(f"{root.uri.rstrip('/')}-{name}", dict(root.storage_options), None)


NOTE = 'note=caf\u00e9 "q" {} \U0001f600'  # a property value JSON has to escape


# --- 1. what we write, the reference reads -----------------------------------------------------


def test_reference_reads_what_we_write(any_root, tmp_path):
    r = any_root
    ours(r, "init")
    ours(r, "create", "namespace", "sales", "--property", "owner=ann", "--property", "tier=gold")
    ours(r, "create", "namespace", "sales.eu", "--property", "region=eu", "--property", NOTE)
    ours(r, "create", "namespace", "empty")
    ours(
        r,
        "create",
        "table",
        "sales.eu.orders",
        "--from",
        parquet(tmp_path, 5),
        "--property",
        "owner=bob",
    )
    ours(r, "create", "table", "events", "--from", parquet(tmp_path, 3))
    ours(r, "create", "table", "legacy", "--from", parquet(tmp_path, 7))
    ours(r, "create", "table", "old", "--from", parquet(tmp_path, 2))
    ours(r, "create", "table", "sales.draft", "--declare")
    ours(r, "create", "table", "sales.tmp", "--from", parquet(tmp_path, 4))
    ours(r, "rename", "sales.tmp", "sales.eu.moved")  # child table into another namespace
    ours(r, "rename", "legacy", "modern")  # root V1 table: moves to a V2 directory
    ours(r, "rename", "old", "sales.old")  # root V1 table into a child namespace
    write_external(r, "ext_data", 6)
    ours(r, "register", "sales.eu.ext", "ext_data")

    mine = listing(r)
    assert mine["events"]["location"] == "events.lance"
    assert v2_pattern("modern").match(mine["modern"]["location"]), mine["modern"]
    assert v2_pattern("sales$old").match(mine["sales.old"]["location"]), mine["sales.old"]
    assert mine["sales.eu.ext"]["location"] == "ext_data"
    assert not exists_on_storage(r, "legacy.lance")
    assert not exists_on_storage(r, "old.lance")

    theirs = ref(r)
    assert ref_namespaces(theirs) == ["empty", "sales"]
    assert ref_namespaces(theirs, "sales") == ["eu"]
    assert ref_namespaces(theirs, "sales", "eu") == []
    assert ref_props(theirs, "sales") == {"owner": "ann", "tier": "gold"}
    assert ref_props(theirs, "sales", "eu") == {
        "region": "eu",
        "note": 'caf\u00e9 "q" {} \U0001f600',
    }
    assert ref_props(theirs, "empty") == {}
    assert ref_tables(theirs, "sales") == ["draft", "old"]
    assert ref_tables(theirs, "sales", "eu") == ["ext", "moved", "orders"]
    assert ref_tables(theirs, "empty") == []
    # Root, directory view (dir listing on): the renamed-away V1 directories are gone for it.
    root_dir_view = ref_tables(theirs)
    assert "events" in root_dir_view
    assert "legacy" not in root_dir_view and "old" not in root_dir_view
    # Root, manifest view: exactly our root tables.
    nodir = ref_nodir(r)
    assert ref_tables(nodir) == ["events", "modern"]
    assert not ref_table_exists(nodir, "legacy")
    assert not ref_table_exists(theirs, "legacy")

    expected = {
        ("sales", "eu", "orders"): 5,
        ("sales", "eu", "moved"): 4,
        ("sales", "eu", "ext"): 6,
        ("sales", "old"): 2,
        ("events",): 3,
        ("modern",): 7,
    }
    for ident, n in expected.items():
        reader = nodir if len(ident) == 1 else theirs
        assert ref_table_exists(reader, *ident)
        described = ref_describe(reader, *ident)
        assert tail(described.location) == mine[".".join(ident)]["location"], ident
        assert count(r, described.location) == n, ident

    assert ref_describe(theirs, "sales", "eu", "orders").properties == {"owner": "bob"}

    # The declared table: the reference resolves it to our reserved directory.
    assert ref_table_exists(theirs, "sales", "draft")
    assert tail(ref_describe(theirs, "sales", "draft").location) == mine["sales.draft"]["location"]

    # Nothing of our rename journal is left in the rows the reference reads.
    rows_now = manifest_rows(r)
    assert rows_now["modern"]["metadata"] is None
    assert rows_now["sales$old"]["metadata"] is None
    assert rows_now["sales$eu$moved"]["metadata"] is None

    # lancedb on the same root opens a child table and a renamed one, and creates one that we
    # then see as an ordinary table.
    seen = lancedb_run(r, ["sales", "eu"], ["orders", "moved"], create="from_lancedb")
    assert seen == {
        "tables": ["ext", "from_lancedb", "moved", "orders"],
        "rows": {"orders": 5, "moved": 4},
    }
    entry = listing(r, "sales.eu", recursive=False)["sales.eu.from_lancedb"]
    assert (entry["kind"], entry["state"]) == ("table", "ok")
    assert v2_pattern("sales$eu$from_lancedb").match(entry["location"])
    assert ours_json(r, "describe", "sales.eu.from_lancedb")["details"]["rows"] == 2


def test_manifest_schema_equals_the_reference(any_root, tmp_path):
    mine, theirs_root = any_root, sibling(any_root, "ref")
    ours(mine, "create", "namespace", "a", "--property", "k=v")
    ours(mine, "create", "table", "a.t", "--from", parquet(tmp_path, 1))
    theirs = ref(theirs_root)
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["a"], properties={"k": "v"}))
    ref_create(theirs, ["a", "t"], 1)

    ours_ds, ref_ds = manifest(mine), manifest(theirs_root)
    a, b = ours_ds.schema, ref_ds.schema
    assert (
        a.names == b.names == ["object_id", "object_type", "location", "metadata", "base_objects"]
    )
    for fa, fb in zip(a, b, strict=True):
        assert (fa.name, fa.type, fa.nullable) == (fb.name, fb.type, fb.nullable)
        assert (fa.metadata or {}) == (fb.metadata or {}), fa.name
    assert a.field("object_id").metadata == {b"lance-schema:unenforced-primary-key:position": b"0"}
    assert not a.field("object_id").nullable and not a.field("object_type").nullable
    assert a.field("base_objects").type.value_field.name == "object_id"
    assert b.field("base_objects").type.value_field.name == "object_id"
    assert a.field("base_objects").type.value_field == b.field("base_objects").type.value_field
    assert (a.metadata or {}) == (b.metadata or {}) == {}
    assert a.equals(b, check_metadata=True)
    assert ours_ds.data_storage_version == ref_ds.data_storage_version
    # The rows themselves look alike (minus the random directory prefix).
    ra, rb = manifest_rows(mine), manifest_rows(theirs_root)
    assert json.loads(ra["a"]["metadata"]) == json.loads(rb["a"]["metadata"]) == {"k": "v"}
    assert ra["a"]["location"] is rb["a"]["location"] is None
    assert ra["a$t"]["metadata"] is rb["a$t"]["metadata"] is None
    assert ra["a$t"]["base_objects"] == rb["a$t"]["base_objects"]
    assert v2_pattern("a$t").match(ra["a$t"]["location"])
    assert v2_pattern("a$t").match(rb["a$t"]["location"])

    # Our commit on the reference's manifest keeps its schema byte for byte.
    ours(theirs_root, "create", "namespace", "b")
    assert manifest(theirs_root).schema.equals(b, check_metadata=True)


# --- 2. what the reference writes, we read, rename and drop -------------------------------------


def test_we_read_rename_and_drop_what_the_reference_writes(any_root):
    r = any_root
    theirs = ref(r)
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["sales"], properties={"owner": "ann"}))
    theirs.create_namespace(
        ln.CreateNamespaceRequest(id=["sales", "eu"], properties={"region": "eu", "tier": "1"})
    )
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["empty"]))
    orders_loc = tail(
        theirs.create_table(
            ln.CreateTableRequest(id=["sales", "eu", "orders"], properties={"owner": "bob"}),
            ipc(rows(5)),
        ).location
    )
    items_loc = tail(ref_create(theirs, ["sales", "items"], 4))
    assert tail(ref_create(theirs, ["events"], 3)) == "events.lance"
    old = theirs.create_table(
        ln.CreateTableRequest(id=["old"], properties={"p": "1"}), ipc(rows(2))
    )
    assert tail(old.location) == "old.lance"
    # A root table in a V2 directory (the reference with dir listing off) and a declared root one.
    v2root_loc = tail(ref_create(ref_nodir(r), ["v2root"], 1))
    assert v2_pattern("v2root").match(v2root_loc)
    rdecl = theirs.declare_table(ln.DeclareTableRequest(id=["rdecl"]))
    assert tail(rdecl.location) == "rdecl.lance"
    draft_loc = tail(theirs.declare_table(ln.DeclareTableRequest(id=["sales", "draft"])).location)
    write_external(r, "imports/ext_data", 6)
    theirs.register_table(
        ln.RegisterTableRequest(id=["sales", "eu", "ext"], location="imports/ext_data")
    )

    # ls -R --json, once as a real subprocess.
    proc = run_cli(*r.args, "ls", "-R", "--json")
    assert proc.exit_code == 0, proc.stderr
    entries = {e["id"]: e for e in proc.json()["entries"]}
    assert set(entries) == {
        "sales",
        "sales.eu",
        "empty",
        "sales.eu.orders",
        "sales.items",
        "events",
        "old",
        "sales.draft",
        "sales.eu.ext",
        "v2root",
        "rdecl",
    }
    for name in ("sales", "sales.eu", "empty"):
        assert entries[name]["kind"] == "namespace"
    expected_tables = {
        "sales.eu.orders": (orders_loc, "ok"),
        "sales.items": (items_loc, "ok"),
        "events": ("events.lance", "ok"),
        "old": ("old.lance", "ok"),
        "sales.draft": (draft_loc, "declared"),
        "sales.eu.ext": ("imports/ext_data", "ok"),
        "v2root": (v2root_loc, "ok"),
        "rdecl": ("rdecl.lance", "declared"),
    }
    for name, (location, state) in expected_tables.items():
        entry = entries[name]
        assert (entry["kind"], entry["location"], entry["state"]) == ("table", location, state)
    assert entries["events"]["source"] == "both"  # manifest row and <name>.lance directory
    assert entries["sales.eu.orders"]["source"] == "manifest"
    assert entries["v2root"]["source"] == "manifest"
    assert entries["rdecl"]["source"] == "both"
    assert set(listing(r, "sales", recursive=False)) == {"sales.eu", "sales.items", "sales.draft"}

    # describe --json: namespace properties, table rows.
    assert ours_json(r, "describe", "sales")["properties"] == {"owner": "ann"}
    eu = ours_json(r, "describe", "sales.eu")
    assert eu["properties"] == {"region": "eu", "tier": "1"}
    assert (eu["namespaces"], eu["tables"]) == (0, 2)
    assert ours_json(r, "describe", "empty")["properties"] == {}
    for name, n in {"sales.eu.orders": 5, "sales.items": 4, "events": 3, "old": 2}.items():
        described = ours_json(r, "describe", name)
        assert described["state"] == "ok", name
        assert described["details"]["rows"] == n, name
    assert ours_json(r, "describe", "sales.eu.ext")["details"]["rows"] == 6
    assert ours_json(r, "describe", "sales.draft")["state"] == "declared"
    assert ours_json(r, "describe", "rdecl")["state"] == "declared"
    assert ours_json(r, "describe", "v2root")["details"]["rows"] == 1
    assert ours_json(r, "describe", "sales.eu.orders")["properties"] == {"owner": "bob"}
    assert ours_json(r, "describe", "old")["properties"] == {"p": "1"}

    # Rename a child table into another namespace: the reference follows.
    ours(r, "rename", "sales.eu.orders", "sales.orders")
    assert ref_tables(theirs, "sales", "eu") == ["ext"]
    assert ref_tables(theirs, "sales") == ["draft", "items", "orders"]
    assert not ref_table_exists(theirs, "sales", "eu", "orders")
    moved = ref_describe(theirs, "sales", "orders")
    assert tail(moved.location) == orders_loc  # no data moves for a V2 table
    assert count(r, moved.location) == 5
    assert moved.properties == {"owner": "bob"}

    # Rename a root table: it moves to <8 hex>_<id>; the old directory is gone for the reference.
    ours(r, "rename", "old", "renamed")
    new_loc = listing(r)["renamed"]["location"]
    assert v2_pattern("renamed").match(new_loc), new_loc
    assert not exists_on_storage(r, "old.lance")
    assert "old" not in ref_tables(theirs)
    assert not ref_table_exists(theirs, "old")
    nodir = ref_nodir(r)
    assert ref_tables(nodir) == ["events", "rdecl", "renamed", "v2root"]
    described = ref_describe(nodir, "renamed")
    assert tail(described.location) == new_loc
    assert count(r, described.location) == 2
    assert described.properties == {"p": "1"}  # kept, and none of our rename journal leaks

    # A root table already in a V2 directory is renamed in place.
    ours(r, "rename", "v2root", "v2root2")
    assert listing(r)["v2root2"]["location"] == v2root_loc
    assert tail(ref_describe(nodir, "v2root2").location) == v2root_loc
    assert not ref_table_exists(nodir, "v2root")

    # A declared root table dropped by us is gone for the reference.
    ours(r, "drop", "rdecl", "--yes")
    assert not ref_table_exists(theirs, "rdecl")
    assert not exists_on_storage(r, "rdecl.lance")

    # Drop tables (root and child): gone for the reference too.
    ours(r, "drop", "events", "--yes")
    ours(r, "drop", "sales.items", "--yes")
    assert "events" not in ref_tables(theirs)
    assert not ref_table_exists(theirs, "events")
    assert ref_tables(nodir) == ["renamed", "v2root2"]
    assert ref_tables(theirs, "sales") == ["draft", "orders"]
    assert not exists_on_storage(r, "events.lance")
    assert not exists_on_storage(r, items_loc)

    # Drop a namespace tree: refused without --cascade, then everything below goes.
    refused = invoke(*r.args, "drop", "sales", "--yes")
    assert refused.exit_code == 5, refused.stderr
    assert ref_namespaces(theirs) == ["empty", "sales"]
    proc = run_cli(*r.args, "drop", "sales", "--cascade", "--yes", "--json")  # a real process
    assert proc.exit_code == 0, proc.stderr
    dropped = {(c["kind"], c["id"]) for c in proc.json()["changes"]}
    assert dropped == {
        ("namespace", "sales"),
        ("namespace", "sales.eu"),
        ("table", "sales.orders"),
        ("table", "sales.draft"),
        ("table", "sales.eu.ext"),
    }
    assert ref_namespaces(theirs) == ["empty"]
    assert not ref_namespace_exists(theirs, "sales")
    assert not ref_namespace_exists(theirs, "sales", "eu")
    assert not ref_table_exists(theirs, "sales", "orders")
    for location in (orders_loc, draft_loc, "imports/ext_data"):
        assert not exists_on_storage(r, location), location
    assert {k: v["object_type"] for k, v in manifest_rows(r).items()} == {
        "empty": "namespace",
        "renamed": "table",
        "v2root2": "table",
    }

    # The reference still writes consistently afterwards; the freed names are reusable.
    ref_create(theirs, ["empty", "fresh"], 1)
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["sales"], properties={"v": "2"}))
    assert ref_props(theirs, "sales") == {"v": "2"}
    assert set(listing(r)) == {"empty", "empty.fresh", "renamed", "sales", "v2root2"}
    assert ours_json(r, "describe", "sales")["properties"] == {"v": "2"}


# Names our validation accepts but that are special in a URI: the table directory must be
# addressed so that Lance, the reference and fsspec all mean the same path.
URI_SPECIAL_NAMES = ("a#b", "q?x", "p%41q", "sp ace", "caf\u00e9", "plus+x")


def test_names_special_in_uris_we_write(any_root, tmp_path):
    r = any_root
    ours(r, "create", "namespace", "n")
    for name in URI_SPECIAL_NAMES:
        ours(r, "create", "table", f"n.{name}", "--from", parquet(tmp_path, 3))
    ours(r, "create", "table", "p%41q", "--from", parquet(tmp_path, 3))  # a root V1 table

    # The root table sits in exactly `p%41q.lance`, not in a percent-decoded `pAq.lance`.
    assert not exists_on_storage(r, "pAq.lance")
    assert exists_on_storage(r, "p%41q.lance/_versions")
    entries = listing(r)
    assert set(entries) == {"n", "p%41q", *(f"n.{x}" for x in URI_SPECIAL_NAMES)}
    states = {ident: e["state"] for ident, e in entries.items() if e["kind"] == "table"}
    assert set(states.values()) == {"ok"}, states
    for name in URI_SPECIAL_NAMES:
        assert ours_json(r, "describe", f"n.{name}")["details"]["rows"] == 3, name
    theirs = ref(r)
    assert ref_tables(theirs, "n") == sorted(URI_SPECIAL_NAMES)
    for name in URI_SPECIAL_NAMES:
        described = ref_describe(theirs, "n", name)
        assert count(r, described.location) == 3, name


def test_names_special_in_uris_reference_writes(any_root):
    r = any_root
    theirs = ref(r)
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["n"]))
    locations = {name: tail(ref_create(theirs, ["n", name], 2)) for name in URI_SPECIAL_NAMES}
    entries = listing(r)
    rows_seen = {}
    for name in URI_SPECIAL_NAMES:
        entry = entries[f"n.{name}"]
        assert entry["state"] == "ok", entry
        result = invoke(*r.args, "describe", f"n.{name}", "--json")
        rows_seen[name] = result.json()["details"]["rows"] if result.exit_code == 0 else None
    assert rows_seen == dict.fromkeys(URI_SPECIAL_NAMES, 2)
    # Our listing names the directory as stored (the reference answers with an escaped URI).
    for name, location in locations.items():
        assert v2_pattern(f"n${name}").match(entries[f"n.{name}"]["location"]), location
    ours(r, "rename", "n.a#b", "n.renamed")
    ours(r, "drop", "n.q?x", "--yes")
    assert ref_tables(theirs, "n") == sorted({*URI_SPECIAL_NAMES, "renamed"} - {"a#b", "q?x"})
    assert count(r, ref_describe(theirs, "n", "renamed").location) == 2


# --- 3. one manifest, both writers -------------------------------------------------------------


def test_alternating_writers_keep_each_others_rows(any_root, tmp_path):
    r = any_root
    theirs = ref(r)
    src = parquet(tmp_path, 2)
    ours(r, "create", "namespace", "a", "--property", "by=ours")
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["b"], properties={"by": "ref"}))
    ours(r, "create", "table", "a.t1", "--from", src)
    ref_create(theirs, ["b", "t2"], 3)
    ref_create(theirs, ["a", "t3"], 4)
    ours(r, "drop", "a.t1", "--yes")
    ref_create(theirs, ["r1"], 1)
    ours(r, "create", "table", "r2", "--from", src)
    theirs.drop_table(ln.DropTableRequest(id=["b", "t2"]))
    ours(r, "rename", "a.t3", "b.t3")
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["a", "sub"]))
    ours(r, "create", "namespace", "b.sub2", "--property", "k=v")
    theirs.declare_table(ln.DeclareTableRequest(id=["a", "sub", "d"]))
    ours(r, "create", "table", "a.sub.t4", "--from", src)
    theirs.drop_namespace(ln.DropNamespaceRequest(id=["b", "sub2"]))

    expected = {
        "a": "namespace",
        "b": "namespace",
        "a$sub": "namespace",
        "b$t3": "table",
        "r1": "table",
        "r2": "table",
        "a$sub$d": "table",
        "a$sub$t4": "table",
    }
    found = manifest_rows(r)
    assert {k: v["object_type"] for k, v in found.items()} == expected
    assert json.loads(found["a"]["metadata"]) == {"by": "ours"}
    assert json.loads(found["b"]["metadata"]) == {"by": "ref"}
    assert found["r1"]["location"] == "r1.lance" and found["r2"]["location"] == "r2.lance"

    mine = listing(r)
    assert set(mine) == {k.replace("$", ".") for k in expected}
    assert mine["a.sub.d"]["state"] == "declared"
    assert ours_json(r, "describe", "b.t3")["details"]["rows"] == 4

    for reader in (theirs, ref(r)):  # the live handle and a fresh one agree
        assert ref_namespaces(reader) == ["a", "b"]
        assert ref_namespaces(reader, "a") == ["sub"]
        assert ref_namespaces(reader, "b") == []
        assert ref_tables(reader, "a") == []
        assert ref_tables(reader, "b") == ["t3"]
        assert ref_tables(reader, "a", "sub") == ["d", "t4"]
        assert ref_props(reader, "b") == {"by": "ref"}
    assert ref_tables(ref_nodir(r)) == ["r1", "r2"]
    assert count(r, ref_describe(theirs, "b", "t3").location) == 4
    assert count(r, ref_describe(theirs, "a", "sub", "t4").location) == 2

    # Our namespace rename re-keys every row below it; the reference follows, data in place.
    t4_location = ref_describe(theirs, "a", "sub", "t4").location
    ours(r, "rename", "a", "z")
    assert ref_namespaces(theirs) == ["b", "z"]
    assert ref_namespaces(theirs, "z") == ["sub"]
    assert ref_tables(theirs, "z", "sub") == ["d", "t4"]
    assert ref_describe(theirs, "z", "sub", "t4").location == t4_location
    assert ref_props(theirs, "z") == {"by": "ours"}
    assert not ref_namespace_exists(theirs, "a")
    ref_create(theirs, ["z", "sub", "t5"], 1)
    assert set(listing(r, "z.sub", recursive=False)) == {"z.sub.d", "z.sub.t4", "z.sub.t5"}


def _indexes(root: Root) -> dict[str, tuple[str, list[str]]]:
    found = {}
    for index in manifest(root).describe_indices():
        found[index.name] = (index.index_type, list(index.field_names))
    return found


def _lookup(root: Root, predicate: str) -> list[str]:
    return sorted(manifest(root).to_table(filter=predicate).column("object_id").to_pylist())


def test_indexes_built_by_our_commits_and_reference_still_reads_and_writes(any_root, tmp_path):
    r = any_root
    idx = ("--indexes",)
    ours(r, "create", "namespace", "a", extra=idx)
    ours(r, "create", "table", "a.t", "--from", parquet(tmp_path, 3), extra=idx)
    ours(r, "create", "table", "root_t", "--from", parquet(tmp_path, 3), extra=idx)

    indexes = _indexes(r)
    assert set(indexes) == {"object_id_btree", "object_type_bitmap", "base_objects_label_list"}
    assert indexes["object_id_btree"][1] == ["object_id"]
    assert indexes["object_type_bitmap"][1] == ["object_type"]
    assert indexes["base_objects_label_list"][1] == ["base_objects"]
    kinds = {name: kind.upper().replace("_", "") for name, (kind, _) in indexes.items()}
    assert kinds == {
        "object_id_btree": "BTREE",
        "object_type_bitmap": "BITMAP",
        "base_objects_label_list": "LABELLIST",
    }
    # The indexes cover the current rows (they are rebuilt after each commit).
    assert _lookup(r, "object_id = 'a$t'") == ["a$t"]
    assert _lookup(r, "object_type = 'table'") == ["a$t", "root_t"]
    assert {i["name"] for i in ours_json(r, "describe")["manifest"]["indexes"]} == set(indexes)

    # The reference reads it, with and without its own inline optimisation, and writes to it.
    for theirs in (ref(r), ref(r, inline_optimization_enabled="true")):
        assert ref_namespaces(theirs) == ["a"]
        assert ref_tables(theirs, "a") == ["t"]
        assert count(r, ref_describe(theirs, "a", "t").location) == 3
    theirs = ref(r)
    theirs.create_namespace(ln.CreateNamespaceRequest(id=["b"], properties={"x": "y"}))
    ref_create(theirs, ["b", "u"], 2)
    ref(r, inline_optimization_enabled="true").create_namespace(ln.CreateNamespaceRequest(id=["c"]))

    # A plain commit of ours over the reference's indexed one: lookups still right.
    ours(r, "create", "namespace", "d")
    assert _lookup(r, "object_id = 'd'") == ["d"]
    assert _lookup(r, "object_type = 'namespace'") == ["a", "b", "c", "d"]
    assert ref_namespace_exists(ref(r, inline_optimization_enabled="true"), "d")

    # Our next indexed commit on top of the reference's ones: all rows there, lookups right.
    ours(r, "create", "table", "c.v", "--from", parquet(tmp_path, 3), extra=idx)
    assert set(_indexes(r)) == {"object_id_btree", "object_type_bitmap", "base_objects_label_list"}
    assert _lookup(r, "object_type = 'table'") == ["a$t", "b$u", "c$v", "root_t"]
    assert _lookup(r, "object_type = 'namespace'") == ["a", "b", "c", "d"]
    assert _lookup(r, "object_id = 'b$u'") == ["b$u"]
    assert set(listing(r)) == {"a", "a.t", "b", "b.u", "c", "c.v", "d", "root_t"}
    assert ref_tables(theirs, "c") == ["v"]
    assert ref_tables(ref(r), "b") == ["u"]
    assert ref_props(ref(r), "b") == {"x": "y"}
    ref(r).drop_table(ln.DropTableRequest(id=["c", "v"]))
    assert set(listing(r)) == {"a", "a.t", "b", "b.u", "c", "d", "root_t"}


# --- 4. .lance-deregistered --------------------------------------------------------------------


def test_drop_keep_data_hides_root_table_from_the_reference(any_root, tmp_path):
    r = any_root
    theirs = ref(r)
    ours(r, "create", "table", "gone", "--from", parquet(tmp_path, 3))
    ours(r, "create", "table", "stays", "--from", parquet(tmp_path, 3))
    ref_create(theirs, ["theirs_gone"], 2)
    ours(r, "create", "table", "forgotten", "--from", parquet(tmp_path, 3))
    assert ref_tables(theirs) == ["forgotten", "gone", "stays", "theirs_gone"]

    ours(r, "drop", "gone", "--keep-data")
    ours(r, "drop", "theirs_gone", "--keep-data")
    ours(r, "deregister", "forgotten")

    for name in ("gone", "theirs_gone", "forgotten"):
        location = f"{name}.lance"
        assert exists_on_storage(r, f"{location}/.lance-deregistered"), name
        assert count(r, uri(r, location)) in (2, 3)  # the data is kept
        assert not ref_table_exists(theirs, name), name
        assert not ref_table_exists(ref_nodir(r), name), name
    assert ref_tables(theirs) == ["stays"]
    assert ref_tables(ref_nodir(r)) == ["stays"]
    assert set(listing(r)) == {"stays"}
    assert set(manifest_rows(r)) == {"stays"}

    # A V1-only root directory (no manifest row): deregistered, it is hidden from both tools;
    # registered again, both see it (the marker does not outlive the registration).
    write_external(r, "v1only.lance", 2)
    assert ref_tables(theirs) == ["stays", "v1only"]
    ours(r, "deregister", "v1only")
    assert exists_on_storage(r, "v1only.lance/.lance-deregistered")
    assert ref_tables(theirs) == ["stays"]
    assert set(listing(r)) == {"stays"}
    ours(r, "register", "v1only", "v1only.lance")
    assert ref_tables(theirs) == ["stays", "v1only"]
    assert ref_tables(ref_nodir(r)) == ["stays", "v1only"]
    assert set(listing(r)) == {"stays", "v1only"}
    assert count(r, ref_describe(theirs, "v1only").location) == 2


def test_a_marker_of_any_shape_hides_a_table_from_both_tools_and_from_prune(any_root):
    """The reference counts anything named `.lance-deregistered` (it lists the table's
    directory): a directory of that name (on S3 a prefix) hides the table from it, from `ls`
    and from `prune`, which keeps every version of it."""
    r = any_root
    for v in range(2):
        mode = "append" if v else "create"
        lance.write_dataset(
            rows(2), uri(r, "odd.lance"), mode=mode, storage_options=r.storage_options
        )
    write_external(r, "plain.lance", 2)
    marker = "odd.lance/.lance-deregistered/x"
    if r.local_path is not None:
        (r.local_path / marker).parent.mkdir()
        (r.local_path / marker).write_bytes(b"")
    else:
        put_object(r, marker, b"")
    assert ref_tables(ref(r)) == ["plain"]
    assert set(listing(r)) == {"plain"}
    time.sleep(1.1)
    report = ours_json(r, "prune", "--older-than", "1s", "--grace", "1s", "--force", "--yes")
    assert [t["location"] for t in report["tables"]] == ["plain.lance"]
    odd = lance.dataset(uri(r, "odd.lance"), storage_options=r.storage_options)
    assert len(odd.versions()) == 2
