"""Property-based hostile input (hypothesis): names, locations, properties, schemas, configuration.

Each property is a plain test that runs one hypothesis property inside it, so that it can print
how many inputs it tried (`pytest -s -p no:xdist tests/cli/test_hostile.py` shows the totals).

CLI runs are in-process, through helpers' `invoke`: `_run_app`, what `lancens`' `main()` runs,
so a usage error is one line too, as for a user. An exception escaping `_run_app` fails the test
with its traceback.

Every property also has its valid side, so that a command refusing everything fails: each
hostile property runs at least one accepted input (an `@example`) and asserts that some input was
accepted, and a companion property (`test_valid_*`) generates only valid inputs (names, locations,
schemas, environments, profiles) and asserts exit 0 with the effect visible (`ls`, `describe`,
the table's Arrow schema, the resolved configuration).

Budget: pure functions 150-300 examples, CLI properties 30-40 examples (HOSTILE_SCALE=N
multiplies them); derandomized (HOSTILE_RANDOM=1 draws fresh inputs); no example database (nothing
is written into the repository). Inputs the properties found breaking the contract are pinned as
plain tests too (`test_surrogate_name_on_the_command_line`,
`test_known_bad_schema_is_refused_as_invalid_input[...]`).
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from helpers import Result, invoke, tree_snapshot
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from lancens_cli.config import resolve_config
from lancens_cli.errors import ConfigError, InvalidInputError
from lancens_cli.models import MAX_LOCATION_BYTES, Identifier, validate_name
from lancens_cli.schema_json import schema_from_json

DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 5, 6, 7, 130}
# What a namespace mutation may answer to bad input: never 1 (internal error / unexpected
# exception) for a name or a location, which are the user's input.
INPUT_EXITS = {0, 2, 3, 4, 5}
HEX8_DIR = re.compile(r"^[0-9a-f]{8}_.+$")

TRIED: collections.Counter = collections.Counter()
OUTCOMES: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)

# Derandomized: the same inputs on every run, so a run's verdict is reproducible. HOSTILE_RANDOM=1
# draws fresh inputs instead (exploration; a failure prints a @reproduce_failure blob).
_COMMON = {
    "derandomize": os.environ.get("HOSTILE_RANDOM") != "1",
    "deadline": None,
    "database": None,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
}
# HOSTILE_SCALE=10 multiplies every budget (a long exploratory run; not what CI runs).
SCALE = float(os.environ.get("HOSTILE_SCALE", "1"))
PURE = settings(max_examples=int(300 * SCALE), **_COMMON)
PURE_SMALL = settings(max_examples=int(150 * SCALE), **_COMMON)
CLI = settings(max_examples=int(30 * SCALE), **_COMMON)
CLI_SCHEMA = settings(max_examples=int(40 * SCALE), **_COMMON)


def _report(name: str) -> None:
    outcomes = dict(sorted(OUTCOMES[name].items(), key=str))
    print(f"\n[hostile] {name}: {TRIED[name]} inputs tried; outcomes {outcomes}")


def _count(name: str, outcome) -> None:
    TRIED[name] += 1
    OUTCOMES[name][outcome] += 1


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("LANCENS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("LANCENS_CONFIG", str(tmp_path / "no-such-config.toml"))
    monkeypatch.setenv("LANCE_LOG", "error")


# --- the in-process CLI ------------------------------------------------------------------------


cli = invoke  # `lancens ARGS` in-process, through the same entry point as the executable


def assert_contract(res: Result, allowed: set[int], json_mode: bool = False) -> None:
    """Documented exit code; no traceback; an error is exactly one line on stderr."""
    detail = f"exit {res.exit_code}\nstdout={res.stdout[:2000]!r}\nstderr={res.stderr[:2000]!r}"
    assert res.exit_code in DOCUMENTED_EXITS, detail
    assert res.exit_code in allowed, detail
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, detail
    lines = res.stderr.splitlines()
    assert len(lines) <= 1, detail
    if res.exit_code != 0:
        assert len(lines) == 1 and res.stderr.endswith("\n"), detail
        if json_mode:
            error = json.loads(lines[0])["error"]
            assert set(error) == {"name", "code", "message"}, detail
        else:
            assert lines[0].startswith("lancens: error: "), detail


# --- identifiers ---------------------------------------------------------------------------------

FRAGMENTS = [
    "..",
    ".",
    "/",
    "\\",
    "$",
    "%2F",
    "%2f",
    "%5C",
    "%5c",
    "%24",
    "%2E",
    "%2e",
    "%00",
    "%",
    "%252F",
    "\x00",
    "\n",
    "\r",
    "\t",
    "\x1b",
    "\x7f",
    "\x85",
    " ",
    "\u00a0",
    "\u2028",
    "\u200b",
    "\ufeff",
    "~",
    "*",
    "?",
    "#",
    ":",
    "'",
    '"',
    "-",
    "__manifest",
    "a",
    "t",
    "x",
    "é",
    "e\u0301",
    "🦆",
    "ß",
    "İ",
    "CON",
    "NUL",
    "file:",
    "s3://",
    "/etc",
    "../outside",
    "outside",
    "..%2F",
    ".lance",
    "_versions",
    "12345678_",
]
_piece = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4))
IDENT = st.one_of(
    st.text(max_size=30),
    st.lists(_piece, max_size=10).map("".join),
    st.text(min_size=200, max_size=400),
    st.builds(
        lambda c, n: c * n,
        st.sampled_from(["x", "é", "🦆", "a.", "..", "ab$"]),
        st.integers(min_value=60, max_value=260),
    ),
)
# Lone surrogates: what Python makes of command-line bytes that are not UTF-8.
SURROGATE_IDENT = (
    st.lists(
        st.one_of(_piece, st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)),
        min_size=1,
        max_size=6,
    )
    .filter(lambda parts: any(0xD800 <= ord(c) <= 0xDFFF for p in parts for c in p))
    .map("".join)
)
DELIMITERS = st.sampled_from([".", ".", ".", "/", "$", ":", "::", "\\", "%2F", " ", "x", ""])


def _check_parse(text: str, delimiter: str, name: str) -> None:
    try:
        ident = Identifier.parse(text, delimiter)
    except InvalidInputError:
        _count(name, "refused")
        return
    except Exception:
        _count(name, "crashed")
        raise
    _count(name, "accepted")
    root = "/sandbox/root"
    for part in ident.parts:
        assert validate_name(part) == part
    # object ids join and split losslessly; the display form parses back to the same parts
    assert Identifier.from_object_id(ident.object_id) == ident
    if not ident.is_root:
        assert Identifier.parse(ident.display(delimiter), delimiter) == ident
        for location in (f"0123abcd_{ident.object_id}", f"{ident.object_id}.lance"):
            assert len(location.encode()) <= MAX_LOCATION_BYTES + 6
            full = os.path.normpath(os.path.join(root, location))
            assert full == os.path.join(root, location), location  # one plain component
            assert os.path.dirname(full) == root, location


def test_identifier_parse_property():
    @PURE
    @given(text=IDENT, delimiter=DELIMITERS)
    @example(text="a..b", delimiter=".")
    @example(text="%2e%2e", delimiter=".")
    @example(text="a.__manifest", delimiter=".")
    @example(text="a" * 246, delimiter=".")
    @example(text="a" * 247, delimiter=".")
    def prop(text, delimiter):
        _check_parse(text, delimiter, "identifier_parse")

    try:
        prop()
    finally:
        _report("identifier_parse")
    assert OUTCOMES["identifier_parse"]["accepted"] > 0, "no identifier was ever accepted"


# Name parts that are valid by the README's rules: no delimiter, `$`, `/`, `\`, control character,
# percent-encoding or surrounding space, not `.`/`..`/`__manifest`; letters of any script. The
# first character is no `-`, so that a part is never taken for an option on a command line.
_NAME_CHARS = st.characters(categories=("Ll", "Lu", "Lo", "Nd"))
VALID_PART = st.builds(
    lambda first, rest: first + rest,
    st.one_of(_NAME_CHARS, st.just("_")),
    st.text(alphabet=st.one_of(_NAME_CHARS, st.sampled_from("_-")), max_size=15),
).filter(lambda part: part != "__manifest")


def test_valid_identifiers_are_accepted():
    """The other side of the two properties above: valid parts joined by any delimiter they do
    not contain parse to exactly those parts, and display back to the text given."""
    name = "identifier_parse_valid"

    @PURE
    @given(
        parts=st.lists(VALID_PART, min_size=1, max_size=4),
        delimiter=st.sampled_from([".", "/", ":", "::", "$", "|"]),
    )
    @example(parts=["ns1", "ns2", "events"], delimiter=".")
    @example(parts=["é", "🦆表"], delimiter="/")
    def prop(parts, delimiter):
        text = delimiter.join(parts)
        try:
            ident = Identifier.parse(text, delimiter)
        except InvalidInputError as exc:
            _count(name, "refused")
            raise AssertionError(f"valid identifier {text!r} refused: {exc}") from None
        _count(name, "accepted")
        assert ident.parts == tuple(parts)
        assert ident.display(delimiter) == text
        assert Identifier.from_object_id(ident.object_id) == ident

    try:
        prop()
    finally:
        _report(name)


def test_identifier_parse_surrogates_property():
    """Non-UTF-8 command-line bytes reach us as lone surrogates: refused, not a crash."""

    @settings(max_examples=int(100 * SCALE), **_COMMON)
    @given(text=SURROGATE_IDENT, delimiter=DELIMITERS)
    @example(text="a\udcffb", delimiter=".")
    def prop(text, delimiter):
        _check_parse(text, delimiter, "identifier_parse_surrogates")

    try:
        prop()
    finally:
        _report("identifier_parse_surrogates")
    # Every input holds a lone surrogate in some part: none may be accepted (the valid side is
    # test_valid_identifiers_are_accepted, letters of every script included).
    outcomes = OUTCOMES["identifier_parse_surrogates"]
    assert outcomes["refused"] > 0 and outcomes["accepted"] == 0, dict(outcomes)


def test_surrogate_name_on_the_command_line(tmp_path):
    """`lancens create namespace $'a\\xffb'`: a real argv with invalid UTF-8 is invalid input."""
    from helpers import run_cli

    root = tmp_path / "ns"
    assert run_cli("--root", str(root), "init").exit_code == 0
    for args in (["create", "namespace", "a\udcffb"], ["create", "table", "a\udcffb", "--declare"]):
        res = run_cli("--root", str(root), *args)
        assert res.exit_code == 2, (args, res)
        assert_contract(res, {2})


def test_non_utf8_storage_option_value_on_the_command_line(tmp_path):
    """`lancens -s $'region=\\xff' ls`: invalid input (2), not an unreadable manifest (1)."""
    from helpers import run_cli

    root = tmp_path / "ns"
    assert run_cli("--root", str(root), "init").exit_code == 0
    assert run_cli("--root", str(root), "create", "namespace", "n").exit_code == 0
    res = run_cli("--root", str(root), "-s", "region=\udcff", "ls")
    assert_contract(res, {2})


# --- the sandbox: a namespace root with neighbours that must never change -------------------------

SCHEMA = {"fields": [{"name": "id", "type": "int64"}, {"name": "city", "type": "utf8"}]}


@pytest.fixture(scope="module")
def sandbox_template(tmp_path_factory) -> Path:
    """sandbox/root (namespace a, tables a.t and t, an unregistered table data/t1),
    sandbox/outside (files and a Lance table next to the root), sandbox/s.json."""
    import lance
    import pyarrow as pa

    base = tmp_path_factory.mktemp("hostile-template") / "sandbox"
    base.mkdir()
    (base / "s.json").write_text(json.dumps(SCHEMA))
    root = base / "root"
    with mock.patch.dict(os.environ, {"LANCENS_CONFIG": str(base / "none.toml")}):
        for step in (
            ["init"],
            ["create", "namespace", "a"],
            ["create", "table", "a.t", "--schema", str(base / "s.json")],
            ["create", "table", "t", "--schema", str(base / "s.json")],
        ):
            res = cli("--root", str(root), *step)
            assert res.exit_code == 0, (step, res)
    lance.write_dataset(pa.table({"x": [1, 2]}), str(root / "data" / "t1"))
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("do not touch")
    (outside / "dir").mkdir()
    (outside / "dir" / "file.bin").write_bytes(b"\x00\x01\x02")
    lance.write_dataset(pa.table({"x": [1]}), str(outside / "tbl.lance"))
    lance.write_dataset(pa.table({"x": [1]}), str(base / "sibling.lance"))
    return base


class Sandbox:
    def __init__(self, template: Path, parent: Path) -> None:
        self.holder = Path(tempfile.mkdtemp(dir=parent))
        self.path = self.holder / "sandbox"
        shutil.copytree(template, self.path, symlinks=True)
        self.root = self.path / "root"
        self.outside = self.path / "outside"

    def snapshot(self):
        return (
            tree_snapshot(self.outside),
            sorted(os.listdir(self.path)),
            sorted(os.listdir(self.holder)),
            (self.path / "s.json").read_bytes(),
            tree_snapshot(self.path / "sibling.lance"),
        )

    def root_entries(self) -> set[str]:
        return set(os.listdir(self.root))

    def remove(self) -> None:
        shutil.rmtree(self.holder, ignore_errors=True)


def _fill(text: str, sandbox: Sandbox) -> str:
    return text.replace("{OUT}", str(sandbox.outside)).replace("{ROOT}", str(sandbox.root))


def _assert_inside(sandbox: Sandbox, before_entries: set[str], res: Result, json_mode: bool):
    """Every new top-level entry of the root is a table or manifest directory; every location
    the command reports stays below the root."""
    root = os.path.realpath(sandbox.root)
    for entry in sandbox.root_entries() - before_entries:
        assert entry == "__manifest" or entry.endswith(".lance") or HEX8_DIR.match(entry), entry
        assert os.path.realpath(sandbox.root / entry).startswith(root + os.sep), entry
    for dirpath, dirnames, filenames in os.walk(sandbox.root):
        for name in dirnames + filenames:
            real = os.path.realpath(os.path.join(dirpath, name))
            assert real.startswith(root + os.sep), real
    if res.exit_code == 0 and json_mode and res.stdout.strip():
        for change in json.loads(res.stdout).get("changes", []):
            location = change.get("location")
            if location and "://" not in location:
                full = os.path.normpath(os.path.join(root, location))
                assert full.startswith(root + os.sep), location


# Identifiers for the CLI: the hostile ones above (no surrogates: see the test above) plus names
# that exist in the sandbox, so that success paths are taken too.
CLI_IDENT = st.one_of(
    IDENT,
    st.sampled_from(
        [
            "a",
            "t",
            "a.t",
            "new",
            "a.new",
            "a.t.x",
            "a.a",
            "data",
            "t.lance",
            "root",
            "outside",
            "new.x",
            "é.🦆",
            "a b",
            "%41",
            "x#y",
            "q?z",
            "-v",
            "--yes",
        ]
    ),
)
SEGMENTS = [
    "..",
    ".",
    "",
    "data",
    "t1",
    "outside",
    "tbl.lance",
    "t.lance",
    "a",
    "%2e%2e",
    "%2F",
    "..%2F",
    "~",
    "root",
    "__manifest",
    "_versions",
    "\x00",
    " ",
    "C:",
    "$",
]
LOCATION = st.one_of(
    st.sampled_from(
        [
            "data/t1",
            "data/t1/",
            "./data/t1",
            "data/./t1",
            "data//t1",
            "data/../data/t1",
            "data\\t1",
            "t.lance",
            "../outside/tbl.lance",
            "..",
            "../outside",
            "../sibling.lance",
            "..\\outside\\tbl.lance",
            "{OUT}/tbl.lance",
            "{ROOT}/data/t1",
            "{ROOT}/../outside/tbl.lance",
            "file://{OUT}/tbl.lance",
            "file:{OUT}/tbl.lance",
            "s3://bucket/x",
            "gs://b/x",
            "memory://x",
            "%2e%2e/outside/tbl.lance",
            "..%2Foutside%2Ftbl.lance",
            "data%2Ft1",
            "\\\\server\\share",
            "C:\\x",
            "~/x",
            "data/t1\x00",
            "data/t1\n",
            " data/t1",
            "",
            "?",
            "#",
            "data/t1?x=1",
            "data/t1#f",
            "__manifest",
            "a",
            "//x",
            "\\x",
        ]
    ),
    st.lists(st.one_of(st.sampled_from(SEGMENTS), st.text(max_size=6)), max_size=5).map("/".join),
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=5).map("\\".join),
    st.text(max_size=20),
)


def _argv(text: str) -> str:
    """A command-line argument cannot hold NUL (execve ends it there)."""
    return text.replace("\x00", "")


COMMANDS = {
    "create-namespace": lambda x, loc, s: ["create", "namespace", x],
    "create-table": lambda x, loc, s: ["create", "table", x, "--schema", str(s.path / "s.json")],
    "create-declared": lambda x, loc, s: ["create", "table", x, "--declare"],
    "register": lambda x, loc, s: ["register", x, _fill(loc, s)],
    "register-location": lambda x, loc, s: ["register", "r1", _fill(loc, s)],
    "rename-namespace": lambda x, loc, s: ["rename", "a", x],
    "rename-root-table": lambda x, loc, s: ["rename", "t", x],
    "rename-from": lambda x, loc, s: ["rename", x, "moved"],
    "drop": lambda x, loc, s: ["drop", x, "--yes"],
    "drop-cascade": lambda x, loc, s: ["drop", x, "--cascade", "--yes"],
    "deregister": lambda x, loc, s: ["deregister", x],
}


# One input per command that the sandbox accepts: each hostile property must see an exit 0.
ACCEPTED_EXAMPLE = {
    "create-namespace": ("new", ""),
    "create-table": ("a.new", ""),
    "create-declared": ("new", ""),
    "register": ("new", "data/t1"),
    "register-location": ("", "data/t1"),
    "rename-namespace": ("new", ""),
    "rename-root-table": ("a.new", ""),
    "rename-from": ("a.t", ""),
    "drop": ("t", ""),
    "drop-cascade": ("a", ""),
    "deregister": ("a.t", ""),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_names_and_locations_stay_in_the_root(command, sandbox_template, tmp_path):
    name = f"cli_{command}"
    build = COMMANDS[command]
    accepted_x, accepted_location = ACCEPTED_EXAMPLE[command]

    @CLI
    @given(
        x=CLI_IDENT.map(_argv),
        location=LOCATION.map(_argv),
        json_mode=st.booleans(),
        dry_run=st.booleans(),
    )
    @example(x=accepted_x, location=accepted_location, json_mode=False, dry_run=False)
    def prop(x, location, json_mode, dry_run):
        sandbox = Sandbox(sandbox_template, tmp_path)
        try:
            args = build(x, location, sandbox)
            extra = (["--json"] if json_mode else []) + (["--dry-run"] if dry_run else [])
            note(f"args={args!r} extra={extra!r}")
            before = sandbox.snapshot()
            before_entries = sandbox.root_entries()
            res = cli("--root", str(sandbox.root), *args, *extra)
            _count(name, res.exit_code)
            assert_contract(res, INPUT_EXITS, json_mode)
            assert sandbox.snapshot() == before, "something outside the root changed"
            _assert_inside(sandbox, before_entries, res, json_mode)
            if res.exit_code == 0:  # the namespace is still healthy and readable afterwards
                listing = cli("--root", str(sandbox.root), "ls", "-R", "--json")
                assert_contract(listing, {0})
        finally:
            sandbox.remove()

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name][0] > 0, f"{command}: no input was ever accepted"


# The valid side of the property above: names valid by the README's rules (a fresh name, or one
# the sandbox holds where the command needs an existing object) and locations of real Lance tables
# inside the root are accepted (exit 0) with the effect visible in `ls -R`; a dry run exits 0 and
# changes nothing.
TAKEN = {"a", "t", "moved", "r1", "data", "outside"}
NEW_NAME = VALID_PART.filter(lambda part: part not in TAKEN)
NEW_ID = st.one_of(NEW_NAME, NEW_NAME.map(lambda part: f"a.{part}"))  # at the root or in `a`
_SEGMENT = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
    st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789_-"), max_size=10),
)
NEW_LOCATION = (
    st.lists(_SEGMENT, min_size=1, max_size=3)
    .filter(lambda segments: segments[0] not in TAKEN)
    .map("/".join)
)


def _listing(sandbox: Sandbox) -> dict[str, dict]:
    res = cli("--root", str(sandbox.root), "ls", "-R", "--json")
    assert_contract(res, {0}, True)
    return {entry["id"]: entry for entry in json.loads(res.stdout)["entries"]}


def _without(entries: dict[str, dict], ident: str) -> set[str]:
    """The ids of `entries` but `ident` and everything below it."""
    return {i for i in entries if i != ident and not i.startswith(ident + ".")}


# command -> (x, location) strategy, and what `ls -R` shows after a real run.
VALID_INPUTS = {
    "create-namespace": (
        st.tuples(NEW_ID, st.just("")),
        lambda x, loc, ls, before: set(ls) == set(before) | {x} and ls[x]["kind"] == "namespace",
    ),
    "create-table": (
        st.tuples(NEW_ID, st.just("")),
        lambda x, loc, ls, before: set(ls) == set(before) | {x} and ls[x]["state"] == "ok",
    ),
    "create-declared": (
        st.tuples(NEW_ID, st.just("")),
        lambda x, loc, ls, before: set(ls) == set(before) | {x} and ls[x]["state"] == "declared",
    ),
    "register": (
        st.tuples(NEW_ID, NEW_LOCATION),
        lambda x, loc, ls, before: set(ls) == set(before) | {x} and ls[x]["location"] == loc,
    ),
    "register-location": (
        st.tuples(st.just("r1"), NEW_LOCATION),
        lambda x, loc, ls, before: set(ls) == set(before) | {"r1"} and ls["r1"]["location"] == loc,
    ),
    "rename-namespace": (
        st.tuples(NEW_NAME, st.just("")),
        lambda x, loc, ls, before: (
            set(ls) == _without(before, "a") | {x, f"{x}.t"}
            and ls[f"{x}.t"] == {**before["a.t"], "id": f"{x}.t"}  # no data moved
        ),
    ),
    "rename-root-table": (
        st.tuples(NEW_ID, st.just("")),
        lambda x, loc, ls, before: (
            set(ls) == _without(before, "t") | {x} and ls[x]["kind"] == "table"
        ),
    ),
    "rename-from": (
        st.tuples(st.sampled_from(["a", "t", "a.t"]), st.just("")),
        lambda x, loc, ls, before: (
            _without(ls, "moved") == _without(before, x)
            and ls["moved"]["kind"] == before[x]["kind"]
        ),
    ),
    "drop": (
        st.tuples(st.sampled_from(["t", "a.t"]), st.just("")),
        lambda x, loc, ls, before: set(ls) == _without(before, x),
    ),
    "drop-cascade": (
        st.tuples(st.sampled_from(["a", "t", "a.t"]), st.just("")),
        lambda x, loc, ls, before: set(ls) == _without(before, x),
    ),
    "deregister": (
        st.tuples(st.sampled_from(["t", "a.t"]), st.just("")),
        lambda x, loc, ls, before: set(ls) == _without(before, x),
    ),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_valid_names_and_locations_are_accepted(command, sandbox_template, tmp_path):
    name = f"cli_valid_{command}"
    build = COMMANDS[command]
    inputs, shows = VALID_INPUTS[command]

    @settings(max_examples=int(12 * SCALE), **_COMMON)
    @given(x_location=inputs, json_mode=st.booleans(), dry_run=st.booleans())
    def prop(x_location, json_mode, dry_run):
        x, location = x_location
        sandbox = Sandbox(sandbox_template, tmp_path)
        try:
            if location:  # a real Lance table there, as register requires
                import lance
                import pyarrow as pa

                lance.write_dataset(pa.table({"v": [1, 2]}), str(sandbox.root / location))
            args = build(x, location, sandbox)
            extra = (["--json"] if json_mode else []) + (["--dry-run"] if dry_run else [])
            note(f"args={args!r} extra={extra!r}")
            before = _listing(sandbox)
            before_tree = tree_snapshot(sandbox.root)
            res = cli("--root", str(sandbox.root), *args, *extra)
            _count(name, res.exit_code)
            assert_contract(res, {0}, json_mode)
            after = _listing(sandbox)
            if dry_run:
                assert tree_snapshot(sandbox.root) == before_tree, "a dry run changed the root"
            else:
                assert shows(x, location, after, before), (args, before, after)
        finally:
            sandbox.remove()

    try:
        prop()
    finally:
        _report(name)


def test_register_through_a_symlink_does_not_reach_outside(sandbox_template, tmp_path):
    """A symlink inside the root that points outside: registering and dropping it must not
    delete the data it points to (the data is outside the root)."""
    sandbox = Sandbox(sandbox_template, tmp_path)
    os.symlink(sandbox.outside / "tbl.lance", sandbox.root / "link")
    before = tree_snapshot(sandbox.outside)
    res = cli("--root", str(sandbox.root), "register", "lnk", "link")
    assert_contract(res, {2})  # the location resolves outside the root
    res = cli("--root", str(sandbox.root), "drop", "lnk", "--yes")
    assert_contract(res, {3})
    assert tree_snapshot(sandbox.outside) == before, "drop deleted data outside the root"


# --- properties ----------------------------------------------------------------------------------

PROP_KEY = st.one_of(
    st.text(max_size=12).filter(lambda k: "=" not in k),
    st.sampled_from(
        [
            "owner",
            " owner ",
            "é",
            "🦆",
            "a.b",
            "lancens.rename_to",
            "k\x01",
            "\t",
            "",
            " ",
            "__manifest",
            "k\x7f",
            "k\x85",
            "k\u2028",
        ]
    ),
)
PROP_VALUE = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "=",
            "a=b=c",
            "  padded  ",
            "line\nbreak",
            "tab\tbed",
            "\x00",
            "\x7f",
            "\x85",
            "\u2028",
            '{"json": 1}',
            "%2F..%2F",
            "\\",
            "🦆" * 50,
        ]
    ),
    st.text(min_size=1000, max_size=3000),
)


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 for c in text)


@pytest.fixture(scope="module")
def prop_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-props") / "root"
    with mock.patch.dict(os.environ, {"LANCENS_CONFIG": str(root) + ".none.toml"}):
        assert cli("--root", str(root), "init").exit_code == 0
    return root


def test_property_values_round_trip(prop_root):
    name = "properties"
    serial = iter(range(10**9))

    @CLI
    @given(pairs=st.lists(st.tuples(PROP_KEY, PROP_VALUE), min_size=1, max_size=3))
    @example(pairs=[("k", "v=w"), (" sp ", "  x ")])
    @example(pairs=[("k", "a\x7fb\x85c\u2028")])
    @example(pairs=[("k", "line\nbreak")])
    def prop(pairs):
        ns = f"p{next(serial)}"
        args = ["create", "namespace", ns] + [f"--property={k}={v}" for k, v in pairs]
        res = cli("--root", str(prop_root), *args)
        expected: dict[str, str] = {}
        for key, value in pairs:  # repeated keys: the last one wins
            expected[key.strip()] = value
        bad = any(_has_control(k + v) for k, v in expected.items()) or "" in expected
        _count(name, "refused" if bad else "accepted")
        if bad:
            assert res.exit_code == 2, res
            assert_contract(res, {2})
            assert cli("--root", str(prop_root), "describe", ns).exit_code == 3
            return
        assert_contract(res, {0})
        described = cli("--root", str(prop_root), "describe", ns, "--json")
        assert_contract(described, {0})
        assert json.loads(described.stdout)["properties"] == expected

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name]["accepted"] > 0, "no property set was ever accepted"


# --- JSON schema files ---------------------------------------------------------------------------

TYPE_NAMES = [
    "null",
    "bool",
    "boolean",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint64",
    "float16",
    "float32",
    "float",
    "float64",
    "double",
    "utf8",
    "string",
    "large_utf8",
    "binary",
    "large_binary",
    "date32",
    "date32:day",
    "date64",
    "INT64",
    " utf8 ",
    "Utf8",
    "timestamp",
    "timestamp:us",
    "timestamp:ns:UTC",
    "timestamp:ms:Europe/Oslo",
    "timestamp:us:Not/AZone",
    "timestamp:xs",
    "time32",
    "time32:ms",
    "time32:us",
    "time64:ns",
    "duration:s",
    "decimal",
    "decimal:128:10:2",
    "decimal:256:40:3",
    "decimal256",
    "decimal128:38:0",
    "decimal:12",
    "decimal:99:1",
    "fixed_size_binary",
    "list",
    "large_list",
    "fixed_size_list",
    "struct",
    "map",
    "quaternion",
    "",
    ":",
    "int64:",
    "list:int8",
]
JSON_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
ANY_JSON = st.recursive(
    JSON_SCALAR,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELD_NAME = st.one_of(
    st.sampled_from(
        [
            "id",
            "id",
            "a",
            "b",
            "a.b",
            "",
            " ",
            "x" * 5000,
            "é",
            "_rowid",
            "_rowaddr",
            "__manifest",
            "a/b",
            "\x00",
            "\n",
        ]
    ),
    st.text(max_size=10),
)
LENGTH = st.one_of(
    st.integers(min_value=-3, max_value=40), st.integers(min_value=2**31 - 2), JSON_SCALAR
)


def _type(field):
    return st.one_of(
        st.sampled_from(TYPE_NAMES),
        st.fixed_dictionaries(
            {"type": st.one_of(st.sampled_from(TYPE_NAMES), JSON_SCALAR)},
            optional={
                "unit": st.one_of(st.sampled_from(["s", "ms", "us", "ns", "xs", ""]), ANY_JSON),
                "timezone": st.one_of(
                    st.sampled_from(["UTC", "+01:00", "Nope/Zone", ""]), ANY_JSON
                ),
                "precision": st.one_of(st.integers(-2, 80), ANY_JSON),
                "scale": st.one_of(st.integers(-40, 80), ANY_JSON),
                "length": LENGTH,
                "fields": st.one_of(st.lists(field, max_size=3), ANY_JSON),
            },
        ),
        ANY_JSON,
    )


FIELD = st.deferred(
    lambda: st.one_of(
        st.fixed_dictionaries(
            {"name": FIELD_NAME, "type": _type(FIELD)},
            optional={
                "nullable": st.one_of(st.booleans(), ANY_JSON),
                "metadata": st.one_of(
                    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2), ANY_JSON
                ),
            },
        ),
        st.fixed_dictionaries({"name": FIELD_NAME, "type": st.sampled_from(TYPE_NAMES)}),
        ANY_JSON,
    )
)
SCHEMA_DOC = st.one_of(
    st.fixed_dictionaries(
        {"fields": st.lists(FIELD, max_size=5)},
        optional={
            "metadata": st.one_of(
                st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2), ANY_JSON
            )
        },
    ),
    st.fixed_dictionaries(
        {
            "fields": st.lists(
                st.fixed_dictionaries({"name": FIELD_NAME, "type": st.sampled_from(TYPE_NAMES)}),
                min_size=1,
                max_size=4,
            )
        }
    ),
    ANY_JSON,
)


def test_schema_from_json_property():
    name = "schema_from_json"

    @PURE
    @given(doc=SCHEMA_DOC)
    @example(doc={"fields": [{"name": "id", "type": "int64"}, {"name": "city", "type": "utf8"}]})
    def prop(doc):
        try:
            schema = schema_from_json(doc)
        except InvalidInputError:
            _count(name, "refused")
            return
        except Exception:
            _count(name, "crashed")
            raise
        _count(name, "accepted")
        names = [f["name"] for f in doc["fields"]]
        assert schema.names == names

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name]["accepted"] > 0, "no schema document was ever accepted"


@pytest.fixture(scope="module")
def schema_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-schema") / "root"
    with mock.patch.dict(os.environ, {"LANCENS_CONFIG": str(root) + ".none.toml"}):
        assert cli("--root", str(root), "init").exit_code == 0
    return root


def test_schema_files_through_the_cli(schema_root):
    import lance

    name = "schema_cli"
    serial = iter(range(10**9))

    @CLI_SCHEMA
    @given(doc=SCHEMA_DOC, json_mode=st.booleans())
    @example(
        doc={
            "fields": [
                {
                    "name": "s",
                    "type": {
                        "type": "struct",
                        "fields": [{"name": "x", "type": "int8"}, {"name": "x", "type": "int8"}],
                    },
                }
            ]
        },
        json_mode=False,
    )
    @example(doc={"fields": []}, json_mode=True)
    @example(doc={"fields": [{"name": "id", "type": "int64"}]}, json_mode=False)
    @example(  # Lance would keep the name cut at the NUL: refused
        doc={"fields": [{"name": "id", "type": "int64"}, {"name": "\x00", "type": "int8"}]},
        json_mode=False,
    )
    def prop(doc, json_mode):
        table = f"s{next(serial)}"
        path = schema_root.parent / f"{table}.json"
        path.write_text(json.dumps(doc))
        args = ["create", "table", table, "--schema", str(path)] + (["--json"] if json_mode else [])
        res = cli("--root", str(schema_root), *args)
        _count(name, res.exit_code)
        assert_contract(res, {0, 2}, json_mode)
        if res.exit_code == 0:
            described = cli("--root", str(schema_root), "describe", table, "--json")
            assert_contract(described, {0})
            got = lance.dataset(json.loads(described.stdout)["uri"]).schema
            want = schema_from_json(doc)
            assert got.names == want.names
            assert [f.type for f in got] == [f.type for f in want]

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name][0] > 0, "no schema file was ever accepted"


# The valid side of the two schema properties: documents in the README's JSON Arrow schema form,
# each field's type spelt as the spec spells it, with the Arrow type it must become (written out
# here, not computed by lancens).
def _valid_types():
    import pyarrow as pa

    return [
        ("bool", pa.bool_()),
        ("int8", pa.int8()),
        ("int16", pa.int16()),
        ("int32", pa.int32()),
        ("int64", pa.int64()),
        ("uint8", pa.uint8()),
        ("uint64", pa.uint64()),
        ("float32", pa.float32()),
        ("float64", pa.float64()),
        ("double", pa.float64()),
        ("utf8", pa.string()),
        ("string", pa.string()),
        ("large_utf8", pa.large_string()),
        ("binary", pa.binary()),
        ("large_binary", pa.large_binary()),
        ("date32", pa.date32()),
        ("timestamp:us", pa.timestamp("us")),
        ("timestamp:ns:UTC", pa.timestamp("ns", tz="UTC")),
        (
            {"type": "timestamp", "unit": "ms", "timezone": "Europe/Oslo"},
            pa.timestamp("ms", "Europe/Oslo"),
        ),
        ({"type": "decimal", "precision": 38, "scale": 10}, pa.decimal128(38, 10)),
        ({"type": "fixed_size_binary", "length": 16}, pa.binary(16)),
    ]


FIELD_NAME_OK = _SEGMENT  # lower-case letters first: never `_rowid` and the like


def _nested_types(inner):
    import pyarrow as pa

    def struct(fields):
        doc = {"type": "struct", "fields": [{"name": n, "type": j} for n, (j, _) in fields]}
        return doc, pa.struct([(n, t) for n, (_, t) in fields])

    return st.one_of(
        inner.map(
            lambda t: ({"type": "list", "fields": [{"name": "item", "type": t[0]}]}, pa.list_(t[1]))
        ),
        st.lists(
            st.tuples(FIELD_NAME_OK, inner), min_size=1, max_size=3, unique_by=lambda f: f[0]
        ).map(struct),
    )


VALID_TYPE = st.recursive(st.sampled_from(_valid_types()), _nested_types, max_leaves=4)
VALID_SCHEMA = st.lists(
    st.tuples(FIELD_NAME_OK, VALID_TYPE, st.booleans()),
    min_size=1,
    max_size=5,
    unique_by=lambda f: f[0],
)


def _schema_doc(fields) -> tuple[dict, object]:
    import pyarrow as pa

    doc = {"fields": [{"name": n, "type": j, "nullable": null} for n, (j, _), null in fields]}
    return doc, pa.schema([pa.field(n, t, nullable=null) for n, (_, t), null in fields])


def test_valid_schema_documents_are_accepted(schema_root):
    """Each valid document becomes exactly its Arrow schema (names, types, nullability), in
    `schema_from_json` and in the table `create table --schema` makes from the file."""
    import lance

    name = "schema_valid"
    serial = iter(range(10**9))

    @CLI_SCHEMA
    @given(fields=VALID_SCHEMA, json_mode=st.booleans())
    def prop(fields, json_mode):
        doc, expected = _schema_doc(fields)
        note(json.dumps(doc))
        assert schema_from_json(doc).equals(expected), schema_from_json(doc)
        table = f"v{next(serial)}"
        path = schema_root.parent / f"{table}.json"
        path.write_text(json.dumps(doc))
        args = ["create", "table", table, "--schema", str(path)] + (["--json"] if json_mode else [])
        res = cli("--root", str(schema_root), *args)
        _count(name, res.exit_code)
        assert_contract(res, {0}, json_mode)
        described = cli("--root", str(schema_root), "describe", table, "--json")
        assert_contract(described, {0})
        got = lance.dataset(json.loads(described.stdout)["uri"]).schema
        assert got.equals(expected, check_metadata=False), (got, expected)

    try:
        prop()
    finally:
        _report(name)


def _field(type_, **extra):
    return {"fields": [{"name": "f", "type": type_, **extra}]}


# Schema documents found by the properties above (and by hand) that break the contract: each
# must be refused as invalid input (exit 2, InvalidInputError), not crash (exit 1).
BAD_SCHEMAS = {
    "timezone-not-a-string": _field({"type": "timestamp", "timezone": 5}),
    "fixed-size-binary-length-2**31": _field({"type": "fixed_size_binary", "length": 2**31}),
    "fixed-size-list-length-2**31": _field(
        {"type": "fixed_size_list", "length": 2**31, "fields": [{"name": "x", "type": "int8"}]}
    ),
    "decimal-precision-10**30": _field({"type": "decimal", "precision": 10**30}),
    "schema-metadata-not-strings": {
        "fields": [{"name": "a", "type": "int8"}],
        "metadata": {"k": 5},
    },
    "null-type-not-nullable": _field("null", nullable=False),
    "map-with-nullable-key": _field(
        {
            "type": "map",
            "fields": [
                {
                    "name": "e",
                    "type": {
                        "type": "struct",
                        "fields": [{"name": "k", "type": "int8"}, {"name": "v", "type": "int8"}],
                    },
                }
            ],
        }
    ),
    "top-level-name-with-dot": {"fields": [{"name": "a.b", "type": "int64"}]},
    "reserved-column-_rowid": {"fields": [{"name": "_rowid", "type": "int64"}]},
}


@pytest.mark.parametrize("case", sorted(BAD_SCHEMAS))
def test_known_bad_schema_is_refused_as_invalid_input(case, schema_root):
    doc = BAD_SCHEMAS[case]
    try:
        schema_from_json(doc)
    except InvalidInputError:
        pass
    except Exception as exc:  # the point of the test
        pytest.fail(f"schema_from_json raised {type(exc).__name__}: {exc}")
    path = schema_root.parent / f"bad-{case}.json"
    path.write_text(json.dumps(doc))
    res = cli(
        "--root",
        str(schema_root),
        "create",
        "table",
        f"r_{case.replace('-', '_')[:40]}",
        "--schema",
        str(path),
    )
    assert_contract(res, {2})


# --- configuration -------------------------------------------------------------------------------

ENV_KEYS = {
    "LANCENS_MANIFEST_ENABLED": "manifest_enabled",
    "LANCENS_DIR_LISTING_ENABLED": "dir_listing_enabled",
    "LANCENS_COMMIT_RETRIES": "commit_retries",
}
ENV_VALUE = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["true", "false", "1", "0", "20", " on ", "No"]),
    st.sampled_from(
        [
            "true",
            "false",
            "TRUE",
            " yes ",
            "on",
            "off",
            "0",
            "1",
            "2",
            "-1",
            "+5",
            "1_000",
            "١٢",
            "1e3",
            "0x10",
            "nan",
            "",
            " ",
            "9" * 5000,
            "true\x00",
            "\u00a0true",
            "tru\u0435",
            "99999999999999999999999",
        ]
    ),
)
ENV = st.dictionaries(st.sampled_from(sorted(ENV_KEYS)), ENV_VALUE, max_size=3)


def _check_config_outcome(call, named: list[str], name: str):
    try:
        config = call()
    except ConfigError as exc:
        _count(name, "ConfigError")
        assert any(key in exc.message for key in named), exc.message
        return None
    _count(name, "ok")
    return config


def test_env_values_property(tmp_path):
    name = "config_env"

    @PURE
    @given(env=ENV)
    @example(env={"LANCENS_COMMIT_RETRIES": " 3 ", "LANCENS_MANIFEST_ENABLED": "false"})
    def prop(env):
        config = _check_config_outcome(
            lambda: resolve_config({"root": str(tmp_path)}, {}, None, env, None),
            [ENV_KEYS[k] for k in env],
            name,
        )
        if config is not None and "LANCENS_COMMIT_RETRIES" in env:
            assert config.commit_retries == int(env["LANCENS_COMMIT_RETRIES"].strip())

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name]["ok"] > 0, "no environment was ever accepted"


@pytest.fixture(scope="module")
def config_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-config") / "root"
    with mock.patch.dict(os.environ, {"LANCENS_CONFIG": str(root) + ".none.toml"}):
        assert cli("--root", str(root), "init").exit_code == 0
        assert cli("--root", str(root), "create", "namespace", "n").exit_code == 0
    return root


def test_env_values_through_the_cli(config_root):
    name = "config_env_cli"

    @CLI
    @given(env=ENV.map(lambda e: {k: v.replace("\x00", "") for k, v in e.items()}))
    @example(env={"LANCENS_COMMIT_RETRIES": "5", "LANCENS_DIR_LISTING_ENABLED": "false"})
    def prop(env):
        res = cli("--root", str(config_root), "ls", env=env)
        _count(name, res.exit_code)
        assert_contract(res, {0, 2})
        if res.exit_code == 2:
            assert any(ENV_KEYS[k] in res.stderr for k in env), res.stderr

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name][0] > 0, "no environment was ever accepted"


# The valid side of the two environment properties: the README's spellings (true / false, a
# non-negative integer), never both switches off. Each value reaches the configuration, and
# through the CLI `describe` shows it in effect.
_BOOLEAN = st.sampled_from(["true", "false"])
VALID_ENV = st.fixed_dictionaries(
    {},
    optional={
        "LANCENS_MANIFEST_ENABLED": _BOOLEAN,
        "LANCENS_DIR_LISTING_ENABLED": _BOOLEAN,
        "LANCENS_INLINE_OPTIMIZATION_ENABLED": _BOOLEAN,
        "LANCENS_COMMIT_RETRIES": st.integers(min_value=0, max_value=10**6).map(str),
    },
).filter(
    lambda e: (
        (e.get("LANCENS_MANIFEST_ENABLED"), e.get("LANCENS_DIR_LISTING_ENABLED"))
        != ("false", "false")
    )
)


def _expected_config(values: dict[str, object]) -> dict[str, str]:
    """What `describe --json` shows under "config" for these settings (defaults elsewhere)."""
    shown = {
        "manifest_enabled": "true",
        "dir_listing_enabled": "true",
        "inline_optimization_enabled": "false",
        "commit_retries": "20",
    }
    for key, value in values.items():
        shown[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return shown


def test_valid_env_values_are_accepted(config_root):
    name = "config_env_valid"

    @CLI
    @given(env=VALID_ENV)
    def prop(env):
        values = {key[len("LANCENS_") :].lower(): value for key, value in env.items()}
        expected = _expected_config(values)
        config = resolve_config({"root": str(config_root)}, {}, None, env, None)
        assert {k: str(getattr(config, k)).lower() for k in expected} == expected
        res = cli("--root", str(config_root), "describe", "--json", env=env)
        _count(name, res.exit_code)
        assert_contract(res, {0}, True)
        shown = json.loads(res.stdout)["config"]
        assert {k: shown[k] for k in expected} == expected, shown

    try:
        prop()
    finally:
        _report(name)


KNOWN_KEYS = [
    "root",
    "manifest_enabled",
    "dir_listing_enabled",
    "inline_optimization_enabled",
    "commit_retries",
    "storage",
    "storage.region",
    "storage.",
    "storage.timeout",
]
TOML_KEY = st.one_of(
    st.sampled_from(KNOWN_KEYS),
    st.sampled_from(
        KNOWN_KEYS
        + [
            "Root",
            "ROOT",
            "manifest-enabled",
            "commit_retries ",
            "",
            "profile",
            "profiles",
            "colour",
            "é",
            "a.b",
            "\x01",
            "storage..x",
        ]
    ),
    st.text(max_size=12),
)


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    return value.isoformat()


TOML_SCALAR = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(
        [
            "true",
            "false",
            "yes",
            "maybe",
            "20",
            "-1",
            "/x",
            "s3://b/p",
            "memory://x",
            "gs://",
            "ftp://x",
        ]
    ),
    st.datetimes(),
    st.dates(),
)
TOML_VALUE = st.recursive(
    TOML_SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
PLAUSIBLE_PROFILE = st.fixed_dictionaries(
    {},
    optional={
        "root": st.sampled_from(["/x", "rel", "s3://b/p", "memory://", "ftp://x", ""]),
        "manifest_enabled": st.sampled_from([True, False, "true", "off", "maybe", 1, 0.5]),
        "dir_listing_enabled": st.sampled_from([True, False, "yes", "NO", "", 2]),
        "inline_optimization_enabled": st.sampled_from([False, "on", "x"]),
        "commit_retries": st.sampled_from([0, 3, -1, 2**40, "7", "many", 1.5, True]),
        "storage": st.dictionaries(
            st.sampled_from(["region", "timeout", "allow_http", ""]), TOML_SCALAR, max_size=2
        ),
    },
)
PROFILE = st.one_of(st.dictionaries(TOML_KEY, TOML_VALUE, max_size=5), PLAUSIBLE_PROFILE)


def _profile_document(profile: dict, root: Path) -> str:
    lines = ["[profiles.p]"]
    for key, value in profile.items():
        if key == "root" and isinstance(value, str) and not value.startswith(("s3", "gs", "m")):
            value = str(root)  # keep most accepted profiles usable
        lines.append(f"{_toml_string(key)} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def test_profile_property(tmp_path):
    name = "config_profile"
    path = tmp_path / "config.toml"

    @PURE_SMALL
    @given(
        content=st.one_of(
            st.text(max_size=200), PROFILE.map(lambda p: _profile_document(p, tmp_path))
        )
    )
    @example(content="[profiles.p]\nroot = 5\n")
    @example(content="[profiles]\np = 3\n")
    @example(content="profiles = [1, 2]\n")
    @example(content="[profiles.p]\ncommit_retries = 1.5\n")
    @example(content="[profiles.p.storage]\nx = {a = 1}\n")
    @example(content="[profiles.p]\ncommit_retries = 3\n[profiles.p.storage]\nregion = 'x'\n")
    def prop(content):
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
        note(content)
        with mock.patch.dict(os.environ, {"LANCENS_CONFIG": str(path)}):
            _check_config_outcome(
                lambda: resolve_config({"root": str(tmp_path)}, {}, "p", {}, None),
                # the key, as an error names it: repr and raw
                [
                    "config file",
                    "profile 'p'",
                    "manifest_enabled and dir_listing_enabled",
                    *[repr(k) for k in _keys_of(content)],
                    *_keys_of(content),
                ],
                name,
            )

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name]["ok"] > 0, "no profile was ever accepted"


def _keys_of(content: str) -> list[str]:
    import tomllib

    try:
        profile = tomllib.loads(content).get("profiles", {}).get("p", {})
    except Exception:
        return []
    return [str(k) for k in profile] if isinstance(profile, dict) else []


def test_profile_through_the_cli(config_root, tmp_path):
    name = "config_profile_cli"
    path = tmp_path / "config.toml"

    @CLI
    @given(profile=PROFILE)
    @example(profile={"colour": "blue"})
    @example(profile={"storage": {"timeout": "soon"}})
    @example(profile={"storage.timeout": "-5s"})
    @example(profile={"commit_retries": 3, "dir_listing_enabled": False})
    def prop(profile):
        content = _profile_document(profile, config_root)
        path.write_text(content, encoding="utf-8")
        note(content)
        res = cli(
            "--root", str(config_root), "--profile", "p", "ls", env={"LANCENS_CONFIG": str(path)}
        )
        _count(name, res.exit_code)
        assert_contract(res, {0, 2})
        if res.exit_code == 2:
            keys = _keys_of(content)
            names = [" ".join(repr(k).split()) for k in keys] + [k for k in keys if k.strip()]
            names += [f"storage.{k}" for k in _storage_keys(content)]
            assert any(n in res.stderr for n in names) or "not valid TOML" in res.stderr, res.stderr

    try:
        prop()
    finally:
        _report(name)
    assert OUTCOMES[name][0] > 0, "no profile was ever accepted"


# The valid side of the two profile properties: a profile with the README's keys and value types
# (the root as a string or not at all, TOML booleans, a non-negative integer, a storage table)
# is accepted; its values reach the configuration, and through the CLI `describe` shows them
# in effect (the root from the profile when no --root is given).
VALID_PROFILE = st.fixed_dictionaries(
    {},
    optional={
        "manifest_enabled": st.booleans(),
        "dir_listing_enabled": st.booleans(),
        "inline_optimization_enabled": st.booleans(),
        "commit_retries": st.integers(min_value=0, max_value=10**6),
        "storage": st.fixed_dictionaries(
            {}, optional={"region": st.sampled_from(["eu-west-1", "us-east-1", "auto"])}
        ),
    },
).filter(lambda p: (p.get("manifest_enabled"), p.get("dir_listing_enabled")) != (False, False))


def test_valid_profiles_are_accepted(config_root, tmp_path):
    name = "config_profile_valid"
    path = tmp_path / "config.toml"

    @CLI
    @given(profile=VALID_PROFILE, root_in_profile=st.booleans())
    def prop(profile, root_in_profile):
        profile = {**profile, "root": str(config_root)} if root_in_profile else profile
        content = _profile_document(profile, config_root)
        path.write_text(content, encoding="utf-8")
        note(content)
        values = {k: v for k, v in profile.items() if k not in ("root", "storage")}
        expected = _expected_config(values)
        expected.update({f"storage.{k}": v for k, v in profile.get("storage", {}).items()})
        expected["root"] = f"file://{config_root}"
        with mock.patch.dict(os.environ, {"LANCENS_CONFIG": str(path)}):
            flags = {} if root_in_profile else {"root": str(config_root)}
            config = resolve_config(flags, {}, "p", {}, None)
        properties = config.to_properties()
        assert {k: properties.get(k) for k in expected} == expected, properties
        root_flag = [] if root_in_profile else ["--root", str(config_root)]
        res = cli(
            *root_flag, "--profile", "p", "describe", "--json", env={"LANCENS_CONFIG": str(path)}
        )
        _count(name, res.exit_code)
        assert_contract(res, {0}, True)
        shown = json.loads(res.stdout)["config"]
        assert {k: shown.get(k) for k in expected} == expected, shown

    try:
        prop()
    finally:
        _report(name)


def _storage_keys(content: str) -> list[str]:
    import tomllib

    try:
        storage = tomllib.loads(content)["profiles"]["p"].get("storage", {})
    except Exception:
        return []
    return [str(k) for k in storage] if isinstance(storage, dict) else []
