"""Crash safety: `lancens` killed with SIGKILL at random moments, then the same command rerun.

Covered: `create table --from` (a child table in a V2 directory, a root table in `<name>.lance`),
`rename` (a root V1 table, which moves to a V2 directory; a V2 child table into another
namespace), `drop` (a table with many data files; a namespace with --cascade), `migrate-v1`
(40 V1 tables) and `register` (a directory under a child name; a deregistered root table), on
local roots and on S3 (moto); create, migrate-v1, rename and drop also on GCS (fake-gcs-server
behind the write proxy, LANCENS_CRASH_GCS_KILLS kills each, default 3). Each kill lands
uniformly in [0.3, 1.0] x the command's cold runtime: during start-up, data writes and commits.
After each kill the state is checked, the same command is rerun and the namespace must be
consistent with the effect complete exactly once (see crash_harness.py for the precise definition
per command).

LANCENS_CRASH_KILLS (default 50) is the number of kills per command, over local and S3 roots
(70 % local: 35 + 15 by default); a command with two variants splits them. LANCENS_CRASH_SEED
changes the delays.
With -s (and without xdist, e.g. `-p no:xdist`) a summary per scenario and per command is printed.

Ctrl-C: the same scenarios (create, migrate-v1, rename; local roots) and a partitioned `write`
get SIGINT instead, in [0.05, 0.75] x the cold runtime. The process must exit 130 by itself (0
only if it had finished), never die of a signal or abort, and leave exactly the state before the
command or its finished effect; then the rerun completes and `check` is clean.
LANCENS_SIGINT_TRIALS (default 5) is the number of interrupts per scenario (30 in all).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import zlib
from collections import Counter
from pathlib import Path

import pytest
from crash_harness import PHASES, Place, failure_report, prepare, run_trials, scenarios

pytestmark = pytest.mark.slow  # kill loops: hundreds of processes

KILLS = int(os.environ.get("LANCENS_CRASH_KILLS", "50"))
SEED = int(os.environ.get("LANCENS_CRASH_SEED", "0"))
LOCAL_SHARE = 0.7  # 35 local + 15 S3 kills per command by default
GCS_KILLS = int(os.environ.get("LANCENS_CRASH_GCS_KILLS", "3"))  # per GCS scenario
GCS_SCENARIOS = ["create-root", "create-child", "migrate-v1", "rename-v1", "drop-namespace"]
VARIANTS = {
    "create": ["create-child", "create-root"],
    "rename": ["rename-v1", "rename-v2"],
    "drop": ["drop-table", "drop-namespace"],
    "migrate-v1": ["migrate-v1"],
    "register": ["register-child", "register-deregistered"],
}


def kills_for(name: str, kind: str) -> int:
    """This scenario's share of the command's kills on this kind of root."""
    if kind == "gcs":
        return GCS_KILLS
    command = next(c for c, names in VARIANTS.items() if name in names)
    local = round(KILLS * LOCAL_SHARE)
    total = local if kind == "local" else KILLS - local
    names = VARIANTS[command]
    index = names.index(name)
    return total // len(names) + (1 if index < total % len(names) else 0)


# The slowest first (measured), so that the two xdist workers finish at about the same time.
ORDER = [
    "migrate-v1-s3", "migrate-v1-local", "rename-v1-s3", "drop-table-s3", "create-child-local",
    "drop-namespace-s3", "create-child-s3", "create-root-local", "create-root-s3",
    "register-child-local",
    "drop-table-local", "register-deregistered-local", "register-child-s3",
    "register-deregistered-s3", "drop-namespace-local", "rename-v2-s3", "rename-v1-local",
    "rename-v2-local",
]  # fmt: skip
CASES = sorted(
    (
        pytest.param(name, kind, id=f"{name}-{kind}", marks=[pytest.mark.s3] * (kind == "s3"))
        for kind in ("s3", "local")
        for names in VARIANTS.values()
        for name in names
    ),
    key=lambda case: ORDER.index(case.id),
) + [pytest.param(name, "gcs", id=f"{name}-gcs", marks=pytest.mark.gcs) for name in GCS_SCENARIOS]

_OUTCOMES = []


@pytest.fixture(scope="module", autouse=True)
def _summary():
    """Quiet moto's request log (noise in failure reports); print the summary at the end."""
    werkzeug = logging.getLogger("werkzeug")
    level = werkzeug.level
    werkzeug.setLevel(logging.WARNING)
    yield
    werkzeug.setLevel(level)
    if not _OUTCOMES:
        return
    print("\ncrash summary per scenario:")
    for outcome in _OUTCOMES:
        print("  " + outcome.summary())
    print("crash summary per command:")
    for command in VARIANTS:
        mine = [o for o in _OUTCOMES if o.command == command]
        if not mine:
            continue
        trials = [t for o in mine for t in o.trials]
        phases = Counter(t.phase for t in trials)
        kinds = Counter(o.kind for o in mine for _ in o.trials)
        codes = Counter(t.rerun_code for t in trials)
        left = Counter(code for t in trials for code in t.leftovers)
        failed = sum(1 for t in trials if t.problems)
        before = phases["untouched"] + phases["partial"]
        print(
            f"  {command:10s} kills {len(trials):3d} ({dict(kinds)}); "
            f"before completion {before} ({', '.join(f'{p} {phases[p]}' for p in PHASES[:2])}), "
            f"after {len(trials) - before} ({', '.join(f'{p} {phases[p]}' for p in PHASES[2:])}); "
            f"rerun exits {dict(sorted(codes.items()))}; leftovers {dict(left)}; failed {failed}"
        )


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("crash-data")


@pytest.fixture
def trial_dir(tmp_path):
    """Where local trial roots live: tmpfs when there is one (LANCENS_CRASH_TMPDIR overrides).

    On this machine's ext4 (mounted with `discard`) deleting a table directory can stall for half
    a second and slows every process doing I/O, which made the cold runtime, and so the kill
    delays, unrepresentative. A SIGKILL does not lose the page cache, so what survives a kill
    is the same on tmpfs and on a disk.
    """
    base = os.environ.get("LANCENS_CRASH_TMPDIR") or (
        "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    )
    if base is None:
        yield tmp_path
        return
    path = tempfile.mkdtemp(prefix="lancens-crash-", dir=base)
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_kill_and_rerun(name, kind, data_dir, trial_dir, tmp_path, request):
    scenario = scenarios(data_dir, kind)[name]
    remote = request.getfixturevalue(f"{kind}_root") if kind != "local" else None
    place = Place(kind, trial_dir, remote)
    template = tmp_path / "template"
    prepare(scenario, template)
    seed = zlib.crc32(f"{name}-{kind}-{SEED}".encode()) % 100_000
    outcome = run_trials(scenario, place, template, kills_for(name, kind), seed)
    _OUTCOMES.append(outcome)
    print("\n" + outcome.summary())
    assert not any(t.problems for t in outcome.trials), failure_report(outcome)


# --- Ctrl-C -------------------------------------------------------------------------------------
# SIGINT at random moments: the process must exit 130 by itself every time (never a death by
# signal or an abort), leaving either exactly the state before the command or its finished
# effect; then the rerun completes and `check` is clean. Local roots only, to keep it short.

SIGINTS = int(os.environ.get("LANCENS_SIGINT_TRIALS", "5"))  # per scenario below
SIGINT_CASES = ["create-root", "create-child", "migrate-v1", "rename-v1", "rename-v2"]


@pytest.mark.parametrize("name", SIGINT_CASES)
def test_sigint_and_rerun(name, data_dir, trial_dir, tmp_path):
    scenario = scenarios(data_dir, "local")[name]
    place = Place("local", trial_dir)
    template = tmp_path / "template"
    prepare(scenario, template)
    seed = zlib.crc32(f"sigint-{name}-{SEED}".encode()) % 100_000
    outcome = run_trials(scenario, place, template, SIGINTS, seed, sigint=True)
    print("\nSIGINT " + outcome.summary())
    assert not any(t.problems for t in outcome.trials), failure_report(outcome)


def _partitioned_root(path: Path, schema: Path, first: Path):
    from helpers import SPEC1, Root, invoke

    path.mkdir()
    root = Root(str(path), {}, path)
    setup = invoke(*root.args, "add-partition-spec", "--schema", str(schema), *SPEC1)
    assert setup.exit_code == 0, setup.stderr
    assert invoke(*root.args, "write", "--from", str(first)).exit_code == 0
    return root


def test_sigint_during_a_partitioned_write(tmp_path):
    """`write` interrupted: all of its rows published or none, no partition table left behind
    that no row references (`check` clean), and the rerun publishes every row exactly once."""
    import random
    import signal
    import subprocess
    import sys
    import time

    import pyarrow.parquet as pq
    from data import events
    from helpers import invoke, published_rows, run_cli

    schema, first, big = (tmp_path / n for n in ("schema.parquet", "first.parquet", "big.parquet"))
    pq.write_table(events(1), schema)
    pq.write_table(events(2000, seed=1), first)
    rows = 300_000
    pq.write_table(events(rows, seed=2, start=10_000), big)

    def write(root) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "lancens_cli", *root.args, "write", "--from", str(big)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    timing = _partitioned_root(tmp_path / "timing", schema, first)
    start = time.monotonic()
    assert write(timing).wait() == 0
    runtime = time.monotonic() - start
    rng = random.Random(SEED)
    for trial in range(SIGINTS):
        root = _partitioned_root(tmp_path / f"t{trial}", schema, first)
        before = sorted(published_rows(root)["id"].to_pylist())
        dirs_before = {p.name for p in root.local_path.iterdir()}
        complete = sorted(before + list(range(10_000, 10_000 + rows)))
        proc = write(root)
        time.sleep(rng.uniform(0.05, 0.75) * runtime)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 130), (trial, proc.returncode, err)
        ids = sorted(published_rows(root)["id"].to_pylist())
        assert ids in (before, complete), f"trial {trial}: {len(ids)} rows published"
        if proc.returncode == 0:
            assert ids == complete
        if ids == before:  # stopped before publishing: the partition tables it made are gone
            assert {p.name for p in root.local_path.iterdir()} == dirs_before, trial
        check = run_cli(*root.args, "check")
        assert check.exit_code == 0, (trial, check.stdout + check.stderr)
        if ids == before:
            assert invoke(*root.args, "write", "--from", str(big)).exit_code == 0
            assert sorted(published_rows(root)["id"].to_pylist()) == complete
