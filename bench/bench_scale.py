#!/usr/bin/env python3
"""How namespace-wide commands grow with the number of tables: wall time and peak memory.

    python bench/bench_scale.py [--sizes 10000,30000] [--runs 1] [--workdir DIR] [--keep]
    python bench/bench_scale.py --commands ls-limit,ls-json,ref-list --runs 3
    python bench/bench_scale.py --sizes 300000,1000000 --keep  # big roots, reused next time

1. For each size, a flat V2 root of that many root tables: `<name>.lance` directories that are
   hard-link copies of one small Lance dataset (`template_table`; a fresh full copy every
   60,000 tables, since ext4 allows at most 65,000 links to a file) and their `__manifest`
   rows, registered in ONE commit through lancens' own store. Roots live under --workdir and
   are reused when their marker file says a build finished; roots this run built are removed
   at the end unless --keep.
2. Each command as a whole cold process, `lancens --root R ...` with stdout to /dev/null
   (median of --runs, no warm-up, commands interleaved): wall seconds and the process's peak
   resident memory (`ru_maxrss` from `os.wait4`; processes it starts are not counted). A
   command over --timeout seconds is killed, reported, and not run at larger sizes.
   A command with warm-ups runs that many times untimed first: a prune's cron run with
   nothing to do is measured after the runs that leave its record.
3. Beside them, what a user would pick instead: the reference `lance.namespace.
   DirectoryNamespace`'s `list_tables` of the root (every page) and `describe_table` of one
   table, each a `python -c` process (it checks the count itself; a failure is reported).

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
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ENV,
    lancens_cmd,
    load_average,
    print_table,
    register_tables,
    table_name,
    template_table,
    versions,
)

LINKS_PER_COPY = 60_000  # under ext4's 65,000 links per file
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "lancens-bench-scale"
MARKER_SUFFIX = ".built"
SETTLE_S = 2.5  # a prune records a directory's time once it is this old (prune's SETTLE, 2 s)

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

# The build runs in a child: a parent that imported Lance would hand its resident size to every
# command it starts (Linux keeps the peak RSS of the image an exec replaces in ru_maxrss).
BUILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from bench_scale import build_root
print(build_root(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])))
"""

REF_DESCRIBE = r"""
import sys
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
ns = DirectoryNamespace(root=sys.argv[1])
response = ns.describe_table(ln.DescribeTableRequest(id=[sys.argv[2]]))
print(response.to_json())
"""


@dataclass(frozen=True)
class Command:
    """One measured command: `argv(root, n)` builds it for a root of n tables."""

    key: str
    label: str
    ours: bool
    args: tuple[str, ...]
    warm_ups: int = 0  # untimed runs first, at each size (a prune's record, its quiet state)

    def argv(self, root: Path, n: int) -> list[str]:
        """Ours through the console script; the reference as `python -c SCRIPT root arg`."""
        if self.ours:
            tail = [a.replace("{table}", table_name(n // 2)) for a in self.args]
            return [*lancens_cmd(), "--root", str(root), *tail]
        script = REF_LIST if self.key == "ref-list" else REF_DESCRIBE
        extra = str(n) if self.key == "ref-list" else table_name(n // 2)
        return [sys.executable, "-c", script, str(root), extra]


COMMANDS = [
    Command("ls-limit", "lancens ls --limit 100", True, ("ls", "--limit", "100")),
    Command("ls-json", "lancens ls --json", True, ("ls", "--json")),
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
    Command("ref-list", "reference list_tables (all pages)", False, ()),
    Command("ref-describe", "reference describe_table <one table>", False, ()),
]


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


def marker(root: Path) -> Path:
    return root.with_name(root.name + MARKER_SUFFIX)


def link_sources(root: Path) -> Path:
    """Full copies of the template the root's tables link to (outside the root: no debris)."""
    return root.with_name(root.name + ".sources")


def is_built(root: Path, n: int) -> bool:
    """A build finished for this size: the marker is written last."""
    path = marker(root)
    return root.is_dir() and path.is_file() and path.read_text().strip() == str(n)


def build_root(root: Path, n: int, workdir: Path) -> float:
    """A disk-lean root of n tables (hard links), from scratch; returns the seconds it took."""
    os.environ.setdefault("LANCE_LOG", "error")
    started = time.perf_counter()
    template = template_table(workdir)
    for stale in (marker(root), root, link_sources(root)):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    root.mkdir(parents=True)
    source = template
    for i in range(n):
        if i % LINKS_PER_COPY == 0:
            source = link_sources(root) / str(i // LINKS_PER_COPY) / "t.lance"
            shutil.copytree(template, source)
        shutil.copytree(source, root / f"{table_name(i)}.lance", copy_function=os.link)
    register_tables(root, n)
    marker(root).write_text(f"{n}\n")
    return time.perf_counter() - started


def build_in_child(root: Path, n: int, workdir: Path) -> float:
    """`build_root` in a fresh process, so that this one stays small (see BUILD)."""
    here = str(Path(__file__).resolve().parent)
    cmd = [sys.executable, "-c", BUILD, here, str(root), str(n), str(workdir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if proc.returncode != 0:
        raise SystemExit(f"building {n} tables failed:\n{proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def remove_root(root: Path) -> None:
    for path in (marker(root), root, link_sources(root)):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def run_cold(cmd: list[str], timeout: float) -> Sample:
    """One whole process; wait4 gives its own peak RSS (getrusage of children keeps a max)."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=ENV
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
    """Round-robin over the commands, --runs times, so that outside load hits all alike."""
    results = {c.key: Result() for c in commands}
    for command in commands:
        for _ in range(command.warm_ups):
            sample = run_cold(command.argv(root, n), timeout)
            print(f"#   {n:>9,} {command.label}: warm-up {sample.wall:.2f} s", flush=True)
            time.sleep(SETTLE_S)  # what a run records are directories older than this
    for _ in range(runs):
        for command in commands:
            result = results[command.key]
            if result.failed is not None and result.failed.timed_out:
                continue
            sample = run_cold(command.argv(root, n), timeout)
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
    return results


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
    keys = ",".join(c.key for c in COMMANDS)
    parser.add_argument("--commands", default=keys, help=f"a subset of {keys}")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="roots live here")
    parser.add_argument("--keep", action="store_true", help="keep the roots this run built")
    parser.add_argument(
        "--timeout", type=float, default=300, help="kill a command after this many seconds"
    )
    args = parser.parse_args(argv)
    wanted = {k.strip() for k in args.commands.split(",") if k.strip()}
    unknown = wanted - {c.key for c in COMMANDS}
    if unknown:
        parser.error(f"unknown --commands {sorted(unknown)}; known: {keys}")
    args.commands = [c for c in COMMANDS if c.key in wanted]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    had_template = (workdir / "template-ns").exists()
    print(f"# bench_scale: {versions()}")
    print(f"# median of {args.runs} cold process(es), no warm-up; roots under {workdir}")
    built_here: list[Path] = []
    all_results: dict[int, dict[str, Result]] = {}
    given_up: set[str] = set()  # timed out at a smaller size
    load_before = load_average()
    try:
        for n in args.sizes:
            root = workdir / f"scale-{n}"
            if is_built(root, n):
                print(f"# reusing {n:,} tables in {root}")
            else:
                took = build_in_child(root, n, workdir)
                built_here.append(root)
                print(f"# built {n:,} tables in {root} in {took:.1f} s", flush=True)
            commands = [c for c in args.commands if c.key not in given_up]
            results = measure_size(root, n, commands, args.runs, args.timeout)
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
