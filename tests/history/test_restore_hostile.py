"""`lancens restore` as a hostile user and a careful reviewer meet it: a root on S3, a SIGKILL at
random moments, a writer committing between the restore's plan and its commit, restores across
schema evolution, and inputs meant to break it.

The oracle is pylance alone, never lancens: what `__manifest` version V publishes (every
partition table row, and the rows each published table version holds). A restore to V must
publish exactly V's state, or (killed) exactly the state before it; every version of the history
must keep reading what it read; a bad input is one line on stderr, its documented exit code and
no change to the tree.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import events
from helpers import SPEC1, Root, cli, invoke, ok, run_cli, tree_snapshot, uri
from inotify_watch import OutsideWatch, describe
from storage.crash_harness import KILL_WINDOW, Place, kill_after, local_files, run_timed

from lancens_cli.service.namespace import Namespace
from lancens_cli.store.manifest import READER_FLAGS_KEY, WRITER_FLAGS_KEY, ManifestStore

RESTORE_MESSAGE = "lancens restore to version "
# what a killed command may leave for `check --fix` / `prune` to remove: never a lost row
DEBRIS = {"staged_manifest_file", "unreferenced_data_file", "abandoned_table_write"}


# --------------------------------------------------------------------------- the oracle


def open_manifest(root, version: int | None = None):
    return lance.dataset(
        uri(root, "__manifest"), version=version, storage_options=root.storage_options or None
    )


def manifest_versions(root) -> list[int]:
    return sorted(int(v["version"]) for v in open_manifest(root).versions())


def table_rows(root, version: int | None = None) -> dict[str, dict]:
    """object id -> the whole `__manifest` row of every partition table `version` publishes."""
    rows = open_manifest(root, version).to_table().to_pylist()
    return {
        r["object_id"]: r for r in rows if r["object_type"] == "table" and "$" in r["object_id"]
    }


def open_published(root, row: dict):
    location = uri(root, row["location"])
    options = root.storage_options or None
    if row.get("read_tag") is not None:
        return lance.dataset(location, version=row["read_tag"], storage_options=options)
    table = lance.dataset(location, storage_options=options)
    if row.get("read_branch") is not None:
        return table.checkout_version((row["read_branch"], row["read_version"]))
    return table.checkout_version(row["read_version"])


def published(root, version: int | None = None) -> dict[str, tuple]:
    """object id -> (location, ref, sorted ids) of every partition table `version` publishes."""
    found = {}
    for object_id, row in table_rows(root, version).items():
        ids = open_published(root, row).to_table(columns=["id"]).column("id").to_pylist()
        ref = (row["read_version"], row.get("read_branch"), row.get("read_tag"))
        found[object_id] = (row["location"], ref, sorted(ids))
    return found


def without_versions(rows: dict[str, dict]) -> dict[str, dict]:
    """`__manifest` rows but their read_version: a restored table on main is published on a
    version of its own holding the target's rows (a Restore of it, so that its latest version
    is the published one)."""
    return {oid: {k: v for k, v in r.items() if k != "read_version"} for oid, r in rows.items()}


def contents(state: dict[str, tuple]) -> dict[str, tuple]:
    """What readers read of each partition table: its location and rows (not which version)."""
    return {oid: (location, ids) for oid, (location, _, ids) in state.items()}


def all_ids(state: dict[str, tuple]) -> list[int]:
    return sorted(i for _, _, ids in state.values() for i in ids)


def commit_message(root, version: int) -> str | None:
    transaction = open_manifest(root).read_transaction(version)
    return (transaction.transaction_properties or {}).get("__lance_commit_message")


def local(path: Path) -> Root:
    return Root(str(path), {}, path)


def healthy(root) -> None:
    result = cli(root, "check")
    assert result.exit_code == 0, (result.stdout, result.stderr)


def one_line_error(result, code: int, words: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == "", result.stderr


def set_manifest_metadata(root, updates: dict[str, str]) -> None:
    """Another writer's metadata commit on `__manifest` (pylance, not lancens)."""
    latest = open_manifest(root)
    lance.LanceDataset.commit(
        uri(root, "__manifest"),
        lance.LanceOperation.UpdateConfig(
            table_metadata_updates=lance.LanceOperation.UpdateMap(updates, False)
        ),
        read_version=latest.version,
        storage_options=root.storage_options or None,
    )


# --------------------------------------------------------------------------- histories


def partitioned_history(root, files) -> int:
    """SPEC1 and three writes (the third into a partition the first two lack); the `__manifest`
    version after the first write, which the tests restore to."""
    ok(root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    ok(root, "write", "--from", files("a.parquet", events(40)))
    target = manifest_versions(root)[-1]
    ok(root, "write", "--from", files("b.parquet", events(30, seed=1, start=1000)))
    fresh = events(20, seed=2, start=2000, countries=("JP",))
    ok(root, "write", "--from", files("c.parquet", fresh))
    return target


MANY = tuple(f"C{i:02d}" for i in range(30))  # 30 countries x 2 years: 60 partitions
EVOLVE = [
    "evolve-schema",
    "--add",
    "score float64",
    "--rename",
    "country=nation",
    "--widen",
    "customer_id=int64",
    "--drop",
    "note",
]
TODAY = ["id", "event_date", "nation", "customer_id", "score"]


def old_rows(n: int, seed: int, start: int, countries=("US", "DE", "FR", None)) -> pa.Table:
    """Rows of the first schema generation: customer_id int32 and a `note` to drop later."""
    table = events(n, seed=seed, start=start, countries=countries, customer_type=pa.int32())
    return table.append_column("note", pa.array([f"n{i}" for i in range(start, start + n)]))


def new_rows(n: int, start: int, countries=("US", "DE")) -> pa.Table:
    """Rows of today's schema (after EVOLVE)."""
    table = events(n, seed=start, start=start, countries=countries, country="nation")
    return table.append_column("score", pa.array([i / 2 for i in range(n)], pa.float64()))


def evolved_history(root, folder: Path, countries=("US", "DE", "FR", None), n: int = 60) -> int:
    """Two writes at the first schema generation, EVOLVE (add, rename, widen, drop), a write at
    today's schema; the `__manifest` version before the evolution."""

    def parquet(name: str, table: pa.Table) -> str:
        pq.write_table(table, folder / name)
        return str(folder / name)

    schema = parquet("old-schema.parquet", old_rows(1, 0, 0))
    ok(root, "add-partition-spec", "--schema", schema, *SPEC1)
    ok(root, "write", "--from", parquet("o1.parquet", old_rows(n, 1, 0, countries)))
    ok(root, "write", "--from", parquet("o2.parquet", old_rows(n, 2, 10_000, countries)))
    target = manifest_versions(root)[-1]
    ok(root, *EVOLVE)
    ok(root, "write", "--from", parquet("n1.parquet", new_rows(n // 2, 20_000)))
    return target


def as_today(table: pa.Table) -> list[tuple]:
    """Rows of the first generation as today's schema reads them: `note` gone, `country` under
    its new name, customer_id widened, `score` NULL."""
    return [
        (r["id"], r["event_date"], r["country"], r["customer_id"], None) for r in table.to_pylist()
    ]


def rows_published(root, version: int | None = None) -> list[tuple]:
    """Every row `version` publishes, through pylance, as tuples of today's columns."""
    found = []
    for row in table_rows(root, version).values():
        table = open_published(root, row).to_table()
        assert table.schema.names == TODAY, (row["object_id"], table.schema)
        assert table.schema.field("customer_id").type == pa.int64()
        found += [tuple(r[name] for name in TODAY) for r in table.to_pylist()]
    return sorted(found)


def target_rows_today(root, version: int) -> list[tuple]:
    """What `version` published, read with the schema it was written with, as read today."""
    found = []
    for row in table_rows(root, version).values():
        found += as_today(open_published(root, row).to_table())
    return sorted(found)


# --------------------------------------------------------------------------- 1. on S3


@pytest.mark.s3
def test_on_s3_a_restore_publishes_exactly_the_versions_rows_and_keeps_the_history(s3_root, files):
    root = s3_root
    target = partitioned_history(root, files)
    latest = manifest_versions(root)[-1]
    history = {v: published(root, v) for v in manifest_versions(root)}
    rows_then = table_rows(root, target)
    assert rows_then and set(table_rows(root)) > set(rows_then)  # the JP write added some

    result = ok(root, "restore", "--to-version", str(target), "--yes", "--json").json()
    assert (result["planned_on"], result["new_version"]) == (latest, latest + 1)
    assert result["restored_over"] == []
    assert manifest_versions(root)[-1] == latest + 1
    assert commit_message(root, latest + 1) == f"{RESTORE_MESSAGE}{target}"
    # every column of every partition table row is the target's, and nothing else is published
    assert without_versions(table_rows(root)) == without_versions(rows_then)
    assert contents(published(root)) == contents(history[target])
    listed = ok(root, "--json", "partitions").json()["partitions"]
    assert {
        p["table"].replace(".", "$"): (
            p["location"],
            p["read_branch"],
            p["read_tag"],
            p["rows"],
        )
        for p in listed
    } == {
        oid: (
            r["location"],
            r["read_branch"],
            r["read_tag"],
            len(history[target][oid][2]),
        )
        for oid, r in rows_then.items()
    }
    unpublished = {c["object_id"] for c in result["changes"] if c["action"] == "unpublished"}
    assert unpublished == set(history[latest]) - set(rows_then)
    healthy(root)
    for version, state in history.items():  # the history in between stays readable
        assert published(root, version) == state
    # and a restore forward brings the later write back
    ok(root, "restore", "--to-version", str(latest), "--yes")
    assert without_versions(table_rows(root)) == without_versions(table_rows(root, latest))
    assert contents(published(root)) == contents(history[latest])
    healthy(root)


# --------------------------------------------------------------------------- 2. SIGKILL

KILL_SEEDS = (3, 17, 29)
KILLS_PER_SEED = int(os.environ.get("LANCENS_RESTORE_KILLS", "4"))


@pytest.fixture(scope="module")
def kill_template(tmp_path_factory):
    """A local root whose restore to before an evolution brings 20 partition tables to today's
    schema (several table commits each) and then commits `__manifest` once: a long enough
    restore to be killed inside its work. (template, target version, the restore's argv)."""
    folder = tmp_path_factory.mktemp("restore-kill")
    template = folder / "template"
    template.mkdir()
    root = local(template)
    target = evolved_history(root, folder, countries=MANY, n=400)
    return template, target, ["restore", "--to-version", str(target), "--yes"]


@pytest.mark.slow
def test_a_restore_killed_at_random_moments_publishes_all_or_nothing(kill_template, tmp_path):
    template, target, argv = kill_template
    root = local(template)
    history = {v: published(root, v) for v in manifest_versions(root)}
    before_latest = max(history)
    wanted = contents(history[target])
    template_files = local_files(template)
    place = Place("local", tmp_path)
    # how long a whole restore takes, and how long one that only plans (start-up included)
    timing = place.copy(template, "timing")
    full, proc = run_timed(timing, argv)
    assert proc.returncode == 0, proc.stderr
    assert contents(published(timing)) == wanted
    planning, proc = run_timed(place.copy(template, "timing-dry"), [*argv, "--dry-run"])
    assert proc.returncode == 0, proc.stderr
    outcomes = []
    for seed in KILL_SEEDS:
        rng = random.Random(seed)
        for number in range(KILLS_PER_SEED):
            # half in the harness's window, half where the work is (after the plan)
            window = KILL_WINDOW if number % 2 else (0.9 * planning / full, 1.05)
            delay = rng.uniform(*window) * full
            trial = place.copy(template, f"s{seed}-{number}")
            code, err = kill_after(trial, argv, delay)
            assert code in (None, 0), err
            after = manifest_versions(trial)
            if after[-1] == before_latest:
                phase = "untouched" if local_files(trial.local_path) == template_files else "work"
                assert published(trial) == history[before_latest], (seed, delay)  # exactly
            else:
                phase = "landed"
                assert after[-1] == before_latest + 1, (seed, delay, after)
                assert commit_message(trial, after[-1]) == f"{RESTORE_MESSAGE}{target}"
                assert contents(published(trial)) == wanted, (seed, delay)
            outcomes.append((seed, round(delay, 2), phase if code is None else "exited"))
            for version, state in history.items():  # no version lost a row
                assert published(trial, version) == state, (seed, delay, version)
            report = cli(trial, "--json", "check")
            codes = {f["code"] for f in json.loads(report.stdout)["findings"]}
            assert codes <= DEBRIS, (seed, delay, report.stdout)
            assert report.exit_code == (1 if codes else 0), report.stdout
            rerun = cli(trial, *argv, "--json")
            assert rerun.exit_code == 0, (seed, delay, rerun.stderr)
            assert contents(published(trial)) == wanted, (seed, delay)
            fixed = cli(trial, "check", "--fix", "--grace-minutes", "0")
            assert fixed.exit_code == 0, (seed, delay, fixed.stdout, fixed.stderr)
            healthy(trial)
            assert contents(published(trial)) == wanted
            ok(trial, "write", "--from", str(template.parent / "n1.parquet"))  # writable
            place.remove(trial)
    print(f"restore {full:.2f}s (plan {planning:.2f}s); kills (seed, delay, phase): {outcomes}")
    assert {phase for *_, phase in outcomes} & {"work", "landed"}, outcomes


# --------------------------------------------------------------------------- 3. a racing writer


def racing_writer(monkeypatch, root, sources: list[str]) -> list:
    """Run a real `lancens write` (a subprocess) for each source just before the restore's
    `__manifest` commit begins: after its plan, after any table it brought to today's schema.
    The patch only chooses the moment; the write and the restore are the CLI's own."""
    original = ManifestStore.commit
    writes = []

    def commit(self, plan, **kwargs):
        if (kwargs.get("message") or "").startswith(RESTORE_MESSAGE) and not writes:
            for source in sources:
                done = run_cli(*root.args, "--json", "write", "--from", source)
                writes.append(manifest_versions(root)[-1] if done.exit_code == 0 else done)
        return original(self, plan, **kwargs)

    monkeypatch.setattr(ManifestStore, "commit", commit)
    return writes


def test_a_write_between_the_plan_and_the_commit_is_restored_over_and_named(
    local_root, files, monkeypatch
):
    root = local_root
    target = partitioned_history(root, files)
    planned_on = manifest_versions(root)[-1]
    wanted = published(root, target)
    racing = [  # into partitions the target has, and into a new one
        files("r1.parquet", events(7, seed=8, start=8000, countries=("US", "DE"))),
        files("r2.parquet", events(5, seed=9, start=9000, countries=("BR",))),
    ]
    writes = racing_writer(monkeypatch, root, racing)
    result = ok(root, "restore", "--to-version", str(target), "--yes", "--json").json()
    assert writes == [planned_on + 1, planned_on + 2]
    assert result["planned_on"] == planned_on
    assert result["restored_over"] == writes
    assert result["new_version"] == planned_on + 3
    assert any(f"version(s) {writes[0]} to {writes[1]} landed" in n for n in result["notes"])
    assert contents(published(root)) == contents(wanted)
    assert without_versions(table_rows(root)) == without_versions(table_rows(root, target))
    # the writers' versions stay readable by time travel, with their rows
    assert set(range(8000, 8007)) <= set(all_ids(published(root, writes[0])))
    assert set(range(9000, 9005)) <= set(all_ids(published(root, writes[1])))
    changed = {c["object_id"]: c["action"] for c in result["changes"]}
    brazil = set(table_rows(root, writes[1])) - set(table_rows(root, writes[0]))
    assert brazil and all(changed[oid] == "unpublished" for oid in brazil)
    healthy(root)
    # a write after the restore lands on the restored state
    monkeypatch.undo()
    ok(root, "write", "--from", racing[0])
    assert all_ids(published(root)) == sorted(all_ids(wanted) + list(range(8000, 8007)))
    healthy(root)


def test_a_write_into_partitions_being_brought_to_todays_schema_is_restored_over(
    local_root, tmp_path, monkeypatch
):
    """The racing write lands after the restore brought the target's tables to today's schema
    (unpublished versions of their own) and before its commit: the writer starts from the
    published versions, the restore publishes the brought ones; nobody's rows leak into the
    other's, and the next write starts from what the restore published."""
    root = local_root
    target = evolved_history(root, tmp_path)
    planned_on = manifest_versions(root)[-1]
    expected = target_rows_today(root, target)
    pq.write_table(new_rows(9, 30_000, countries=("US", "DE", "FR")), tmp_path / "r.parquet")
    writes = racing_writer(monkeypatch, root, [str(tmp_path / "r.parquet")])
    result = ok(root, "restore", "--to-version", str(target), "--yes", "--json").json()
    assert writes == [planned_on + 1] and result["restored_over"] == writes
    assert any(c["to_current_schema"] for c in result["changes"])
    assert rows_published(root) == expected
    assert set(range(30_000, 30_009)) <= {r[0] for r in rows_published(root, writes[0])}
    healthy(root)
    monkeypatch.undo()
    pq.write_table(new_rows(4, 40_000), tmp_path / "after.parquet")
    ok(root, "write", "--from", str(tmp_path / "after.parquet"))
    ids = [r[0] for r in rows_published(root)]
    assert ids == sorted([r[0] for r in expected] + list(range(40_000, 40_004)))
    healthy(root)


def test_restoring_a_namespace_without_our_writer_guard_names_no_write_restored_over(
    local_root, files
):
    """A namespace laid out without our writer flag gets it with the restore, in a metadata
    commit of its own before the rows: that commit is the restore's, not a racing write."""
    root = local_root
    target = partitioned_history(root, files)
    set_manifest_metadata(root, {WRITER_FLAGS_KEY: "0"})
    planned_on = manifest_versions(root)[-1]
    wanted = published(root, target)
    result = ok(root, "restore", "--to-version", str(target), "--yes", "--json").json()
    assert result["planned_on"] == planned_on
    assert result["restored_over"] == [], result["notes"]
    assert not [n for n in result["notes"] if "landed while" in n]
    assert result["new_version"] == planned_on + 2  # the guard, then the rows
    assert open_manifest(root).metadata[WRITER_FLAGS_KEY] == str(1 << 10)
    assert contents(published(root)) == contents(wanted)
    healthy(root)


# --------------------------------------------------------------------------- 4. evolve-schema


def test_a_restore_to_before_an_evolution_reads_its_rows_under_todays_schema(local_root, tmp_path):
    root = local_root
    target = evolved_history(root, tmp_path)
    expected = target_rows_today(root, target)
    before = manifest_versions(root)[-1]
    history = {v: published(root, v) for v in manifest_versions(root)}
    result = ok(root, "restore", "--to-version", str(target), "--yes", "--json").json()
    brought = [c for c in result["changes"] if c["to_current_schema"]]
    assert brought
    for change in brought:  # a version built on the target's, which stays as it was
        assert change["brought_from"] == history[target][change["object_id"]][1][0]
    assert rows_published(root) == expected  # every row, NULL score, renamed, widened
    assert contents(published(root)) == contents(history[target])
    assert result["new_version"] == before + 1
    healthy(root)
    for version, state in history.items():
        assert published(root, version) == state
    # writers append at today's schema, on the restored state
    pq.write_table(new_rows(6, 50_000, countries=("US", "FR")), tmp_path / "w.parquet")
    ok(root, "write", "--from", str(tmp_path / "w.parquet"))
    assert [r[0] for r in rows_published(root)] == sorted(
        [r[0] for r in expected] + list(range(50_000, 50_006))
    )
    healthy(root)
    # a second restore to the same version changes what it publishes for nobody
    ok(root, "restore", "--to-version", str(target), "--yes")
    assert rows_published(root) == expected
    healthy(root)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_reads_the_restored_rows_under_todays_schema(local_root, tmp_path, monkeypatch):
    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
    root = local_root
    target = evolved_history(root, tmp_path)
    expected = target_rows_today(root, target)
    ok(root, "restore", "--to-version", str(target), "--yes")
    healthy(root)
    written = new_rows(5, 60_000)
    pq.write_table(written, tmp_path / "w.parquet")
    ok(root, "write", "--from", str(tmp_path / "w.parquet"))
    scanned = ok(root, "scan", "--json").json()
    assert scanned["columns"] == TODAY
    rows = sorted(tuple(r) for r in scanned["rows"])
    wanted = [(i, d.isoformat(), c, k, s) for i, d, c, k, s in expected]
    wanted += [
        (r["id"], r["event_date"].isoformat(), r["nation"], r["customer_id"], r["score"])
        for r in written.to_pylist()
    ]
    assert rows == sorted(wanted)


# --------------------------------------------------------------------------- 5. hostile inputs


@pytest.fixture
def history(partitioned, files):
    """The history conftest's `partitioned` root gets: three writes, one to a new partition."""
    ok(partitioned, "write", "--from", files("a.parquet", events(40)))
    ok(partitioned, "write", "--from", files("b.parquet", events(30, seed=1, start=1000)))
    ok(partitioned, "write", "--from", files("c.parquet", events(9, seed=2, countries=("JP",))))
    return partitioned


@pytest.mark.parametrize(
    ("version", "code", "words"),
    [
        (" 2 ", 0, ""),
        ("\t2\n", 0, ""),
        ("+2", 0, ""),
        ("-1", 3, "version -1 does not exist or was pruned; readable versions are 1 to"),
        ("0", 3, "version 0 does not exist"),
        ("99999999999999999999999", 3, "version 99999999999999999999999 does not exist"),
        ("18446744073709551616", 3, "does not exist or was pruned"),
        pytest.param("9" * 5000, 2, "is not a whole number", id="5000-digits"),
        ("2 3", 2, "'2 3' is not a whole number"),
        ("2.0", 2, "not a whole number"),
        ("1e3", 2, "not a whole number"),
        ("0x2", 2, "not a whole number"),
        ("", 2, "'' is not a whole number"),
        ("two", 2, "not a whole number"),
    ],
)
def test_odd_versions_name_the_version_or_fail_in_one_line(history, version, code, words):
    root = history
    before = tree_snapshot(root.local_path)
    result = cli(root, "restore", "--to-version", version, "--yes", "--dry-run", "--json")
    if code:
        one_line_error(result, code, words)
    else:
        assert result.exit_code == 0, result.stderr
        assert result.json()["restored_to"] == 2
    assert tree_snapshot(root.local_path) == before
    wanted = published(root, 2)
    result = cli(root, "restore", "--to-version", version, "--yes")  # not a dry run
    if code:
        one_line_error(result, code, words)
        assert tree_snapshot(root.local_path) == before
    else:
        assert result.exit_code == 0, result.stderr
        assert contents(published(root)) == contents(wanted)


def spellings(moment: dt.datetime) -> list[str]:
    """One instant written in many zones and forms of ISO 8601."""
    utc = moment.astimezone(dt.UTC)
    zones = [dt.timedelta(hours=h, minutes=m) for h, m in ((5, 30), (-3, -30), (14, 0), (-12, 0))]
    spelled = [utc.isoformat(), utc.isoformat().replace("+00:00", "Z")]
    spelled.append(utc.replace(tzinfo=None).isoformat())  # no offset: UTC
    spelled += [utc.astimezone(dt.timezone(z)).isoformat() for z in zones]
    compact = utc.astimezone(dt.timezone(-zones[1])).strftime("%Y-%m-%dT%H:%M:%S.%f%z")
    spelled.append(compact)  # +0330, no colon
    spelled.append(utc.astimezone(dt.timezone(zones[0])).isoformat(sep=" "))
    return spelled


def commit_times(root) -> dict[int, dt.datetime]:
    """Each `__manifest` version's commit instant, as pylance tells it (naive local time)."""
    return {
        int(v["version"]): v["timestamp"].astimezone(dt.UTC) for v in open_manifest(root).versions()
    }


def test_a_timestamp_in_any_zone_picks_the_newest_version_committed_at_or_before_it(history):
    root = history
    before = tree_snapshot(root.local_path)
    times = commit_times(root)
    assert len(set(times.values())) == len(times)  # distinct instants to tell apart
    for version, moment in times.items():
        for spelled in spellings(moment):
            result = cli(root, "restore", "--to-timestamp", spelled, "--dry-run", "--json")
            assert result.exit_code == 0, (spelled, result.stderr)
            assert result.json()["restored_to"] == version, (spelled, version)
        earlier = (moment - dt.timedelta(microseconds=1)).astimezone(
            dt.timezone(dt.timedelta(hours=-9))
        )
        result = cli(root, "restore", "--to-timestamp", earlier.isoformat(), "--dry-run", "--json")
        if version == min(times):
            one_line_error(result, 3, "no __manifest version was committed at or before")
        else:
            assert result.json()["restored_to"] == version - 1, (earlier, version)
    assert tree_snapshot(root.local_path) == before


@pytest.mark.parametrize("zone", ["America/St_Johns", "Asia/Kathmandu", "Pacific/Kiritimati"])
def test_the_machines_time_zone_does_not_move_the_version_a_timestamp_picks(history, zone):
    """Lance tells commit times in the process's local time; a process in another zone (a
    real one, `TZ`) must pick the same version for the same instant."""
    root = history
    times = commit_times(root)
    version = sorted(times)[len(times) // 2]
    for spelled in (spellings(times[version])[1], spellings(times[version])[3]):
        result = run_cli(
            *root.args,
            "restore",
            "--to-timestamp",
            spelled,
            "--dry-run",
            "--json",
            env={"TZ": zone},
        )
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["restored_to"] == version, (zone, spelled)


@pytest.mark.parametrize(
    ("timestamp", "code", "words"),
    [
        ("0001-01-01T00:00:00+14:00", 2, "is out of range"),
        ("9999-12-31T23:59:59-14:00", 2, "is out of range"),
        ("2026-11-27T13:13:25+25:00", 2, "is not ISO 8601"),
        ("2026-02-30T00:00:00Z", 2, "is not ISO 8601"),
        ("2026-11-27T13:13:25 Europe/Paris", 2, "is not ISO 8601"),
        ("2026-11-27T13:13:25Z[Europe/Paris]", 2, "is not ISO 8601"),
        ("tomorrow", 2, "is not ISO 8601"),
        ("", 2, "is not ISO 8601"),
        ("1970-01-01T00:00:00Z", 3, "no __manifest version was committed at or before"),
        ("2001-01-01T09:00:00+09:00", 3, "2001-01-01T00:00:00+00:00"),
    ],
)
def test_odd_timestamps_fail_in_one_line_and_change_nothing(history, timestamp, code, words):
    root = history
    before = tree_snapshot(root.local_path)
    one_line_error(cli(root, "restore", "--to-timestamp", timestamp, "--yes"), code, words)
    assert tree_snapshot(root.local_path) == before


def test_a_timestamp_after_the_newest_version_restores_nothing(history):
    root = history
    before = tree_snapshot(root.local_path)
    latest = manifest_versions(root)[-1]
    result = ok(root, "restore", "--to-timestamp", "9999-12-31T23:59:59+14:00", "--yes", "--json")
    assert result.json()["restored_to"] == latest and result.json()["new_version"] is None
    assert tree_snapshot(root.local_path) == before


@pytest.fixture
def tables(local_root, files):
    """A root with a namespace `a`, tables `a.t` (two versions) and `t`."""
    root = local_root
    source = files("t.parquet", pa.table({"id": list(range(5))}))
    ok(root, "create", "namespace", "a")
    ok(root, "create", "table", "a.t", "--from", source)
    ok(root, "create", "table", "t", "--from", source)
    location = Namespace.from_properties(root.properties).snapshot().get("a$t")["location"]
    lance.write_dataset(pa.table({"id": [9]}), str(root.local_path / location), mode="append")
    return root


@pytest.mark.parametrize(
    ("ident", "extra", "code", "words"),
    [
        ("a.t", (), 0, ""),
        ("a/t", ("--delimiter", "/"), 0, ""),
        ("a::t", ("--delimiter", "::"), 0, ""),
        ("a$t", ("--delimiter", "$"), 0, ""),
        ("a$t", (), 2, "it contains '$'"),
        ("a..t", (), 2, "a name part is empty"),
        (".t", (), 2, "a name part is empty"),
        ("a.t.", (), 2, "a name part is empty"),
        ("../t", (), 2, "a name part is empty"),
        ("", (), 2, "the root is a namespace, not a table"),
        ("a", (), 2, "a is a namespace, not a table"),
        ("a\x00t", (), 2, "control character"),
        ("a\nt", (), 2, "control character"),
        ("__manifest", (), 2, "reserved"),
        pytest.param("x" * 5000, (), 2, "identifier", id="5000-chars"),
        ("a t", (), 3, "does not exist"),
        ("a.t", ("--delimiter", "$"), 3, "table a.t does not exist"),
        ("a.t", ("--delimiter", ""), 2, "the delimiter must not be empty"),
    ],
)
def test_ids_with_odd_delimiters_restore_the_table_named_or_fail_in_one_line(
    tables, ident, extra, code, words
):
    root = tables
    before = tree_snapshot(root.local_path)
    result = cli(root, *extra, "restore", ident, "--to-version", "1", "--yes", "--json")
    if code:
        one_line_error(result, code, words)
        assert tree_snapshot(root.local_path) == before
        return
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert (report["rows_before"], report["rows_after"], report["new_version"]) == (6, 5, 3)
    assert report["target"] == ident
    location = Namespace.from_properties(root.properties).snapshot().get("a$t")["location"]
    assert lance.dataset(str(root.local_path / location)).count_rows() == 5
    assert lance.dataset(str(root.local_path / "t.lance")).version == 1  # the other untouched


def test_a_partition_table_is_refused_under_any_delimiter(history):
    root = history
    before = tree_snapshot(root.local_path)
    object_id = next(iter(table_rows(root)))
    for delimiter in ("/", "::", "$"):
        named = object_id.replace("$", delimiter)
        result = cli(root, "--delimiter", delimiter, "restore", named, "--to-version", "1", "--yes")
        one_line_error(result, 2, f"{named} is a partition table: restore its namespace")
    assert tree_snapshot(root.local_path) == before


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (WRITER_FLAGS_KEY, "requires writer features"),
        (READER_FLAGS_KEY, "requires reader features"),
    ],
)
def test_a_manifest_with_feature_flags_we_do_not_know_is_never_changed(history, key, words):
    root = history
    target = manifest_versions(root)[1]
    set_manifest_metadata(
        root, {key: str((1 << 10) | (1 << 17) if key == WRITER_FLAGS_KEY else 1 << 3)}
    )
    before = tree_snapshot(root.local_path)
    for extra in ((), ("--dry-run",)):
        result = cli(root, "restore", "--to-version", str(target), "--yes", *extra)
        one_line_error(result, 1, words)
        assert tree_snapshot(root.local_path) == before, extra


def test_restoring_to_before_the_root_was_partitioned_unpublishes_every_partition(
    local_root, files
):
    """The oldest `__manifest` versions of a root partitioned later publish no partition: a
    restore to one unpublishes every partition and keeps the plain tables, the specs and the
    schema."""
    root = local_root
    ok(root, "create", "table", "plain", "--from", files("p.parquet", pa.table({"id": [1, 2]})))
    target = manifest_versions(root)[-1]
    ok(root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    ok(root, "write", "--from", files("a.parquet", events(30)))
    spec_rows = {
        r["object_id"]: r
        for r in open_manifest(root).to_table().to_pylist()
        if "$" not in r["object_id"]
    }
    result = ok(root, "restore", "--to-version", str(target), "--yes", "--json").json()
    assert {c["action"] for c in result["changes"]} == {"unpublished"}
    assert published(root) == {}
    rows = open_manifest(root).to_table().to_pylist()
    assert {r["object_id"]: r for r in rows if "$" not in r["object_id"]} == spec_rows
    healthy(root)
    ok(root, "write", "--from", files("b.parquet", events(5, seed=4, start=500)))
    assert all_ids(published(root)) == list(range(500, 505))
    healthy(root)


# --- a partition row whose location leads outside the root (tests/catalog containment) -------


@pytest.fixture
def outside_world(tmp_path):
    """`base/cat`, a partitioned root (spec `k`) with `cat/lnk -> ..` and `victim.lance` beside
    it; (base, root, the version before the hostile row, the version with it, its object id).
    The hostile row is made as tests/catalog/test_containment_watch.py makes it."""
    base, root = tmp_path / "base", tmp_path / "base" / "cat"
    root.mkdir(parents=True)
    lance.write_dataset(pa.table({"k": [1], "v": ["victim"]}), str(base / "victim.lance"))
    (base / "secret.txt").write_text("outside")
    os.symlink("..", root / "lnk")
    source = tmp_path / "rows.parquet"  # outside `base`: the commands may read it
    pq.write_table(pa.table({"k": [1, 2], "v": ["a", "b"]}), source)
    args = ("--root", str(root))
    assert (
        invoke(*args, "add-partition-spec", "--schema", str(source), "--field", "k").exit_code == 0
    )
    assert invoke(*args, "write", "--from", str(source)).exit_code == 0
    ns = Namespace.from_properties({"root": str(root)})
    good = ns.snapshot().version
    object_id = next(
        r["object_id"]
        for r in ns.snapshot().rows
        if r["object_type"] == "table" and r["partition_field_k"] == 1
    )
    ns.manifest.mutate(lambda s, e: e.replace(object_id, location="lnk/victim.lance"))
    return base, root, good, ns.snapshot().version, object_id


def watched_restore(base: Path, root: Path, *args: str):
    """`lancens --root ROOT restore ARGS` under an inotify watch: nothing outside the root may
    be opened, listed or read, and nothing there may change."""
    outside = {k: v for k, v in tree_snapshot(base).items() if not k.startswith("cat/")}
    with OutsideWatch([base], {root}) as watch:
        result = invoke("--root", str(root), "restore", *args)
    events_seen = describe(watch.events())
    assert not events_seen, (args, result.exit_code, events_seen[:8])
    assert {k: v for k, v in tree_snapshot(base).items() if not k.startswith("cat/")} == outside
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_a_partition_row_leading_outside_the_root_is_never_opened_nor_published_again(
    outside_world,
):
    base, root, good, bad, object_id = outside_world
    cat = local(root)
    # the version with the hostile row: refused (a safety rail, exit 5), nothing changed
    ok(cat, "restore", "--to-version", str(good), "--yes")  # away from it first: it heals
    assert table_rows(cat)[object_id]["location"] == table_rows(cat, good)[object_id]["location"]
    healthy(cat)
    before = tree_snapshot(root)
    for extra in (("--dry-run",), ("--yes",)):
        result = watched_restore(base, root, "--to-version", str(bad), *extra)
        one_line_error(result, 5, "refused location")
        assert "resolves outside the root" in result.stderr
        assert tree_snapshot(root) == before


def test_a_restore_away_from_a_row_leading_outside_never_opens_it(outside_world):
    base, root, good, bad, object_id = outside_world
    cat = local(root)
    result = watched_restore(base, root, "--to-version", str(good), "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    change = next(c for c in json.loads(result.stdout)["changes"] if c["object_id"] == object_id)
    assert change["before"] is not None and change["rows_before"] is None  # not opened
    assert table_rows(cat) == table_rows(cat, good)
    healthy(cat)
