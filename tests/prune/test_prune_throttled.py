"""`prune` on a bucket that throttles, and `--delete-rate-limit` (a moto server on 127.0.0.1
behind S3's own throttling answers: tests/prune/throttled_s3.py).

Through `503 SlowDown` on most requests and bulk deletes that skip half their keys, a prune
removes exactly what `versions` says expires on the calm bucket, every debris object included,
and every version a reader can reach reads as before. With `--delete-rate-limit N`, no second
of the run deletes more than N objects beyond one second's burst.
"""

from __future__ import annotations

import json
import time

import lance
import pyarrow as pa
import pytest
from helpers import invoke, s3_client
from prune_namespace import expiring_by_table
from throttled_s3 import ThrottledS3

pytestmark = pytest.mark.s3

FAST = ["--older-than", "1s", "--grace", "1s", "--force", "--yes", "--json"]
TABLES = 3
LIMIT = 8  # objects a second


@pytest.fixture(scope="module")
def server():
    started = ThrottledS3()
    started.start()
    yield started
    started.stop()


@pytest.fixture
def namespace(server, request):
    """A root of TABLES tables with many versions, a tag, a branch, a killed append's file and
    an abandoned root table write, all older than the policy's second."""
    bucket = f"throttled-{request.node.name[-20:].lower().replace('_', '-').strip('-[]')}"
    s3_client(server.endpoint).create_bucket(Bucket=bucket)
    options = server.options
    root = f"s3://{bucket}/ns"
    args = ["--root", root, *[f"-s{k}={v}" for k, v in options.items()]]
    for name in ("a", "b"):
        assert invoke(*args, "create", "namespace", name).exit_code == 0
    for t in range(TABLES):
        uri = f"{root}/t{t}.lance"
        for v in range(6):
            rows = pa.table({"x": list(range(v * 10, v * 10 + 10)), "t": [t] * 10})
            mode = "overwrite" if v == 4 else ("append" if v else "create")
            lance.write_dataset(rows, uri, mode=mode, storage_options=options)
        ds = lance.dataset(uri, storage_options=options)
        ds.delete("x = 3")
        if t == 0:
            ds.tags.create("keep", 2)
        if t == 1:
            branch = ds.create_branch("dev", 3)
            lance.write_dataset(rows, branch, mode="append")
        if t == 2:  # a killed append: data files no version names
            lance.fragment.write_fragments(rows, uri, storage_options=options)
    ghost = pa.table({"x": list(range(40))})
    lance.fragment.write_fragments(
        ghost, f"{root}/ghost.lance", max_rows_per_file=5, storage_options=options
    )
    time.sleep(1.2)
    return args, root, options, bucket


def readable(root: str, options: dict, expiring: dict[str, list[int]]) -> dict:
    """Every version of every table that stays, read."""
    found = {}
    for t in range(TABLES):
        uri = f"{root}/t{t}.lance"
        ds = lance.dataset(uri, storage_options=options)
        gone = set(expiring.get(f"t{t}.lance", []))
        for v in ds.versions():
            if v["version"] not in gone:
                found[(t, v["version"])] = lance.dataset(
                    uri, version=v["version"], storage_options=options
                ).to_table()
        if t == 1:
            found[(t, "dev")] = ds.checkout_version(("dev", None)).to_table()
    return found


def failures(result) -> list:
    """The failed tables' errors (an assertion's message)."""
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return [result.stderr]
    every = [*report["tables"], *([report["manifest"]] if report["manifest"] else [])]
    return [result.stderr, *[(t["location"], t["error"]) for t in every if t["error"]]]


def keys(server, bucket: str, prefix: str) -> list[str]:
    answer = s3_client(server.endpoint).list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for o in answer.get("Contents", [])]


def test_prune_through_throttling_removes_what_a_calm_run_would(server, namespace):
    args, root, options, bucket = namespace
    expiring = expiring_by_table(args, "--older-than", "1s", "--force")
    assert sum(len(v) for v in expiring.values()) >= TABLES * 4
    before = readable(root, options, expiring)
    killed = set(keys(server, bucket, "ns/t2.lance/data/")) - {
        f"ns/t2.lance/data/{f.path}"
        for frag in lance.dataset(f"{root}/t2.lance", storage_options=options).get_fragments()
        for f in frag.metadata.files
    }
    assert killed
    server.throttle(burst=2, partial_deletes=True)  # half the requests answered on their 3rd try
    result = invoke(*args, "prune", *FAST)
    traffic = server.calm()
    assert result.exit_code == 0, failures(result)
    assert traffic.throttled > 50 and traffic.refused_keys > 0, traffic
    report = json.loads(result.stdout)
    removed = {t["location"]: t["versions_removed"] for t in report["tables"]}
    assert {location: v for location, v in removed.items() if v} == expiring
    assert [d["action"] for d in report["debris"]] == ["deleted"]
    assert keys(server, bucket, "ns/ghost.lance/") == []  # every key, the refused ones too
    assert killed.isdisjoint(keys(server, bucket, "ns/t2.lance/data/"))
    after = readable(root, options, {})
    assert sorted(after, key=str) == sorted(before, key=str)
    for key, table in before.items():
        assert after[key].equals(table), key
    assert invoke(*args, "check").exit_code == 0


def test_delete_rate_limit_bounds_every_second_of_the_run(server, namespace):
    limit = LIMIT
    args, _root, _options, _bucket = namespace
    server.calm()
    started = time.monotonic()
    result = invoke(*args, "prune", *FAST, "--delete-rate-limit", str(limit), "--parallel", "4")
    took = time.monotonic() - started
    deleted = server.calm().deleted
    assert result.exit_code == 0, result.stderr
    total = sum(n for _, n in deleted)
    assert total >= 6 * limit, total  # enough deletes for the rate to tell
    for start, _ in deleted:  # any second of the run: the rate, plus one second's burst
        in_window = sum(n for at, n in deleted if start <= at < start + 1)
        assert in_window <= 2 * limit, (in_window, deleted)
    assert took >= (total - limit) / limit - 0.5
    totals = json.loads(result.stdout)["totals"]
    assert totals["versions_removed"] >= TABLES * 4


def test_without_a_limit_the_same_deletes_take_a_fraction_of_it(server, namespace):
    """The limit is what slows the run above, not the bucket: unlimited, the deletes of the
    same namespace come far faster than LIMIT a second."""
    args, _root, _options, _bucket = namespace
    server.calm()
    result = invoke(*args, "prune", *FAST, "--parallel", "4")
    deleted = server.calm().deleted
    assert result.exit_code == 0, result.stderr
    busiest = max(sum(n for at, n in deleted if start <= at < start + 1) for start, _ in deleted)
    assert busiest > 2 * LIMIT


def test_a_rate_limit_below_one_is_refused_before_anything_changes(server, namespace):
    args, _root, _options, bucket = namespace
    before = sorted(keys(server, bucket, ""))
    result = invoke(*args, "prune", *FAST, "--delete-rate-limit", "0")
    assert result.exit_code == 2
    assert "--delete-rate-limit" in result.stderr
    assert sorted(keys(server, bucket, "")) == before
