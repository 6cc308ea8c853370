"""The root is the trust boundary: catalog rows written by any tool never make a command touch
what lies outside the root, the catalog itself, or another row's data.

Rows are appended to `__manifest` with lancens' own store (as any Lance writer could), with
"victim" tables and files beside the root; every command a user or a cron job runs is then run
through the CLI, and the files outside the root must be byte-identical afterwards while every
legitimate table inside reads as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke, tree_snapshot
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lancens_cli.service.namespace import Namespace


class World:
    """A root with legitimate tables, and victims beside it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "cat"
        self.root.mkdir()
        self.args = ("--root", str(self.root))
        lance.write_dataset(pa.table({"v": [1, 2, 3]}), str(base / "victim.lance"))
        sibling = base / "cat-sib"
        sibling.mkdir()
        lance.write_dataset(pa.table({"v": [9]}), str(sibling / "t.lance"))
        (base / "secret.txt").write_text("outside")
        os.symlink("..", self.root / "lnk")
        data = base / "rows.parquet"
        pq.write_table(pa.table({"id": list(range(10)), "s": ["x"] * 10}), data)
        for name in ("good", "other"):
            assert self.ok("create", "table", name, "--from", str(data))
        assert self.ok("create", "namespace", "team")
        assert self.ok("create", "table", "team.inner", "--from", str(data))
        self.ns = Namespace.from_properties({"root": str(self.root)})

    def ok(self, *args: str) -> bool:
        result = invoke(*self.args, *args)
        assert result.exit_code == 0, result.stderr
        return True

    def run(self, *args: str):
        return invoke(*self.args, *args)

    def add_row(self, object_id: str, location: str, metadata: str | None = None) -> None:
        template = self.ns.snapshot().get("good")
        row = {**template, "object_id": object_id, "location": location, "metadata": metadata}
        self.ns.manifest.mutate(lambda snapshot, edit: edit.add(row))

    def outside(self) -> dict[str, bytes]:
        return {
            name: content
            for name, content in tree_snapshot(self.base).items()
            if not name.startswith("cat/")
        }

    def legit(self) -> dict[str, list]:
        """What every legitimate table reads, through pylance."""
        found = {}
        for name, location in (("good", "good.lance"), ("other", "other.lance")):
            found[name] = lance.dataset(str(self.root / location)).to_table().to_pylist()
        inner = self.ns.snapshot().get("team$inner")["location"]
        found["team.inner"] = lance.dataset(str(self.root / inner)).to_table().to_pylist()
        return found


@pytest.fixture
def world(tmp_path) -> World:
    return World(tmp_path)


def test_drop_through_a_symlink_out_of_the_root_is_refused(world):
    world.add_row("evil", "lnk/victim.lance")
    before = world.outside()
    result = world.run("drop", "evil", "--yes")
    assert result.exit_code == 5, result.stderr
    assert "resolves outside the root" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert world.outside() == before


@pytest.mark.parametrize("location", ["__manifest", "__manifest/data", ".lancens-prune"])
def test_drop_of_a_row_located_in_the_catalog_is_refused(world, location):
    world.add_row("evil", location)
    legit = world.legit()
    result = world.run("drop", "evil", "--yes")
    assert result.exit_code == 5, result.stderr
    assert "reserves" in result.stderr
    assert world.legit() == legit
    assert world.ns.snapshot().get("good") is not None


def test_drop_of_a_row_sharing_another_tables_location_is_refused(world):
    world.add_row("twin", "good.lance")
    legit = world.legit()
    result = world.run("drop", "twin", "--yes")
    assert result.exit_code == 5, result.stderr
    assert "good" in result.stderr
    assert world.legit() == legit


def test_drop_cascade_of_a_namespace_holding_a_refused_row_changes_nothing(world):
    world.add_row("team$evil", "lnk/victim.lance")
    before, legit = world.outside(), world.legit()
    result = world.run("drop", "team", "--cascade", "--yes")
    assert result.exit_code == 5, result.stderr
    assert world.outside() == before and world.legit() == legit


@pytest.mark.parametrize(
    "location",
    [
        "lnk/victim.lance",
        "lnk/cat-sib/t.lance",
        "lnk/secret.txt",
    ],
)
def test_prune_and_compact_never_change_a_table_outside_the_root(world, location):
    world.add_row("evil", location)
    before, legit = world.outside(), world.legit()
    for extra in ([], ["--compact"]):
        result = world.run(
            "prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes", *extra, "--json"
        )
        assert result.exit_code in (0, 6), result.stderr
        report = json.loads(result.stdout)
        assert [r["table"] for r in report["refused"]] == ["evil"]
        assert world.outside() == before
    assert world.legit() == legit


def test_reads_never_open_a_refused_location(world):
    world.add_row("evil", "lnk/victim.lance")
    listing = world.run("ls", "--json")
    assert listing.exit_code == 0, listing.stderr
    states = {e["id"]: e["state"] for e in json.loads(listing.stdout)["entries"]}
    assert states["evil"].startswith("refused:") and states["good"] == "ok"
    described = world.run("describe", "evil")
    assert described.exit_code == 5 and "v\t" not in described.stdout
    checked = world.run("check", "--json")
    findings = json.loads(checked.stdout)["findings"]
    assert {(f["code"], f.get("object") or f.get("name")) for f in findings} >= {
        ("bad_location", "evil")
    }


def test_one_bad_row_does_not_take_the_root_down(world):
    world.add_row("long", "x" * 5000)
    world.add_row("nul", "a\x00b")
    world.add_row("deep", "deep.lance", metadata="[" * 100_000 + "]" * 100_000)
    world.add_row("list", "list.lance", metadata="[1, 2]")
    for args in (["ls"], ["check"], ["check", "--fix"], ["prune", "--yes"], ["ls", "--json"]):
        result = world.run(*args)
        assert result.exit_code in (0, 1, 6), (args, result.stderr)
        assert "Internal" not in result.stderr and "Traceback" not in result.stderr
        assert all(len(line) < 600 for line in result.stdout.splitlines()), args
        assert all(len(line) < 600 for line in result.stderr.splitlines()), args
    checked = json.loads(world.run("check", "--json").stdout)
    codes = {(f["code"], f.get("object") or f.get("name")) for f in checked["findings"]}
    assert {("bad_location", "long"), ("bad_location", "nul")} <= codes
    assert {("bad_metadata", "deep"), ("bad_metadata", "list")} <= codes


def test_control_characters_never_reach_the_terminal_raw(world):
    world.add_row("esc", "esc\x1b[2J.lance")
    for args in (["ls"], ["check"]):
        result = world.run(*args)
        assert "\x1b" not in result.stdout + result.stderr
        assert "\\x1b" in result.stdout + result.stderr


def test_a_symlinked_lance_directory_leading_out_is_refused(world):
    os.symlink(world.base / "victim.lance", world.root / "ghost.lance")
    before = world.outside()
    assert world.run("drop", "ghost", "--yes").exit_code == 5
    listing = json.loads(world.run("ls", "--json").stdout)
    assert {e["id"]: e["state"] for e in listing["entries"]}["ghost"].startswith("refused")
    world.run("prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes")
    assert world.outside() == before


def test_a_write_into_a_partition_row_outside_the_root_is_refused(tmp_path):
    base = tmp_path
    root = base / "cat"
    root.mkdir()
    lance.write_dataset(pa.table({"k": [1], "v": ["victim"]}), str(base / "victim.lance"))
    os.symlink("..", root / "lnk")
    args = ("--root", str(root))
    rows = base / "rows.parquet"
    pq.write_table(pa.table({"k": [1, 2], "v": ["a", "b"]}), rows)
    assert invoke(*args, "add-partition-spec", "--schema", str(rows), "--field", "k").exit_code == 0
    assert invoke(*args, "write", "--from", str(rows)).exit_code == 0
    ns = Namespace.from_properties({"root": str(root)})
    snapshot = ns.snapshot()
    row = next(
        r for r in snapshot.rows if r["object_type"] == "table" and r["partition_field_k"] == 1
    )
    ns.manifest.mutate(lambda s, e: e.replace(row["object_id"], location="lnk/victim.lance"))
    before = {k: v for k, v in tree_snapshot(base).items() if not k.startswith("cat/")}
    result = invoke(*args, "write", "--from", str(rows))
    assert result.exit_code == 5, result.stderr
    assert {k: v for k, v in tree_snapshot(base).items() if not k.startswith("cat/")} == before


SPELLINGS = [
    "lnk/victim.lance",
    "lnk/cat-sib/t.lance",
    "lnk/../victim.lance",
    "../victim.lance",
    "/abs/victim.lance",
    "file:///tmp/victim.lance",
    "__manifest",
    "./__manifest",
    "good.lance",
    "team",
    "",
    "x" * 3000,
    "a\x00b",
    "esc\x1b.lance",
    "lnk",
]
COMMANDS = [
    ("ls",),
    ("ls", "--recursive"),
    ("describe", "{id}"),
    ("check",),
    ("check", "--fix"),
    ("drop", "{id}", "--yes"),
    ("rename", "{id}", "renamed"),
    ("prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes"),
    ("prune", "--compact", "--yes"),
    ("migrate-v1", "--yes"),
]


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(st.sampled_from(SPELLINGS), min_size=1, max_size=3),
    commands=st.permutations(COMMANDS),
)
def test_hostile_rows_never_let_a_command_touch_the_outside(tmp_path_factory, rows, commands):
    world = World(tmp_path_factory.mktemp("hostile"))
    for i, location in enumerate(rows):
        world.add_row(f"evil{i}", location)
    before, legit = world.outside(), world.legit()
    for command in commands:
        args = [part.format(id=f"evil{len(rows) - 1}") for part in command]
        result = world.run(*args)
        assert result.exit_code in (0, 1, 2, 3, 4, 5, 6), (args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert "Internal" not in result.stderr, (args, result.stderr)
        assert world.outside() == before, args
    after = world.legit()
    # a legitimate table may be gone only because a command dropped or renamed a row
    # sharing its location was refused: never
    assert after == legit


S3_SPELLINGS = [
    "../{sib}/t.lance",
    "s3://{bucket}/{sib}/t.lance",
    "s3://other-bucket/{sib}/t.lance",
    "%2e%2e/{sib}/t.lance",
    "..%2f{sib}/t.lance",
    "/{sib}/t.lance",
    "./../{sib}/t.lance",
    "__manifest",
    "good.lance",
    "",
]
S3_COMMANDS = [
    ("ls",),
    ("describe", "{id}"),
    ("check",),
    ("check", "--fix", "--drop-refused-rows"),
    ("drop", "{id}", "--yes"),
    ("rename", "{id}", "renamed"),
    ("prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes"),
    ("prune", "--compact", "--yes"),
]


@pytest.mark.s3
def test_on_s3_hostile_rows_never_reach_a_sibling_prefix(
    s3_bucket, s3_options, moto_endpoint, tmp_path
):
    """`cat-sib/` beside `cat/` in the same bucket (a prefix that starts alike): whatever rows
    another writer adds and whatever commands run, nothing there is read, written or deleted,
    and the legitimate table inside reads as before."""
    import itertools

    from helpers import s3_client

    client = s3_client(moto_endpoint)
    lance_options = {k: str(v) for k, v in s3_options.items()}
    storage_args = [f"-s{k}={v}" for k, v in s3_options.items()]
    pq.write_table(pa.table({"id": [1, 2, 3]}), tmp_path / "rows.parquet")
    counter = itertools.count()

    def objects(prefix: str) -> dict[str, str]:
        found = client.list_objects_v2(Bucket=s3_bucket, Prefix=prefix)
        return {o["Key"]: o["ETag"] for o in found.get("Contents", [])}

    @settings(
        max_examples=5,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        rows=st.lists(st.sampled_from(S3_SPELLINGS), min_size=1, max_size=3),
        commands=st.permutations(S3_COMMANDS),
    )
    def check(rows, commands):
        n = next(counter)
        root, sib = f"cat{n}", f"cat{n}-sib"
        lance.write_dataset(
            pa.table({"v": [9]}), f"s3://{s3_bucket}/{sib}/t.lance", storage_options=lance_options
        )
        args = ("--root", f"s3://{s3_bucket}/{root}", *storage_args)
        assert invoke(*args, "init").exit_code == 0
        created = invoke(*args, "create", "table", "good", "--from", str(tmp_path / "rows.parquet"))
        assert created.exit_code == 0, created.stderr
        ns = Namespace.from_properties(
            {
                "root": f"s3://{s3_bucket}/{root}",
                **{f"storage.{k}": v for k, v in s3_options.items()},
            }
        )
        template = ns.snapshot().get("good")
        for i, spelling in enumerate(rows):
            row = {
                **template,
                "object_id": f"evil{i}",
                "location": spelling.format(sib=sib, bucket=s3_bucket),
            }
            ns.manifest.mutate(lambda snapshot, edit, row=row: edit.add(row))
        before = objects(f"{sib}/")
        good = lance.dataset(
            f"s3://{s3_bucket}/{root}/good.lance", storage_options=lance_options
        ).to_table()
        for command in commands:
            result = invoke(*args, *[part.format(id=f"evil{len(rows) - 1}") for part in command])
            assert result.exit_code in (0, 1, 2, 3, 4, 5, 6), (command, result.stderr)
            assert "Traceback" not in result.stderr and "Internal" not in result.stderr, command
            assert objects(f"{sib}/") == before, command
        if "good.lance" not in rows:  # a row sharing good's location may make it refused
            assert (
                lance.dataset(f"s3://{s3_bucket}/{root}/good.lance", storage_options=lance_options)
                .to_table()
                .equals(good)
            )

    check()


def test_check_fix_removes_refused_rows_only_when_asked_and_never_their_data(world):
    world.add_row("evil", "lnk/victim.lance")
    world.add_row("cat", "__manifest")
    before, legit = world.outside(), world.legit()
    assert world.run("check", "--drop-refused-rows").exit_code == 2  # needs --fix
    assert world.run("check", "--fix").exit_code == 1  # not asked: the rows stay
    assert world.ns.snapshot().get("evil") is not None
    result = world.run("check", "--fix", "--drop-refused-rows", "--json")
    fixed = [f for f in json.loads(result.stdout)["findings"] if f["fixed"]]
    assert {f["object"] for f in fixed} == {"evil", "cat"}
    assert all("row removed from the catalog" in f["message"] for f in fixed)
    snapshot = world.ns.snapshot()
    assert snapshot.get("evil") is None and snapshot.get("cat") is None
    assert world.outside() == before and world.legit() == legit
    assert world.run("check").exit_code == 0


@pytest.mark.parametrize("pace", [[], ["--delete-rate-limit", "100"]])
def test_prune_removes_a_dead_writes_symlink_never_what_it_leads_to(world, pace):
    """A V2-named link at the root to an outside directory holding only `data/` reads as a
    dead write's debris: prune may remove the link, never the files it leads to (with a
    delete rate limit too, which deletes file by file)."""
    dead = world.base / "dead" / "data"
    dead.mkdir(parents=True)
    (dead / "0.lance").write_bytes(b"outside, not ours")
    for path in (dead / "0.lance", dead, dead.parent):
        os.utime(path, (1e9, 1e9))
    os.symlink(world.base / "dead", world.root / "0badc0de_ghost")
    before, legit = world.outside(), world.legit()
    result = world.run(
        "prune", "--older-than", "0s", "--grace", "0s", "--force", "--yes", "--json", *pace
    )
    assert result.exit_code in (0, 6), result.stderr
    assert world.outside() == before
    assert world.legit() == legit


# --- one listing per directory resolves as realpath does ---------------------------------------

NAMES = st.sampled_from(["a", "b", "t.lance", "x y", "é", "a-b"])
LINK_TARGETS = st.sampled_from(["..", ".", "a", "../..", "b/a", "/", "missing", "a/../b", "loop"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dirs=st.lists(st.lists(NAMES, min_size=1, max_size=3), max_size=6),
    links=st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=2), LINK_TARGETS), max_size=5),
    locations=st.lists(st.lists(NAMES, min_size=1, max_size=4), min_size=1, max_size=12),
)
def test_the_resolver_answers_what_realpath_answers(tmp_path_factory, dirs, links, locations):
    from lancens_cli.store.containment import LocalResolver

    base = tmp_path_factory.mktemp("tree")
    root = base / "root"
    root.mkdir()
    for parts in dirs:
        (root.joinpath(*parts)).mkdir(parents=True, exist_ok=True)
    for parts, target in links:
        path = root.joinpath(*parts)
        if path.parent.is_dir() and not os.path.lexists(path):
            os.symlink(str(path) if target == "loop" else target, path)
    resolver = LocalResolver(os.path.realpath(root))
    for parts in locations:
        location = "/".join(parts)
        assert resolver.resolve(location) == os.path.realpath(root / location), location


def reference_syntax_problem(location: str) -> str | None:
    """The location rules as the trust boundary states them, written out here without
    check_relative's fast path for plain names."""
    from lancens_cli.store.containment import RESERVED_TOP

    if not location or location.startswith(("/", "\\")) or "://" in location:
        return f"location {location!r} must be a path relative to the root"
    parts = location.replace("\\", "/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        return f"location {location!r} must not contain '.', '..' or '//'"
    top = parts[0]
    return f"the location is inside {top}, which lancens reserves" if top in RESERVED_TOP else None


PIECES = [*"ab.-_/\\:0Z\u00e9 ", "__manifest", ".lancens-prune", ".lancens-jobs"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join))
def test_plain_locations_are_judged_as_the_rules_judge_them(location):
    from lancens_cli.store.containment import syntax_problem

    assert syntax_problem(location) == reference_syntax_problem(location)


# --- the one-pass verdict on plain rows is the sorted comparison's -------------------------------

ROW_LOCATIONS = st.sampled_from(
    ["a", "b", "a-b", "t.lance", "x$y", "a/b", "a/b/c", "b/a", "lnk", "lnk/a", "ab", "a/../b",
     "__manifest", ".lancens-prune", "é", "a b", "./a", "", "/abs", "out"]
)  # fmt: skip


def _rows_root(tmp_path_factory, dirs: list[list[str]], link_to: str | None):
    """The storage of a root holding `dirs`, and a link `lnk` to `link_to` (to `a`: also a
    plain-looking name, `x$y`, that is a link)."""
    root = tmp_path_factory.mktemp("rows") / "root"
    root.mkdir()
    for parts in dirs:
        root.joinpath(*parts).mkdir(parents=True, exist_ok=True)
    if link_to is not None:
        os.symlink(link_to, root / "lnk")
        if link_to == "a":
            os.symlink("a", root / "x$y")
    return Namespace.from_properties({"root": str(root)}).storage


ROW_IDS = st.sampled_from(["t1", "t2", "t3", "ns$t4", "t5", "t6"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dirs=st.lists(st.lists(NAMES, min_size=1, max_size=2), max_size=4),
    link_to=st.sampled_from([None, "a", "b/a", "..", "missing"]),
    rows=st.lists(st.tuples(ROW_IDS, ROW_LOCATIONS), min_size=1, max_size=10),
    candidates=st.lists(ROW_LOCATIONS, max_size=4),
)
def test_plain_rows_judged_in_one_pass_as_by_sorting_them_all(
    tmp_path_factory, dirs, link_to, rows, candidates
):
    """RowLocations accepts a plain one-component row without resolving or sorting it unless
    another row lies at or below its directory; the verdicts (and `admit`'s answers after them)
    must be exactly those of resolving and sorting every row, links and duplicates included."""
    from lancens_cli.store import row_verdicts

    storage = _rows_root(tmp_path_factory, dirs, link_to)
    triples = [(oid, "table", location) for oid, location in rows]

    def judged() -> tuple[dict[str, tuple[str, str]], list[str | None]]:
        verdict = row_verdicts.RowLocations(storage, triples)
        refused = {oid: (r.location, r.reason) for oid, r in verdict.refused.items()}
        answers = [verdict.admit(f"new{i}", loc) for i, loc in enumerate(candidates)]
        return refused, answers

    fast = judged()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(row_verdicts, "PLAIN_LOCATION", r"[^\s\S]")  # no row is plain
        sorted_all = judged()
    assert fast == sorted_all, (rows, candidates)


class _Snapshot:
    """A `__manifest` snapshot as the verdicts read it: its rows, and room for what they keep."""

    def __init__(self, table: pa.Table) -> None:
        self.exists, self.table = True, table


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dirs=st.lists(st.lists(NAMES, min_size=1, max_size=2), max_size=4),
    link_to=st.sampled_from([None, "a", "b/a", "..", "missing"]),
    rows=st.lists(st.tuples(ROW_IDS, ROW_LOCATIONS), min_size=1, max_size=10),
    namespaces=st.lists(ROW_IDS, max_size=2),
)
@example(dirs=[], link_to=None, rows=[("t1", "__manifest"), ("t2", "a")], namespaces=[])
@example(dirs=[["a"]], link_to="a", rows=[("t1", "a"), ("t2", "lnk")], namespaces=[])
@example(dirs=[["a"]], link_to="a", rows=[("t1", "a"), ("t2", "x$y")], namespaces=["t3"])
@example(dirs=[], link_to=None, rows=[("t1", "a"), ("t1", "b"), ("t2", "ab")], namespaces=[])
@example(dirs=[], link_to=None, rows=[("t1", "a"), ("t2", "a"), ("t3", "b")], namespaces=[])
@example(dirs=[], link_to=None, rows=[("t1", "a"), ("t2", "a/b"), ("t3", "b")], namespaces=[])
def test_one_row_judged_alone_as_the_whole_catalog_judges_it(
    tmp_path_factory, dirs, link_to, rows, namespaces
):
    """`require_row` (a command about one table) refuses exactly the rows the whole
    catalog's verdicts refuse, with the same words, whether it judged the row alone or not."""
    from lancens_cli.errors import RefusedError
    from lancens_cli.store import row_verdicts

    storage = _rows_root(tmp_path_factory, dirs, link_to)
    triples = [(oid, "table", location) for oid, location in rows]
    triples += [(oid, "namespace", None) for oid in namespaces]  # rows of another kind
    table = row_verdicts._rows_table(triples)

    def verdict(judge, *args) -> str | None:
        try:
            judge(*args)
        except RefusedError as exc:
            return exc.message
        return None

    whole = row_verdicts.RowLocations(storage, table)
    for object_id, _ in rows:
        alone = verdict(row_verdicts.require_row, storage, _Snapshot(table), object_id)
        assert alone == verdict(whole.require, object_id), (rows, object_id)


def test_a_plain_catalog_judges_one_row_without_judging_them_all(tmp_path, monkeypatch):
    """The reason for `require_row`: a row of a plain catalog is accepted without the whole
    catalog's verdicts (a sort of a million locations), and a catalog asked of many rows is
    judged whole once."""
    from lancens_cli.store import row_verdicts

    storage = Namespace.from_properties({"root": str(tmp_path)}).storage
    table = row_verdicts._rows_table([(f"t{i}", "table", f"t{i}.lance") for i in range(10)])
    judged = []
    whole = row_verdicts.RowLocations
    monkeypatch.setattr(row_verdicts, "RowLocations", lambda *a: judged.append(1) or whole(*a))
    snapshot = _Snapshot(table)
    for i in range(row_verdicts.LONE_CHECKS):
        row_verdicts.require_row(storage, snapshot, f"t{i}")
    assert judged == []
    for i in range(row_verdicts.LONE_CHECKS, 10):
        row_verdicts.require_row(storage, snapshot, f"t{i}")
    assert judged == [1]


def test_names_that_are_not_utf8_are_listed_refused_and_break_nothing(tmp_path):
    """A root whose directory holds a `<name>.lance` directory and a symbolic link whose names
    are not UTF-8 (os.scandir gives them with surrogates, which Arrow cannot hold): ls lists
    the directory, refused, and pages past it; describe counts it; check and prune run."""
    root = tmp_path / "ns"
    root.mkdir()
    ok_table = pa.table({"id": [1, 2]})
    lance.write_dataset(ok_table, str(root / "plain.lance"))
    os.mkdir(os.path.join(os.fsencode(root), b"\xff.lance"))
    os.symlink(str(tmp_path), os.path.join(os.fsencode(root), b"\xfe"))
    run = [*["--root", str(root)]]
    listed = invoke(*run, "ls", "--json")
    assert listed.exit_code == 0, listed.stderr
    entries = {e["id"]: e for e in json.loads(listed.stdout)["entries"]}
    assert set(entries) == {"plain", "\udcff"}
    assert entries["\udcff"]["state"].startswith("refused: ")
    assert entries["plain"]["state"] == "ok"
    first = json.loads(invoke(*run, "ls", "--json", "--limit", "1").stdout)
    token = first["next_page_token"]
    second = json.loads(invoke(*run, "ls", "--json", "--limit", "1", "--page-token", token).stdout)
    paged = [e["id"] for e in first["entries"] + second["entries"]]
    assert paged == ["plain", "\udcff"] and second["next_page_token"] is None
    described = invoke(*run, "describe", "--json")
    assert described.exit_code == 0 and json.loads(described.stdout)["tables"] == 2
    assert invoke(*run, "check", "--json").exit_code == 1  # the odd name is a finding
    assert invoke(*run, "prune", "--dry-run", "--json").exit_code == 0
    assert invoke(*run, "create", "table", "t", "--declare").exit_code == 0  # with a manifest
    assert invoke(*run, "ls", "--json").exit_code == 0
