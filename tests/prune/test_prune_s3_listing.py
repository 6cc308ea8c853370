"""On S3, one listing of the root serves every table's (store/version_files.py `list_tables`).

Each table's listing must be exactly what a listing of its own directory gives (the record's
digests, the versions, the tags check, the data-file count), whatever the names: prefixes of
one another, a table inside another's directory, namespaces, a table with no object, debris
between them. And a run with nothing to do lists no table on its own.
"""

from __future__ import annotations

import json
import time
import uuid

import lance
import pyarrow as pa
import pytest
from helpers import invoke, s3_client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from throttled_s3 import ThrottledS3

from lancens_cli.config import NamespaceConfig
from lancens_cli.service.prune.report import UNCHANGED
from lancens_cli.store.storage import Storage
from lancens_cli.store.version_files import list_table, list_tables

pytestmark = pytest.mark.s3

# names that sort next to one another: `a`, `a-b`, `a.b`, `a/b` (inside `a`), `ab`...
PART = st.text(alphabet="ab-._", min_size=1, max_size=3).filter(lambda p: p.strip("."))
LOCATION = st.lists(PART, min_size=1, max_size=2).map("/".join)
INSIDE = st.sampled_from(
    [
        "_versions/1.manifest",
        "_versions/18446744073709551614.manifest",
        "_versions/x.txt",
        "_refs/tags/keep.txt",
        "data/f.lance",
        "data/sub/g.lance",
        "data/",  # a "directory" marker some tools write: no file
        "_transactions/0-a.txn",
        "other",
    ]
)


def storage_of(bucket: str, prefix: str, options: dict[str, str]) -> Storage:
    return Storage(NamespaceConfig(root=f"s3://{bucket}/{prefix}", storage_options=options))


def same(listed, own) -> bool:
    return (listed.versions, listed.has_refs, listed.data_files, listed.digest, listed.times) == (
        own.versions,
        own.has_refs,
        own.data_files,
        own.digest,
        own.times,
    )


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.dictionaries(LOCATION, st.lists(INSIDE, max_size=4), min_size=2, max_size=6),
    st.lists(LOCATION, max_size=3),
)
def test_one_listing_of_the_root_gives_each_table_its_own_listing(
    moto_endpoint, s3_bucket, s3_options, tables, others
):
    prefix = f"root-{uuid.uuid4().hex[:8]}"
    client = s3_client(moto_endpoint)
    for location, files in tables.items():
        for inside in files:
            client.put_object(Bucket=s3_bucket, Key=f"{prefix}/{location}/{inside}", Body=b"x")
    for other in others:  # debris and directories that are no table
        client.put_object(Bucket=s3_bucket, Key=f"{prefix}/{other}", Body=b"yy")
    storage = storage_of(s3_bucket, prefix, s3_options)
    locations = sorted(tables)
    found = list(list_tables(storage, locations))
    assert sorted(location for location, _ in found) == locations  # each once
    for location, listed in found:
        assert listed is not None
        assert same(listed, list_table(storage, location)), location


def test_a_real_table_is_listed_as_its_own_listing_lists_it(s3_root, s3_options):
    """Versions in both namings, tags, deletion files, an index: the same listing."""
    for name in ("t.lance", "t.lance2", "t", "u.lance"):
        uri = f"{s3_root.uri}/{name}"
        for v in range(3):
            rows = pa.table({"x": list(range(v * 5, v * 5 + 5))})
            lance.write_dataset(
                rows, uri, mode="append" if v else "create", storage_options=s3_options
            )
        ds = lance.dataset(uri, storage_options=s3_options)
        ds.delete("x = 2")
        ds.tags.create("keep", 1)
    lance.write_dataset(
        pa.table({"x": [1]}),
        f"{s3_root.uri}/v2.lance",
        storage_options=s3_options,
        enable_v2_manifest_paths=True,
    )
    storage = storage_of(*s3_root.uri.removeprefix("s3://").split("/", 1), s3_options)
    locations = ["t.lance", "t.lance2", "t", "u.lance", "v2.lance", "missing.lance"]
    found = dict(list_tables(storage, locations))
    assert set(found) == set(locations)
    for location in locations:
        assert same(found[location], list_table(storage, location)), location
    assert found["t.lance"].has_refs and len(found["t.lance"].versions) == 4
    assert found["missing.lance"].versions == {}


def tables_of_two_versions(server: ThrottledS3, request, register: bool):
    """TABLES tables of two versions each on the counted server, the older versions past the
    policy's second: registered as in a V2 namespace, or `<name>.lance` directories found by
    listing, as in a V1 one; (the prune command, the server)."""
    bucket = f"counted-{request.node.name[5:25].lower().replace('_', '-')}".strip("-")
    s3_client(server.endpoint).create_bucket(Bucket=bucket)
    options = server.options
    root = f"s3://{bucket}/ns"
    at_root = ["--root", root, *[f"-s{k}={v}" for k, v in options.items()]]
    for t in range(TABLES):
        location = f"t{t}" if register else f"t{t}.lance"
        for v in range(2):
            rows = pa.table({"x": [v]})
            mode = "append" if v else "create"
            lance.write_dataset(rows, f"{root}/{location}", mode=mode, storage_options=options)
        if register:
            assert invoke(*at_root, "register", f"t{t}", location).exit_code == 0
    time.sleep(1.1)
    return [*at_root, "--json", "prune", *POLICY], server


@pytest.fixture
def registered(counted, request):
    return tables_of_two_versions(counted, request, register=True)


@pytest.fixture
def listed_only(counted, request):
    return tables_of_two_versions(counted, request, register=False)


TABLES = 12
POLICY = ["--older-than", "1s", "--grace", "1s", "--force", "--yes"]


def prune(command: list[str]) -> list[dict]:
    result = invoke(*command)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["tables"]


def test_a_run_with_nothing_to_do_lists_no_table_on_its_own(registered):
    """The second run finds every table unchanged from one listing of the root (a request
    per 1,000 objects), where a listing per table costs a request per table at least. The
    first run, having pruned every table, lists them again for the record the same way."""
    command, server = registered
    first = prune(command)
    assert sum(len(t["versions_removed"]) for t in first) == TABLES
    server.calm()
    second = prune(command)
    assert sum(len(t["versions_removed"]) for t in second) == 0
    assert all(t["status"] == "nothing to do" for t in second)
    # skipped on the record the first run left from its one listing after pruning them all
    assert all(UNCHANGED in t["notes"] for t in second), second
    listed = server.calm().listed
    per_table = [p for p in listed if p.startswith("ns/t") and p != "ns/"]
    assert per_table == [], per_table
    assert "ns/" in listed  # the root's, serving every table


def test_tables_found_by_listing_cost_one_request_each_when_nothing_changed(listed_only):
    """A V1 root: each table is asked once whether it was deregistered (one listing of its
    marker's name, not a `HEAD` and a listing), not again by the debris checks, and never
    listed on its own; its unpublished-write check is not asked of a table the run read
    versions of."""
    command, server = listed_only
    first = prune(command)
    assert sum(len(t["versions_removed"]) for t in first) == TABLES
    server.calm()
    second = prune(command)
    assert all(UNCHANGED in t["notes"] for t in second), second
    traffic = server.calm()
    per_table = [p for p in traffic.listed if p.startswith("ns/t")]
    assert sorted(per_table) == sorted(f"ns/t{t}.lance/.lance-deregistered" for t in range(TABLES))
    assert [(m, p) for m, p in traffic.asked if "/ns/t" in p] == []  # no table object read
    assert len(traffic.asked) < TABLES + 25, traffic.asked  # the rest is per run


def test_a_store_listing_out_of_name_order_gets_a_listing_per_table(registered):
    """As S3 directory buckets do: the root's listing is not used, each table is listed on
    its own, and the run removes what it removes on an ordered store; its record holds."""
    command, server = registered
    server.throttle(0, unordered="ns/")  # the root's listing: Lance never asks for it
    first = prune(command)
    assert sum(len(t["versions_removed"]) for t in first) == TABLES, first
    listed = server.calm().listed
    assert {f"ns/t{t}/" for t in range(TABLES)} <= set(listed)  # each on its own
    second = prune(command)
    assert all(UNCHANGED in t["notes"] for t in second), second
