"""On S3, a cold `prune` asks of each table no more than Lance's own open and cleanup ask
(`cleanup_old_versions` in a loop, the peer a user would pick), and lists less: the latest
manifest is read once, by us, and the cleanup opens the table from what was read with a HEAD
where the loop's open lists the versions (store/lance_session.py `HeldManifest`). And that
handle, of the version read before the plan, is safe when writers commit between the reading
and the cleanup: every version from its own on stays whole, and appending processes racing
prune runs lose no committed row."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import lance
import pyarrow as pa
import pytest
from helpers import invoke, s3_client
from throttled_s3 import ThrottledS3

from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import Pins, plan_table, read_table_state
from lancens_cli.service.prune.report import TableResult
from lancens_cli.service.prune.table import execute_plan
from lancens_cli.store import lance_session
from lancens_cli.store.lance_session import HeldDatasets, HeldManifest

pytestmark = pytest.mark.s3

TABLES = 6
VERSIONS = 3
POLICY = ["--older-than", "1s", "--grace", "1s", "--force", "--yes"]
_TABLE = re.compile(r"^/?(?:[^/]+/)?ns/(t\d+)/([^/]+)")


def write_tables(server: ThrottledS3, bucket: str) -> str:
    """TABLES tables of VERSIONS appends each under s3://bucket/ns; the root."""
    s3_client(server.endpoint).create_bucket(Bucket=bucket)
    root = f"s3://{bucket}/ns"
    for t in range(TABLES):
        for v in range(VERSIONS):
            rows = pa.table({"x": [t * 10 + v], "s": [f"row {v}"]})
            mode = "append" if v else "create"
            lance.write_dataset(rows, f"{root}/t{t}", mode=mode, storage_options=server.options)
    return root


def registered(server: ThrottledS3, root: str) -> list[str]:
    """The tables of `write_tables` registered in the root's `__manifest`; the CLI's root
    arguments."""
    at_root = ["--root", root, *[f"-s{k}={v}" for k, v in server.options.items()]]
    for t in range(TABLES):
        assert invoke(*at_root, "register", f"t{t}", f"t{t}").exit_code == 0
    return at_root


def per_table(traffic, bucket: str) -> Counter:
    """The requests that name one table's objects, by method and the directory they ask
    (deletes left out: Lance batches them as its listings stream in, so their count follows
    timing, not the work)."""
    asked: Counter = Counter()
    for method, path in traffic.asked:
        found = _TABLE.match(path.removeprefix(f"/{bucket}"))
        if found and method in ("GET", "HEAD"):
            asked[(method, found.group(2))] += 1
    for prefix in traffic.listed:
        found = _TABLE.match(prefix)
        if found:
            asked[("LIST", found.group(2))] += 1
    return asked


def cold_prune(server: ThrottledS3, at_root: list[str], bucket: str) -> Counter:
    """A cold prune of every table through the CLI, each losing its old versions; what it
    asked of each table (`per_table`)."""
    server.calm()
    result = invoke(*at_root, "--json", "prune", *POLICY)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)["tables"]
    assert sorted(len(t["versions_removed"]) for t in report) == [VERSIONS - 1] * TABLES
    return per_table(server.calm(), bucket)


def test_a_cold_prune_asks_each_table_no_more_than_lances_own_cleanup_and_lists_less(counted):
    ours_root, loop_root = write_tables(counted, "ours"), write_tables(counted, "loop")
    at_root = registered(counted, ours_root)
    time.sleep(1.2)
    ours = cold_prune(counted, at_root, "ours")
    for t in range(TABLES):
        ds = lance.dataset(f"{loop_root}/t{t}", storage_options=counted.options)
        ds.cleanup_old_versions(older_than=timedelta(seconds=1), error_if_tagged_old_versions=False)
    loop = per_table(counted.calm(), "loop")
    assert loop[("GET", "_versions")] == TABLES * (VERSIONS + 1)  # the peer: open + cleanup
    # a LIST costs 12.5 times a HEAD on S3
    opened = Counter({("HEAD", "_versions"): TABLES})
    assert ours[("LIST", "_versions")] == loop[("LIST", "_versions")] - TABLES, (ours, loop)
    assert ours - opened + Counter({("LIST", "_versions"): TABLES}) == loop, (ours, loop)
    for t in range(TABLES):
        ds = lance.dataset(f"{ours_root}/t{t}", storage_options=counted.options)
        assert ds.to_table().column("x").to_pylist() == [t * 10 + v for v in range(VERSIONS)]


def test_a_prune_of_one_table_opens_no_other_with_lance(counted):
    """Every table is read for the clone map, but only the tables in scope are opened (and
    held): the others cost one read of their latest manifest, no listing of their own."""
    root = write_tables(counted, "scope")
    at_root = registered(counted, root)
    time.sleep(1.2)
    counted.calm()
    result = invoke(*at_root, "--json", "prune", "t1", *POLICY)
    assert result.exit_code == 0, result.stderr
    assert [t["location"] for t in json.loads(result.stdout)["tables"]] == ["t1"]
    traffic = counted.calm()
    others = [p for p in traffic.listed if _TABLE.match(p) and not p.startswith("ns/t1/")]
    assert others == []
    read = Counter(
        _TABLE.match(p.removeprefix("/scope")).group(1)
        for m, p in traffic.asked
        if m == "GET" and _TABLE.match(p.removeprefix("/scope"))
    )
    assert all(read[f"t{t}"] == 1 for t in range(TABLES) if t != 1), read


def test_the_dataset_held_from_the_reading_keeps_what_writers_commit_before_the_cleanup(counted):
    """Read (its manifest held), then an overwrite and a delete land, then the plan made from
    the reading runs on the table opened from it: the versions planned away go, and every
    version from the held one on reads as it did."""
    root = write_tables(counted, "held")
    ns = Namespace.from_properties(
        {"root": root, **{f"storage.{k}": v for k, v in counted.options.items()}}
    )
    storage = ns.storage
    uri = f"{root}/t0"
    time.sleep(1.2)
    policy = PrunePolicy(older_than=timedelta(seconds=1), grace=timedelta(seconds=1))
    now = datetime.now(UTC)
    held = HeldDatasets({"t0"})
    state = read_table_state(storage, "t0", None, policy=policy, since=now, held=held)
    assert state is not None and isinstance(state.handle, HeldManifest)
    assert state.handle.open().version == VERSIONS
    lance.write_dataset(
        pa.table({"x": [7, 8, 9], "s": ["a", "b", "c"]}),
        uri,
        mode="overwrite",
        storage_options=counted.options,
    )
    lance.dataset(uri, storage_options=counted.options).delete("x = 8")
    readable = {
        v: lance.dataset(uri, version=v, storage_options=counted.options).to_table()
        for v in range(VERSIONS, VERSIONS + 3)
    }
    plan = plan_table(state, Pins(), policy, {}, now)
    assert plan.expire == list(range(1, VERSIONS))
    result = TableResult(None, "t0")
    execute_plan(ns, plan, policy, False, result, state.handle)
    assert result.versions_removed == list(range(1, VERSIONS))
    left = [v["version"] for v in lance.dataset(uri, storage_options=counted.options).versions()]
    assert left == list(range(VERSIONS, VERSIONS + 3))
    for v, table in readable.items():
        assert lance.dataset(uri, version=v, storage_options=counted.options).to_table() == table


def test_past_the_held_budget_tables_are_read_from_their_manifest_and_opened_again(
    counted, monkeypatch
):
    """With room for one manifest, the first table read is held and the others are opened
    again for the cleanup, as Lance opens them: every table is pruned alike, and only the
    tables read past the budget cost a read more than the loop."""
    root = write_tables(counted, "budget")
    at_root = registered(counted, root)
    time.sleep(1.2)
    monkeypatch.setattr(lance_session, "HELD_BYTES", 1)
    asked = cold_prune(counted, at_root, "budget")
    # the loop reads VERSIONS + 1 manifests a table; one table held, the others read once more
    assert asked[("GET", "_versions")] == TABLES * (VERSIONS + 1) + TABLES - 1
    for t in range(TABLES):
        ds = lance.dataset(f"{root}/t{t}", storage_options=counted.options)
        assert ds.to_table().column("x").to_pylist() == [t * 10 + v for v in range(VERSIONS)]
        assert [v["version"] for v in ds.versions()] == [VERSIONS]


WRITER = """
import json, sys, lance, pyarrow as pa
root, options = sys.argv[1], json.loads(sys.argv[2])
writer, rounds, tables = map(int, sys.argv[3:])
for r in range(rounds):
    for t in range(tables):
        ids = [1000 * (writer + 1) + 10 * r + t]
        rows = pa.table({"x": ids, "s": [f"w{writer}"]})
        lance.write_dataset(rows, f"{root}/t{t}", mode="append", storage_options=options)
        print(t, ids[0], flush=True)
"""


def test_prunes_and_appending_processes_at_once_lose_no_committed_row(counted):
    """Two processes append to every table while `lancens prune` runs again and again in a
    third (each run holds what it read of each table until its cleanup): at the end every table
    holds its first rows and every append that reported success, each once, and every version
    left reads."""
    root = write_tables(counted, "racing")
    options = json.dumps(counted.options)
    at_root = registered(counted, root)
    time.sleep(1.2)
    env = {**os.environ, "LANCE_LOG": "error"}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, root, options, str(w), "8", str(TABLES)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(2)
    ]
    runs, removed_while_writing = 0, 0
    while any(w.poll() is None for w in writers) or runs < 2:
        writing = any(w.poll() is None for w in writers)
        done = subprocess.run(
            [sys.executable, "-m", "lancens_cli", *at_root, "--json", "prune", *POLICY],
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        removed = json.loads(done.stdout)["totals"]["versions_removed"]
        removed_while_writing += removed if writing else 0
        runs += 1
    assert removed_while_writing > 0  # the runs raced the appends
    appended: dict[int, list[int]] = {t: [] for t in range(TABLES)}
    for writer in writers:
        out, _ = writer.communicate()
        assert writer.returncode == 0
        for line in out.splitlines():
            table, row = map(int, line.split())
            appended[table].append(row)
    assert sum(map(len, appended.values())) == 2 * 8 * TABLES
    for t in range(TABLES):
        ds = lance.dataset(f"{root}/t{t}", storage_options=counted.options)
        first = [t * 10 + v for v in range(VERSIONS)]
        assert sorted(ds.to_table().column("x").to_pylist()) == sorted(first + appended[t])
        for version in ds.versions():  # each left reads: first rows, appends, once each
            old = lance.dataset(
                f"{root}/t{t}", version=version["version"], storage_options=counted.options
            )
            ids = old.to_table().column("x").to_pylist()
            assert len(ids) == len(set(ids)) and set(first) <= set(ids)
            assert set(ids) <= set(first + appended[t])
