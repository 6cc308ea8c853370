"""gs:// roots against a local GCS emulator: options, redaction, reads and a store that refuses.

The emulator (fake-gcs-server) and the write proxy in front of it are the shared fixtures of
tests/conftest.py (tests/gcs_emulator.py, tests/gcs_proxy.py). Both clients lancens uses are
pointed at them with storage options, as a user would:

* fsspec's gcsfs (listing, existence, deletes, copies) by `endpoint` and `skip_signature`;
* Lance's object_store GCS client by `service_account_key`, a service-account JSON carrying
  object_store's emulator extension `{"gcs_base_url": ..., "disable_oauth": true}`, plus
  `allow_http`.

Here: how options are taken and redacted, V1 and V2 roots written elsewhere and read on GCS, and
what a user sees when the store refuses Lance's writes (the emulator without the proxy refuses
every XML upload). Writes through the proxy are in test_gcs_writes.py and in every test that
runs on `any_root`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from gcs_emulator import service_account_key
from helpers import Root, invoke, object_tags, run_cli

# A value that must never be printed: it sits in the service-account JSON that is redacted.
SECRET = "not-a-real-private-key-7f3a9c"


@pytest.fixture
def secret_root(gcs_root, gcs_proxy) -> Root:
    """gcs_root whose service-account key carries SECRET (redaction must hide it)."""
    key = service_account_key(gcs_proxy.url, private_key=SECRET)
    return Root(gcs_root.uri, {**gcs_root.storage_options, "service_account_key": key}, None)


def gcs_cli(root: Root, *args: str):
    return run_cli(*root.args, *args)


# --- tables made by pylance, uploaded with gcsfs ---------------------------------------------


def local_table(path: Path, rows: int, versions: int = 2) -> Path:
    """A V1 Lance table written by pylance on local disk (`versions` commits)."""
    import lance
    import pyarrow as pa

    per = max(rows // versions, 1)
    for v in range(versions):
        n = rows - per * (versions - 1) if v == versions - 1 else per
        table = pa.table({"id": list(range(v * per, v * per + n)), "city": ["Oslo"] * n})
        lance.write_dataset(table, str(path), mode="create" if v == 0 else "append")
    return path


def upload(fs, local: Path, root: Root, rel: str) -> None:
    """Copy a local directory tree to `<root>/<rel>/`, object by object."""
    base = "/".join(p for p in (root.uri[len("gs://") :], rel) if p)
    for dirpath, _dirs, files in os.walk(local):
        for name in files:
            full = Path(dirpath) / name
            fs.put_file(str(full), f"{base}/{full.relative_to(local).as_posix()}")


@pytest.fixture
def v1_root(secret_root, gcs_fs, tmp_path) -> Root:
    """orders.lance (150 rows, 2 versions), events.lance (40 rows), junk.lance (not Lance)."""
    upload(gcs_fs, local_table(tmp_path / "orders.lance", 150), secret_root, "orders.lance")
    upload(gcs_fs, local_table(tmp_path / "events.lance", 40, 1), secret_root, "events.lance")
    gcs_fs.pipe_file(f"{secret_root.uri[len('gs://') :]}/junk.lance/readme.txt", b"not lance")
    return secret_root


def _ls(root: Root, *args: str) -> dict[str, dict]:
    result = gcs_cli(root, "ls", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return {entry["id"]: entry for entry in _entries(result.json())}


def _entries(document: dict) -> list[dict]:
    return document["entries"]


# --- 1. options and redaction ----------------------------------------------------------------


def test_options_are_shown_with_the_key_redacted(v1_root):
    """describe (JSON and plain) shows the options, the service-account JSON as ****; the key
    stays hidden in a one-line error too."""
    result = gcs_cli(v1_root, "describe", "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    config = doc["config"]
    assert doc["root"] == v1_root.uri
    assert config["storage.service_account_key"] == "****"
    assert config["storage.endpoint"] == v1_root.storage_options["endpoint"]
    assert config["storage.skip_signature"] == "true"
    assert config["storage.allow_http"] == "true"
    assert doc["tables"] == 3 and doc["manifest"] is None
    plain = gcs_cli(v1_root, "describe")
    assert plain.exit_code == 0 and "****" in plain.stdout, plain.stderr
    missing = gcs_cli(v1_root, "describe", "nope", "--json")
    assert missing.exit_code == 3
    assert json.loads(missing.stderr)["error"]["name"] == "TableNotFound"
    for run in (result, plain, missing):
        assert SECRET not in run.stdout + run.stderr
        assert "gcs_base_url" not in run.stdout + run.stderr


def test_bad_service_account_key_is_a_config_error(gcs_root):
    root = Root(gcs_root.uri, {**gcs_root.storage_options, "service_account_key": "{nope"}, None)
    result = gcs_cli(root, "ls")
    assert result.exit_code == 2
    assert "service_account_key" in result.stderr and "{nope" not in result.stderr


def test_missing_bucket_is_not_found(gcs_options):
    root = Root(f"gs://no-such-{uuid.uuid4().hex[:8]}/ns", dict(gcs_options), None)
    result = gcs_cli(root, "ls")
    assert result.exit_code == 3, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr


# --- 2. V1 tables written by pylance: listing, describe, check, migrate-v1 --check ----------


def test_ls_lists_v1_tables_through_gcsfs(v1_root):
    entries = _ls(v1_root)
    assert set(entries) == {"orders", "events", "junk"}
    assert entries["orders"]["state"] == "ok" and entries["orders"]["location"] == "orders.lance"
    assert entries["orders"]["source"] == "directory"
    assert entries["junk"]["state"] == "not a Lance table"
    piped = gcs_cli(v1_root, "ls")
    assert piped.exit_code == 0
    assert sorted(line.split("\t")[0] for line in piped.stdout.splitlines()) == [
        "events",
        "junk",
        "orders",
    ]


def test_describe_table_reads_through_lance_gcs(v1_root):
    result = gcs_cli(v1_root, "describe", "orders", "--versions", "--json")
    assert result.exit_code == 0, result.stderr
    details = result.json()["details"]
    assert details["rows"] == 150 and details["version"] == 2 and details["fragments"] == 2
    assert [f["name"] for f in details["schema"]] == ["id", "city"]
    assert details["bytes_on_storage"] > 0
    junk = gcs_cli(v1_root, "describe", "junk")
    assert junk.exit_code == 1 and "not a Lance table" in junk.stderr


def test_check_finds_a_missing_data_file(v1_root, gcs_fs):
    first = gcs_cli(v1_root, "check", "--json")
    assert first.exit_code == 1  # junk.lance is reported, nothing else
    codes = {(f["code"], f["object"]) for f in first.json()["findings"]}
    assert all(obj == "junk" for _code, obj in codes), codes
    data = [o for o in sorted(object_tags(v1_root)) if o.startswith("orders.lance/data/")]
    gcs_fs.rm_file(f"{v1_root.uri[len('gs://') :]}/{data[0]}")
    second = gcs_cli(v1_root, "check", "orders", "--json")
    assert second.exit_code == 1
    found = [f for f in second.json()["findings"] if f["object"] == "orders"]
    assert [f["code"] for f in found] == ["missing_data_file"], found


def test_migrate_v1_check_and_dry_run_change_nothing(v1_root, gcs_fs):
    before = sorted(object_tags(v1_root))
    check = gcs_cli(v1_root, "migrate-v1", "--check", "--json")
    assert check.exit_code == 7, check.stderr
    doc = check.json()
    assert doc["to_migrate"] == 3 and doc["complete"] is False and doc["commits"] == 0
    assert {t["name"]: t["status"] for t in doc["tables"]} == {
        "orders": "to migrate",
        "events": "to migrate",
        "junk": "to migrate",
    }
    dry = gcs_cli(v1_root, "migrate-v1", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    assert dry.json()["dry_run"] is True and dry.json()["commits"] == 0
    assert sorted(object_tags(v1_root)) == before


def test_drop_and_deregister_v1_tables(v1_root, gcs_fs):
    """Without a manifest these are pure gcsfs work: deletes and a marker object."""
    dropped = gcs_cli(v1_root, "drop", "events", "--yes")
    assert dropped.exit_code == 0, dropped.stderr
    gone = gcs_cli(v1_root, "deregister", "orders")
    assert gone.exit_code == 0, gone.stderr
    left = sorted(object_tags(v1_root))
    assert not [o for o in left if o.startswith("events.lance/")]
    assert "orders.lance/.lance-deregistered" in left
    assert any(o.startswith("orders.lance/data/") for o in left)  # data kept
    assert set(_ls(v1_root)) == {"junk"}


# --- 3. a V2 namespace (with __manifest) read from GCS --------------------------------------


@pytest.fixture
def v2_root(gcs_root, gcs_fs, tmp_path) -> Root:
    """A namespace built by lancens on local disk, then uploaded object by object."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    local = tmp_path / "ns"
    pq.write_table(pa.table({"id": list(range(30))}), tmp_path / "o.parquet")
    for args in (
        ["init"],
        ["create", "namespace", "sales", "--property", "owner=ann"],
        ["create", "table", "sales.orders", "--from", str(tmp_path / "o.parquet")],
        ["create", "table", "events", "--from", str(tmp_path / "o.parquet")],
    ):
        result = invoke("--root", str(local), *args)
        assert result.exit_code == 0, (args, result.stderr)
    upload(gcs_fs, local, gcs_root, "")
    return gcs_root


def test_v2_namespace_ls_describe_check(v2_root):
    entries = _ls(v2_root, "--recursive")
    assert set(entries) >= {"sales", "sales.orders", "events"}, entries
    assert entries["sales.orders"]["source"] == "manifest"
    assert entries["sales.orders"]["state"] == "ok"
    assert entries["events"]["source"] == "both"
    ns = gcs_cli(v2_root, "describe", "sales", "--json")
    assert ns.exit_code == 0, ns.stderr
    assert ns.json()["properties"] == {"owner": "ann"}
    table = gcs_cli(v2_root, "describe", "sales.orders", "--json")
    assert table.exit_code == 0, table.stderr
    assert table.json()["details"]["rows"] == 30
    root = gcs_cli(v2_root, "describe", "--json")
    assert root.exit_code == 0 and root.json()["manifest"]["version"] >= 1, root.stdout
    check = gcs_cli(v2_root, "check", "--json")
    assert check.exit_code == 0, check.stdout
    assert check.json()["healthy"] is True and check.json()["tables_checked"] == 2
    done = gcs_cli(v2_root, "migrate-v1", "--check")
    assert done.exit_code == 0, done.stderr


# --- 4. a store that refuses Lance's writes ----------------------------------------------------


def test_refused_write_is_one_clean_error_and_leaves_nothing(
    v1_root, gcs_endpoint, gcs_fs, tmp_path
):
    """Lance pointed straight at the emulator, which answers every XML upload with 400 (as a
    bucket would that the credentials may read but not write): each write is one line on
    stderr, exit 1, the secret never shown, and nothing below the root changes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = service_account_key(gcs_endpoint, private_key=SECRET)
    refusing = Root(v1_root.uri, {**v1_root.storage_options, "service_account_key": key}, None)
    pq.write_table(pa.table({"id": [1, 2, 3]}), tmp_path / "t.parquet")
    before = sorted(object_tags(v1_root))
    for args in (
        ["create", "table", "fresh", "--from", str(tmp_path / "t.parquet")],
        ["create", "namespace", "sales"],
    ):
        result = gcs_cli(refusing, *args)
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        assert (
            result.stderr.startswith("lancens: error: ")
            and len(result.stderr.strip().splitlines()) == 1
        ), result.stderr
        assert "Traceback" not in result.stderr and SECRET not in result.stderr
    assert sorted(object_tags(v1_root)) == before


# --- 5. custom endpoints and options gcsfs needs ---------------------------------------------


def test_custom_endpoint_needs_no_gcsfs_env(v1_root):
    """gcsfs' default "extended" client probes a gRPC API at the endpoint for every bucket and
    waits 60 s per failed probe. With a custom endpoint lancens should use the plain client, so
    `ls` answers in seconds without GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false."""
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    env.pop("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "lancens_cli", *v1_root.args, "ls"],
            capture_output=True, text=True, input="", env=env, timeout=20,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("`lancens ls` against a custom GCS endpoint took over 20 s (gcsfs gRPC probe)")
    assert proc.returncode == 0, proc.stderr
    assert "Could not determine bucket type" not in proc.stderr


def test_service_account_key_alone_reaches_the_emulator(v1_root, gcs_endpoint):
    """object_store's emulator key (gcs_base_url + disable_oauth) should also steer gcsfs: the
    endpoint from gcs_base_url and anonymous access, instead of handing gcsfs a token dict."""
    root = Root(
        v1_root.uri,
        {"service_account_key": service_account_key(gcs_endpoint), "allow_http": "true"},
        None,
    )
    result = gcs_cli(root, "ls")
    assert result.exit_code == 0, result.stderr
    assert "orders" in result.stdout


def test_option_order_does_not_matter(v1_root):
    """skip_signature before service_account_key must still mean anonymous gcsfs access."""
    options = v1_root.storage_options
    reordered = {
        "skip_signature": options["skip_signature"],
        "endpoint": options["endpoint"],
        "service_account_key": options["service_account_key"],
        "allow_http": options["allow_http"],
    }
    result = gcs_cli(Root(v1_root.uri, reordered, None), "ls")
    assert result.exit_code == 0, result.stderr
    assert "orders" in result.stdout


def test_use_opendal_is_refused_for_gs_roots(gcs_root, gcs_endpoint):
    """pylance 14.0.2's OpenDAL GCS store writes gs://b/p/x.lance below itself again
    (b/p/x.lance/p/x.lance/...), so lancens would commit a __manifest that its own listing never
    finds (create succeeds, then the namespace "does not exist"). It must refuse the option."""
    root = Root(
        gcs_root.uri,
        {
            "endpoint": gcs_endpoint,
            "skip_signature": "true",
            "use_opendal": "true",
            "allow_anonymous": "true",
            "disable_vm_metadata": "true",
            "disable_config_load": "true",
        },
        None,
    )
    result = gcs_cli(root, "create", "namespace", "sales")
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "use_opendal" in result.stderr
