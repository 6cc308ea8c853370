"""The root is the trust boundary, watched by the kernel: whatever rows, directories or
`__manifest` metadata a hostile or buggy writer leaves, no lancens command opens, lists or reads
anything outside the namespace root.

Lance reads in Rust, out of Python's sight, so every command runs under an inotify watch of the
directories around the root (`inotify_watch.OutsideWatch`): an IN_OPEN or IN_ACCESS event there
fails the test, as does any change to the bytes outside the root.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Result, invoke, tree_snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inotify_watch import IN_ACCESS, IN_OPEN, OutsideWatch, describe
from test_containment import World

from lancens_cli.service.namespace import Namespace

EXIT_CODES = {0, 1, 2, 3, 4, 5, 6, 7, 130}  # as `lancens --help` documents them
NESTED_OBJECT = '{"a": ' * 5000 + "1" + "}" * 5000
DAMAGED_PROPERTIES = ["not json", "[1, 2]", NESTED_OBJECT]


def watched(base: Path, root: Path, *args: str, inputs: tuple[Path, ...] = ()) -> Result:
    """`lancens --root ROOT ARGS` under a watch of `base`, which must see nothing outside the
    root (and the input files the command is given); no traceback, no internal error."""
    with OutsideWatch([base], {root, *inputs}) as watch:
        result = invoke("--root", str(root), *args)
    events = describe(watch.events())
    assert not events, (args, result.exit_code, events[:8])
    assert "Traceback" not in result.stderr, (args, result.stderr)
    assert "Internal" not in result.stderr, (args, result.stderr)
    assert result.exit_code in EXIT_CODES, (args, result.exit_code, result.stderr)
    return result


def outside(base: Path) -> dict[str, bytes]:
    """Every file of `base` that is not in the root `base/cat`."""
    return {k: v for k, v in tree_snapshot(base).items() if not k.startswith("cat/")}


# --- the watch itself ---------------------------------------------------------------------------


def test_the_watch_sees_reads_by_any_process_and_skips_ignored_paths(tmp_path):
    (tmp_path / "seen.txt").write_text("read me")
    listed = tmp_path / "listed"
    listed.mkdir()
    hidden = tmp_path / "hidden"
    (hidden / "deeper").mkdir(parents=True)
    (hidden / "deeper" / "f.txt").write_text("not reported")
    lance.write_dataset(pa.table({"v": [1]}), str(tmp_path / "t.lance"))
    os.symlink(tmp_path / "t.lance", hidden / "link.lance")

    with OutsideWatch([tmp_path], {hidden}) as watch:
        assert watch.events() == []  # adding the watches is not reported
        subprocess.run(
            ["cat", str(tmp_path / "seen.txt"), str(hidden / "deeper" / "f.txt")],
            check=True,
            capture_output=True,
        )
        subprocess.run(["ls", str(listed)], check=True, capture_output=True)
        lance.dataset(str(hidden / "link.lance")).to_table()  # in-process, through a link
    events = watch.events()
    masks = {(directory, name): 0 for directory, name, _ in events}
    for directory, name, mask in events:
        masks[directory, name] |= mask
    assert masks[tmp_path, "seen.txt"] & IN_OPEN and masks[tmp_path, "seen.txt"] & IN_ACCESS
    assert masks[listed, ""] & IN_OPEN  # a directory opened: listed
    assert any(d.is_relative_to(tmp_path / "t.lance") for d, _ in masks)  # at its real path
    assert not [e for e in events if e[0].is_relative_to(hidden) or e[1] == "hidden"]


def test_the_watch_sees_a_command_read_outside_the_root(tmp_path):
    """The control: a command's own read outside the root (its input file) is seen."""
    root = tmp_path / "cat"
    root.mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "rows.parquet")
    with OutsideWatch([tmp_path], {root}) as watch:
        result = invoke(
            "--root", str(root), "create", "table", "t", "--from", str(tmp_path / "rows.parquet")
        )
    assert result.exit_code == 0, result.stderr
    assert any(name == "rows.parquet" and mask & IN_OPEN for _, name, mask in watch.events())


# --- migrate-v1 over symbolic links -------------------------------------------------------------


@pytest.mark.parametrize("target", ["absolute", "relative"])
def test_migrate_never_registers_or_reads_a_linked_directory_outside_the_root(tmp_path, target):
    world = World(tmp_path)
    lance.write_dataset(pa.table({"v": [7]}), str(world.base / "outside.lance"))
    link = world.base / "outside.lance" if target == "absolute" else Path("../outside.lance")
    os.symlink(link, world.root / "ghost.lance")
    before = world.outside()
    for extra, codes in ((["--dry-run"], {0, 6}), (["--check"], {6}), ([], {6})):
        result = watched(world.base, world.root, "migrate-v1", *extra, "--json")
        assert result.exit_code in codes, (extra, result.exit_code, result.stderr)
        items = {item["name"]: item for item in result.json()["tables"]}
        assert items["ghost"]["status"] == "skipped", (extra, items["ghost"])
        assert "location leads outside the root" in items["ghost"]["reason"], items["ghost"]
        assert world.outside() == before, extra
    result = watched(world.base, world.root, "migrate-v1")
    assert result.exit_code == 6, result.stderr
    assert Namespace.from_properties({"root": str(world.root)}).snapshot().get("ghost") is None
    assert world.outside() == before


def test_migrate_registers_a_table_once_never_again_through_a_link_to_it(tmp_path):
    world = World(tmp_path)
    lance.write_dataset(pa.table({"v": [5, 6]}), str(world.root / "real.lance"))
    os.symlink("real.lance", world.root / "alias.lance")
    before = world.outside()
    result = watched(world.base, world.root, "migrate-v1", "--json")
    items = {item["name"]: item for item in result.json()["tables"]}
    assert items["real"]["status"] == "migrated", items["real"]
    assert items["alias"]["status"] == "skipped", items["alias"]
    assert items["alias"]["reason"], items["alias"]
    assert result.exit_code == 6, result.stderr
    snapshot = Namespace.from_properties({"root": str(world.root)}).snapshot()
    assert snapshot.get("alias") is None and snapshot.get("real") is not None
    sharing = [
        r["object_id"] for r in snapshot.rows if r["location"] in ("real.lance", "alias.lance")
    ]
    assert sharing == ["real"]
    checked = watched(world.base, world.root, "check")
    assert checked.exit_code == 0, (checked.stdout, checked.stderr)
    assert world.outside() == before


# --- a partitioned root ---------------------------------------------------------------------------


class Partitioned:
    """A partitioned root `base/cat` (spec `k`) with two partitions, `victim.lance` beside it
    and `cat/lnk -> ..`; its input file lives in `base/input`, which commands may read."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "cat"
        self.root.mkdir()
        lance.write_dataset(pa.table({"k": [1], "v": ["victim"]}), str(base / "victim.lance"))
        (base / "secret.txt").write_text("outside")
        os.symlink("..", self.root / "lnk")
        self.input = base / "input"
        self.input.mkdir()
        self.rows = self.input / "rows.parquet"
        pq.write_table(pa.table({"k": [1, 2], "v": ["a", "b"]}), self.rows)
        spec = self.run("add-partition-spec", "--schema", str(self.rows), "--field", "k")
        assert spec.exit_code == 0, spec.stderr
        written = self.run("write", "--from", str(self.rows))
        assert written.exit_code == 0, written.stderr
        self.ns = Namespace.from_properties({"root": str(self.root)})

    def run(self, *args: str) -> Result:
        return invoke("--root", str(self.root), *args)

    def watched(self, *args: str) -> Result:
        return watched(self.base, self.root, *args, inputs=(self.input,))

    def partition(self, k: int) -> str:
        """The object_id of partition k's table row."""
        rows = self.ns.snapshot().rows
        return next(
            r["object_id"]
            for r in rows
            if r["object_type"] == "table" and r["partition_field_k"] == k
        )


def hostile_partition(base: Path) -> tuple[Partitioned, str]:
    """A partitioned root whose k=1 partition row leads to `victim.lance` outside, and its id."""
    world = Partitioned(base)
    object_id = world.partition(1)
    world.ns.manifest.mutate(lambda s, e: e.replace(object_id, location="lnk/victim.lance"))
    return world, object_id.replace("$", ".")


SAFE = {0, 1, 5, 6}
PARTITION_COMMANDS = [
    (("ls",), {0}),
    (("ls", "--recursive"), {0}),
    (("describe",), {0}),
    (("describe", "{id}"), {5}),
    (("check",), {1}),
    (("check", "--json"), {1}),
    (("check", "--fix"), {1}),
    (("versions",), SAFE),
    (("prune", "--yes"), SAFE),
    (("prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes"), SAFE),
    (("prune", "--compact", "--yes"), SAFE),
    (("partitions",), SAFE),
    (("write", "--from", "{rows}"), {5}),
    (("tag-partitions", "t1"), SAFE),
    (("evolve-schema", "--add", "extra string"), SAFE),
]


@pytest.mark.parametrize(
    ("command", "codes"), PARTITION_COMMANDS, ids=[" ".join(c) for c, _ in PARTITION_COMMANDS]
)
def test_no_command_reaches_outside_through_a_partition_row(tmp_path, command, codes):
    world, dotted = hostile_partition(tmp_path)
    before = outside(world.base)
    args = [part.format(id=dotted, rows=world.rows) for part in command]
    result = world.watched(*args)
    assert result.exit_code in codes, (args, result.exit_code, result.stderr)
    assert outside(world.base) == before, args
    if "--json" in args and args[0] == "check":
        findings = {(f["code"], f.get("object")) for f in result.json()["findings"]}
        assert ("bad_location", dotted) in findings, findings


def test_every_command_in_turn_over_a_partition_row_leading_outside(tmp_path):
    """The commands one after another over the same root, as a cron job's day runs them."""
    world, dotted = hostile_partition(tmp_path)
    before = outside(world.base)
    for command, codes in PARTITION_COMMANDS:
        args = [part.format(id=dotted, rows=world.rows) for part in command]
        result = world.watched(*args)
        assert result.exit_code in codes, (args, result.exit_code, result.stderr)
        assert outside(world.base) == before, args


# --- namespace rows with damaged properties ---------------------------------------------------


def add_namespace(world: World, object_id: str, metadata: str) -> None:
    template = world.ns.snapshot().get("team")
    row = {**template, "object_id": object_id, "location": None, "metadata": metadata}
    world.ns.manifest.mutate(lambda snapshot, edit: edit.add(row))


@pytest.fixture
def damaged(tmp_path) -> World:
    """A World with namespace rows bad1, bad2, bad3 whose properties are no JSON object."""
    world = World(tmp_path)
    for i, text in enumerate(DAMAGED_PROPERTIES, start=1):
        add_namespace(world, f"bad{i}", text)
    return world


DAMAGED_IDS = ["bad1", "bad2", "bad3"]


def test_check_reports_each_namespace_with_damaged_properties(damaged):
    before = damaged.outside()
    checked = watched(damaged.base, damaged.root, "check", "--json")
    findings = {(f["code"], f.get("object")) for f in checked.json()["findings"]}
    assert {("bad_properties", name) for name in DAMAGED_IDS} <= findings, findings
    assert checked.exit_code == 1, checked.stderr
    assert damaged.outside() == before


def test_check_fix_never_deletes_a_namespace_with_damaged_properties(damaged):
    fixed = watched(damaged.base, damaged.root, "check", "--fix")
    snapshot = damaged.ns.snapshot()
    assert [name for name in DAMAGED_IDS if snapshot.get(name) is None] == []
    assert fixed.exit_code == 1, (fixed.stdout, fixed.stderr)


def test_ls_lists_namespaces_with_damaged_properties_as_damaged(damaged):
    listing = watched(damaged.base, damaged.root, "ls", "--json")
    assert listing.exit_code == 0, listing.stderr
    states = {e["id"]: e["state"] for e in listing.json()["entries"]}
    assert {name: states.get(name) for name in DAMAGED_IDS} == {
        name: AnyDamaged() for name in DAMAGED_IDS
    }


@pytest.mark.parametrize("name", DAMAGED_IDS)
def test_describe_says_what_is_wrong_with_a_namespaces_properties(damaged, name):
    described = watched(damaged.base, damaged.root, "describe", name, "--json")
    assert described.exit_code == 0, described.stderr
    report = described.json()
    assert report["properties"] == {}, report
    assert isinstance(report.get("damaged"), str) and "JSON" in report["damaged"], report


class AnyDamaged:
    """Equal to any state that starts with "damaged"."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith("damaged")

    def __repr__(self) -> str:
        return "'damaged...'"


# --- unreadable partitioning metadata in __manifest -----------------------------------------------

UNREADABLE = {
    "schema-deep-array": ("schema", "[" * 100_000 + "]" * 100_000),
    "spec-deep-array": ("partition_spec_v1", "[" * 100_000 + "]" * 100_000),
    "spec-deep-object": ("partition_spec_v1", NESTED_OBJECT),
}


def unreadable_partitioning(base: Path, variant: str) -> tuple[Partitioned, str]:
    world = Partitioned(base)
    key, value = UNREADABLE[variant]
    world.ns.manifest.mutate(lambda s, e: e.set_metadata({key: value}))
    return world, key


@pytest.mark.parametrize("variant", sorted(UNREADABLE))
def test_check_names_unreadable_partitioning_metadata(tmp_path, variant):
    world, key = unreadable_partitioning(tmp_path, variant)
    before = tree_snapshot(world.base)
    checked = world.watched("check", "--json")
    found = [f for f in checked.json()["findings"] if f["code"] == "partition_metadata"]
    assert any(key in (f.get("object") or "") + f["message"] for f in found), checked.stdout[:2000]
    assert checked.exit_code == 1, checked.stderr
    assert tree_snapshot(world.base) == before


@pytest.mark.parametrize("variant", sorted(UNREADABLE))
def test_ls_and_describe_explain_unreadable_partitioning_metadata(tmp_path, variant):
    world, _ = unreadable_partitioning(tmp_path, variant)
    before = tree_snapshot(world.base)
    listed = world.watched("ls")
    assert listed.exit_code == 0, listed.stderr
    listing = world.watched("ls", "--json")
    assert listing.exit_code == 0, listing.stderr
    partitioning = listing.json()["partitioning"]
    assert isinstance(partitioning, dict) and partitioning.get("unreadable"), partitioning
    described = world.watched("describe", "--json")
    assert described.exit_code == 0, described.stderr
    unreadable = described.json()["manifest"]["partitioning"].get("unreadable")
    assert isinstance(unreadable, str) and unreadable, described.stdout[:2000]
    assert tree_snapshot(world.base) == before


CHANGES = [
    ("write", "--from", "{rows}"),
    ("evolve-schema", "--add", "x string"),
    ("add-partition-spec", "--field", "v"),
    ("tag-partitions", "t"),
    ("prune", "--yes"),
]


@pytest.mark.parametrize("command", CHANGES, ids=[c[0] for c in CHANGES])
@pytest.mark.parametrize("variant", sorted(UNREADABLE))
def test_unreadable_partitioning_metadata_refuses_every_change(tmp_path, variant, command):
    world, _ = unreadable_partitioning(tmp_path, variant)
    before = tree_snapshot(world.root)
    args = [part.format(rows=world.rows) for part in command]
    result = world.watched(*args)
    assert result.exit_code == 3, (args, result.exit_code, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert tree_snapshot(world.root) == before, args


# --- any hostile row, any damaged namespace, any order of commands ------------------------------

SPELLINGS = [
    "lnk/victim.lance",
    "lnk/cat-sib/t.lance",
    "lnk/secret.txt",
    "lnk",
    "lnk/../victim.lance",
    "../victim.lance",
    "../cat-sib/t.lance",
    "{base}/victim.lance",
    "file://{base}/victim.lance",
    "%2e%2e/victim.lance",
    "__manifest",
    "./__manifest",
    ".lancens-prune",
    "good.lance",
    "team/../good.lance",
    "a\x00b",
    "esc\x1b.lance",
    "new\nline.lance",
]
WATCHED_COMMANDS = [
    ("ls",),
    ("ls", "--recursive"),
    ("describe", "{id}"),
    ("check",),
    ("check", "--fix"),
    ("versions",),
    ("prune", "--yes"),
    ("prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes"),
    ("prune", "--compact", "--yes"),
    ("migrate-v1",),
    ("drop", "{id}", "--yes"),
    ("rename", "{id}", "x"),
]


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    location=st.sampled_from(SPELLINGS),
    properties=st.sampled_from(DAMAGED_PROPERTIES),
    target=st.sampled_from(["evil", "bad"]),
    commands=st.permutations(WATCHED_COMMANDS),
)
def test_no_command_in_any_order_reaches_outside_the_root(
    tmp_path_factory, location, properties, target, commands
):
    world = World(tmp_path_factory.mktemp("watched"))
    world.add_row("evil", location.format(base=world.base))
    add_namespace(world, "bad", properties)
    before = world.outside()
    for command in commands:
        args = [part.format(id=target) for part in command]
        result = watched(world.base, world.root, *args)
        assert result.exit_code in range(7), (args, result.exit_code, result.stderr)
        assert world.outside() == before, args


@pytest.mark.spark
def test_a_scan_never_reads_a_partition_row_leading_outside_the_root(tmp_path, monkeypatch):
    """Spark reads in the JVM and Lance in Rust: refused as a whole, while the partitions a
    filter keeps read as before; the kernel sees nothing opened outside the root."""
    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
    world, _ = hostile_partition(tmp_path)
    before = outside(world.base)
    whole = world.watched("scan", "--count")
    assert whole.exit_code == 5, whole.stderr
    assert "will not read its location" in whole.stderr
    errors = [line for line in whole.stderr.splitlines() if line.startswith("lancens: error")]
    assert len(errors) == 1, whole.stderr  # after the progress lines, one line says why
    kept = world.watched("scan", "--count", "--where", "k = 2")
    assert kept.exit_code == 0, kept.stderr
    assert kept.stdout.strip() == "1"
    assert outside(world.base) == before
