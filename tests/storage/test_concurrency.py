"""Concurrency: several real OS processes creating tables and namespaces in one namespace.

Two kinds of process are used:

* service workers: `python -c WORKER` processes that build a `Namespace` and call
  `lancens_cli.service.catalog.create.create_table` for each of their names;
* CLI processes: either plain `python -m lancens_cli ...` subprocesses, or a pre-warmed process
  that imports the CLI, waits at a start line and then runs `lancens_cli.cli.app.main()` with the
  given argv (the real CLI, exit code included, without the ~1 s import skew between racers).

Every worker of a run waits for one "go" file (a barrier across processes), so they start
together. Afterwards the namespace is checked from the outside: `lancens ls -R --json`, the raw
`__manifest` rows and its whole version history, every table directory opened with pylance, no
orphan directories at the root and no data files in `__manifest/data/` that no manifest version
references (the staged files of failed commits must be removed).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from helpers import Root, child_names, object_tags, run_cli

pytestmark = pytest.mark.slow

PROCESS_TIMEOUT = 180
MANIFEST = "__manifest"

# One script for every worker process; argv[1] is a JSON spec. A worker runs `rounds` rounds; in
# each it says it is ready, waits for the round's "go" file, does the work and writes a result
# file. mode "cli": each round is one full `lancens` run through `lancens_cli.cli.app.main()`
# (argv, exit code and stderr as a user sees them). mode "service": create_table() for each name.
WORKER = r"""
import contextlib, io, json, os, sys, time, zlib
spec = json.loads(sys.argv[1])
os.environ.setdefault("LANCE_LOG", "error")
import pyarrow as pa
import lance  # noqa: F401  (warm up before the start line)
sync, me = spec["sync"], spec["index"]


def wait_for_go(r):
    open(os.path.join(sync, f"ready-{me}-{r}"), "w").close()
    go = os.path.join(sync, f"go-{r}")
    deadline = time.monotonic() + 150
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.stderr.write("worker: no go signal\n")
            sys.exit(99)
        time.sleep(0.001)


def report(r, result):
    path = os.path.join(sync, f"result-{me}-{r}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(result, handle)
    os.rename(path + ".tmp", path)


def rows_for(name):
    return 1 + zlib.crc32(name.encode()) % 7


if spec["mode"] == "cli":
    from lancens_cli.cli.app import main
    import lancens_cli.service.catalog.create, lancens_cli.store.manifest  # noqa: F401,E401
    import lancens_cli.store.sources  # noqa: F401
    if spec.get("remote"):
        import gcsfs, s3fs  # noqa: F401,E401
    for r, argv in enumerate(spec["rounds"]):
        wait_for_go(r)
        sys.argv = ["lancens", *argv]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        report(r, {"exit": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
    sys.exit(0)

from lancens_cli.errors import LancensError
from lancens_cli.models import Identifier
from lancens_cli.service.catalog.create import create_table
from lancens_cli.service.namespace import Namespace

ns = Namespace.from_properties(spec["properties"])
retries = []
ns.manifest.on_retry = retries.append
ns.require_root()  # warm up the file system client too
for r, names in enumerate(spec["rounds"]):
    tables = {}
    for name in names:
        n = rows_for(name)
        tables[name] = pa.table({"id": list(range(n)), "name": [name] * n})
    wait_for_go(r)
    started = time.monotonic()
    results = []
    for name in names:
        try:
            changes = create_table(ns, Identifier.parse(name), data=tables[name])
            results.append({"name": name, "exit": 0, "location": changes.changes[0].location})
        except LancensError as exc:
            results.append({"name": name, "exit": exc.exit_code, "error": exc.name,
                            "message": exc.message})
        except Exception as exc:
            results.append({"name": name, "exit": 1, "error": type(exc).__name__,
                            "message": str(exc)})
    report(r, {"results": results, "retries": len(retries),
               "seconds": time.monotonic() - started})
"""


def rows_for(name: str) -> int:
    """Row count of the table a worker writes for `name` (same formula as in WORKER)."""
    return 1 + zlib.crc32(name.encode()) % 7


def _env() -> dict[str, str]:
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    env.pop("LANCENS_ROOT", None)
    return env


def _wait_for(paths: list[Path], procs: list[subprocess.Popen], what: str) -> None:
    deadline = time.monotonic() + PROCESS_TIMEOUT
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None and proc.returncode != 0:
                raise AssertionError(
                    f"a worker died while {what}: exit {proc.returncode}: "
                    f"{proc.stderr.read()[-3000:]}"
                )
        assert time.monotonic() < deadline, f"timed out while {what}"
        time.sleep(0.005)


def _run_together(specs: list[dict], sync_dir: Path) -> list[list[dict]]:
    """Start one worker per spec; release them together for each round; wait for all.

    Returns results[round][worker].
    """
    sync_dir.mkdir(parents=True, exist_ok=True)
    rounds = len(specs[0]["rounds"])
    assert all(len(spec["rounds"]) == rounds for spec in specs)
    procs = []
    for i, spec in enumerate(specs):
        spec = {**spec, "sync": str(sync_dir), "index": i}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, json.dumps(spec)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                env=_env(),
            )
        )
    try:
        results = []
        for r in range(rounds):
            _wait_for(
                [sync_dir / f"ready-{i}-{r}" for i in range(len(specs))],
                procs,
                f"getting ready for round {r}",
            )
            (sync_dir / f"go-{r}").touch()
            files = [sync_dir / f"result-{i}-{r}.json" for i in range(len(specs))]
            _wait_for(files, procs, f"running round {r}")
            results.append([json.loads(f.read_text()) for f in files])
        for proc in procs:
            _, err = proc.communicate(timeout=PROCESS_TIMEOUT)
            assert proc.returncode == 0, f"worker exit {proc.returncode}: {err[-3000:]}"
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# --- looking at the namespace from the outside -----------------------------------------------


def root_children(root: Root) -> set[str]:
    """Names of the directories directly below the root."""
    if root.local_path is not None:
        return set(os.listdir(root.local_path))
    return child_names(root)


def files_below(root: Root, rel: str) -> set[str]:
    """Every file below `rel` (relative to `rel`)."""
    if root.local_path is not None:
        top = root.local_path / rel
        return {os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(top) for f in fs}
    return {name[len(rel) + 1 :] for name in object_tags(root, rel)}


def table_uri(root: Root, location: str) -> str:
    return f"{root.uri.rstrip('/')}/{location}"


def open_dataset(root: Root, location: str, version: int | None = None):
    import lance

    return lance.dataset(
        table_uri(root, location), version=version, storage_options=root.storage_options
    )


def referenced_data_files(ds) -> set[str]:
    return {f.path for frag in ds.get_fragments() for f in frag.data_files()}


def check_history(root: Root, location: str, commits: int) -> tuple[set[str], list[set[str]]]:
    """Versions 1..commits, nothing else; returns the data files any version references and
    the object ids of every version."""
    latest = open_dataset(root, location)
    versions = [v["version"] for v in latest.versions()]
    assert versions == list(range(1, commits + 1)), (
        f"{location}: expected versions 1..{commits} (one per successful commit), "
        f"found {versions[:5]}...{versions[-5:]} ({len(versions)} versions)"
    )
    referenced: set[str] = set()
    ids_per_version = []
    for v in versions:
        ds = latest if v == latest.version else open_dataset(root, location, v)
        referenced |= referenced_data_files(ds)
        if location == MANIFEST:
            ids_per_version.append(set(ds.to_table(columns=["object_id"])["object_id"].to_pylist()))
    return referenced, ids_per_version


def verify_namespace(
    root: Root,
    tables: dict[str, int],
    namespaces: set[str],
    commits: int,
    *,
    table_content: dict[str, str] | None = None,
) -> dict:
    """Check the namespace holds exactly `tables` (object_id -> row count) and `namespaces`.

    `commits` is the number of successful manifest commits there must have been: every create
    is one commit at version N+1, so the history is exactly 1..commits with each version adding
    one row to the previous one (no lost update, no duplicate version).
    """
    # 1. what a user sees
    listing = run_cli("ls", "-R", "--json", *root.args)
    assert listing.exit_code == 0, listing.stderr
    entries = listing.json()["entries"]
    assert listing.json()["next_page_token"] is None
    listed_tables = [e["id"] for e in entries if e["kind"] == "table"]
    listed_namespaces = [e["id"] for e in entries if e["kind"] == "namespace"]
    expected_ids = {oid.replace("$", ".") for oid in tables}
    dupes = [i for i, c in collections.Counter(listed_tables).items() if c > 1]
    assert not dupes, f"ls lists tables more than once: {dupes[:10]}"
    assert set(listed_tables) == expected_ids, (
        f"ls: missing {sorted(expected_ids - set(listed_tables))[:10]}, "
        f"unexpected {sorted(set(listed_tables) - expected_ids)[:10]}"
    )
    assert sorted(listed_namespaces) == sorted(n.replace("$", ".") for n in namespaces)
    bad_state = [
        (e["id"], e["state"]) for e in entries if e["kind"] == "table" and e["state"] != "ok"
    ]
    assert not bad_state, f"tables not in state ok: {bad_state[:10]}"

    # 2. the raw manifest
    manifest = open_dataset(root, MANIFEST).to_table().to_pylist()
    counts = collections.Counter(r["object_id"] for r in manifest)
    dupes = {oid: c for oid, c in counts.items() if c > 1}
    assert not dupes, f"duplicate __manifest rows: {dict(list(dupes.items())[:10])}"
    table_rows = {r["object_id"]: r for r in manifest if r["object_type"] == "table"}
    ns_rows = {r["object_id"] for r in manifest if r["object_type"] == "namespace"}
    assert set(table_rows) == set(tables), (
        f"__manifest: missing {sorted(set(tables) - set(table_rows))[:10]}, "
        f"unexpected {sorted(set(table_rows) - set(tables))[:10]}"
    )
    assert ns_rows == namespaces

    # 3. the manifest history: one version per commit, each adding exactly one row
    referenced, ids_per_version = check_history(root, MANIFEST, commits)
    for v in range(1, len(ids_per_version)):
        before, after = ids_per_version[v - 1], ids_per_version[v]
        assert before <= after and len(after - before) == 1, (
            f"__manifest v{v + 1} is not v{v} plus one row: lost {sorted(before - after)}, "
            f"added {sorted(after - before)}"
        )

    # 4. no staged files of failed commits left in __manifest/data
    data_files = files_below(root, f"{MANIFEST}/data")
    unreferenced = data_files - referenced
    assert not unreferenced, (
        f"{len(unreferenced)} data files in __manifest/data/ that no manifest version "
        f"references (of {len(data_files)}): {sorted(unreferenced)[:5]}"
    )

    # 5. every table directory exists and opens with the right content
    for oid, row in table_rows.items():
        ds = open_dataset(root, row["location"])
        assert ds.count_rows() == tables[oid], f"{oid} at {row['location']}: wrong row count"
        names = set(ds.to_table(columns=["name"])["name"].to_pylist())
        want = (table_content or {}).get(oid, oid.replace("$", "."))
        assert names == {want}, f"{oid} at {row['location']} holds {names}, expected {want}"
        versions = [v["version"] for v in ds.versions()]
        assert versions == [1], f"{oid}: table has versions {versions}, expected only [1]"

    # 6. no orphan table directories at the root
    locations = {row["location"] for row in table_rows.values()}
    orphans = root_children(root) - locations - {MANIFEST}
    assert not orphans, f"{len(orphans)} orphan entries at the root: {sorted(orphans)[:10]}"
    return {"manifest_versions": commits, "manifest_data_files": len(data_files)}


def _init(root: Root, *namespaces: str) -> None:
    """Create the root (local) and the given namespaces, through the service layer."""
    from lancens_cli.models import Identifier
    from lancens_cli.service.catalog.create import create_namespace
    from lancens_cli.service.namespace import Namespace, init_root

    ns = Namespace.from_properties(root.properties)
    if root.local_path is not None:
        init_root(ns)
    for name in namespaces:
        create_namespace(ns, Identifier.parse(name))


def _report(text: str) -> None:
    print(f"\n[concurrency] {text}")


def _many_creates(root: Root, tmp_path: Path, parent: str, processes: int, per_process: int):
    """`processes` service workers creating `per_process` tables each, started together."""
    namespaces = {parent} if parent else set()
    _init(root, *namespaces)
    specs = []
    for w in range(processes):
        names = [f"t{w}_{i:02d}" for i in range(per_process)]
        names = [f"{parent}.{n}" if parent else n for n in names]
        specs.append({"mode": "service", "properties": root.properties, "rounds": [names]})
    started = time.monotonic()
    (reports,) = _run_together(specs, tmp_path / "sync")
    wall = time.monotonic() - started
    failures = [r for report in reports for r in report["results"] if r["exit"] != 0]
    assert not failures, f"{len(failures)} creates failed, e.g. {failures[:3]}"
    expected = {
        name.replace(".", "$"): rows_for(name) for spec in specs for name in spec["rounds"][0]
    }
    figures = verify_namespace(root, expected, namespaces, commits=len(namespaces) + len(expected))
    scheme = root.uri.split("://")[0] if "://" in root.uri else "local"
    _report(
        f"{scheme} {parent or '(root)'}: {processes} processes x {per_process} creates, "
        f"{sum(r['retries'] for r in reports)} manifest retries, "
        f"slowest worker {max(r['seconds'] for r in reports):.1f}s, wall {wall:.1f}s, {figures}"
    )


# --- 1. many processes, many tables ------------------------------------------------------------


def test_many_service_workers_create_tables_in_child_namespace(local_root, tmp_path):
    _many_creates(local_root, tmp_path, "ns", processes=4, per_process=50)


def test_many_service_workers_create_tables_at_fresh_root(local_root, tmp_path):
    # No __manifest yet: the first commits also race to create version 1 of it.
    _many_creates(local_root, tmp_path, "", processes=4, per_process=50)


def test_cli_processes_create_tables(local_root, tmp_path):
    """4 concurrent streams of plain `python -m lancens_cli create table` subprocesses, 5 each,
    alternating between a child namespace and the root."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _init(local_root, "ns")
    streams = []
    for w in range(4):
        names = [f"ns.c{w}_{i}" if i % 2 == 0 else f"c{w}_{i}" for i in range(5)]
        for name in names:
            n = rows_for(name)
            pq.write_table(
                pa.table({"id": list(range(n)), "name": [name] * n}), tmp_path / f"{name}.parquet"
            )
        streams.append(names)
    results: dict[str, object] = {}

    def stream(names):
        for name in names:
            results[name] = run_cli(
                "create",
                "table",
                name,
                "--from",
                str(tmp_path / f"{name}.parquet"),
                *local_root.args,
            )

    threads = [threading.Thread(target=stream, args=(names,)) for names in streams]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    failed = {k: (r.exit_code, r.stderr) for k, r in results.items() if r.exit_code != 0}
    assert not failed, failed
    expected = {name.replace(".", "$"): rows_for(name) for names in streams for name in names}
    assert len(expected) == 20
    figures = verify_namespace(local_root, expected, {"ns"}, commits=1 + len(expected))
    _report(f"CLI subprocesses: 4 streams x 5 creates (root and ns), wall {wall:.1f}s, {figures}")


# --- 2. and 3. races on one new name --------------------------------------------------------------


def _race(root: Root, tmp_path: Path, argv_for, racers: int, rounds: int) -> list[list[dict]]:
    """`racers` CLI processes, released together for each round; results[round][racer]."""
    specs = [
        {
            "mode": "cli",
            "rounds": [[*argv_for(r, k), "--json", *root.args] for r in range(rounds)],
            "remote": root.local_path is None,
        }
        for k in range(racers)
    ]
    return _run_together(specs, tmp_path / "sync")


def _one_winner(results: list[dict], allowed_errors: set[str], what: str, state=None) -> int:
    """Exactly one racer exits 0, every other one exits 4 with one of `allowed_errors`."""
    codes = [r["exit"] for r in results]
    winners = [k for k, c in enumerate(codes) if c == 0]
    assert len(winners) == 1 and codes.count(4) == len(codes) - 1, (
        f"{what}: exit codes {codes}; "
        + (f"afterwards the table {state()}; " if state else "")
        + f"stderr: {[r['stderr'].strip()[-300:] for r in results if r['stderr'].strip()]}"
    )
    for result in results:
        if result["exit"] == 4:
            error = json.loads(result["stderr"].strip().splitlines()[-1])["error"]
            assert error["name"] in allowed_errors, f"{what}: {error}"
    return winners[0]


def _table_state(root: Root, object_id: str) -> str:
    """What the manifest row of a table points at, for failure messages."""
    rows = [
        row
        for row in open_dataset(root, MANIFEST).to_table().to_pylist()
        if row["object_id"] == object_id
    ]
    if len(rows) != 1:
        return f"has {len(rows)} manifest rows"
    location = rows[0]["location"]
    try:
        ds = open_dataset(root, location)
        holds = sorted(set(ds.to_table(columns=["name"])["name"].to_pylist()))
        versions = [v["version"] for v in ds.versions()]
        return f"at {location} holds {holds} with versions {versions}"
    except Exception as exc:  # only describing the state
        return f"at {location} does not open ({str(exc)[:100]})"


def _table_race(root: Root, tmp_path: Path, parent: str, rounds: int, racers: int):
    import pyarrow as pa
    import pyarrow.parquet as pq

    namespaces = {parent} if parent else set()
    _init(root, *namespaces)
    names = [f"{parent}.race{r}" if parent else f"race{r}" for r in range(rounds)]
    files = {}
    for name in names:
        for k in range(racers):
            # Each racer loads different data (k + 1 rows), so the table shows whose write won.
            path = tmp_path / f"{name}-{k}.parquet"
            pq.write_table(
                pa.table({"id": list(range(k + 1)), "name": [f"racer{k}"] * (k + 1)}), path
            )
            files[name, k] = str(path)
    started = time.monotonic()
    results = _race(
        root,
        tmp_path,
        lambda r, k: ["create", "table", names[r], "--from", files[names[r], k]],
        racers,
        rounds,
    )
    wall = time.monotonic() - started
    expected: dict[str, int] = {}
    content: dict[str, str] = {}
    for r, name in enumerate(names):
        oid = name.replace(".", "$")
        winner = _one_winner(
            results[r],
            {"TableAlreadyExists"},
            f"round {r} ({name})",
            state=lambda oid=oid: _table_state(root, oid),
        )
        expected[oid] = winner + 1
        content[oid] = f"racer{winner}"
    verify_namespace(
        root, expected, namespaces, commits=len(namespaces) + len(expected), table_content=content
    )
    scheme = root.uri.split("://")[0] if "://" in root.uri else "local"
    _report(
        f"{scheme} table race in {parent or '(root)'}: {rounds} rounds x {racers} racers, "
        f"wall {wall:.1f}s"
    )


def test_race_same_table_in_child_namespace(local_root, tmp_path):
    _table_race(local_root, tmp_path, "ns", rounds=3, racers=6)


def test_race_same_root_table(local_root, tmp_path):
    # Root tables share the `<name>.lance` directory: the winner's table must survive intact,
    # holding the winner's data, and nobody else's write may land in it.
    _table_race(local_root, tmp_path, "", rounds=4, racers=6)


def test_race_same_namespace(local_root, tmp_path):
    # Round 0 runs on a fresh root: the racers also race to create __manifest version 1.
    _init(local_root)
    rounds, racers = 3, 6
    names = [f"nsr{r}" for r in range(rounds)]
    results = _race(
        local_root,
        tmp_path,
        lambda r, k: ["create", "namespace", names[r], "--property", f"racer={k}"],
        racers,
        rounds,
    )
    winners = {
        name: _one_winner(results[r], {"NamespaceAlreadyExists"}, f"round {r} ({name})")
        for r, name in enumerate(names)
    }
    verify_namespace(local_root, {}, set(names), commits=rounds)
    rows = {
        row["object_id"]: row for row in open_dataset(local_root, MANIFEST).to_table().to_pylist()
    }
    for name, winner in winners.items():
        assert json.loads(rows[name]["metadata"]) == {"racer": str(winner)}, (
            f"row of {name} carries {rows[name]['metadata']} but racer {winner} won"
        )


# --- 4. the same on S3 (moto) and GCS (fake-gcs-server behind the write proxy) -----------------

OBJECT_STORES = [
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("gcs", marks=pytest.mark.gcs),
]


@pytest.mark.parametrize("store", OBJECT_STORES)
@pytest.mark.parametrize("parent", ["ns", ""], ids=["child", "root"])
def test_object_store_service_workers_create_tables(store, tmp_path, parent, request):
    root = request.getfixturevalue(f"{store}_root")
    _many_creates(root, tmp_path, parent, processes=3, per_process=10)


@pytest.mark.parametrize("store", OBJECT_STORES)
@pytest.mark.parametrize("parent", ["ns", ""], ids=["child", "root"])
def test_object_store_race_same_table(store, tmp_path, parent, request):
    root = request.getfixturevalue(f"{store}_root")
    _table_race(root, tmp_path, parent, rounds=3, racers=4)
