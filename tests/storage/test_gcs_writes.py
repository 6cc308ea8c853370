"""Lance writes on gs:// roots, through the CLI, against fake-gcs-server behind a write proxy.

fake-gcs-server 1.54 serves Lance's reads but has no XML upload, the request Lance's object_store
writes every object with (see test_gcs.py and docs/gcs.md). gcs_proxy.py fills that gap: it turns
each XML `PUT /bucket/object` into the JSON multipart upload the emulator does implement, carrying
`x-goog-if-generation-match` as `ifGenerationMatch` (honoured by that upload form only), so a
commit of a version another writer already made is refused with 412 as GCS refuses it.

The emulator, the proxy and the options are the shared fixtures of tests/conftest.py: Lance is
pointed at the proxy (`gcs_base_url` of the service-account key), gcsfs at the emulator itself
(`endpoint`). Every command runs as a user runs it, with `--root gs://...` and
`-s key=value`; what it did is read back from outside with pylance (through the proxy) and gcsfs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events
from helpers import SPEC1, Result, Root, invoke, object_tags


@pytest.fixture
def root(gcs_root) -> Root:
    """`gs://<fresh bucket>/ns` (the shared gcs_root: emulator and proxy in tests/conftest.py)."""
    return gcs_root


def gcli(root: Root, *args: str) -> Result:
    """`lancens --root gs://... -s ... ARGS`, in-process through the entry point."""
    return invoke(*root.args, *args)


def gok(root: Root, *args: str) -> Result:
    result = gcli(root, *args)
    assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
    return result


def parquet(folder: Path, name: str, table: pa.Table) -> str:
    pq.write_table(table, folder / name)
    return str(folder / name)


def dataset(root: Root, options: dict[str, str], location: str, **kwargs):
    """A table (or `__manifest`) of the root, opened by pylance through the proxy."""
    import lance

    return lance.dataset(f"{root.uri}/{location}", storage_options=options, **kwargs)


def manifest_rows(root: Root, options: dict[str, str]) -> list[dict]:
    rows = dataset(root, options, "__manifest").to_table().to_pylist()
    return sorted(rows, key=lambda r: r["object_id"])


def table_rows(root: Root, options: dict[str, str]) -> dict[str, dict]:
    """The manifest's table rows by object id; fails if an id appears twice."""
    rows = [r for r in manifest_rows(root, options) if r["object_type"] == "table"]
    ids = [r["object_id"] for r in rows]
    assert len(ids) == len(set(ids)), ids
    return {r["object_id"]: r for r in rows}


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


# --- the proxy itself: a conditional PUT is what makes one writer win -----------------------


def _put(url: str, body: bytes, generation_match: str | None) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, data=body, method="PUT")
    if generation_match is not None:
        request.add_header("x-goog-if-generation-match", generation_match)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers)


def test_proxy_put_honours_if_generation_match(root, gcs_proxy, gcs_fs):
    """The request Lance commits a version with: the first create wins, a second is 412, an
    unconditional PUT overwrites; GETs through the proxy read what was stored."""
    bucket = root.uri[len("gs://") :].split("/")[0]
    url = f"{gcs_proxy.url}/{bucket}/dir/_versions/1.manifest"
    status, headers = _put(url, b"first", "0")
    assert status == 200 and headers.get("x-goog-generation"), headers
    assert headers.get("ETag"), headers
    assert _put(url, b"second", "0")[0] == 412
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == b"first"
    assert _put(url, b"third", None)[0] == 200
    assert gcs_fs.cat_file(f"{bucket}/dir/_versions/1.manifest") == b"third"


def test_a_40_mb_data_file_goes_up_in_parts(root, gcs_lance_options, gcs_proxy, tmp_path):
    """A table whose data file is ~40 MB (embeddings): Lance uploads it with an XML multipart
    upload (above LANCE_INITIAL_UPLOAD_SIZE, 5 MiB), and every vector reads back as written."""
    rows = 80_000
    rng = np.random.default_rng(7)
    vectors = pa.FixedSizeListArray.from_arrays(
        pa.array(rng.random(rows * 128, dtype=np.float32)), 128
    )
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "embedding": vectors})
    multipart_before = gcs_proxy.multipart_objects
    gok(root, "create", "table", "vectors", "--from", parquet(tmp_path, "v.parquet", table))
    assert gcs_proxy.multipart_objects > multipart_before
    (row,) = table_rows(root, gcs_lance_options).values()
    read = dataset(root, gcs_lance_options, row["location"]).to_table().sort_by("id")
    assert read.schema.field("embedding").type == pa.list_(pa.float32(), 128)
    assert read.equals(table)
    assert gok(root, "check", "--json").json()["healthy"] is True


# --- catalog commands ------------------------------------------------------------------------


def test_create_namespace_and_table_then_ls_and_describe(root, gcs_lance_options, tmp_path):
    gok(root, "create", "namespace", "sales", "--property", "owner=ann")
    source = parquet(tmp_path, "o.parquet", pa.table({"id": list(range(100))}))
    gok(root, "create", "table", "sales.orders", "--from", source)
    again = gcli(root, "create", "table", "sales.orders", "--from", source)
    assert again.exit_code == 4, again.stderr

    listed = gok(root, "ls", "--recursive", "--json").json()["entries"]
    entries = {e["id"]: e for e in listed}
    assert {"sales", "sales.orders"} <= set(entries), entries
    assert entries["sales.orders"]["source"] == "manifest"
    assert entries["sales.orders"]["state"] == "ok"
    details = gok(root, "describe", "sales.orders", "--json").json()["details"]
    assert details["rows"] == 100 and details["version"] == 1

    rows = manifest_rows(root, gcs_lance_options)
    kinds = sorted((r["object_type"], r["object_id"]) for r in rows)
    assert len([k for k in kinds if k[0] == "table"]) == 1, kinds
    assert ("namespace", "sales") in kinds, kinds
    (table,) = table_rows(root, gcs_lance_options).values()
    assert ids(dataset(root, gcs_lance_options, table["location"]).to_table()) == list(range(100))


def test_rename_then_drop(root, gcs_lance_options, gcs_fs, tmp_path):
    source = parquet(tmp_path, "t.parquet", pa.table({"id": list(range(20))}))
    gok(root, "create", "namespace", "sales")
    gok(root, "create", "table", "orders", "--from", source)
    gok(root, "rename", "orders", "sales.archived")
    tables = table_rows(root, gcs_lance_options)
    assert len(tables) == 1, tables
    (moved,) = tables.values()
    assert ids(dataset(root, gcs_lance_options, moved["location"]).to_table()) == list(range(20))
    names = {e["id"] for e in gok(root, "ls", "--recursive", "--json").json()["entries"]}
    assert "sales.archived" in names and "orders" not in names, names
    assert gcli(root, "describe", "orders").exit_code == 3

    gok(root, "drop", "sales.archived", "--yes")
    assert table_rows(root, gcs_lance_options) == {}
    left = sorted(object_tags(root))
    assert not [o for o in left if o.startswith(moved["location"] + "/")], left
    assert gcli(root, "describe", "sales.archived").exit_code == 3


def test_check_then_fix_removes_debris_of_a_dead_write(root, gcs_fs, tmp_path):
    """A `<name>.lance/data/` object with no version (a write killed before its commit) is
    found by check and removed by `check --fix` once older than the grace period."""
    gok(root, "create", "table", "orders", "--from", parquet(tmp_path, "o.parquet", events(30)))
    healthy = gok(root, "check", "--json").json()
    assert healthy["healthy"] is True and healthy["tables_checked"] == 1, healthy

    bucket_path = root.uri[len("gs://") :]
    gcs_fs.pipe_file(f"{bucket_path}/ghost.lance/data/0-dead.lance", b"half a write")
    found = gcli(root, "check", "--json", "--grace-minutes", "0")
    assert found.exit_code == 1, found.stdout
    findings = found.json()["findings"]
    assert [f["object"] for f in findings] == ["ghost"], findings

    fixed = gcli(root, "check", "--fix", "--grace-minutes", "0", "--json")
    assert fixed.exit_code == 0, (fixed.stdout, fixed.stderr)
    assert not [o for o in sorted(object_tags(root)) if o.startswith("ghost.lance/")]
    assert gok(root, "check", "--json").json()["healthy"] is True


def test_create_btree_index(root, gcs_lance_options, tmp_path):
    gok(root, "create", "table", "orders", "--from", parquet(tmp_path, "o.parquet", events(200)))
    gok(root, "create", "index", "orders", "--column", "customer_id", "--type", "btree")
    (row,) = table_rows(root, gcs_lance_options).values()
    table = dataset(root, gcs_lance_options, row["location"])
    indices = {i.name: i for i in table.describe_indices()}
    assert "customer_id_idx" in indices, indices
    index = indices["customer_id_idx"]
    assert "BTree" in index.type_url and index.num_rows_indexed == 200, index
    plan = table.scanner(filter="customer_id = 7").explain_plan()
    assert "customer_id_idx" in plan or "ScalarIndexQuery" in plan, plan
    expected = events(200).filter(pa.compute.equal(events(200).column("customer_id"), 7))
    assert ids(table.to_table(filter="customer_id = 7")) == ids(expected)


# --- a partitioned namespace -----------------------------------------------------------------


def published(root: Root, options: dict[str, str]) -> pa.Table:
    """Every row a reader sees: each partition table at its recorded read_version."""
    parts = [
        dataset(root, options, row["location"], version=row["read_version"]).to_table()
        for row in table_rows(root, options).values()
    ]
    return pa.concat_tables(parts, promote_options="default")


def test_partitioned_write_partitions_evolve_restore(root, gcs_lance_options, tmp_path):
    gok(root, "add-partition-spec", "--schema", parquet(tmp_path, "s.parquet", events(1)), *SPEC1)
    first = events(40, seed=1)
    gok(root, "write", "--from", parquet(tmp_path, "w1.parquet", first))
    assert ids(published(root, gcs_lance_options)) == list(range(40))
    version_after_first = dataset(root, gcs_lance_options, "__manifest").version

    listed = gok(root, "partitions", "--json").json()["partitions"]
    assert len(listed) == len(table_rows(root, gcs_lance_options)) > 1, listed
    us = gok(root, "partitions", "--where", "country = 'US'", "--json").json()["partitions"]
    assert 0 < len(us) < len(listed), us

    gok(root, "evolve-schema", "--add", "score int64")
    second = events(30, seed=2, start=100).append_column("score", pa.array([5] * 30, pa.int64()))
    gok(root, "write", "--from", parquet(tmp_path, "w2.parquet", second))
    now = published(root, gcs_lance_options)
    assert ids(now) == list(range(40)) + list(range(100, 130))
    scores = dict(zip(now.column("id").to_pylist(), now.column("score").to_pylist(), strict=True))
    assert scores[0] is None and scores[100] == 5

    gok(root, "restore", "--to-version", str(version_after_first), "--yes")
    assert ids(published(root, gcs_lance_options)) == list(range(40))


def test_prune_compacts_and_expires_versions(root, gcs_lance_options, tmp_path):
    gok(root, "add-partition-spec", "--schema", parquet(tmp_path, "s.parquet", events(1)), *SPEC1)
    for n in range(3):
        rows = events(20, seed=n, start=100 * n, countries=("US",))
        gok(root, "write", "--from", parquet(tmp_path, f"w{n}.parquet", rows))
    expected = ids(published(root, gcs_lance_options))
    before = {
        oid: dataset(root, gcs_lance_options, row["location"])
        for oid, row in table_rows(root, gcs_lance_options).items()
    }
    assert any(len(ds.get_fragments()) > 1 for ds in before.values())

    pruned = gcli(root, "prune", "--older-than", "0s", "--compact", "--yes", "--force", "--json")
    assert pruned.exit_code == 0, (pruned.stdout, pruned.stderr)
    report = pruned.json()
    assert report["totals"]["tables_failed"] == 0, report["totals"]
    # Versions are expired before compaction, so each table keeps 3 (published) and the
    # compaction's own versions; the three written fragments become one, published.
    assert {t["object_id"]: t["versions_removed"] for t in report["tables"]} == {
        oid: [1, 2] for oid in before
    }, report["tables"]
    assert {c["table"]: c["fragments_removed"] for c in report["compacted"]} == {
        oid: 3 for oid in before
    }, report["compacted"]
    assert all(c["published"] for c in report["compacted"]), report["compacted"]
    assert ids(published(root, gcs_lance_options)) == expected
    for oid, row in table_rows(root, gcs_lance_options).items():
        table = dataset(root, gcs_lance_options, row["location"])
        assert len(table.get_fragments()) == 1, oid
        assert row["read_version"] == table.version, oid
        assert min(v["version"] for v in table.versions()) == 3, oid
    assert gok(root, "check", "--json").json()["healthy"] is True


# --- racing processes ------------------------------------------------------------------------


def test_concurrent_creates_each_land_once(root, gcs_lance_options, gcs_proxy, tmp_path):
    """Four processes create four tables in one root at once: each __manifest commit is a
    conditional PUT, so losers re-read and retry, and every table is registered once."""
    names = [f"t{n}" for n in range(4)]
    sources = {
        name: parquet(tmp_path, f"{name}.parquet", events(10, start=i * 10))
        for i, name in enumerate(names)
    }
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    procs = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lancens_cli",
                *root.args,
                "create",
                "table",
                name,
                "--from",
                sources[name],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in names
    }
    refused_before = gcs_proxy.refused
    results = {name: proc.communicate(timeout=300) for name, proc in procs.items()}
    print(f"commits refused with 412 during the race: {gcs_proxy.refused - refused_before}")
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, results[name])

    tables = table_rows(root, gcs_lance_options)
    assert sorted(tables) == names, tables
    for i, name in enumerate(names):
        read = dataset(root, gcs_lance_options, tables[name]["location"]).to_table()
        assert ids(read) == list(range(i * 10, i * 10 + 10)), name
    listed = {e["id"] for e in gok(root, "ls", "--json").json()["entries"]}
    assert listed == set(names)


# --- Lance's own GCS keys, for both clients; the token never shown --------------------------

TOKEN = "ya29.not-a-real-access-token-4d1e"


@pytest.mark.parametrize(
    ("base_key", "token_key"),
    [
        ("google_base_url", "google_bearer_token"),
        ("base_url", "bearer_token"),
        ("google_base_url", "google_storage_token"),
    ],
)
def test_base_url_and_bearer_token_reach_both_clients(
    base_key, token_key, gcs_fs, gcs_proxy, gcs_lance_options, tmp_path
):
    """Only Lance's keys, as a user with a token from `gcloud auth print-access-token` writes
    them: Lance and gcsfs both go to the base URL and both send the token; describe, JSON output
    and an error show it as ****, never its value."""
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    gcs_fs.mkdir(bucket)
    options = {base_key: gcs_proxy.url, token_key: TOKEN, "allow_http": "true"}
    root = Root(f"gs://{bucket}/ns", options, None)
    source = parquet(tmp_path, "t.parquet", pa.table({"id": list(range(5))}))
    gok(root, "create", "table", "orders", "--from", source)
    listed = gok(root, "ls", "--json").json()["entries"]
    assert [e["id"] for e in listed] == ["orders"], listed
    gok(root, "drop", "orders", "--yes")
    assert table_rows(root, gcs_lance_options) == {}
    bearer = f"Bearer {TOKEN}"
    assert {("xml", bearer), ("json", bearer)} <= gcs_proxy.authorizations  # Lance and gcsfs

    described = gok(root, "describe", "--json")
    assert described.json()["config"][f"storage.{token_key}"] == "****"
    assert described.json()["config"][f"storage.{base_key}"] == gcs_proxy.url
    missing = gcli(root, "describe", "nope", "--json")
    assert missing.exit_code == 3
    for run in (described, gok(root, "describe"), missing):
        assert TOKEN not in run.stdout + run.stderr


@pytest.mark.parametrize("token_first", [True, False], ids=["token-first", "account-first"])
def test_a_bearer_token_beside_a_service_account_is_refused(
    token_first, gcs_fs, gcs_proxy, tmp_path
):
    """Which of two credentials a client uses would depend on the client (and so could differ
    between Lance and gcsfs): both together are refused, in either order, with exit 2 and
    nothing written."""
    bucket = f"o-{uuid.uuid4().hex[:12]}"
    gcs_fs.mkdir(bucket)
    account = tmp_path / "account.json"
    account.write_text("{}")
    token = {"google_bearer_token": TOKEN}
    rest = {"service_account": str(account), "google_base_url": gcs_proxy.url}
    options = {**token, **rest} if token_first else {**rest, **token}
    root = Root(f"gs://{bucket}/ns", {**options, "allow_http": "true"}, None)
    refused = gcli(root, "create", "namespace", "sales")
    assert refused.exit_code == 2, (refused.stdout, refused.stderr)
    assert "bearer token or a service account" in refused.stderr
    assert TOKEN not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    gcs_fs.invalidate_cache()
    assert gcs_fs.find(bucket) == []
