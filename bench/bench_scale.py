#!/usr/bin/env python3
"""How namespace-wide commands grow with the number of tables: wall time and peak memory.

    python bench/bench_scale.py [--sizes 10000,30000] [--runs 1] [--workdir DIR] [--keep]
    python bench/bench_scale.py --commands ls-limit,ls-json,ref-list --runs 3
    python bench/bench_scale.py --sizes 300000,1000000 --keep  # big roots, reused next time
    python bench/bench_scale.py --layout nested  # 100 namespaces; also drop --cascade
    python bench/bench_scale.py --layout partitioned  # N partition tables of one spec
    python bench/bench_scale.py --commands migrate-v1 --sizes 1000,3000  # a V1 root's migration

1. For each size, a root of that many tables (--layout), every table directory a hard-link copy
   of one small Lance dataset (a fresh full copy of it every 60,000 tables, outside the root,
   since ext4 allows at most 65,000 links to a file), and all `__manifest` rows in ONE commit
   through lancens' own store and row functions:
   - flat (the default): V2 root tables `<name>.lance`, copies of `template_table`, rows as
     the reference's `create_table` writes them (`register_tables`).
   - nested: 100 namespaces `ns000`..`ns099` at the root, table i is `t<i // 100>` of
     `ns<i % 100>`, in a V2 directory `<8 hex>_<object_id>`: rows and directory names as
     `lancens create namespace` / `create table` make them (`register_nested`).
   - partitioned: a partitioned root made by the CLI (`add-partition-spec -f id` over the
     template's schema, then `write` of one partition, id = 0), and partitions 1..N-1 beside
     it: a partition namespace and its `dataset` table each, rows as `write` adds them, the
     tables copies of the one the CLI wrote (`register_partitions`).
   - v1 (no --layout of its own; `migrate-v1` runs on it): flat's `<name>.lance` directories
     and no `__manifest`.
   Roots live under --workdir (`scale-<N>`, `scale-<layout>-<N>`) and are reused when their
   marker file says a build finished; roots this run built are removed at the end unless
   --keep.
2. Each command as a whole cold process, `lancens --root R ...` with stdout to /dev/null
   (median of --runs, no warm-up, commands interleaved): wall seconds and the process's peak
   resident memory (`ru_maxrss` from `os.wait4`; processes it starts are not counted). A
   command over --timeout seconds is killed, reported, and not run at larger sizes.
   A command with warm-ups runs that many times untimed first: a prune's cron run with
   nothing to do is measured after the runs that leave its record, a page of `ls` after the
   listing that keeps the root's sorted listing for the next (the cache directory is the
   bench's own, under --workdir); `ls-limit-first` runs each time with an empty cache, as
   the first page after any change to the root or its catalog. Where tables sit below
   namespaces (nested, partitioned) `ls` lists with -R. Commands for one layout only:
   `partitions --json` (partitioned), `drop <one table> --dry-run` (flat: the scan of every
   table for readers of it), `drop ns000 --cascade` and its dry run (nested: one
   namespace of N/100 tables), `migrate-v1 --dry-run` and `migrate-v1` (--layout flat, on
   the v1 root; not in the default --commands). A command that changes its root (`drop`,
   `migrate-v1`) runs after the others, and after each run the root is put back, untimed:
   what the run added at its top level goes, `__manifest` is the build's again (a copy kept
   beside the root), and deleted table directories are linked again. A command asked for on
   a layout it does not fit is skipped with a note.
   `fs-floor` (not in the default --commands) is what the file system alone charges a
   command that looks at every table: a stat and a listing of each table's `_versions/` in
   plain Python. Where it grows faster than linear (the kernel's caches no longer hold every
   table's directories), no such command can grow slower.
3. Beside them, what a user would pick instead: the reference `lance.namespace.
   DirectoryNamespace`'s `list_tables` of the root (every page; where tables sit below
   namespaces, a walk of `list_namespaces` and `list_tables` of every namespace) and
   `describe_table` of one table, each a `python -c` process (it checks the count itself; a
   failure is reported).

Prints one table: per size the wall seconds and peak MiB, then the growth exponent between
consecutive sizes, log(t2/t1) / log(n2/n1) (1: linear in tables; 0: flat). Always exits 0.
Not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ENV,
    lancens_cmd,
    load_average,
    nested_namespace,
    nested_table,
    print_table,
    register_nested,
    register_partitions,
    register_tables,
    table_name,
    template_table,
    versions,
)

LINKS_PER_COPY = 60_000  # under ext4's 65,000 links per file
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "lancens-bench-scale"
MARKER_SUFFIX = ".built"
SETTLE_S = 2.5  # a prune records a directory's time once it is this old (prune's SETTLE, 2 s)
LAYOUTS = ("flat", "nested", "partitioned")  # --layout; `v1` is a root layout of migrate-v1's
DEEP = ("nested", "partitioned")  # tables below namespaces: `ls -R`, the reference walks
MANIFEST_DIR = "__manifest"
TARGET_FILE = "target"  # in a root's meta directory: the table `describe` shows

REF_LIST = r"""
import sys
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
ns = DirectoryNamespace(root=sys.argv[1])
count, token = 0, None
while True:
    response = ns.list_tables(ln.ListTablesRequest(id=[], page_token=token))
    count += len(response.tables)
    token = response.page_token
    if not token:
        break
print(count)
if count != int(sys.argv[2]):
    sys.exit(f"listed {count} tables, expected {sys.argv[2]}")
"""

REF_WALK = r"""
import sys
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
ns = DirectoryNamespace(root=sys.argv[1])
count, stack = 0, [[]]
while stack:
    parent = stack.pop()
    token = None
    while True:
        response = ns.list_namespaces(ln.ListNamespacesRequest(id=parent, page_token=token))
        stack.extend([*parent, name] for name in response.namespaces)
        token = response.page_token
        if not token:
            break
    while True:
        response = ns.list_tables(ln.ListTablesRequest(id=parent, page_token=token))
        count += len(response.tables)
        token = response.page_token
        if not token:
            break
print(count)
if count != int(sys.argv[2]):
    sys.exit(f"listed {count} tables, expected {sys.argv[2]}")
"""

# The build runs in a child: a parent that imported Lance would hand its resident size to every
# command it starts (Linux keeps the peak RSS of the image an exec replaces in ru_maxrss).
BUILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from bench_scale import build_root
print(build_root(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]))
"""

REF_DESCRIBE = r"""
import sys
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
ns = DirectoryNamespace(root=sys.argv[1])
response = ns.describe_table(ln.DescribeTableRequest(id=sys.argv[2].split(".")))
print(response.to_json())
"""

# The file system's own floor for a command that looks at every table: one stat and one
# listing of each table's `_versions/`, in plain Python (no Lance, no lancens).
FS_FLOOR = r"""
import os, sys
root, count = sys.argv[1], 0
with os.scandir(root) as entries:
    for entry in entries:
        if entry.name.endswith(".lance") and entry.is_dir():
            os.stat(os.path.join(entry.path, "_versions"))
            os.listdir(os.path.join(entry.path, "_versions"))
            count += 1
if count != int(sys.argv[2]):
    sys.exit(f"looked at {count} tables, expected {sys.argv[2]}")
"""
SCRIPTS = {"list": REF_LIST, "walk": REF_WALK, "describe": REF_DESCRIBE, "floor": FS_FLOOR}


@dataclass(frozen=True)
class Command:
    """One measured command: `argv(root, n)` builds it for a root of n tables. A reference
    command's `args` name its script (`SCRIPTS`)."""

    key: str
    label: str
    ours: bool
    args: tuple[str, ...]
    warm_ups: int = 0  # untimed runs first, at each size (a prune's record, its quiet state)
    no_cache: bool = False  # each run with an empty cache directory: as after any change
    layouts: tuple[str, ...] = LAYOUTS  # the --layout values it is measured on
    root: str | None = None  # the layout of the root it runs on, if not --layout's
    fresh: bool = False  # it changes its root: runs last, the root put back after each run
    default: bool = True  # in the default --commands of its layouts
    deep: tuple[str, tuple[str, ...]] | None = None  # label and args on DEEP layouts

    def on_layout(self, layout: str) -> Command:
        """The command as --layout runs it (its `deep` form where tables sit below)."""
        if self.deep is None or layout not in DEEP:
            return self
        label, args = self.deep
        return replace(self, label=label, args=args, deep=None)

    def root_layout(self, layout: str) -> str:
        return self.root or layout

    def argv(self, root: Path, n: int) -> list[str]:
        """Ours through the console script; the reference as `python -c SCRIPT root arg`."""
        if self.ours:
            tail = [a.replace("{table}", target_table(root, n)) for a in self.args]
            return [*lancens_cmd(), "--root", str(root), *tail]
        script = self.args[0]
        extra = target_table(root, n) if script == "describe" else str(n)
        return [sys.executable, "-c", SCRIPTS[script], str(root), extra]


COMMANDS = [
    Command(
        "ls-limit",
        "lancens ls --limit 100 (listed before)",
        True,
        ("ls", "--limit", "100"),
        warm_ups=1,  # the listing a command keeps for the next (service/catalog/listing_index)
        deep=("lancens ls -R --limit 100", ("ls", "-R", "--limit", "100")),
    ),
    Command(
        "ls-limit-first",
        "lancens ls --limit 100 (first listing)",
        True,
        ("ls", "--limit", "100"),
        no_cache=True,
        deep=("lancens ls -R --limit 100 (first listing)", ("ls", "-R", "--limit", "100")),
    ),
    Command(
        "ls-top",
        "lancens ls (the root's children, listed before)",
        True,
        ("ls",),
        warm_ups=1,
        layouts=DEEP,  # a few children of a big catalog: a partitioned root's specs
    ),
    Command(
        "ls-json",
        "lancens ls --json",
        True,
        ("ls", "--json"),
        deep=("lancens ls -R --json", ("ls", "-R", "--json")),
    ),
    Command("versions", "lancens versions --json", True, ("versions", "--json")),
    Command("check", "lancens check", True, ("check",)),
    Command(
        "prune",
        "lancens prune --dry-run --older-than 7d",
        True,
        ("prune", "--dry-run", "--older-than", "7d", "--full"),  # a first run, record or not
    ),
    Command(
        "prune-quiet",
        "lancens prune, nothing to do (from its record)",
        True,
        ("prune", "--older-than", "7d", "--yes"),
        warm_ups=2,  # the first leaves the record, the second the root's state beside it
    ),
    Command("describe", "lancens describe <one table>", True, ("describe", "{table}")),
    Command(
        "partitions",
        "lancens partitions --json",
        True,
        ("partitions", "--json"),
        layouts=("partitioned",),
    ),
    Command(
        "drop-one-dry",
        "lancens drop <one table> --dry-run (every table scanned for readers)",
        True,
        ("drop", "{table}", "--dry-run"),
        layouts=("flat",),
    ),
    Command(
        "drop-dry",
        "lancens drop ns000 --cascade --dry-run",
        True,
        ("drop", nested_namespace(0), "--cascade", "--dry-run"),
        layouts=("nested",),
    ),
    Command(
        "drop-cascade",
        "lancens drop ns000 --cascade --yes (N/100 tables)",
        True,
        ("drop", nested_namespace(0), "--cascade", "--yes"),
        layouts=("nested",),
        fresh=True,
    ),
    Command(
        "migrate-v1-dry",
        "lancens migrate-v1 --dry-run (V1 root)",
        True,
        ("migrate-v1", "--dry-run"),
        layouts=("flat",),
        root="v1",
        default=False,
    ),
    Command(
        "migrate-v1",
        "lancens migrate-v1 (V1 root)",
        True,
        ("migrate-v1",),
        layouts=("flat",),
        root="v1",
        fresh=True,
        default=False,
    ),
    Command(
        "ref-list",
        "reference list_tables (all pages)",
        False,
        ("list",),
        deep=("reference walk: list_namespaces + list_tables (all pages)", ("walk",)),
    ),
    Command("ref-describe", "reference describe_table <one table>", False, ("describe",)),
    Command(
        "fs-floor",
        "file system floor: stat + list _versions/ of every table",
        False,
        ("floor",),
        layouts=("flat",),
        default=False,
    ),
]
# the root layouts whose roots a command changes: they keep a copy of `__manifest` to go back to
RESTORED = {c.root_layout(layout) for c in COMMANDS if c.fresh for layout in c.layouts}


@dataclass
class Sample:
    """One cold process: wall seconds, peak RSS in KiB, exit code, killed by the timeout."""

    wall: float
    maxrss_kib: int
    code: int
    timed_out: bool
    stderr: str


@dataclass
class Result:
    """All runs of one command at one size."""

    samples: list[Sample] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def mib(self) -> float:
        return statistics.median(s.maxrss_kib for s in self.samples) / 1024

    @property
    def failed(self) -> Sample | None:
        return next((s for s in self.samples if s.code != 0 or s.timed_out), None)


def root_path(workdir: Path, layout: str, n: int) -> Path:
    """`scale-<N>` for flat (the name roots had before there were layouts), else with it."""
    return workdir / (f"scale-{n}" if layout == "flat" else f"scale-{layout}-{n}")


def marker(root: Path) -> Path:
    return root.with_name(root.name + MARKER_SUFFIX)


def link_sources(root: Path) -> Path:
    """Full copies of the template the root's tables link to (outside the root: no debris)."""
    return root.with_name(root.name + ".sources")


def meta(root: Path) -> Path:
    """Beside the root: its `__manifest` as built (RESTORED layouts) and TARGET_FILE."""
    return root.with_name(root.name + ".meta")


def target_table(root: Path, n: int) -> str:
    """The table `describe` shows: the build's choice, else flat's middle table."""
    path = meta(root) / TARGET_FILE
    return path.read_text().strip() if path.is_file() else table_name(n // 2)


def is_built(root: Path, n: int) -> bool:
    """A build finished for this size: the marker is written last."""
    path = marker(root)
    return root.is_dir() and path.is_file() and path.read_text().strip() == str(n)


def remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def linker(root: Path, template: Path) -> Callable[[str], None]:
    """`link(location)` makes `root/location` a hard-link copy of the template, from a fresh
    full copy of it (in `link_sources`) every LINKS_PER_COPY tables."""
    made = 0
    source = template

    def link(location: str) -> None:
        nonlocal made, source
        if made % LINKS_PER_COPY == 0:
            source = link_sources(root) / str(made // LINKS_PER_COPY) / "t.lance"
            shutil.copytree(template, source)
        shutil.copytree(source, root / location, copy_function=os.link)
        made += 1

    return link


def partitioned_seed(root: Path) -> Path:
    """A partitioned root made by the CLI: spec v1 `id` (identity) over the template's schema,
    and one partition written (id = 0). Returns the directory of that partition's table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    seed = meta(root) / "seed.parquet"
    seed.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [0, 0, 0], "name": ["a", "b", "c"]}), seed)
    for args in (("add-partition-spec", "-f", "id", "--schema"), ("write", "--from")):
        cmd = [*lancens_cmd(), "--root", str(root), *args, str(seed)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    (table,) = [p for p in root.iterdir() if p.name != MANIFEST_DIR]
    return table


def build_root(root: Path, n: int, workdir: Path, layout: str = "flat") -> float:
    """A disk-lean root of n tables (hard links), from scratch; returns the seconds it took."""
    os.environ.setdefault("LANCE_LOG", "error")
    started = time.perf_counter()
    for stale in (marker(root), root, link_sources(root), meta(root)):
        remove_path(stale)
    root.mkdir(parents=True)
    if layout == "partitioned":
        from lancens_cli.partition.rows import dotted

        link = linker(root, partitioned_seed(root))
        ids = register_partitions(root, n, link)
        (meta(root) / TARGET_FILE).write_text(dotted(ids[n // 2]) + "\n")
    else:
        link = linker(root, template_table(workdir))
    if layout == "nested":
        register_nested(root, n, link)
        meta(root).mkdir()
        (meta(root) / TARGET_FILE).write_text(".".join(nested_table(n // 2)) + "\n")
    elif layout in ("flat", "v1"):
        for i in range(n):
            link(f"{table_name(i)}.lance")
        if layout == "flat":
            register_tables(root, n)
    if layout in RESTORED and (root / MANIFEST_DIR).is_dir():
        meta(root).mkdir(exist_ok=True)
        shutil.copytree(root / MANIFEST_DIR, meta(root) / MANIFEST_DIR)
    marker(root).write_text(f"{n}\n")
    return time.perf_counter() - started


def build_in_child(root: Path, n: int, workdir: Path, layout: str) -> float:
    """`build_root` in a fresh process, so that this one stays small (see BUILD)."""
    here = str(Path(__file__).resolve().parent)
    cmd = [sys.executable, "-c", BUILD, here, str(root), str(n), str(workdir), layout]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if proc.returncode != 0:
        raise SystemExit(f"building {n} tables ({layout}) failed:\n{proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def restore_root(root: Path, before: set[str]) -> None:
    """Put back a root a command changed (untimed): the top-level entries it added go,
    `__manifest` is the build's again (a full copy), and the table directories it deleted are
    hard-link copies again, of a source copy with links to spare (its deleted ones freed
    them)."""
    after = set(os.listdir(root))
    for name in (after - before) | {MANIFEST_DIR}:
        remove_path(root / name)
    if (meta(root) / MANIFEST_DIR).is_dir():
        shutil.copytree(meta(root) / MANIFEST_DIR, root / MANIFEST_DIR)
    missing = sorted(before - after - {MANIFEST_DIR})
    if not missing:
        return
    sources = sorted(link_sources(root).glob("*/t.lance"))
    room = {
        s: LINKS_PER_COPY + 1 - next(f for f in s.rglob("*") if f.is_file()).stat().st_nlink
        for s in sources
    }
    for name in missing:
        source = next((s for s in sources if room[s] > 0), None)
        if source is None:  # not expected: the deleted directories freed their links
            source = link_sources(root) / f"restore-{len(sources)}" / "t.lance"
            shutil.copytree(sources[0], source)
            sources.append(source)
            room[source] = LINKS_PER_COPY
        shutil.copytree(source, root / name, copy_function=os.link)
        room[source] -= 1


def remove_root(root: Path) -> None:
    for path in (marker(root), root, link_sources(root), meta(root)):
        remove_path(path)


def run_cold(cmd: list[str], timeout: float, no_cache: bool = False) -> Sample:
    """One whole process; wait4 gives its own peak RSS (getrusage of children keeps a max).
    With `no_cache`, in an empty cache directory of its own (a first listing)."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as empty:
        env = {**ENV, "XDG_CACHE_HOME": empty} if no_cache else ENV
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-1500:].decode(errors="replace")
    return Sample(wall, usage.ru_maxrss, proc.returncode, killed.is_set(), tail)


def measure_size(
    root: Path, n: int, commands: list[Command], runs: int, timeout: float
) -> dict[str, Result]:
    """Round-robin over the commands, --runs times, so that outside load hits all alike; the
    commands that change the root after the others (round-robin too), the root put back after
    each of their runs. Their root is unmarked meanwhile: a run killed half-way rebuilds it."""
    results = {c.key: Result() for c in commands}
    steady = [c for c in commands if not c.fresh]
    fresh = [c for c in commands if c.fresh]
    for command in steady:
        for _ in range(command.warm_ups):
            sample = run_cold(command.argv(root, n), timeout, command.no_cache)
            print(f"#   {n:>9,} {command.label}: warm-up {sample.wall:.2f} s", flush=True)
            time.sleep(SETTLE_S)  # what a run records are directories older than this
    for _ in range(runs):
        for command in steady:
            run_one(command, root, n, results[command.key], timeout)
    if fresh:
        marker(root).unlink()
        for _ in range(runs):
            for command in fresh:
                before = set(os.listdir(root))
                run_one(command, root, n, results[command.key], timeout)
                restore_root(root, before)
        if not any(s.timed_out for c in fresh for s in results[c.key].samples):
            marker(root).write_text(f"{n}\n")  # a killed run may leave a table half deleted
    return results


def run_one(command: Command, root: Path, n: int, result: Result, timeout: float) -> None:
    """One timed cold run, printed as it ends (unless the command timed out before)."""
    if result.failed is not None and result.failed.timed_out:
        return
    sample = run_cold(command.argv(root, n), timeout, command.no_cache)
    result.samples.append(sample)
    state = "timed out" if sample.timed_out else f"exit {sample.code}"
    print(
        f"#   {n:>9,} {command.label}: {sample.wall:.2f} s, "
        f"{sample.maxrss_kib / 1024:.0f} MiB, {state}",
        flush=True,
    )
    if sample.code != 0 and not sample.timed_out:
        last = sample.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        print(f"#     stderr: {last[0][:300]}", flush=True)


def cells(result: Result | None) -> list[str]:
    """Wall and MiB, or why there is no figure."""
    if result is None or not result.samples:
        return ["skipped", ""]
    failed = result.failed
    if failed is not None and failed.timed_out:
        return [f">{failed.wall:.0f} (killed)", ""]
    wall = f"{result.wall:.3f}" + ("" if failed is None else f" (exit {failed.code})")
    return [wall, f"{result.mib:.0f}"]


def exponent(a: Result | None, b: Result | None, n1: int, n2: int) -> str:
    """log(t2/t1) / log(n2/n1), where both sizes have a figure."""
    if not (a and b and a.samples and b.samples) or any(
        r.failed is not None and r.failed.timed_out for r in (a, b)
    ):
        return ""
    return f"{math.log(b.wall / a.wall) / math.log(n2 / n1):.2f}"


def report(sizes: list[int], commands: list[Command], all_results: dict[int, dict]) -> None:
    """The one table: command, per size wall and MiB, then the exponents."""
    headers = ["command"]
    for n in sizes:
        headers += [f"wall s @{n:,}", f"peak MiB @{n:,}"]
    pairs = list(zip(sizes, sizes[1:], strict=False))
    headers += [f"exp {a:,}->{b:,}" for a, b in pairs]
    rows = []
    for command in commands:
        per_size = [all_results.get(n, {}).get(command.key) for n in sizes]
        row = [command.label]
        for result in per_size:
            row += cells(result)
        for (a, b), (ra, rb) in zip(pairs, zip(per_size, per_size[1:], strict=False), strict=True):
            row.append(exponent(ra, rb, a, b))
        rows.append(row)
    print_table(headers, rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="10000,30000",
        type=lambda s: sorted({int(x) for x in s.split(",") if x.strip()}),
        help="comma-separated table counts (e.g. 10000,100000 or 300000,1000000)",
    )
    parser.add_argument("--runs", type=int, default=1, help="cold runs per command (median)")
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="flat",
        help="root tables (flat), 100 namespaces of N/100 tables (nested), N partition tables",
    )
    keys = ",".join(c.key for c in COMMANDS)
    parser.add_argument(
        "--commands",
        default=None,
        help=f"a subset of {keys} (default: those of --layout but the migrate-v1 ones)",
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="roots live here")
    parser.add_argument("--keep", action="store_true", help="keep the roots this run built")
    parser.add_argument(
        "--timeout", type=float, default=300, help="kill a command after this many seconds"
    )
    args = parser.parse_args(argv)
    if args.commands is None:
        wanted = {c.key for c in COMMANDS if c.default and args.layout in c.layouts}
    else:
        wanted = {k.strip() for k in args.commands.split(",") if k.strip()}
    unknown = wanted - {c.key for c in COMMANDS}
    if unknown:
        parser.error(f"unknown --commands {sorted(unknown)}; known: {keys}")
    args.skipped = [c for c in COMMANDS if c.key in wanted and args.layout not in c.layouts]
    args.commands = [
        c.on_layout(args.layout) for c in COMMANDS if c.key in wanted and c not in args.skipped
    ]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    had_template = (workdir / "template-ns").exists()
    # What commands keep between runs (a big root's listing) lives beside the roots, not in
    # the user's own cache; emptied for each run, a command's cache starts as a user's first.
    ENV["XDG_CACHE_HOME"] = str(workdir / "cache")
    print(f"# bench_scale: {versions()}")
    print(f"# median of {args.runs} cold process(es); roots under {workdir}")
    print(f"# layout {args.layout}")
    for command in args.skipped:
        only = ", ".join(command.layouts)
        print(f"# skipped {command.key}: only on --layout {only}, not {args.layout}")
    built_here: list[Path] = []
    all_results: dict[int, dict[str, Result]] = {}
    given_up: set[str] = set()  # timed out at a smaller size
    load_before = load_average()
    try:
        for n in args.sizes:
            commands = [c for c in args.commands if c.key not in given_up]
            results: dict[str, Result] = {}
            layouts = dict.fromkeys(c.root_layout(args.layout) for c in commands)
            for layout in layouts:  # --layout's root, and v1's for migrate-v1
                root = root_path(workdir, layout, n)
                if is_built(root, n):
                    print(f"# reusing {n:,} tables ({layout}) in {root}")
                else:
                    took = build_in_child(root, n, workdir, layout)
                    built_here.append(root)
                    print(f"# built {n:,} tables ({layout}) in {root} in {took:.1f} s", flush=True)
                on_root = [c for c in commands if c.root_layout(args.layout) == layout]
                results.update(measure_size(root, n, on_root, args.runs, args.timeout))
            all_results[n] = results
            for key, result in results.items():
                if result.failed is not None and result.failed.timed_out:
                    given_up.add(key)
    finally:
        load_after = load_average()
        if not args.keep:
            for root in built_here:
                remove_root(root)
            if not had_template:
                shutil.rmtree(workdir / "template-ns", ignore_errors=True)
            if built_here and not any(workdir.iterdir()):
                workdir.rmdir()
    print()
    report(args.sizes, args.commands, all_results)
    print()
    print(f"# before: {load_before}; after: {load_after}")
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"# peak MiB counts from this process's own peak at the fork ({floor:.0f} MiB)")
    kept = "kept" if args.keep else "removed (those this run built)"
    print(f"# roots {kept}; {len(built_here)} built this run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
