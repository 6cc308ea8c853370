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
import os
import time
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import country_rows
from helpers import Root, invoke, ok
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_namespace import expiring_by_table

# How a clone's source path may be spelt, relative to the root given through `data -> disk1`.
SPELLINGS = [
    "{link}/ns/{table}",
    "{real}/ns/{table}",
    "{link}/ns//{table}",
    "{link}/ns/x/../{table}",
]

STEP = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 40)),
    st.tuples(st.just("overwrite"), st.integers(1, 40)),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("index"), st.sampled_from(["btree", "fts", "vector"])),
    st.tuples(st.just("compact"), st.just(0)),
    st.tuples(st.just("tag"), st.integers(0, 1000)),
    st.tuples(st.just("branch"), st.integers(0, 1000)),
    st.tuples(st.just("clone"), st.integers(0, 1000), st.sampled_from(SPELLINGS)),
    st.tuples(st.just("publish"), st.integers(1, 5)),
)
POLICY = st.fixed_dictionaries(
    {
        "retain": st.integers(1, 3),
        "older_than": st.sampled_from(["1s", "1h"]),
        "compact": st.booleans(),
    }
)


def rows(start: int, n: int) -> pa.Table:
    values = np.random.default_rng(start).random(n * 4, dtype=np.float32)
    return pa.table(
        {
            "a": pa.array(range(start, start + n), pa.int64()),
            "s": [f"w{i % 5} common" for i in range(start, start + n)],
            "v": pa.FixedSizeListArray.from_arrays(pa.array(values), 4),
        }
    )


class Scene:
    """The generated namespace: `data/ns` (a symlink to `disk1/ns`) with a partitioned spec,
    a catalogued table `plain.t`, and shallow clones of it at the root."""

    def __init__(self, base: Path):
        (base / "disk1" / "ns" / "x").mkdir(parents=True)
        os.symlink(base / "disk1", base / "data")
        self.base = base
        self.root = base / "data" / "ns"
        self.ns = Root(str(self.root), {}, self.root)
        self.next_row = 0
        self.published = 0
        self.tags = 0
        self.clones = 0
        pq.write_table(country_rows(0), base / "p.parquet")
        ok(
            self.ns,
            "add-partition-spec",
            "--schema",
            str(base / "p.parquet"),
            "--field",
            "country",
        )
        ok(self.ns, "create", "namespace", "plain")
        pq.write_table(rows(0, 20), base / "t.parquet")
        ok(self.ns, "create", "table", "plain.t", "--from", str(base / "t.parquet"))
        self.next_row = 20
        manifest = lance.dataset(str(self.root / "__manifest"))
        (row,) = manifest.to_table(filter="object_id = 'plain$t'").to_pylist()
        self.location = row["location"]
        self.table = str(self.root / self.location)

    def dataset(self) -> lance.LanceDataset:
        return lance.dataset(self.table)

    def apply(self, step: tuple) -> None:
        kind, arg = step[0], step[1]
        ds = self.dataset()
        if kind in ("append", "overwrite"):
            mode = "append" if kind == "append" else "overwrite"
            lance.write_dataset(rows(self.next_row, arg), self.table, mode=mode)
            self.next_row += arg
        elif kind == "delete":
            ds.delete(f"a % 7 = {arg}")
        elif kind == "index":
            if kind == "index" and ds.count_rows() < 8:
                return
            if arg == "btree":
                ds.create_scalar_index("a", "BTREE", replace=True)
            elif arg == "fts":
                ds.create_scalar_index("s", "INVERTED", replace=True)
            else:
                ds.create_index("v", "IVF_FLAT", num_partitions=2, replace=True)
        elif kind == "compact":
            ds.optimize.compact_files(target_rows_per_fragment=1 << 20)
        elif kind == "tag":
            version = self._some_version(arg)
            ds.tags.create(f"t{self.tags}", version)
            self.tags += 1
        elif kind == "branch":
            name = f"b{self.tags}"
            self.tags += 1
            branch = ds.create_branch(name, self._some_version(arg))
            lance.write_dataset(rows(self.next_row, 3), branch, mode="append")
            self.next_row += 3
        elif kind == "clone":
            source = step[2].format(
                link=self.base / "data", real=self.base / "disk1", table=self.location
            )
            version = self._some_version(arg)
            lance.dataset(source, version=version).shallow_clone(
                str(self.root / f"clone{self.clones}.lance"), version
            )
            self.clones += 1
            # the source moves on: only the clone still reads that version's files
            lance.write_dataset(rows(self.next_row, 4), self.table, mode="overwrite")
            self.next_row += 4
        elif kind == "publish":
            pq.write_table(country_rows(1000 + 10 * self.published, arg), self.base / "p.parquet")
            ok(self.ns, "write", "--from", str(self.base / "p.parquet"))
            self.published += 1

    def _some_version(self, pick: int) -> int:
        versions = [v["version"] for v in self.dataset().versions()]
        return versions[pick % len(versions)]


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
