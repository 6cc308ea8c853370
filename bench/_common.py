"""Shared by the benchmarks: building large namespaces fast, timing cold processes, tables.

Benchmarks, not tests: they print figures and ratios against the reference
(`lance.namespace.DirectoryNamespace`) measured in the same run, and always exit 0.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Cold processes get the environment a cron job would: no colour, Lance quiet, no lancens config.
# An installed package runs from its compiled bytecode: a shell that asks for none (as some
# sandboxes do) would time the compiler at every start.
ENV = {
    **{
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LANCENS_") and k != "PYTHONDONTWRITEBYTECODE"
    },
    "NO_COLOR": "1",
    "LANCE_LOG": "error",
    "LANCENS_CONFIG": os.devnull,
}


def lancens_cmd() -> list[str]:
    """The installed console script next to this interpreter, else `python -m lancens_cli`."""
    script = Path(sys.executable).parent / "lancens"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lancens_cli"]


def ipc_bytes(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def template_table(workdir: Path) -> Path:
    """One small root table exactly as the reference's create_table writes it."""
    import lance_namespace as ln
    import pyarrow as pa
    from lance.namespace import DirectoryNamespace

    scratch = workdir / "template-ns"
    target = scratch / "t.lance"
    if not target.exists():
        scratch.mkdir(parents=True, exist_ok=True)
        ns = DirectoryNamespace(root=str(scratch))
        data = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})
        ns.create_table(ln.CreateTableRequest(id=["t"]), ipc_bytes(data))
    return target


def table_name(i: int) -> str:
    return f"t{i:06d}"


def register_tables(root: Path, n: int) -> None:
    """The `__manifest` rows of tables 0..n-1 in one commit (rows already there are kept), as
    n reference `create_table` calls would write them: object_id = name, location =
    `<name>.lance`, no metadata."""
    from lancens_cli.service.namespace import Namespace

    ns = Namespace.from_properties({"root": str(root)})

    def plan(snapshot, edit) -> None:
        for i in range(n):
            name = table_name(i)
            if not edit.has(name):
                edit.add(
                    {
                        "object_id": name,
                        "object_type": "table",
                        "location": f"{name}.lance",
                        "metadata": None,
                        "base_objects": None,
                    }
                )

    ns.manifest.mutate(plan)


NAMESPACES = 100  # a nested root's namespaces, `ns000`..`ns099`


def nested_namespace(k: int) -> str:
    return f"ns{k:03d}"


def nested_table(i: int) -> tuple[str, str]:
    """Table i of a nested root: `t<i // 100>` in namespace `ns<i % 100>` (namespace, name)."""
    return nested_namespace(i % NAMESPACES), table_name(i // NAMESPACES)


def register_nested(root: Path, n: int, link: Callable[[str], None]) -> None:
    """A nested root's `__manifest` in one commit, as `create namespace ns000` .. `ns099` and
    n `create table ns<k>.t<j>` would write it: `namespace_row` and `table_row` (no metadata),
    each table in a V2 directory `<8 hex>_<object_id>` drawn by `v2_location`, as `create`
    draws it. `link(location)` makes each table's directory before the commit (create's
    order: the data, then the row)."""
    from lancens_cli.models import Identifier
    from lancens_cli.service.catalog.manifest_rows import namespace_row, table_row
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.store.tables import v2_location

    ns = Namespace.from_properties({"root": str(root)})
    rows = [namespace_row(Identifier((nested_namespace(k),)).object_id) for k in range(NAMESPACES)]
    for i in range(n):
        object_id = Identifier(nested_table(i)).object_id
        location = v2_location(object_id)
        link(location)
        rows.append(table_row(object_id, location, None))

    def plan(snapshot, edit) -> None:
        for row in rows:
            edit.add(row)

    ns.manifest.mutate(plan)


def register_partitions(root: Path, n: int, link: Callable[[str], None]) -> list[str]:
    """n - 1 partition tables of a one-field partitioned root beside the one that `lancens
    write` made (values 0..n-1 in all), in one commit: per table a partition namespace (a random
    16-character name, `partition_namespace_name`) and its `dataset` table in a fresh V2
    directory, rows from `partition_namespace_row` / `partition_table_row` with the value i
    and the `read_version` / `read_branch` the CLI's partition has, as `write` adds them.
    Refuses (SystemExit) when those functions no longer give the CLI's rows. `link(location)`
    makes each table's directory before the commit. Returns the object ids of the n partition
    tables, by value."""
    from lancens_cli.models import KIND_NAMESPACE, KIND_TABLE
    from lancens_cli.partition.rows import child_id, partition_rows
    from lancens_cli.service.catalog.manifest_rows import (
        partition_namespace_row,
        partition_table_row,
    )
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.service.partitioned.layout import layout_of
    from lancens_cli.service.partitioned.placement import TABLE_NAME, partition_namespace_name
    from lancens_cli.store.tables import v2_location

    ns = Namespace.from_properties({"root": str(root)})
    snapshot = ns.snapshot()
    layout = layout_of(snapshot)
    if layout is None or len(layout.current.fields) != 1:
        raise SystemExit(f"{root}: expected a partitioned root with one partition field")
    spec = layout.current
    column = spec.fields[0].column
    found = {p.row["object_type"]: p.row for p in partition_rows(snapshot.rows, [spec])}
    if sorted(found) != [KIND_NAMESPACE, KIND_TABLE]:
        raise SystemExit(f"{root}: expected one partition namespace and its table")
    seed_ns, seed = found[KIND_NAMESPACE], found[KIND_TABLE]
    published = {"read_version": seed["read_version"], "read_branch": seed["read_branch"]}
    value = {column: seed[column]}
    again = [
        (seed_ns, partition_namespace_row(seed_ns["object_id"], **value)),
        (seed, {**partition_table_row(seed["object_id"], seed["location"], **value), **published}),
    ]
    for written, built in again:
        keys = set(written) | set(built)
        if any(written.get(k) != built.get(k) for k in keys):
            raise SystemExit(f"the CLI wrote {written}, the row functions give {built}")
    rows = []
    ids = {seed[column]: seed["object_id"]}
    for i in [v for v in range(n) if v != seed[column]][: n - 1]:
        namespace_id = child_id(spec.namespace, partition_namespace_name())
        table_id = child_id(namespace_id, TABLE_NAME)
        location = v2_location(table_id)
        link(location)
        ids[i] = table_id
        rows.append(partition_namespace_row(namespace_id, **{column: i}))
        rows.append({**partition_table_row(table_id, location, **{column: i}), **published})

    def plan(snapshot, edit) -> None:
        for row in rows:
            edit.add(row)

    ns.manifest.mutate(plan)
    return [ids[value] for value in sorted(ids)]


def build_namespace(root: Path, n: int, workdir: Path) -> float:
    """A compatibility-mode root with n tables: `<name>.lance` copies plus one manifest commit.

    The on-disk result equals n reference `create_table` calls at the root (same directories,
    same `__manifest` rows: object_id = name, location = `<name>.lance`, no metadata), except
    that `__manifest` has 1 version instead of n. Returns the seconds it took.
    """
    os.environ.setdefault("LANCE_LOG", "error")

    started = time.perf_counter()
    template = template_table(workdir)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        target = root / f"{table_name(i)}.lance"
        if not target.exists():
            shutil.copytree(template, target)

    register_tables(root, n)
    return time.perf_counter() - started


@dataclass
class Timing:
    """Per-run wall time and CPU time (user + system) of one cold command."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_s(self) -> float:
        return statistics.median(self.cpu)


def run_once(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = proc.stderr[-2000:]
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    return wall, cpu, proc


def measure(
    commands: dict[str, list[str]],
    *,
    runs: int,
    warmup: int = 1,
    checks: dict[str, Callable[[str], None]] | None = None,
    before_each: Callable[[str, int], list[str] | None] | None = None,
) -> dict[str, Timing]:
    """Cold processes, interleaved round-robin so that load from elsewhere hits all alike.

    `warmup` untimed rounds come first (page cache, bytecode). `checks[label](stdout)` validates
    the first output. `before_each(label, i)` may return the command to run in round i.
    """
    timings = {label: Timing() for label in commands}
    for i in range(warmup + runs):
        for label, cmd in commands.items():
            if before_each is not None:
                cmd = before_each(label, i) or cmd
            wall, cpu, proc = run_once(cmd)
            if checks and label in checks and i == 0:
                checks[label](proc.stdout)
            if i >= warmup:
                timings[label].wall.append(wall)
                timings[label].cpu.append(cpu)
    return timings


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.1f} {five:.1f} {fifteen:.1f}"
    except OSError:
        return "load average unknown"


def median(values: list[float]) -> float:
    return statistics.median(values)


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f} s"


def versions() -> str:
    from importlib.metadata import version

    return (
        f"python {sys.version.split()[0]}, pylance {version('pylance')}, "
        f"lance-namespace {version('lance-namespace')}, lancens-cli {version('lancens-cli')}, "
        f"{os.cpu_count()} CPUs"
    )
