"""Kill `lancens` with SIGKILL (or interrupt it with SIGINT, as Ctrl-C does) at random moments,
rerun the same command, and prove the namespace consistent: the machinery behind
tests/storage/test_crash.py.

A *scenario* is one command on one prepared namespace (built once per test as a local template,
then copied for every trial: a directory copy locally, an upload to a fresh prefix on S3). A
*trial* runs the command in a real subprocess, kills it after a delay drawn uniformly from
[0.3, 1.0] x the command's cold runtime, inspects the state the kill left, reruns the same
command (in-process, same code path as the CLI, without the start-up cost) and inspects again,
ending with the service-level `check`.

What "consistent" means is spelled out in `Scenario` and `_verify`:

* after the kill: no duplicate object_id; every table a user can see (listing: manifest rows and
  root `<name>.lance` directories) and every table row opens with pylance with exactly the data
  expected under its name (row count and sum of `id`, so a missing data file is noticed), except
  that a drop target may instead be gone; tables the command does not touch are all there; the
  command-specific invariant holds (rename: exactly one of old/new; migrate-v1: all or none
  registered);
* the rerun of a root create whose kill left `<name>.lance` holding only uncommitted data files
  must refuse the name (exit 4) without adding or removing a file and point to `check --fix`;
  `check --fix --grace-minutes 0` then removes the debris and the command is run once more
  (`create` never deletes a file it did not write);
* after the rerun: its exit code is one the scenario accepts (a non-zero "already done" code only
  when the killed run had finished its effect); the visible tables are exactly the expected ones
  with their data; no duplicate object_id or location; no rename bookkeeping left in rows; the
  command-specific end state (no old directory, no dropped row or directory, each V1 table
  registered exactly once, one row for a registered table); `check` reports nothing but staged
  `__manifest` files (and, for create, orphaned V2 directories of the killed run).
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
from helpers import Root, invoke, root_fs

from lancens_cli.models import KIND_TABLE, STATE_UNCOMMITTED, Identifier
from lancens_cli.service.catalog.listing import list_namespace
from lancens_cli.service.check import check
from lancens_cli.service.namespace import RENAME_INTENT_KEY, RENAMED_FROM_KEY, Namespace
from lancens_cli.store.manifest import decode_properties
from lancens_cli.store.tables import DEREGISTERED_MARKER, table_state, v2_location_object_id

GONE = "gone"  # no loadable table at the location (missing, or no manifest left)
KILL_WINDOW = (0.3, 1.0)  # kill delays, as fractions of the command's cold runtime
# SIGINT delays: earlier, since a Ctrl-C near the end finds the work done (and a loaded
# machine stretches the measured runtime)
SIGINT_WINDOW = (0.05, 0.75)

# Phases a kill can land in (relative to the command's effect).
UNTOUCHED = "untouched"  # nothing on storage changed yet (start-up, reading)
PARTIAL = "partial"  # something changed, the effect is not complete
COMPLETE = "complete"  # killed after the effect was complete (e.g. while exiting)
EXITED = "exited"  # the process finished before the kill
PHASES = (UNTOUCHED, PARTIAL, COMPLETE, EXITED)


# --- data --------------------------------------------------------------------------------------


def make_data(rows: int, offset: int = 0) -> pa.Table:
    ids = pa.array(range(offset, offset + rows), pa.int64())
    return pa.table({"id": ids, "v": pc.multiply(ids, 3), "s": pc.cast(ids, pa.string())})


def write_lance(uri: str, rows: int, *, versions: int = 1, rows_per_file: int | None = None):
    """A Lance table of `versions` appends of `rows` rows each (ids continue across versions)."""
    for version in range(versions):
        kwargs = {"max_rows_per_file": rows_per_file} if rows_per_file else {}
        lance.write_dataset(
            make_data(rows, version * rows),
            uri,
            mode="append" if version else "create",
            enable_v2_manifest_paths=True,
            **kwargs,
        )


def ns_of(root: Root) -> Namespace:
    from lancens_cli.config import NamespaceConfig

    return Namespace(NamespaceConfig.from_properties(root.properties))


def fingerprint(ns: Namespace, location: str) -> tuple[int, int] | str:
    """(rows, sum of id) of the latest version, GONE, or a text saying why it cannot be read."""
    try:
        ds = lance.dataset(ns.storage.uri(location), storage_options=ns.storage.lance_options)
    except Exception as exc:  # noqa: BLE001 - any failure to open is a state to report
        state = table_state(ns.storage, location)
        if state in ("missing", "not a Lance table", "uncommitted write"):
            return GONE
        return f"unloadable ({state}): {str(exc)[:160]}"
    try:
        ids = ds.to_table(columns=["id"]).column("id")
    except Exception as exc:  # noqa: BLE001
        return f"broken (v{ds.version}, {ds.count_rows()} rows in manifest): {str(exc)[:160]}"
    return (len(ids), pc.sum(ids).as_py() or 0)


def local_files(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}


# --- places: where a trial's namespace lives ------------------------------------------------


class Place:
    """Fresh copies of a local template namespace for the trials.

    Locally every trial gets its own copy of the directory. On an object store (S3 or GCS)
    every trial uses the same prefix, brought back to exactly the template's objects before
    it: objects the last trial added are deleted, and those it deleted or changed (MD5 differs
    from the template file's) are uploaded again. That costs a few requests instead of one
    upload per object.
    """

    def __init__(self, kind: str, workdir: Path, remote_root: Root | None = None):
        self.kind = kind
        self.workdir = workdir
        self.remote_root = remote_root
        self._md5: dict[str, str] = {}
        self._ns: Namespace | None = None
        if remote_root is not None:
            self._fs, self._base = root_fs(remote_root)

    def copy(self, template: Path, label: str) -> Root:
        if self.kind == "local":
            path = self.workdir / label
            shutil.copytree(template, path)
            return Root(str(path), {}, path)
        if not self._md5:
            for path in template.rglob("*"):
                if path.is_file():
                    rel = path.relative_to(template).as_posix()
                    self._md5[rel] = hashlib.md5(path.read_bytes()).hexdigest()
        current = self._objects()
        stale = [name for name in current if name not in self._md5]
        missing = [name for name, md5 in self._md5.items() if current.get(name) != md5]
        if stale:
            self._fs.rm([f"{self._base}/{name}" for name in stale])

        def upload(name: str) -> None:
            self._fs.pipe_file(f"{self._base}/{name}", (template / name).read_bytes())

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(upload, missing))
        return self.remote_root

    def _objects(self) -> dict[str, str]:
        """name -> MD5 (hex) of every object below the prefix."""
        self._fs.invalidate_cache()
        if not self._fs.exists(self._base):
            return {}
        return {
            name[len(self._base) + 1 :]: _md5_hex(info)
            for name, info in self._fs.find(self._base, detail=True).items()
        }

    def namespace(self, root: Root) -> Namespace | None:
        """A handle to reuse for inspecting `root` (S3: the shared prefix), or None."""
        if root.local_path is not None:
            return None
        if self._ns is None:
            self._ns = ns_of(root)
        return self._ns

    def files(self, root: Root) -> set[str]:
        """Every file below the root, relative to it."""
        if root.local_path is not None:
            return local_files(root.local_path)
        return set(self._objects())

    def remove(self, root: Root) -> None:
        """Done with a trial's root (remote: the next copy() restores the shared prefix)."""
        if root.local_path is not None:
            shutil.rmtree(root.local_path, ignore_errors=True)


def _md5_hex(info: dict) -> str:
    """An object's MD5 as hex, from S3's ETag (single-part uploads) or GCS's md5Hash."""
    if info.get("md5Hash"):
        return base64.b64decode(info["md5Hash"]).hex()
    return str(info.get("ETag", "")).strip('"')


# --- scenarios -----------------------------------------------------------------------------


@dataclass
class Scenario:
    """One command on one prepared namespace, and what consistency means for it."""

    name: str  # e.g. "rename-v1"
    command: str  # the summary groups by this: create, rename, drop, migrate-v1, register
    argv: list[str]
    build: Callable[[Path], None]  # prepares the namespace at a local template root
    # expected visible tables after a completed command, from those before it
    transform: Callable[[dict], dict]
    rerun_codes: frozenset[int]  # exit codes a rerun may give (non-zero only if already done)
    # may be GONE after a kill: drop targets, and the `<name>.lance` of a root create, which
    # lists as an "uncommitted write" until `check --fix` removes the debris
    vanishing: frozenset[str] = frozenset()
    # a root create: when the kill left this directory holding only an uncommitted write, the
    # rerun must refuse the name (exit 4) touching nothing and say that `check --fix` removes
    # it; then `check --fix --grace-minutes 0` and a second rerun must complete the command
    debris: str | None = None
    exclusive: tuple[str, str] | None = None  # rename: exactly one of (old, new) visible
    extra_final: Callable[[Scenario, Root, Namespace, dict], list[str]] | None = None
    extra_kill: Callable[[Scenario, Root, Namespace, dict], list[str]] | None = None
    allowed_findings: frozenset[str] = frozenset({"staged_manifest_file"})
    # filled by prepare()
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    template_rows: list[dict] = field(default_factory=list)


def _create_table(path: Path, name: str, data: pa.Table) -> None:
    from lancens_cli.service.catalog.create import create_table

    create_table(ns_of(Root(str(path), {}, path)), Identifier.parse(name), data=data)


def _cli(path: Path, *args: str) -> None:
    result = invoke("--root", str(path), *args)
    assert result.exit_code == 0, (args, result.stderr)


def _base(path: Path) -> None:
    """What most scenarios start from: a namespace, a child table and a root table."""
    _cli(path, "create", "namespace", "sales")
    _create_table(path, "sales.keep", make_data(1000))
    _create_table(path, "keep", make_data(700))


def make_parquet(data_dir: Path, kind: str) -> Path:
    """The --from file of `create`: big enough that writing it takes a good part of the run."""
    import pyarrow.parquet as pq

    path = data_dir / f"orders-{kind}.parquet"
    if not path.exists():
        pq.write_table(make_data(CREATE_ROWS[kind]), path, row_group_size=200_000)
    return path


# Sizes per kind of root: moto answers every request in the test process, so S3 trials are
# several times slower than local ones; their data is kept smaller to fit the time budget.
CREATE_ROWS = {"local": 2_500_000, "s3": 1_500_000, "gcs": 1_000_000}
MIGRATE_TABLES = {"local": 40, "s3": 16, "gcs": 12}


def scenarios(data_dir: Path, kind: str) -> dict[str, Scenario]:
    """Every scenario for a kind of root; `data_dir` holds the parquet file of `create`."""
    parquet = str(data_dir / f"orders-{kind}.parquet")
    tables = MIGRATE_TABLES[kind]
    create_rows = CREATE_ROWS[kind]

    def plus(**added):
        return lambda before: {**before, **added}

    def minus(*names, **added):
        return lambda before: {
            **{k: v for k, v in before.items() if k not in names},
            **{k: before[v] for k, v in added.items()},
        }

    def build_create(path):
        make_parquet(data_dir, kind)
        _base(path)

    def build_rename_v1(path):
        _base(path)
        write_lance(str(path / "old.lance"), 100, versions=12)
        _cli(path, "migrate-v1")

    def build_rename_v2(path):
        _base(path)
        _cli(path, "create", "namespace", "archive")
        _create_table(path, "sales.a", make_data(100))
        for version in range(1, 10):
            location = ns_of(Root(str(path), {}, path)).snapshot().get("sales$a")["location"]
            lance.write_dataset(make_data(100, 100 * version), str(path / location), mode="append")

    def build_drop_table(path):
        _base(path)
        _create_table(path, "sales.big", make_data(200))
        location = ns_of(Root(str(path), {}, path)).snapshot().get("sales$big")["location"]
        # many files, so that deleting them takes a while
        lance.write_dataset(
            make_data(6_000, 200), str(path / location), mode="append", max_rows_per_file=100
        )

    def build_drop_namespace(path):
        _base(path)
        _cli(path, "create", "namespace", "sales.eu")
        _cli(path, "create", "namespace", "other")
        _create_table(path, "other.keep", make_data(300))
        for name in ("sales.t1", "sales.t2", "sales.t3", "sales.eu.t4"):
            _create_table(path, name, make_data(50))
            location = (
                ns_of(Root(str(path), {}, path)).snapshot().get(name.replace(".", "$"))["location"]
            )
            lance.write_dataset(
                make_data(3000, 50), str(path / location), mode="append", max_rows_per_file=300
            )

    def build_migrate(path):
        path.mkdir(exist_ok=True)
        for i in range(tables):
            write_lance(str(path / f"t{i:02d}.lance"), 10 + i)

    def build_register_child(path):
        _base(path)
        write_lance(str(path / "imports" / "orders"), 500, versions=3)

    def build_register_deregistered(path):
        _base(path)
        _create_table(path, "events", make_data(900))
        _cli(path, "deregister", "events")
        assert (path / "events.lance" / DEREGISTERED_MARKER).exists()

    def migrate_final(scenario, root, ns, state) -> list[str]:
        rows = Counter(r["location"] for r in state["rows"] if r["object_type"] == KIND_TABLE)
        wanted = [f"t{i:02d}.lance" for i in range(tables)]
        return [f"{loc} registered {rows[loc]} times" for loc in wanted if rows[loc] != 1]

    def migrate_kill(scenario, root, ns, state) -> list[str]:
        registered = {r["location"] for r in state["rows"] if r["object_type"] == KIND_TABLE}
        count = sum(1 for i in range(tables) if f"t{i:02d}.lance" in registered)
        if count not in (0, tables):
            return [f"migrate-v1 not atomic: {count} of {tables} tables registered"]
        return []

    def register_final(location, object_id):
        def extra(scenario, root, ns, state) -> list[str]:
            rows = [r for r in state["rows"] if r["location"] == location]
            problems = []
            if [r["object_id"] for r in rows] != [object_id]:
                problems.append(f"rows for {location}: {[r['object_id'] for r in rows]}")
            return problems

        return extra

    def rename_v1_final(scenario, root, ns, state) -> list[str]:
        return ["old.lance still exists"] if ns.storage.exists("old.lance") else []

    def drop_final(prefix):
        def extra(scenario, root, ns, state) -> list[str]:
            problems = []
            for row in scenario.template_rows:
                oid = row["object_id"]
                if oid == prefix or oid.startswith(prefix + "$"):
                    if any(r["object_id"] == oid for r in state["rows"]):
                        problems.append(f"row {oid} still there")
                    if row["location"] and ns.storage.exists(row["location"]):
                        problems.append(f"directory {row['location']} of {oid} still there")
            return problems

        return extra

    dropped_ns = ("sales.keep", "sales.t1", "sales.t2", "sales.t3", "sales.eu.t4")
    all_scenarios = [
        Scenario(
            "create-child",
            "create",
            ["create", "table", "sales.orders", "--from", parquet],
            build_create,
            plus(**{"sales.orders": create_rows}),
            frozenset({0, 4}),
            allowed_findings=frozenset(
                {"staged_manifest_file", "orphan_table_directory", "abandoned_table_write"}
            ),
        ),
        Scenario(
            "create-root",
            "create",
            ["create", "table", "orders", "--from", parquet],
            build_create,
            plus(orders=create_rows),
            frozenset({0, 4}),
            vanishing=frozenset({"orders"}),
            debris="orders.lance",
        ),
        Scenario(
            "rename-v1",
            "rename",
            ["rename", "old", "new"],
            build_rename_v1,
            minus("old", new="old"),
            frozenset({0, 3}),
            exclusive=("old", "new"),
            extra_final=rename_v1_final,
        ),
        Scenario(
            "rename-v2",
            "rename",
            ["rename", "sales.a", "archive.a"],
            build_rename_v2,
            minus("sales.a", **{"archive.a": "sales.a"}),
            frozenset({0, 3}),
            exclusive=("sales.a", "archive.a"),
        ),
        Scenario(
            "drop-table",
            "drop",
            ["drop", "sales.big", "--yes"],
            build_drop_table,
            minus("sales.big"),
            frozenset({0, 3}),
            vanishing=frozenset({"sales.big"}),
            extra_final=drop_final("sales$big"),
        ),
        Scenario(
            "drop-namespace",
            "drop",
            ["drop", "sales", "--cascade", "--yes"],
            build_drop_namespace,
            minus(*dropped_ns),
            frozenset({0, 3}),
            vanishing=frozenset(dropped_ns),
            extra_final=drop_final("sales"),
        ),
        Scenario(
            "migrate-v1",
            "migrate-v1",
            ["migrate-v1"],
            build_migrate,
            lambda before: dict(before),
            frozenset({0}),
            extra_final=migrate_final,
            extra_kill=migrate_kill,
        ),
        Scenario(
            "register-child",
            "register",
            ["register", "sales.orders", "imports/orders"],
            build_register_child,
            plus(**{"sales.orders": "imports/orders"}),
            frozenset({0, 4}),
            extra_final=register_final("imports/orders", "sales$orders"),
        ),
        Scenario(
            "register-deregistered",
            "register",
            ["register", "events", "events.lance"],
            build_register_deregistered,
            plus(events="events.lance"),
            frozenset({0, 4}),
            extra_final=register_final("events.lance", "events"),
        ),
    ]
    return {s.name: s for s in all_scenarios}


# --- inspecting a namespace ----------------------------------------------------------------


class Fingerprints:
    """Fingerprints by (location, the names of every file below it).

    Lance never rewrites a file in place (every data file, manifest and transaction file has a
    fresh name), so a directory holding exactly the same file names as when it was last read holds
    the same table; only directories whose files changed are opened again. This keeps S3 trials
    affordable without weakening what is proved.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, frozenset[str]], tuple[int, int] | str] = {}

    def get(self, ns: Namespace, location: str, files: set[str]) -> tuple[int, int] | str:
        prefix = location + "/"
        key = (location, frozenset(f for f in files if f.startswith(prefix)))
        if not key[1]:
            return fingerprint(ns, location)  # nothing there: let fingerprint say why
        if key not in self._known:
            self._known[key] = fingerprint(ns, location)
        return self._known[key]


def inspect_state(
    root: Root, files: set[str], prints: Fingerprints, ns: Namespace | None = None
) -> dict:
    """Rows of `__manifest`, the tables a user sees (name -> location) and their data.

    `ns` may be a handle reused between inspections of the same root (S3: creating an s3fs
    client costs a few hundred ms against moto); its listing cache is dropped first.
    """
    if ns is None:
        ns = ns_of(root)
    elif not ns.storage.is_local:
        ns.storage.fs.invalidate_cache()
    snapshot = ns.snapshot()
    rows = list(snapshot.rows)
    listing = list_namespace(ns, Identifier(()), recursive=True, with_state=False)
    visible = {e.id: e.location for e in listing.entries if e.kind == KIND_TABLE}
    locations = set(visible.values()) | {
        r["location"] for r in rows if r["object_type"] == KIND_TABLE and r["location"]
    }
    found = {loc: prints.get(ns, loc, files) for loc in sorted(locations)}
    return {"ns": ns, "rows": rows, "visible": visible, "prints": found, "files": files}


def prepare(scenario: Scenario, template: Path) -> None:
    """Build the template and derive the expected tables before and after the command."""
    template.mkdir(parents=True)
    scenario.build(template)
    root = Root(str(template), {}, template)
    state = inspect_state(root, local_files(template), Fingerprints())
    scenario.template_rows = state["rows"]
    scenario.before = {name: state["prints"][loc] for name, loc in state["visible"].items()}
    assert all(isinstance(v, tuple) for v in scenario.before.values()), scenario.before
    after = scenario.transform(scenario.before)
    for name, value in after.items():
        if isinstance(value, int):  # created from the parquet file (ids 0..rows-1)
            after[name] = (value, value * (value - 1) // 2)
        elif isinstance(value, str):  # registered from a directory
            after[name] = fingerprint(state["ns"], value)
    scenario.after = after


def _verify(scenario: Scenario, root: Root, state: dict, final: bool) -> list[str]:
    """Consistency problems of the state (after a kill, or with `final` after the rerun)."""
    problems = []
    ns, rows, visible, prints = state["ns"], state["rows"], state["visible"], state["prints"]
    ids = Counter(r["object_id"] for r in rows)
    problems += [f"duplicate object_id {oid!r} x{n}" for oid, n in ids.items() if n > 1]
    table_locs = Counter(r["location"] for r in rows if r["object_type"] == KIND_TABLE)
    problems += [f"location {loc!r} in {n} rows" for loc, n in table_locs.items() if n > 1]
    names = {**scenario.before, **scenario.after}  # what each name may hold

    def expect(name: str, location: str, how: str) -> None:
        got = prints.get(location)
        if name not in names:
            problems.append(f"unexpected table {name} ({how}) at {location}: {got}")
        elif got == GONE and not final and name in scenario.vanishing:
            pass
        elif got != names[name]:
            problems.append(f"{name} ({how}) at {location}: {got}, expected {names[name]}")

    for name, location in visible.items():
        expect(name, location, "listed")
    for row in rows:
        if row["object_type"] == KIND_TABLE:
            name = Identifier.from_object_id(row["object_id"]).display()
            expect(name, row["location"], "row")
    if final:
        if set(visible) != set(scenario.after):
            problems.append(
                f"tables {sorted(visible)}, expected {sorted(scenario.after)} "
                f"(missing {sorted(set(scenario.after) - set(visible))}, "
                f"extra {sorted(set(visible) - set(scenario.after))})"
            )
        for row in rows:
            props = decode_properties(row.get("metadata"))
            left = [k for k in (RENAME_INTENT_KEY, RENAMED_FROM_KEY) if k in props]
            if left:
                problems.append(f"row {row['object_id']} still carries {left}")
        if scenario.extra_final:
            problems += scenario.extra_final(scenario, root, ns, state)
    else:
        kept = set(scenario.before) & set(scenario.after)
        lost = sorted(kept - set(visible))
        if lost:
            problems.append(f"untouched tables lost: {lost}")
        if scenario.exclusive:
            present = [n for n in scenario.exclusive if n in visible]
            if len(present) != 1:
                problems.append(f"of {scenario.exclusive} visible: {present}")
        if scenario.extra_kill:
            problems += scenario.extra_kill(scenario, root, ns, state)
    return problems


def is_complete(scenario: Scenario, root: Root, state: dict) -> bool:
    return not _verify(scenario, root, state, final=True)


def run_check(scenario: Scenario, state: dict) -> tuple[list[str], list[str]]:
    """(problems, leftovers) of the service-level check after the rerun."""
    report = check(state["ns"], Identifier(()))
    problems, leftovers = [], []
    for finding in report.findings:
        text = f"{finding.code} {finding.location}"
        if finding.code not in scenario.allowed_findings:
            problems.append(f"check: {text}: {finding.message}")
            continue
        leftovers.append(finding.code)
        if finding.code in ("orphan_table_directory", "abandoned_table_write"):
            # only a V2 directory the killed create wrote for its target, never referenced
            target = Identifier.parse(scenario.argv[2]).object_id
            if v2_location_object_id(finding.location or "") != target:
                problems.append(f"check: unexpected orphan {text}")
    return problems, leftovers


# --- running and killing -------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    env.pop("LANCENS_ROOT", None)
    return env


def run_timed(root: Root, argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "lancens_cli", *root.args, *argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=_env(),
        timeout=300,
    )
    return time.monotonic() - start, proc


def kill_after(root: Root, argv: list[str], delay: float) -> tuple[int | None, str]:
    """Run the command, SIGKILL it after `delay` seconds; (exit code if it finished, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *root.args, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=delay)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        return None, ""


def handler_floor() -> float:
    """How soon a Ctrl-C can be the command's to handle: three times the time a cold interpreter
    takes to run our first line (`interrupt.install_for_process`, the first statement of
    `python -m lancens_cli`), the slowest of three. Before it, Python's own start-up (`site`
    and its `.pth` files: 30 ms here, more on a loaded machine) owns SIGINT and no program
    can answer it; after it, every Ctrl-C must end in exit 130. Three times, and at least
    0.2 s: the floor is measured once, and the suite's other worker can slow a later start
    (a Ctrl-C at 0.098 s once met Python's own start-up under load)."""
    code = "from lancens_cli import interrupt; interrupt.install_for_process()"
    slowest = 0.0
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", code], env=_env(), check=True)
        slowest = max(slowest, time.monotonic() - started)
    return max(3 * slowest, 0.2)


def interrupt_after(root: Root, argv: list[str], delay: float) -> tuple[int, str]:
    """Run the command, send SIGINT (Ctrl-C) after `delay` seconds; (exit code, stderr).

    The process must then stop by itself: a negative code is a death by signal (an abort).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *root.args, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@dataclass
class Trial:
    delay: float
    phase: str
    rerun_code: int | None
    leftovers: list[str]
    problems: list[str]
    kill_state: str  # a short description of what the kill left, for reports


@dataclass
class Outcome:
    scenario: str
    command: str
    kind: str
    runtime: float
    seed: int
    trials: list[Trial] = field(default_factory=list)

    def summary(self) -> str:
        phases = Counter(t.phase for t in self.trials)
        codes = Counter(t.rerun_code for t in self.trials)
        left = Counter(code for t in self.trials for code in t.leftovers)
        failed = sum(1 for t in self.trials if t.problems)
        return (
            f"{self.scenario:22s} {self.kind:5s} runtime {self.runtime:5.2f}s seed {self.seed:<6d} "
            f"kills {len(self.trials):3d} | "
            + " ".join(f"{p} {phases[p]}" for p in PHASES)
            + f" | rerun exits {dict(sorted(codes.items()))}"
            + (f" | leftovers {dict(left)}" if left else "")
            + (f" | FAILED {failed}" if failed else "")
        )


def _describe(state: dict, template_files: set[str]) -> str:
    files = state["files"]
    added, removed = files - template_files, template_files - files
    tables = {n: state["prints"].get(loc) for n, loc in state["visible"].items()}
    return (
        f"+{len(added)} -{len(removed)} files (e.g. +{sorted(added)[:3]} -{sorted(removed)[:3]}); "
        f"tables {tables}; rows {[r['object_id'] for r in state['rows']]}"
    )


def run_trials(
    scenario: Scenario,
    place: Place,
    template: Path,
    kills: int,
    seed: int,
    *,
    sigint: bool = False,
) -> Outcome:
    """Kill the command `kills` times (or, with `sigint`, interrupt it as Ctrl-C does)."""
    template_files = local_files(template)
    prints = Fingerprints()
    # The command's runtime, measured once in a cold process on a fresh copy (which also
    # proves that the uninterrupted command works and ends in the expected state).
    timing_root = place.copy(template, f"{scenario.name}-timing")
    runtime, proc = run_timed(timing_root, scenario.argv)
    assert proc.returncode == 0, proc.stderr
    state = inspect_state(
        timing_root, place.files(timing_root), prints, place.namespace(timing_root)
    )
    assert not _verify(scenario, timing_root, state, final=True), _verify(
        scenario, timing_root, state, final=True
    )
    problems, _ = run_check(scenario, state)
    assert not problems, problems
    place.remove(timing_root)

    outcome = Outcome(scenario.name, scenario.command, place.kind, runtime, seed)
    rng = random.Random(seed)
    floor = handler_floor() if sigint else 0.0
    for number in range(kills):
        delay = rng.uniform(*(SIGINT_WINDOW if sigint else KILL_WINDOW)) * runtime
        delay = max(delay, floor)
        root = place.copy(template, f"{scenario.name}-{number}")
        if sigint:
            code, err = interrupt_after(root, scenario.argv, delay)
        else:
            code, err = kill_after(root, scenario.argv, delay)
        problems = []
        state = inspect_state(root, place.files(root), prints, place.namespace(root))
        if sigint and code == 130:
            # Ctrl-C: the command stops before its first irrevocable change, having removed
            # what it staged, or finishes that change; never anything in between.
            if state["files"] == template_files:
                phase = UNTOUCHED
            elif is_complete(scenario, root, state):
                phase = COMPLETE
            else:
                phase = PARTIAL
                problems.append("interrupted (130) but left a half-done state")
            if "lancens: interrupted" not in err:
                problems.append(f"exit 130 without saying so: {err.strip()[-300:]}")
        elif sigint and code != 0:
            phase = EXITED
            problems.append(f"SIGINT gave exit {code} (expected 130): {err.strip()[-300:]}")
        elif code is not None:
            phase = EXITED
            if code != 0:
                problems.append(f"the uninterrupted run exited {code}: {err.strip()[-300:]}")
        elif state["files"] == template_files:
            phase = UNTOUCHED
        else:
            phase = COMPLETE if is_complete(scenario, root, state) else PARTIAL
        kill_state = _describe(state, template_files)
        problems += [f"after kill: {p}" for p in _verify(scenario, root, state, final=False)]

        rerun, recovered = _rerun(scenario, root, place, state, problems)
        if rerun.exit_code not in scenario.rerun_codes:
            problems.append(f"rerun exited {rerun.exit_code}: {rerun.stderr.strip()}")
        elif rerun.exit_code != 0 and phase not in (COMPLETE, EXITED):
            problems.append(
                f"rerun exited {rerun.exit_code} ({rerun.stderr.strip()}) "
                f"though the killed run had not finished ({phase})"
            )
        state = inspect_state(root, place.files(root), prints, place.namespace(root))
        problems += [f"after rerun: {p}" for p in _verify(scenario, root, state, final=True)]
        check_problems, leftovers = run_check(scenario, state)
        problems += [f"after rerun: {p}" for p in check_problems]
        if scenario.name == "register-deregistered" and state["ns"].storage.exists(
            f"events.lance/{DEREGISTERED_MARKER}"
        ):
            leftovers.append("deregistered_marker")  # the row exists: harmless but left over
        if recovered:
            leftovers.append("refused_over_debris")  # rerun after `check --fix`
        registered = {r["location"] for r in state["rows"]}
        for name, location in state["visible"].items():
            if location not in registered and name not in scenario.before:
                leftovers.append("table_without_row")  # known only from its directory
        outcome.trials.append(Trial(delay, phase, rerun.exit_code, leftovers, problems, kill_state))
        if not problems:
            place.remove(root)
    return outcome


def _rerun(scenario: Scenario, root: Root, place: Place, state: dict, problems: list[str]):
    """Rerun the command; over a killed root create's debris, the refusal and the way on.

    Returns (the last rerun's result, whether it needed `check --fix` first).
    """
    debris = scenario.debris and (
        table_state(state["ns"].storage, scenario.debris) == STATE_UNCOMMITTED
    )
    # On S3 a killed process's last upload may land after the kill-time listing: the files
    # the refused rerun must leave alone are those there just before it runs.
    before = place.files(root)
    rerun = invoke(*root.args, *scenario.argv)
    if not debris:
        return rerun, False
    if rerun.exit_code != 4 or "check --fix" not in rerun.stderr:
        problems.append(f"rerun over debris exited {rerun.exit_code}: {rerun.stderr.strip()}")
    if place.files(root) != before:
        problems.append("the rerun refused over debris changed files")
    fix = invoke(*root.args, "check", "--fix", "--grace-minutes", "0")
    if fix.exit_code != 0:
        problems.append(f"check --fix over debris exited {fix.exit_code}: {fix.stdout.strip()}")
    return invoke(*root.args, *scenario.argv), True


def failure_report(outcome: Outcome) -> str:
    lines = [outcome.summary()]
    for trial in outcome.trials:
        if trial.problems:
            lines.append(
                f"  kill at {trial.delay:.3f}s ({trial.delay / outcome.runtime:.2f} x runtime), "
                f"phase {trial.phase}, rerun exit {trial.rerun_code}:"
            )
            lines += [f"    {p}" for p in trial.problems]
            lines.append(f"    state after kill: {trial.kill_state}")
    return "\n".join(lines)
