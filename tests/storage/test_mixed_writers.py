"""Mixed writers: `lancens` and the reference `DirectoryNamespace` changing one namespace at once.

Four OS processes are released together (a "go" file is the barrier across processes):

* two "ours" workers call the service layer (`create_namespace`, `create_table`, `drop`) on a
  `Namespace` built from the root's properties;
* two "ref" workers call pylance's `DirectoryNamespace` (`create_namespace`, `create_table` with
  Arrow IPC bytes, `drop_table`).

Each worker creates its own namespace `mix.<worker>`, then tables alternately in the shared
namespace `mix` and in its own, and drops some of its own tables along the way. After every
operation that returned it appends one JSON line to its log; an operation that raised is logged
as failed and is not "done".

Afterwards the `__manifest` must hold exactly what the logs imply: every create reported done and
not later dropped is there exactly once, every drop reported done is absent, no object_id twice,
every remaining table opens with the rows its writer wrote, no dropped table's directory is left.
The version history must have one version per done operation, each the previous one plus or minus
exactly one row. When that fails, the version that lost (or resurrected) a row is found and the
commit is attributed to the side whose change it carries, with its transaction's read_version as
evidence of a stale read.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from helpers import Root, run_cli

pytestmark = pytest.mark.slow

PROCESS_TIMEOUT = 150
MANIFEST = "__manifest"
PARENT = "mix"

# argv[1] is a JSON spec: side ("ours" | "ref"), name, properties, tables, drop_every, sync, log.
WORKER = r"""
import json, os, sys, time, traceback, zlib
spec = json.loads(sys.argv[1])
os.environ.setdefault("LANCE_LOG", "error")
import pyarrow as pa
import lance  # noqa: F401  (warm up before the start line)
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
from lancens_cli.models import Identifier
from lancens_cli.service.catalog.create import create_namespace, create_table
from lancens_cli.service.catalog.drop import drop
from lancens_cli.service.namespace import Namespace
if spec["properties"]["root"].startswith("s3://"):
    import s3fs  # noqa: F401

side, me, parent = spec["side"], spec["name"], spec["parent"]
log = open(spec["log"], "a", buffering=1)


def rows_for(name):
    return 1 + zlib.crc32(name.encode()) % 7


def data_for(object_id):
    n = rows_for(object_id)
    return pa.table({"id": list(range(n)), "name": [object_id] * n})


def ipc(table):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


if side == "ours":
    ns = Namespace.from_properties(spec["properties"])
    retries = []
    ns.manifest.on_retry = retries.append
    ns.require_root()  # warm up the file system client

    def do_create_namespace(parts):
        create_namespace(ns, Identifier(tuple(parts)))

    def do_create_table(parts):
        oid = "$".join(parts)
        changes = create_table(ns, Identifier(tuple(parts)), data=data_for(oid))
        return changes.changes[0].location

    def do_drop_table(parts):
        drop(ns, Identifier(tuple(parts)))
else:
    ref = DirectoryNamespace(**spec["properties"])
    retries = []

    def do_create_namespace(parts):
        ref.create_namespace(ln.CreateNamespaceRequest(id=list(parts)))

    def do_create_table(parts):
        oid = "$".join(parts)
        response = ref.create_table(ln.CreateTableRequest(id=list(parts)), ipc(data_for(oid)))
        return response.location.rstrip("/").rsplit("/", 1)[-1]

    def do_drop_table(parts):
        ref.drop_table(ln.DropTableRequest(id=list(parts)))


def run(op, parts, call):
    started = time.time()
    entry = {"worker": me, "side": side, "op": op, "id": "$".join(parts), "start": started}
    try:
        result = call(parts)
        entry.update(ok=True, location=result)
    except BaseException as exc:  # noqa: BLE001  (logged, the run goes on)
        entry.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:300]}")
    entry["end"] = time.time()
    log.write(json.dumps(entry) + "\n")
    return entry["ok"]


# The plan: own namespace first, then tables alternately in the shared parent and in the own
# namespace; after every `drop_every`-th create, drop the table created two steps before.
own = [parent, me]
plan = [("create_namespace", own)]
created = []
for i in range(spec["tables"]):
    parts = [parent, f"{me}_t{i:02d}"] if i % 2 == 0 else [*own, f"t{i:02d}"]
    plan.append(("create_table", parts))
    created.append(parts)
    if i % spec["drop_every"] == spec["drop_every"] - 1 and len(created) >= 3:
        plan.append(("drop_table", created[-3]))
calls = {
    "create_namespace": do_create_namespace,
    "create_table": do_create_table,
    "drop_table": do_drop_table,
}

open(os.path.join(spec["sync"], f"ready-{me}"), "w").close()
go = os.path.join(spec["sync"], "go")
deadline = time.monotonic() + 120
while not os.path.exists(go):
    if time.monotonic() > deadline:
        sys.exit(99)
    time.sleep(0.001)
started = time.monotonic()
for op, parts in plan:
    run(op, parts, calls[op])
summary = {"worker": me, "seconds": time.monotonic() - started, "retries": len(retries)}
with open(os.path.join(spec["sync"], f"done-{me}.json"), "w") as handle:
    json.dump(summary, handle)
"""


def rows_for(name: str) -> int:
    return 1 + zlib.crc32(name.encode()) % 7


def _env() -> dict[str, str]:
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    env.pop("LANCENS_ROOT", None)
    return env


def _run_workers(specs: list[dict], sync: Path) -> tuple[list[dict], float]:
    """Start every worker, release them together once all are ready, wait for all."""
    sync.mkdir(parents=True, exist_ok=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps({**spec, "sync": str(sync)})],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=_env(),
        )
        for spec in specs
    ]
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while not all((sync / f"ready-{s['name']}").exists() for s in specs):
            for proc in procs:
                if proc.poll() is not None:
                    raise AssertionError(f"worker died starting: {proc.stderr.read()[-3000:]}")
            assert time.monotonic() < deadline, "workers did not get ready"
            time.sleep(0.005)
        started = time.monotonic()
        (sync / "go").touch()
        for proc in procs:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert proc.returncode == 0, f"worker exit {proc.returncode}: {err[-3000:]}"
        wall = time.monotonic() - started
        return [json.loads((sync / f"done-{s['name']}.json").read_text()) for s in specs], wall
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# --- looking at the result ----------------------------------------------------------------------


def _open(root: Root, location: str, version: int | None = None):
    import lance

    return lance.dataset(
        f"{root.uri.rstrip('/')}/{location}", version=version, storage_options=root.storage_options
    )


def _exists(root: Root, location: str) -> bool:
    if root.local_path is not None:
        return (root.local_path / location).exists()
    import boto3

    opts = root.storage_options
    client = boto3.client(
        "s3",
        endpoint_url=opts["endpoint"],
        region_name=opts["region"],
        aws_access_key_id=opts["access_key_id"],
        aws_secret_access_key=opts["secret_access_key"],
    )
    bucket, _, base = root.uri[len("s3://") :].partition("/")
    found = client.list_objects_v2(Bucket=bucket, Prefix=f"{base}/{location}/", MaxKeys=1)
    return found.get("KeyCount", 0) > 0


def _history(root: Root) -> list[dict]:
    """Every `__manifest` version: its object ids and its transaction's read_version."""
    latest = _open(root, MANIFEST)
    history = []
    for v in sorted(x["version"] for x in latest.versions()):
        ds = latest if v == latest.version else _open(root, MANIFEST, v)
        ids = ds.to_table(columns=["object_id"])["object_id"].to_pylist()
        try:
            read_version = latest.read_transaction(v).read_version
        except Exception:  # only evidence; an old version may have no transaction file
            read_version = None
        files = {f.path for frag in ds.get_fragments() for f in frag.data_files()}
        history.append({"version": v, "ids": ids, "read_version": read_version, "files": files})
    return history


def _manifest_data_files(root: Root) -> set[str]:
    if root.local_path is not None:
        return set(os.listdir(root.local_path / MANIFEST / "data"))
    import boto3

    opts = root.storage_options
    client = boto3.client(
        "s3",
        endpoint_url=opts["endpoint"],
        region_name=opts["region"],
        aws_access_key_id=opts["access_key_id"],
        aws_secret_access_key=opts["secret_access_key"],
    )
    bucket, _, base = root.uri[len("s3://") :].partition("/")
    prefix = f"{base}/{MANIFEST}/data/"
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", [])}


def _owner(object_id: str) -> str:
    """The worker whose plan holds `object_id` (`mix$o0_t00`, `mix$r1$t03`, `mix$o1`)."""
    parts = object_id.split("$")
    if len(parts) < 2:
        return "setup"
    return parts[1].split("_")[0]


def _forensics(history: list[dict], sides: dict[str, str]) -> list[str]:
    """Versions that are not their predecessor plus or minus exactly one row, explained."""
    findings = []
    for before, after in zip(history, history[1:], strict=False):
        old, new = set(before["ids"]), set(after["ids"])
        lost, added = sorted(old - new), sorted(new - old)
        if len(lost) + len(added) == 1 and len(after["ids"]) == len(new):
            continue
        if not lost and not added and len(after["ids"]) == len(new):
            continue  # the same rows: our drop's marking commit (counted in the version total)
        # Which change does this commit carry? The smallest diff against any earlier version
        # tells which snapshot the writer really read.
        base = min(
            (h for h in history if h["version"] < after["version"]),
            key=lambda h: (len(set(h["ids"]) ^ new), -h["version"]),
        )
        own_change = sorted(set(base["ids"]) ^ new)
        authors = sorted({f"{sides.get(_owner(o), '?')}:{_owner(o)}" for o in own_change})
        findings.append(
            f"v{after['version']} (transaction read_version={after['read_version']}) "
            f"vs v{before['version']}: lost {lost[:8]}, added {added[:8]}, "
            f"{len(after['ids']) - len(new)} duplicate rows; it is v{base['version']} plus "
            f"{own_change[:4]} -> written by {authors} from a stale snapshot; "
            f"the lost rows were written by "
            f"{sorted({f'{sides.get(_owner(o), chr(63))}:{_owner(o)}' for o in lost})}"
        )
    return findings


def _mixed_run(root: Root, tmp_path: Path, tables: int, drop_every: int) -> None:
    import lance_namespace as ln
    from lance.namespace import DirectoryNamespace

    from lancens_cli.models import Identifier
    from lancens_cli.service.catalog.create import create_namespace
    from lancens_cli.service.namespace import Namespace, init_root

    ns = Namespace.from_properties(root.properties)
    if root.local_path is not None:
        init_root(ns)
    create_namespace(ns, Identifier((PARENT,)))

    workers = [("o0", "ours"), ("o1", "ours"), ("r0", "ref"), ("r1", "ref")]
    sides = dict(workers)
    logs = tmp_path / "logs"
    logs.mkdir()
    specs = [
        {
            "side": side,
            "name": name,
            "parent": PARENT,
            "properties": root.properties,
            "tables": tables,
            "drop_every": drop_every,
            "log": str(logs / f"{name}.jsonl"),
        }
        for name, side in workers
    ]
    summaries, wall = _run_workers(specs, tmp_path / "sync")

    entries = [
        json.loads(line)
        for spec in specs
        for line in Path(spec["log"]).read_text().splitlines()
        if line.strip()
    ]
    done = [e for e in entries if e["ok"]]
    failed = [e for e in entries if not e["ok"]]
    planned = len(entries)
    # Each worker's log is in its own order; ids are per worker, so per-id order is well defined.
    present: dict[str, dict] = {}
    dropped: dict[str, dict] = {}
    namespaces = {PARENT}
    for e in done:
        if e["op"] == "create_namespace":
            namespaces.add(e["id"])
        elif e["op"] == "create_table":
            present[e["id"]] = e
            dropped.pop(e["id"], None)
        elif e["op"] == "drop_table":
            dropped[e["id"]] = present.pop(e["id"], e)

    # --- the final manifest -------------------------------------------------------------------
    rows = _open(root, MANIFEST).to_table().to_pylist()
    counts = collections.Counter(r["object_id"] for r in rows)
    history = _history(root)
    evidence = _forensics(history, sides)
    problems = []
    dupes = {oid: c for oid, c in counts.items() if c > 1}
    if dupes:
        problems.append(f"duplicate object_ids: {dupes}")
    table_rows = {r["object_id"]: r for r in rows if r["object_type"] == "table"}
    ns_rows = {r["object_id"] for r in rows if r["object_type"] == "namespace"}
    missing = sorted(set(present) - set(table_rows))
    if missing:
        problems.append(
            "creates reported done and never dropped are missing: "
            + ", ".join(f"{m} ({sides[_owner(m)]})" for m in missing)
        )
    resurrected = sorted(set(dropped) & set(table_rows))
    if resurrected:
        problems.append(
            "drops reported done but the row is back: "
            + ", ".join(f"{m} ({sides[_owner(m)]})" for m in resurrected)
        )
    unexpected = sorted(set(table_rows) - set(present) - set(dropped))
    if unexpected:
        problems.append(f"rows no done create explains (failed ops?): {unexpected}")
    if ns_rows != namespaces:
        problems.append(
            f"namespaces: missing {sorted(namespaces - ns_rows)}, "
            f"unexpected {sorted(ns_rows - namespaces)}"
        )
    # One version per done operation (plus the setup: `mix`), none more, none lost; our drop
    # of a table is two: it marks the row before deleting the data, then removes it.
    marks = sum(1 for e in done if e["op"] == "drop_table" and sides[_owner(e["id"])] == "ours")
    if len(history) != 1 + len(done) + marks:
        problems.append(
            f"__manifest has {len(history)} versions, expected {1 + len(done) + marks} "
            f"(1 setup + {len(done)} done operations + {marks} drop marks)"
        )
    if problems:
        raise AssertionError(
            f"{root.uri}: the manifest does not match the logs\n  "
            + "\n  ".join(problems)
            + "\nversion history evidence:\n  "
            + ("\n  ".join(evidence) if evidence else "(every version is its predecessor +-1)")
            + "\nfailed operations: "
            + str([(e["worker"], e["op"], e["id"], e["error"]) for e in failed])
        )
    assert not evidence, "version history is not one row per commit:\n  " + "\n  ".join(evidence)

    # --- every remaining table opens with its writer's rows; dropped directories are gone -----
    for oid, row in table_rows.items():
        ds = _open(root, row["location"])
        assert ds.count_rows() == rows_for(oid), f"{oid} at {row['location']}: wrong row count"
        assert set(ds.to_table(columns=["name"])["name"].to_pylist()) == {oid}
        assert row["location"].endswith(oid), (oid, row["location"])
    left = [oid for oid, e in dropped.items() if e.get("location") and _exists(root, e["location"])]
    assert not left, f"dropped tables whose directory is still there: {left}"

    # --- both tools see the same thing ----------------------------------------------------------
    listing = run_cli("ls", "-R", "--json", *root.args)
    assert listing.exit_code == 0, listing.stderr
    listed = {e["id"] for e in listing.json()["entries"] if e["kind"] == "table"}
    assert listed == {oid.replace("$", ".") for oid in present}
    health = run_cli("check", "--json", *root.args)
    assert health.exit_code == 0 and health.json()["healthy"], health.stdout + health.stderr
    ref = DirectoryNamespace(**root.properties)
    for namespace in sorted(namespaces):
        parts = namespace.split("$")
        theirs = set(ref.list_tables(ln.ListTablesRequest(id=parts)).tables)
        want = {oid.split("$")[-1] for oid in present if oid.split("$")[:-1] == parts}
        assert theirs == want, f"reference list_tables({parts}): {sorted(theirs ^ want)}"

    # All operations ran concurrently; at most a few may have given up (not "done").
    per_side = collections.Counter(e["side"] for e in done)
    assert len(done) >= 0.9 * planned, f"only {len(done)} of {planned} operations done: {failed}"
    # Staged files no version references: left by failed commit attempts (ours remove theirs;
    # reported as information about the reference, not checked).
    referenced = set().union(*(h["files"] for h in history))
    staged = len(_manifest_data_files(root) - referenced)
    scheme = root.uri.split("://")[0] if "://" in root.uri else "local"
    overlap = _overlap(done)
    print(
        f"\n[mixed] {scheme}: 2 ours + 2 ref processes, {planned} operations planned, "
        f"{len(done)} done (ours {per_side['ours']}, ref {per_side['ref']}), "
        f"{len(failed)} failed {[(e['worker'], e['op'], e['error'][:60]) for e in failed][:3]}, "
        f"our manifest retries {sum(s['retries'] for s in summaries)}, "
        f"max concurrent ops {overlap}, wall {wall:.1f}s, "
        f"slowest worker {max(s['seconds'] for s in summaries):.1f}s, "
        f"{len(history)} manifest versions, {len(table_rows)} tables left, "
        f"{staged} unreferenced __manifest data files"
    )


def _overlap(done: list[dict]) -> int:
    """The largest number of operations in flight at one moment (from the logged intervals)."""
    events = sorted([(e["start"], 1) for e in done] + [(e["end"], -1) for e in done])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def test_mixed_writers_local(local_root, tmp_path):
    # 4 workers x (1 namespace + 24 creates + 7 drops) = 128 concurrent operations.
    _mixed_run(local_root, tmp_path, tables=24, drop_every=3)


@pytest.mark.s3
def test_mixed_writers_s3(s3_root, tmp_path):
    # 4 workers x (1 namespace + 10 creates + 2 drops) = 52 concurrent operations.
    _mixed_run(s3_root, tmp_path, tables=10, drop_every=4)
