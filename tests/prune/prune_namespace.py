"""A namespace with everything `prune` must respect, and what each reader can reach in it.

Built with the CLI (partitioned namespace, namespaces, tables) and pylance (table versions,
tags, a branch, shallow clones, a write that died before publishing), plus the debris of killed
writes: an abandoned table write and a staged `__manifest` data file.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
from data import country_rows
from helpers import invoke, ok

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
