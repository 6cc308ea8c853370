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
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("LANCENS_")},
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
