#!/usr/bin/env python3
"""`lancens prune` against a per-table loop of `cleanup_old_versions`, and `__manifest` upkeep.

    python bench/bench_prune.py [--tables 500] [--versions 10] [--commits 500] [--workdir DIR]
    python bench/bench_prune.py --tables 10000 --commits 10000 --s3-tables 1000  # issue sizes
    python bench/bench_prune.py --s3-tables 300 --s3-latency-ms 0,25  # S3's request latency
    python bench/bench_prune.py --tables 300 --commits 0 --spark-master 'local[2]'
    python bench/bench_prune.py --tables 0 --commits 0 --clone-versions 1500

1. N root tables of V versions each (copies of one template table, registered in `__manifest`),
   copied afresh for each of `--cold-runs` runs (median; who goes first alternates). Cold
   processes, same retention (versions older than 1 s, the latest kept):
   - ours: `lancens prune --older-than 1s --force --yes --json`
   - loop: `python -c` opening each table and calling `cleanup_old_versions(older_than=1s)`,
     one after the other (what a cron job without lancens does)
   Both must remove the same number of versions. Then, with nothing left to do, both again
   (best of 3), and `lancens prune --full` (the record ignored).
   With `--spark-master URL`, a third copy is pruned with `--master URL` (the per-table work
   as Spark tasks; the cold process starts Spark too) and must remove as many versions.
2. `__manifest` after C commits (one `create namespace` each): its files and bytes, and a cold
   `lancens ls --json`, before and after `prune`.
3. With `--memory-tables N[,M...]`: peak resident memory of `lancens prune` over N synthetic
   one-version tables (hard links of one template table, all registered), nothing to remove.
4. With `--clone-versions N`: one table appended to N times, a shallow clone of its version
   N/2, then the table compacted; built twice. `lancens prune` (which must keep the clone's
   version) against `cleanup_old_versions` on both tables, and whether the clone still reads as
   before after each.

Prints figures; always exits 0. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ENV,
    fmt_s,
    lancens_cmd,
    load_average,
    print_table,
    run_once,
    table_name,
    versions,
)

os.environ.setdefault("LANCE_LOG", "error")

LOOP = """
import sys, lance
from datetime import timedelta
removed = 0
for line in open(sys.argv[1]):
    ds = lance.dataset(line.strip())
    stats = ds.cleanup_old_versions(older_than=timedelta(seconds=1),
                                    error_if_tagged_old_versions=False)
    removed += stats.old_versions
print(removed)
"""


def template(workdir: Path, n_versions: int) -> Path:
    import lance
    import pyarrow as pa

    path = workdir / f"template-{n_versions}" / "t.lance"
    if not path.exists():
        for i in range(n_versions):
            data = pa.table({"id": pa.array([i] * 100, pa.int64()), "s": [f"v{i}"] * 100})
            lance.write_dataset(data, path, mode="append" if i else "create")
    return path


def build_root(root: Path, source: Path, n: int) -> None:

    root.mkdir(parents=True)
    for i in range(n):
        shutil.copytree(source, root / f"{table_name(i)}.lance")
    build_root_rows(root, n)


def build_root_rows(root: Path, n: int) -> None:
    """Register `<name>.lance` directories 0..n-1 in `__manifest`, in one commit."""
    from lancens_cli.service.namespace import Namespace

    ns = Namespace.from_properties({"root": str(root)})

    def plan(snapshot, edit):
        for i in range(n):
            name = table_name(i)
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


def tree_size(path: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(dirpath, name))
    return files, size


def bench_tables(workdir: Path, n: int, n_versions: int, cold_runs: int = 3) -> None:
    source = template(workdir, n_versions)
    base, ours, loop = (workdir / f"{kind}-{n}" for kind in ("base", "ours", "loop"))
    started = time.perf_counter()
    build_root(base, source, n)
    print(f"built {n} tables of {n_versions} versions in {time.perf_counter() - started:.1f} s")
    listing = workdir / f"tables-{n}.txt"
    listing.write_text("".join(f"{loop / f'{table_name(i)}.lance'}\n" for i in range(n)))
    cmd = [*lancens_cmd(), "--root", str(ours), "prune", "--older-than", "1s", "--force"]
    walls: dict[str, list[float]] = {"ours": [], "loop": []}
    cpus: dict[str, list[float]] = {"ours": [], "loop": []}
    for run in range(cold_runs):  # each on fresh copies, in turn, who goes first alternating
        for root in (ours, loop):
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(base, root, symlinks=True)
        time.sleep(1.5)
        order = ("ours", "loop") if run % 2 == 0 else ("loop", "ours")
        for who in order:
            if who == "ours":
                wall, cpu, proc = run_once([*cmd, "--yes", "--json"])
                report = json.loads(proc.stdout)
                removed_ours = report["totals"]["versions_removed"] - len(
                    report["manifest"]["versions_removed"] if report["manifest"] else []
                )
            else:
                wall, cpu, loop_proc = run_once([sys.executable, "-c", LOOP, str(listing)])
                removed_loop = int(loop_proc.stdout.strip())
            walls[who].append(wall)
            cpus[who].append(cpu)
    wall_ours, wall_loop = median(walls["ours"]), median(walls["loop"])
    print_table(
        ["cold run (median of fresh copies)", "wall", "cpu", "walls", "versions removed"],
        [
            [
                "lancens prune",
                fmt_s(wall_ours),
                fmt_s(median(cpus["ours"])),
                " ".join(f"{w:.2f}" for w in walls["ours"]),
                removed_ours,
            ],
            [
                "cleanup_old_versions loop",
                fmt_s(wall_loop),
                fmt_s(median(cpus["loop"])),
                " ".join(f"{w:.2f}" for w in walls["loop"]),
                removed_loop,
            ],
        ],
    )
    print(f"speed-up: {wall_loop / wall_ours:.2f}x (cold run, medians of {cold_runs})")
    if removed_loop != removed_ours:
        print(f"WARNING: removed {removed_ours} (ours) vs {removed_loop} (loop)")
    # Nothing to do any more, as cron finds it hours later: the directories have settled.
    time.sleep(2.5)
    looking = run_once([*cmd, "--yes", "--json"])[0]  # reads the catalog; changes nothing
    time.sleep(0.5)
    again_ours = [run_once([*cmd, "--yes", "--json"])[0] for _ in range(3)]  # from the record
    again_full = [run_once([*cmd, "--full", "--yes", "--json"])[0] for _ in range(3)]
    again_loop = [run_once([sys.executable, "-c", LOOP, str(listing)])[0] for _ in range(3)]
    best = {"record": min(again_ours), "full": min(again_full), "loop": min(again_loop)}
    print_table(
        ["again, nothing to do (best of 3)", "wall"],
        [
            ["lancens prune, after a run that changed nothing", fmt_s(best["record"])],
            ["lancens prune, the first run with nothing to do (looks)", fmt_s(looking)],
            ["lancens prune --full", fmt_s(best["full"])],
            ["cleanup_old_versions loop", fmt_s(best["loop"])],
        ],
    )
    print(
        f"speed-up, nothing to do: {best['loop'] / best['record']:.2f}x the loop "
        f"(goal >= 10x), {best['loop'] / looking:.2f}x for the first such run, "
        f"{best['full'] / best['record']:.2f}x a full run"
    )
    for root in (base, ours, loop):
        shutil.rmtree(root)


def bench_spark(workdir: Path, n: int, n_versions: int, master: str) -> None:
    """Local threads against Spark tasks on the same kind of root (both cold processes)."""
    source = template(workdir, n_versions)
    roots = {"threads": workdir / f"threads-{n}", "spark": workdir / f"spark-{n}"}
    for root in roots.values():
        build_root(root, source, n)
    time.sleep(1.5)
    rows = []
    removed = {}
    for name, root in roots.items():
        cmd = [*lancens_cmd(), "--root", str(root), "prune", "--older-than", "1s", "--force"]
        extra = ["--master", master] if name == "spark" else []
        wall, cpu, proc = run_once([*cmd, "--yes", "--json", *extra])
        report = json.loads(proc.stdout)
        removed[name] = report["totals"]["versions_removed"]
        rows.append([f"prune ({name})", fmt_s(wall), fmt_s(cpu), removed[name]])
    print_table(["run", "wall", "cpu (processes reaped)", "versions removed"], rows)
    if removed["threads"] != removed["spark"]:
        print(f"WARNING: removed {removed['threads']} (threads) vs {removed['spark']} (spark)")
    for root in roots.values():
        shutil.rmtree(root)


LOOP_S3 = """
import json, sys, lance
from datetime import timedelta
options = json.loads(sys.argv[2])
removed = 0
for line in open(sys.argv[1]):
    ds = lance.dataset(line.strip(), storage_options=options)
    stats = ds.cleanup_old_versions(older_than=timedelta(seconds=1),
                                    error_if_tagged_old_versions=False)
    removed += stats.old_versions
print(removed)
"""


def request_kind(environ: dict) -> str:
    """What one S3 request asked, in words: its verb and the kind of object or listing."""
    method, query = environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
    key = environ.get("PATH_INFO", "").split("/", 2)[-1]  # path-style: /bucket/key
    if method == "POST" and "delete" in query:
        return "DeleteObjects (batch)"
    if method == "GET" and ("list-type" in query or "prefix=" in query or not key):
        return "LIST"
    name = key.rsplit("/", 1)[-1]
    if "__manifest" in key:
        what = "__manifest"
    elif "/_refs/" in key:
        what = "_refs"
    elif name.endswith(".manifest"):
        what = "version manifest"
    elif name.endswith(".json") and "_versions" in key:
        what = "latest_version_hint"
    elif name.endswith(".txn"):
        what = "transaction file"
    elif "/data/" in key:
        what = "data file"
    elif ".lancens" in key:
        what = "lancens' own file"
    else:
        what = "other"
    return f"{method} {what}"


# S3 Standard request prices (us-east-1, USD per 1,000 requests): LIST, PUT, COPY and POST
# (a DeleteObjects batch is a POST) at one price, GET and HEAD at a twelfth of it; DELETE is free
PRICE_PER_1000 = {"LIST": 0.005, "PUT": 0.005, "POST": 0.005, "GET": 0.0004, "HEAD": 0.0004}


def request_cost(kinds: Counter) -> float:
    """What the requests counted by `request_kind` cost on S3 Standard, in USD."""
    price = dict(PRICE_PER_1000, DeleteObjects=PRICE_PER_1000["POST"])
    return sum(n * price.get(kind.split()[0], 0.0) / 1000 for kind, n in kinds.items())


def moto_server(latency_ms: float):
    """A moto S3 server on loopback, answering one request at a time; with `latency_ms`, each
    request waits that long first (a sleep, so concurrent requests wait side by side, as on S3
    itself, whose per-request latency of tens of milliseconds is what a namespace walk waits
    on)."""
    from moto.moto_server import threaded_moto_server
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    # moto 5.0 had its own request handler; later versions use werkzeug's
    handler = getattr(threaded_moto_server, "MotoRequestHandler", None)
    handler_option = {"request_handler": handler} if handler else {}

    class Server(ThreadedMotoServer):
        requests = 0  # every request answered, for requests per table
        kinds: Counter = Counter()  # the same, by what each asked (`request_kind`)

        def _server_entry(self) -> None:
            inner = DomainDispatcherApplication(create_backend_app)
            serial = threading.Lock()

            def app(environ, start_response):
                time.sleep(latency_ms / 1000)
                # moto's listing is not safe against a concurrent delete (it answers 500 when a
                # key goes mid-listing); S3 is. So moto works one request at a time, while the
                # latency of concurrent requests passes side by side, as on S3.
                with serial:
                    Server.requests += 1
                    Server.kinds[request_kind(environ)] += 1
                    return inner(environ, start_response)

            self._server = make_server(self._ip_address, self._port, app, True, **handler_option)
            self._server_ready_event.set()
            self._server.serve_forever()

    return Server(ip_address="127.0.0.1", port=0, verbose=False)


def bench_s3(workdir: Path, n: int, n_versions: int, latency_ms: float = 0) -> None:
    """The same comparison on a moto S3 server on loopback."""
    import logging

    import boto3

    from lancens_cli.service.namespace import Namespace

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = moto_server(latency_ms)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    options = {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": "bench",
        "secret_access_key": "bench-secret",
        "allow_http": "true",
    }
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench-secret",
    )
    # moto keeps buckets per process, and scans a whole bucket for every listing: each root gets
    # a bucket of its own, so neither run pays for the other's keys
    bucket = f"bench-{latency_ms:g}ms".replace(".", "-")
    buckets = {prefix: f"{bucket}-{prefix}" for prefix in ("ours", "loop")}
    for name in buckets.values():
        client.create_bucket(Bucket=name)
    source = template(workdir, n_versions)
    files = [(p, p.relative_to(source).as_posix()) for p in source.rglob("*") if p.is_file()]
    started = time.perf_counter()
    from concurrent.futures import ThreadPoolExecutor

    for prefix in ("ours", "loop"):
        uploads = [
            (str(path), buckets[prefix], f"{prefix}/{table_name(i)}.lance/{rel}")
            for i in range(n)
            for path, rel in files
        ]
        with ThreadPoolExecutor(max_workers=16) as pool:  # the setup, not what is measured
            list(pool.map(lambda item: client.upload_file(*item), uploads))
        props = {"root": f"s3://{buckets[prefix]}/{prefix}"}
        props.update({f"storage.{k}": v for k, v in options.items()})
        ns = Namespace.from_properties(props)

        def plan(snapshot, edit):
            for i in range(n):
                name = table_name(i)
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
    print(f"S3 (moto): built 2 x {n} tables in {time.perf_counter() - started:.1f} s")
    listing = workdir / f"s3-tables-{n}.txt"
    loop_root = f"s3://{buckets['loop']}/loop"
    listing.write_text("".join(f"{loop_root}/{table_name(i)}.lance\n" for i in range(n)))
    time.sleep(1.5)
    storage = [arg for k, v in options.items() for arg in ("-s", f"{k}={v}")]
    root = f"s3://{buckets['ours']}/ours"
    cmd = [*lancens_cmd(), "--root", root, *storage, "prune", "--older-than", "1s"]

    kinds: dict[str, Counter] = {}  # what each cold run asked, by kind

    def counted(command: list[str], name: str | None = None):
        """One run, and the requests per table it sent (by kind, under `name`)."""
        before, kinds_before = server.requests, Counter(server.kinds)
        done = run_once(command)
        if name is not None:
            kinds[name] = Counter(server.kinds) - kinds_before
        return (*done, f"{(server.requests - before) / n:.2f}")

    wall_ours, cpu_ours, proc, asked_ours = counted([*cmd, "--force", "--yes", "--json"], "ours")
    report = json.loads(proc.stdout)
    loop = [sys.executable, "-c", LOOP_S3, str(listing), json.dumps(options)]
    wall_loop, cpu_loop, loop_proc, asked_loop = counted(loop, "loop")
    removed_ours = report["totals"]["versions_removed"] - len(
        report["manifest"]["versions_removed"] if report["manifest"] else []
    )
    print_table(
        ["S3 run", "wall", "cpu", "versions removed", "requests per table"],
        [
            ["lancens prune", fmt_s(wall_ours), fmt_s(cpu_ours), removed_ours, asked_ours],
            [
                "cleanup_old_versions loop",
                fmt_s(wall_loop),
                fmt_s(cpu_loop),
                loop_proc.stdout.strip(),
                asked_loop,
            ],
        ],
    )
    print(f"S3 speed-up: {wall_loop / wall_ours:.2f}x with {latency_ms:g} ms per request (cold)")
    print_table(
        ["cold run: requests per table, by kind", "lancens prune", "loop"],
        [
            [kind, f"{kinds['ours'][kind] / n:.2f}", f"{kinds['loop'][kind] / n:.2f}"]
            for kind in sorted(set(kinds["ours"]) | set(kinds["loop"]))
        ],
    )
    ours_cost, loop_cost = request_cost(kinds["ours"]), request_cost(kinds["loop"])
    print(
        f"cold run, S3 Standard request prices: ${ours_cost * 1e6 / n:.1f} vs "
        f"${loop_cost * 1e6 / n:.1f} per million tables ({loop_cost / ours_cost:.2f}x)"
    )
    again_ours, _, _, asked_again = counted([*cmd, "--force", "--yes", "--json"])
    again_full, _, _, asked_full = counted([*cmd, "--force", "--full", "--yes", "--json"])
    again_loop, _, _, asked_again_loop = counted(loop)
    print_table(
        ["S3 again, nothing to do", "wall", "requests per table"],
        [
            ["lancens prune (the last run's record)", fmt_s(again_ours), asked_again],
            ["lancens prune --full", fmt_s(again_full), asked_full],
            ["cleanup_old_versions loop", fmt_s(again_loop), asked_again_loop],
        ],
    )
    print(f"S3 speed-up, nothing to do: {again_loop / again_ours:.2f}x the loop (goal >= 20x)")
    server.stop()


PEAK = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True)
if proc.returncode:
    sys.exit(proc.stderr.decode()[-2000:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def bench_memory(workdir: Path, sizes: list[int]) -> None:
    """Peak RSS of a prune over many one-version tables (kept: nothing to remove)."""
    source = template(workdir, 1)
    files = [p for p in source.rglob("*") if p.is_file()]
    rows = []
    for n in sizes:
        root = workdir / f"memory-{n}"
        started = time.perf_counter()
        for i in range(n):
            if i % 50_000 == 0 and i:  # a file takes at most 65,000 hard links
                source = workdir / f"template-1-copy-{n}-{i}" / "t.lance"
                shutil.copytree(template(workdir, 1), source)
                files = [p for p in source.rglob("*") if p.is_file()]
            target = root / f"{table_name(i)}.lance"
            for path in files:
                link = target / path.relative_to(source)
                link.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, link)
        build_root_rows(root, n)
        print(f"built {n} one-version tables in {time.perf_counter() - started:.1f} s")
        cmd = [*lancens_cmd(), "--root", str(root), "prune", "--older-than", "1s", "--force"]
        wall, _cpu, proc = run_once([sys.executable, "-c", PEAK, *cmd, "--yes", "--json"])
        peak_mib = int(proc.stdout.strip()) / 1024
        rows.append([n, fmt_s(wall), f"{peak_mib:.0f} MiB", f"{peak_mib * 1024 * 1024 / n:.0f}"])
        shutil.rmtree(root)
    print_table(["tables", "prune wall", "peak RSS", "bytes per table"], rows)


def build_cloned(root: Path, n: int) -> Path:
    """`src.lance` appended to n times, `copy.lance` a shallow clone of its version n // 2, then
    the source compacted (its old files are read by old versions and the clone alone)."""
    import lance
    import pyarrow as pa

    source = root / "src.lance"
    for i in range(n):
        rows = pa.table({"id": pa.array([i], pa.int64())})
        lance.write_dataset(rows, source, mode="append" if i else "create")
    lance.dataset(str(source)).shallow_clone(str(root / "copy.lance"), max(1, n // 2))
    lance.dataset(str(source)).optimize.compact_files(target_rows_per_fragment=1_000_000)
    return root / "copy.lance"


def clone_reads(clone: Path, expected) -> str:
    import lance

    try:
        return "yes" if lance.dataset(str(clone)).to_table().equals(expected) else "other rows"
    except Exception as exc:  # noqa: BLE001 - the figure is whether it reads
        return f"no ({type(exc).__name__})"


def bench_clone(workdir: Path, n: int) -> None:
    import lance

    started = time.perf_counter()
    ours, loop = (
        build_cloned(workdir / f"clone-ours-{n}", n),
        build_cloned(workdir / f"clone-loop-{n}", n),
    )
    expected = lance.dataset(str(ours)).to_table()
    took = time.perf_counter() - started
    print(f"built 2 x a table of {n} versions with a shallow clone in {took:.1f} s")
    time.sleep(1.5)
    cmd = [*lancens_cmd(), "--root", str(ours.parent), "prune", "--older-than", "1s", "--force"]
    wall_ours, cpu_ours, proc = run_once([*cmd, "--yes", "--json"])
    removed_ours = json.loads(proc.stdout)["totals"]["versions_removed"]
    listing = loop.parent / "tables.txt"
    listing.write_text(f"{loop.parent / 'src.lance'}\n{loop}\n")
    wall_loop, cpu_loop, loop_proc = run_once([sys.executable, "-c", LOOP, str(listing)])
    print_table(
        ["run", "wall", "cpu", "versions removed", "clone reads after"],
        [
            [
                "lancens prune",
                fmt_s(wall_ours),
                fmt_s(cpu_ours),
                removed_ours,
                clone_reads(ours, expected),
            ],
            [
                "cleanup_old_versions on both",
                fmt_s(wall_loop),
                fmt_s(cpu_loop),
                loop_proc.stdout.strip(),
                clone_reads(loop, expected),
            ],
        ],
    )
    ratio = wall_loop / wall_ours
    print(f"lancens prune / loop wall: {ratio:.2f}x (the loop keeps no clone's version)")


def bench_manifest(workdir: Path, commits: int) -> None:
    from lancens_cli.service.catalog.create import namespace_row
    from lancens_cli.service.namespace import Namespace

    root = workdir / f"manifest-{commits}"
    root.mkdir()
    ns = Namespace.from_properties({"root": str(root)})
    started = time.perf_counter()
    for i in range(commits):
        ns.manifest.mutate(lambda snapshot, edit, i=i: edit.add(namespace_row(f"ns{i:06d}")))
    print(f"{commits} __manifest commits in {time.perf_counter() - started:.1f} s")
    ls = [*lancens_cmd(), "--root", str(root), "ls", "--json"]

    def cold_ls() -> float:
        run_once(ls)  # warm the page cache and bytecode once
        return min(run_once(ls)[0] for _ in range(3))

    files_before, bytes_before = tree_size(root / "__manifest")
    ls_before = cold_ls()
    time.sleep(1.5)
    prune = [*lancens_cmd(), "--root", str(root), "prune", "--older-than", "1s", "--force"]
    wall, _cpu, _proc = run_once([*prune, "--yes"])
    files_after, bytes_after = tree_size(root / "__manifest")
    ls_after = cold_ls()
    print_table(
        ["__manifest", "files", "bytes", "cold ls --json"],
        [
            ["before prune", files_before, bytes_before, fmt_s(ls_before)],
            ["after prune", files_after, bytes_after, fmt_s(ls_after)],
        ],
    )
    print(f"prune of __manifest took {fmt_s(wall)}")
    shutil.rmtree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument(
        "--cold-runs", type=int, default=3, help="cold runs of each, on fresh copies (median)"
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--s3-tables", type=int, default=0, help="also on moto S3 (e.g. 1000)")
    parser.add_argument("--spark-master", default=None, help="also prune with --master URL")
    parser.add_argument(
        "--s3-latency-ms",
        default="0",
        help="added per S3 request, comma-separated runs (e.g. 0,25; S3 itself: tens of ms)",
    )
    parser.add_argument(
        "--memory-tables", default="", help="peak RSS at these sizes, e.g. 10000,100000"
    )
    parser.add_argument(
        "--clone-versions", type=int, default=0, help="a table of N versions with a shallow clone"
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-prune-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(versions())
    print(load_average())
    assert ENV  # cold processes run with the shared bench environment
    if args.tables:
        bench_tables(workdir, args.tables, args.versions, args.cold_runs)
    if args.commits:
        bench_manifest(workdir, args.commits)
    if args.spark_master:
        bench_spark(workdir, args.tables, args.versions, args.spark_master)
    if args.s3_tables:
        for latency in [float(x) for x in args.s3_latency_ms.split(",")]:
            bench_s3(workdir / f"s3-{latency:g}ms", args.s3_tables, args.versions, latency)
    if args.memory_tables:
        bench_memory(workdir, [int(n) for n in args.memory_tables.split(",")])
    if args.clone_versions:
        bench_clone(workdir, args.clone_versions)
    print(load_average())


if __name__ == "__main__":
    main()
