"""A namespace with everything `prune` must respect, and what each reader can reach in it.

Built with the CLI (partitioned namespace, namespaces, tables) and pylance (table versions,
tags, a branch, shallow clones, a write that died before publishing), plus the debris of killed
writes: an abandoned table write and a staged `__manifest` data file. `Scene` builds one step
by step instead, for the property tests (`STEP`: the steps hypothesis draws).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from data import country_rows
from helpers import Root, invoke, ok
from hypothesis import strategies as st

ABANDONED = "0badc0de_plain$ghost"


@dataclass
class Built:
    path: Path
    table: Path  # plain.t, 20 versions, a tag, a branch, two clones
    partition: Path  # a partition table with a dead write's unpublished version
    published: int  # its read_version
    dead_version: int
    staged: Path
    uncommitted: Path  # a data file of plain.t no version references (a killed append)
    removable: list[int] = field(default_factory=list)  # versions of plain.t nobody needs


def build(root, tmp: Path) -> Built:
    """The namespace of the issue's Tests section, on a local root."""
    path = root.local_path
    data = tmp / "rows.parquet"
    pq.write_table(country_rows(0), data)
    ok(root, "add-partition-spec", "--schema", str(data), "--field", "country")
    ok(root, "write", "--from", str(data))
    pq.write_table(country_rows(100), data)
    ok(root, "write", "--from", str(data))
    for name in ("plain", "more", "other"):
        ok(root, "create", "namespace", name)  # many __manifest versions
    pq.write_table(pa.table({"a": pa.array([0, 1, 2], pa.int64())}), tmp / "a.parquet")
    ok(root, "create", "table", "plain.t", "--from", str(tmp / "a.parquet"))
    ok(root, "create", "table", "more.u", "--from", str(tmp / "a.parquet"))
    manifest = lance.dataset(str(path / "__manifest"))
    table_rows = manifest.to_table(filter="object_type = 'table'").to_pylist()
    location = {r["object_id"]: r["location"] for r in table_rows}
    table = path / location["plain$t"]
    for i in range(1, 20):  # versions 2..20: appends, overwrites, a delete
        if i % 7 == 0:
            lance.write_dataset(pa.table({"a": pa.array([i], pa.int64())}), table, mode="overwrite")
        elif i % 5 == 0:
            lance.dataset(table).delete("a = 1")
        else:
            lance.write_dataset(pa.table({"a": pa.array([i], pa.int64())}), table, mode="append")
    ds = lance.dataset(table)
    assert ds.version == 20
    ds.tags.create("keep", 3)
    branch = ds.create_branch("dev", 5)
    lance.write_dataset(pa.table({"a": pa.array([99], pa.int64())}), branch, mode="append")
    ds.shallow_clone(str(path / "cloned_tag.lance"), "keep")
    ds.shallow_clone(str(path / "cloned_v9.lance"), 9)
    for i in range(4):  # a root <name>.lance table
        lance.write_dataset(
            pa.table({"b": pa.array([i], pa.int64())}),
            path / "old.lance",
            mode="append" if i else "create",
        )
    # A partitioned write that died after its table commit, before publishing it.
    part = next(r for r in table_rows if r.get("read_version") is not None)
    partition = path / part["location"]
    dead = lance.write_dataset(country_rows(500, 2), partition, mode="append").version
    # A killed append to plain.t: its data file, no version.
    known = set((table / "data").iterdir())
    lance.fragment.write_fragments(pa.table({"a": pa.array([77], pa.int64())}), table)
    (uncommitted,) = set((table / "data").iterdir()) - known
    # An abandoned table write and a staged __manifest file.
    data_file = next((table / "data").iterdir())
    (path / ABANDONED / "data").mkdir(parents=True)
    shutil.copy(data_file, path / ABANDONED / "data" / data_file.name)
    staged_source = next((path / "__manifest" / "data").iterdir())
    prefix = "0" * 8 if not staged_source.name.startswith("0" * 8) else "1" * 8
    staged = path / "__manifest" / "data" / (prefix + staged_source.name[8:])
    shutil.copy(staged_source, staged)
    return Built(
        path,
        table,
        partition,
        part["read_version"],
        dead,
        staged,
        uncommitted,
        removable=[v for v in range(1, 20) if v not in (3, 5, 9)],
    )


def reachable(built: Built) -> dict[str, pa.Table]:
    """Everything a reader can be sent to, read now (to compare after prune)."""
    path = built.path
    found: dict[str, pa.Table] = {}
    manifest = lance.dataset(str(path / "__manifest"))
    for row in manifest.to_table(filter="object_type = 'table'").to_pylist():
        ds = lance.dataset(str(path / row["location"]), version=row.get("read_version"))
        found[f"table {row['object_id']}"] = ds.to_table()
    main = lance.dataset(built.table)
    found["tag keep"] = lance.dataset(built.table, version="keep").to_table()
    found["branch dev"] = main.checkout_version(("dev", None)).to_table()
    for version in (3, 5, 9, main.latest_version):
        found[f"plain.t v{version}"] = lance.dataset(built.table, version=version).to_table()
    for name in ("cloned_tag", "cloned_v9", "old"):
        found[name] = lance.dataset(str(path / f"{name}.lance")).to_table()
    return found


def assert_same(before: dict[str, pa.Table], after: dict[str, pa.Table]) -> None:
    assert sorted(before) == sorted(after)
    for key, table in before.items():
        assert after[key].equals(table), key


def versions(path: Path) -> list[int]:
    return [v["version"] for v in lance.dataset(path).versions()]


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)
    for dirpath, _dirs, files in os.walk(src):  # keep modification times (the grace)
        for name in files:
            source = os.path.join(dirpath, name)
            target = os.path.join(dst, os.path.relpath(source, src))
            stat = os.stat(source)
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def expiring_by_table(root_args, *policy) -> dict[str, list[int]]:
    """What `versions` says expires under `policy`: version numbers by table location."""
    result = invoke(*root_args, "versions", *policy, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    found = {}
    for table in summary["tables"]:
        if table["expiring"]:
            detail = invoke(*root_args, "versions", table["table"], *policy, "--json")
            assert detail.exit_code == 0, detail.stderr
            found[table["location"]] = json.loads(detail.stdout)["expiring"]
    return found


# --- a namespace generated step by step (the property tests) ---------------------------------

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
        elif kind == "debris":  # a killed append: data files, no version
            lance.fragment.write_fragments(rows(self.next_row, arg), self.table)
            self.next_row += arg
        elif kind == "untag":
            names = sorted(ds.tags.list())
            if names:
                ds.tags.delete(names[arg % len(names)])
        elif kind == "publish":
            pq.write_table(country_rows(1000 + 10 * self.published, arg), self.base / "p.parquet")
            ok(self.ns, "write", "--from", str(self.base / "p.parquet"))
            self.published += 1

    def _some_version(self, pick: int) -> int:
        versions = [v["version"] for v in self.dataset().versions()]
        return versions[pick % len(versions)]
