"""A cold prune opens each table for its cleanup from the latest manifest its reading took
(store/lance_session.py `HeldManifest`), not by Lance finding and reading it again. Tables of
both manifest naming schemes, with deletion files and btree, full-text and vector indexes,
lose exactly what Lance's own cleanup takes, and every version left reads as before; a
table written anew under the same path between its reading and its cleanup loses nothing."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import Root, invoke

from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import Pins, plan_table, read_table_state
from lancens_cli.service.prune.report import TableResult
from lancens_cli.service.prune.table import execute_plan
from lancens_cli.store.delete_pace import DeletePace
from lancens_cli.store.lance_session import HeldDatasets, HeldManifest

POLICY = ["--older-than", "1s", "--grace", "1s", "--force", "--yes"]


def rows(start: int, n: int) -> pa.Table:
    values = np.arange(start * 4, (start + n) * 4, dtype=np.float32) % 17
    return pa.table(
        {
            "a": pa.array(range(start, start + n), pa.int64()),
            "s": [f"w{i % 5} common" for i in range(start, start + n)],
            "v": pa.FixedSizeListArray.from_arrays(pa.array(values), 4),
        }
    )


def write_table(uri: str, options: dict[str, str], v2_names: bool, indexed: bool) -> None:
    """Six versions: appends, a delete (a deletion file), indexes of every kind."""
    ds = lance.write_dataset(
        rows(0, 300), uri, storage_options=options, enable_v2_manifest_paths=v2_names
    )
    lance.write_dataset(rows(300, 50), uri, mode="append", storage_options=options)
    ds = lance.dataset(uri, storage_options=options)
    ds.delete("a % 7 = 3")
    if indexed:
        ds.create_scalar_index("a", "BTREE")
        ds.create_scalar_index("s", "INVERTED")
        ds.create_index("v", "IVF_FLAT", num_partitions=2)
    lance.write_dataset(rows(350, 20), uri, mode="append", storage_options=options)


def every_version(uri: str, options: dict[str, str]) -> dict[int, pa.Table]:
    ds = lance.dataset(uri, storage_options=options)
    return {
        v["version"]: lance.dataset(uri, version=v["version"], storage_options=options)
        .to_table()
        .sort_by("a")
        for v in ds.versions()
    }


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_cold_prune_from_held_manifests_takes_what_lances_cleanup_takes(kind, request):
    """Four tables (both naming schemes, with and without indexes) in one root and in a loop's
    copy: after `lancens prune` and `cleanup_old_versions` each keeps the same versions, and
    each version left reads as it did."""
    root: Root = request.getfixturevalue(f"{kind}_root")
    options = root.storage_options
    at_root = ["--root", root.uri, *[f"-s{k}={v}" for k, v in options.items()]]
    names = {f"t{i}": (v2, indexed) for i, (v2, indexed) in enumerate(
        [(True, True), (False, True), (True, False), (False, False)]
    )}  # fmt: skip
    for prefix in ("ours", "loop"):
        for name, (v2, indexed) in names.items():
            write_table(f"{root.uri}/{prefix}/{name}.lance", options, v2, indexed)
    for name in names:
        result = invoke(*at_root, "register", name, f"ours/{name}.lance")
        assert result.exit_code == 0, result.stderr
    before = {n: every_version(f"{root.uri}/ours/{n}.lance", options) for n in names}
    time.sleep(1.2)
    result = invoke(*at_root, "--json", "prune", *POLICY)
    assert result.exit_code == 0, result.stderr
    report = {t["location"]: t for t in json.loads(result.stdout)["tables"]}
    for name in names:
        loop = lance.dataset(f"{root.uri}/loop/{name}.lance", storage_options=options)
        loop.cleanup_old_versions(older_than=timedelta(seconds=1))
        ours_uri = f"{root.uri}/ours/{name}.lance"
        left = every_version(ours_uri, options)
        assert sorted(left) == sorted(every_version(loop.uri, options)), name
        assert report[f"ours/{name}.lance"]["status"] == "pruned"
        assert len(left) < len(before[name])
        for version, table in left.items():
            assert table == before[name][version], (name, version)
        ds = lance.dataset(ours_uri, storage_options=options)
        if names[name][1]:
            assert ds.to_table(full_text_query="w3").num_rows > 0
            assert len(ds.list_indices()) == 3


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_table_written_anew_after_its_reading_loses_nothing_to_its_cleanup(kind, request):
    """The table is read (its manifest held) and planned, then removed and written anew
    under the same path with fewer versions, older than `--older-than` by the cleanup: the
    held manifest still opens, at a version the table no longer has, and a cleanup on it
    would take every version below it. Neither the handle nor the plan's stale version
    numbers take anything: Lance judges ages by the run's start, which the new versions
    postdate."""
    root: Root = request.getfixturevalue(f"{kind}_root")
    options = root.storage_options
    ns = Namespace.from_properties(
        {"root": root.uri, **{f"storage.{k}": v for k, v in options.items()}}
    )
    uri = f"{root.uri}/t.lance"
    for start in range(4):
        mode = "append" if start else "create"
        lance.write_dataset(rows(start * 10, 10), uri, mode=mode, storage_options=options)
    time.sleep(1.2)
    policy = PrunePolicy(older_than=timedelta(seconds=1), grace=timedelta(seconds=1))
    now = datetime.now(UTC)
    held = HeldDatasets({"t.lance"})
    state = read_table_state(ns.storage, "t.lance", None, policy=policy, since=now, held=held)
    assert state is not None and isinstance(state.handle, HeldManifest)
    plan = plan_table(state, Pins(), policy, {}, now)
    assert plan.expire == [1, 2, 3]
    ns.storage.delete_tree("t.lance")
    lance.write_dataset(rows(100, 5), uri, enable_v2_manifest_paths=False, storage_options=options)
    lance.dataset(uri, storage_options=options).delete("a = 101")
    readable = every_version(uri, options)
    assert sorted(readable) == [1, 2]
    time.sleep(1.2)
    assert state.handle.open().version == 4
    result = TableResult(None, "t.lance")
    execute_plan(ns, plan, policy, False, result, state.handle)
    assert every_version(uri, options) == readable
    assert not {1, 2} & set(result.versions_removed)


def test_a_wait_for_the_delete_rate_does_not_move_the_cutoff(local_root):
    """Under `--delete-rate-limit` a cleanup may wait for its share of the rate while others
    hold it; Lance's cutoff is still the plan's (taken once the share is held): a table
    written anew after the run started keeps every version, however long the wait."""
    ns = Namespace.from_properties({"root": local_root.uri})
    uri = f"{local_root.uri}/t.lance"
    for start in range(4):
        lance.write_dataset(rows(start * 10, 10), uri, mode="append" if start else "create")
    time.sleep(1.2)
    policy = PrunePolicy(older_than=timedelta(seconds=1), grace=timedelta(seconds=1))
    now = datetime.now(UTC)
    held = HeldDatasets({"t.lance"})
    state = read_table_state(ns.storage, "t.lance", None, policy=policy, since=now, held=held)
    plan = plan_table(state, Pins(), policy, {}, now)
    assert plan.expire == [1, 2, 3]
    ns.storage.delete_tree("t.lance")
    lance.write_dataset(rows(100, 5), uri)
    lance.write_dataset(rows(105, 5), uri, mode="append")
    readable = every_version(uri, {})
    pace = DeletePace(1, 1)  # one object a second, one share: a second cleanup must wait
    ns.storage.delete_pace = pace
    holding = threading.Event()

    def other_cleanup() -> None:
        with pace.lance_share():
            holding.set()
            time.sleep(2.5)

    other = threading.Thread(target=other_cleanup)
    other.start()
    holding.wait()
    execute_plan(ns, plan, policy, False, TableResult(None, "t.lance"), state.handle)
    other.join()
    assert every_version(uri, {}) == readable
