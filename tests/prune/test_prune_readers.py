"""The safety rule of `prune`, as a property over generated namespaces.

Hypothesis builds a namespace step by step as its users would: appends, overwrites and deletes
of a catalogued table, btree / FTS / vector indexes built and rebuilt, compactions, tags,
branches, shallow clones made through every spelling of the source's path (the root itself is
given through a symlink), and partitioned writes that publish new `__manifest` versions. Then
`prune` runs under a generated policy (with or without `--compact`). Afterwards every version
a reader can still be sent to (each table's latest, every tag, every branch, every clone, and
every table version each remaining `__manifest` version publishes) reads exactly as before: the
same multiset of rows, and the same answers from its scalar, FTS and vector indexes. Without
`--compact`, what `versions` said would expire is exactly what `prune` removed.
"""

from __future__ import annotations

import hashlib
import json
import time

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_namespace import STEP, Scene, expiring_by_table

POLICY = st.fixed_dictionaries(
    {
        "retain": st.integers(1, 3),
        "older_than": st.sampled_from(["1s", "1h"]),
        "compact": st.booleans(),
    }
)


def digest(table: pa.Table) -> str:
    lines = sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def answers(ds: lance.LanceDataset) -> tuple:
    """What the version's rows and indexes answer (sets: compaction may reorder rows)."""
    found: list = [ds.count_rows(), digest(ds.to_table())]
    kinds = {i["fields"][0]: i["type"] for i in ds.list_indices()}
    if "a" in kinds:
        found.append(sorted(ds.to_table(filter="a % 9 = 4", columns=["a"]).column("a").to_pylist()))
    if "s" in kinds:
        hits = ds.to_table(full_text_query="w3", columns=["a"]).column("a").to_pylist()
        found.append(sorted(hits))
    if "v" in kinds:
        query = {"column": "v", "q": np.full(4, 0.5, np.float32), "k": 5, "nprobes": 2}
        found.append(sorted(ds.to_table(nearest=query, columns=["a"]).column("a").to_pylist()))
    return tuple(found)


def reachable(scene: Scene) -> dict[str, tuple]:
    """Every version a reader can be sent to now, with what it answers."""
    root = scene.root
    found: dict[str, tuple] = {}
    tables = {scene.location} | {p.name for p in root.iterdir() if p.name.endswith(".lance")}
    manifest = lance.dataset(str(root / "__manifest"))
    for entry in manifest.versions():
        at = lance.dataset(str(root / "__manifest"), version=entry["version"])
        for row in at.to_table(filter="object_type = 'table'").to_pylist():
            tables.add(row["location"])
            if row.get("read_version") is not None:
                ds = lance.dataset(str(root / row["location"]), version=row["read_version"])
                key = f"manifest v{entry['version']}: {row['location']}@{row['read_version']}"
                found[key] = answers(ds)
    for location in sorted(tables):
        ds = lance.dataset(str(root / location))
        found[f"{location} latest"] = answers(ds)
        for tag in ds.tags.list():
            found[f"{location} tag {tag}"] = answers(ds.checkout_version(tag))
        for branch in ds.branches.list():
            found[f"{location} branch {branch}"] = answers(ds.checkout_version((branch, None)))
    return found


def still_reachable(before: dict[str, tuple], scene: Scene) -> list[str]:
    """The keys of `before` a reader can still be sent to: all but removed `__manifest`
    versions (prune may expire the catalog's own versions; those publish nothing any more)."""
    kept = {e["version"] for e in lance.dataset(str(scene.root / "__manifest")).versions()}
    return [k for k in before if not k.startswith("manifest v") or int(k.split()[1][1:-1]) in kept]


@pytest.mark.slow
def test_after_prune_every_version_a_reader_can_reach_reads_as_before(tmp_path_factory):
    removed_in_all: list[int] = []

    @settings(
        max_examples=12,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        steps=st.lists(STEP, min_size=4, max_size=14),
        policy=POLICY,
    )
    def property_holds(steps, policy):
        scene = Scene(tmp_path_factory.mktemp("readers"))
        for step in [("append", 5), ("append", 5), ("index", "btree")] + steps:
            scene.apply(step)
        before = reachable(scene)
        time.sleep(1.1)  # past the 1s window and grace
        flags = ["--older-than", policy["older_than"], "--retain", str(policy["retain"])]
        flags += ["--grace", "1s", "--force"]
        said = expiring_by_table(scene.ns.args, *flags)
        compact = ["--compact"] if policy["compact"] else []
        result = invoke(*scene.ns.args, "prune", *flags, *compact, "--yes", "--json")
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        if not compact:  # versions answers from prune's own decision
            removed = {
                t["location"]: sorted(t["versions_removed"])
                for t in report["tables"]
                if t["versions_removed"]
            }
            assert {k: sorted(v) for k, v in said.items()} == removed, (steps, policy)
        removed_in_all.append(sum(len(t["versions_removed"]) for t in report["tables"]))
        after = reachable(scene)
        for key in still_reachable(before, scene):
            assert after.get(key) == before[key], (key, steps, policy)
        assert invoke(*scene.ns.args, "check").exit_code == 0

    property_holds()
    assert sum(removed_in_all) > 0  # the property was tried where prune removed versions
