"""A prune with nothing to do after a run that changed nothing is answered from the record
alone, without opening Lance (service/prune/quiet.py), and says exactly what a run that looks
would say; after any change in between, the run looks, and removes what a full run removes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time

import pytest
from helpers import Root, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_namespace import STEP, Scene
from test_prune_record import CHANGE, removed, skipped

from lancens_cli.service.prune import quiet
from lancens_cli.service.prune import run as run_module
from lancens_cli.service.prune.record import RECORD, SETTLE

FLAGS = ["--older-than", "1s", "--grace", "1s", "--force"]
# Changes outside the tables: the catalog, a namespace, a dead table write at the top.
ROOT_CHANGE = st.one_of(
    st.tuples(st.just("namespace"), st.integers(0, 1000)),
    st.tuples(st.just("ghost"), st.integers(0, 1000)),
    st.tuples(st.just("stray"), st.integers(0, 1000)),
)


def looked(monkeypatch) -> list[int]:
    """Counts the runs that looked at the root (the run service called)."""
    calls: list[int] = []
    real = run_module.prune

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "prune", counting)
    return calls


def prune_json(root: Root, *args: str) -> dict:
    result = invoke(*root.args, "--json", "prune", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def tables(report: dict) -> list[str]:
    return [t["location"] for t in report["tables"]]


def root_state(root: Root) -> dict | None:
    return json.loads(gzip.decompress((root.local_path / RECORD).read_bytes())).get("root")


def quiet_root(scene: Scene) -> None:
    """Prune (removing what is old), then again once the directories settled: that second
    run changes nothing and leaves the root's state."""
    time.sleep(1.1)
    prune_json(scene.ns, *FLAGS, "--yes")
    time.sleep(SETTLE.total_seconds() + 0.2)
    second = prune_json(scene.ns, *FLAGS, "--yes")
    assert second["totals"]["versions_removed"] == 0, second["totals"]
    assert root_state(scene.ns) is not None


def apply_root_change(scene: Scene, change: tuple) -> None:
    kind, n = change
    if kind == "namespace":
        assert invoke(*scene.ns.args, "create", "namespace", f"n{n}").exit_code == 0
    elif kind == "ghost":  # a root table write that never committed, long past the grace
        ghost = scene.root / f"ghost{n}.lance" / "data"
        ghost.mkdir(parents=True, exist_ok=True)
        (ghost / "0.lance").write_bytes(b"never committed")
        for path in (ghost / "0.lance", ghost, ghost.parent):
            os.utime(path, (1e9, 1e9))
    else:  # a file in a directory no table owns
        (scene.root / "x" / f"stray{n}").write_bytes(b"")


def test_a_quiet_run_opens_no_lance_and_says_what_looking_says(tmp_path, monkeypatch):
    scene = Scene(tmp_path)
    for step in [("append", 5), ("tag", 0), ("append", 3), ("publish", 2), ("debris", 2)]:
        scene.apply(step)
    quiet_root(scene)
    code = (
        "import sys\n"
        "from lancens_cli.cli.app import main\n"
        f"sys.argv = ['lancens', *{scene.ns.args!r}, '--json', 'prune', *{FLAGS!r}, '--yes']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "heavy = [m for m in ('lance', 'pyarrow', 'pydantic') if m in sys.modules]\n"
        "sys.stderr.write(f'imported: {heavy}')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    # nor anything else that costs a cron run time to import (pydantic: typer >= 0.29 loads it)
    assert proc.stderr.endswith("imported: []"), proc.stderr
    answered = json.loads(proc.stdout)
    # the same root, looked at: the run service, with the record but without the root's state
    monkeypatch.setattr(quiet, "answer", lambda *args: None)
    calls = looked(monkeypatch)
    looking = prune_json(scene.ns, *FLAGS, "--yes")
    assert calls
    assert answered == looking
    assert skipped(answered) == {t["location"] for t in answered["tables"]}
    assert answered["manifest"] is not None


def test_a_dry_run_full_run_other_policy_or_other_settings_look(tmp_path, monkeypatch):
    scene = Scene(tmp_path)
    scene.apply(("append", 5))
    quiet_root(scene)
    calls = looked(monkeypatch)
    prune_json(scene.ns, *FLAGS, "--yes")
    assert calls == []  # answered from the record
    for extra in (["--dry-run"], ["--full", "--yes"], ["--retain", "2", "--yes"]):
        prune_json(scene.ns, *FLAGS, *extra)
        assert calls, extra
        calls.clear()
    # the settings that decide which tables a run sees are part of the record's key
    result = invoke("--no-dir-listing", *scene.ns.args, "--json", "prune", *FLAGS, "--yes")
    assert result.exit_code == 0, result.stderr
    assert calls


def test_a_dropped_table_costs_one_looking_run(tmp_path, monkeypatch):
    scene = Scene(tmp_path)
    scene.apply(("append", 5))
    scene.apply(("clone", 0, "{real}/ns/{table}"))
    quiet_root(scene)
    assert invoke(*scene.ns.args, "drop", "clone0", "--yes").exit_code == 0
    time.sleep(SETTLE.total_seconds() + 0.2)
    calls = looked(monkeypatch)
    first = prune_json(scene.ns, *FLAGS, "--yes")  # looks; the dropped table leaves the record
    assert calls and "clone0.lance" not in tables(first)
    calls.clear()
    time.sleep(SETTLE.total_seconds() + 0.2)
    prune_json(scene.ns, *FLAGS, "--yes")  # looks again: the record's tables are the scope now
    calls.clear()
    assert prune_json(scene.ns, *FLAGS, "--yes")["tables"]
    assert calls == []  # and then answers from the record again


@pytest.mark.slow
def test_after_a_quiet_run_every_change_is_seen(tmp_path_factory, monkeypatch):
    answered: list[bool] = []

    @settings(
        max_examples=10,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        before=st.lists(STEP, min_size=1, max_size=5),
        between=st.lists(
            st.booleans().flatmap(lambda root: ROOT_CHANGE if root else CHANGE), max_size=3
        ),
    )
    def property_holds(before, between):
        scene = Scene(tmp_path_factory.mktemp("quiet"))
        for step in [("append", 5), ("tag", 0), *before]:
            scene.apply(step)
        quiet_root(scene)
        for change in between:
            if change[0] in ("namespace", "ghost", "stray"):
                apply_root_change(scene, change)
            else:
                scene.apply(change)
        time.sleep(1.1)  # what changed is past the 1s window and grace
        full = prune_json(scene.ns, *FLAGS, "--full", "--dry-run")
        calls = looked(monkeypatch)
        incremental = prune_json(scene.ns, *FLAGS, "--yes")
        monkeypatch.undo()
        assert removed(incremental) == removed(full), (before, between)
        assert tables(incremental) == tables(full)
        assert [d["location"] for d in incremental["debris"]] == [
            d["location"] for d in full["debris"]
        ]
        assert (incremental["manifest"] or {}).get("versions_removed") == (
            full["manifest"] or {}
        ).get("versions_removed")
        if not between:
            assert not calls  # nothing changed: answered from the record
        answered.append(not calls)

    property_holds()
    assert any(answered) and not all(answered)
