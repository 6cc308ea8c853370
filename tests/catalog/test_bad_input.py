"""Hostile and malformed input: every case fails cleanly and changes nothing on disk.

Each case runs `lancens` as a real subprocess against a copy of one populated local namespace
(built once per worker) and checks the contract of the README: the documented exit code, one
line on stderr (`lancens: error: ...`, or with --json one `{"error": {...}}` object; Click's
usage message for usage errors), nothing on stdout, no traceback, and the root and its parent
directory unchanged byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import invoke, run_cli, tree_snapshot

# The Lance namespace error catalogue (name -> numeric code), independent of lancens' own table.
CATALOGUE = {
    "Unsupported": 0,
    "NamespaceNotFound": 1,
    "NamespaceAlreadyExists": 2,
    "NamespaceNotEmpty": 3,
    "TableNotFound": 4,
    "TableAlreadyExists": 5,
    "TableVersionNotFound": 11,
    "InvalidInput": 13,
    "ConcurrentModification": 14,
    "PermissionDenied": 15,
    "ServiceUnavailable": 17,
    "Internal": 18,
    "InvalidTableState": 19,
}

SCHEMA = {"fields": [{"name": "id", "type": "int64"}, {"name": "city", "type": "utf8"}]}


# --- the populated namespace, built once per worker -------------------------------------------


def _write_inputs(inp: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    inp.mkdir()
    orders = pa.table({"id": list(range(100)), "city": ["Oslo", "Lima"] * 50})
    pq.write_table(orders, inp / "orders.parquet")
    (inp / "schema.json").write_text(json.dumps(SCHEMA))
    (inp / "malformed.json").write_text('{"fields": [{"name": "id", "type": "int64"},')
    (inp / "unknown_type.json").write_text(
        json.dumps({"fields": [{"name": "id", "type": "quaternion"}]})
    )
    (inp / "dup.json").write_text(
        json.dumps({"fields": [{"name": "id", "type": "int64"}, {"name": "id", "type": "utf8"}]})
    )
    (inp / "not_object.json").write_text("[1, 2, 3]")
    (inp / "nullable_str.json").write_text(
        json.dumps({"fields": [{"name": "id", "type": "int64", "nullable": "yes"}]})
    )
    (inp / "binary_schema.json").write_bytes(b"\xff\xfe\x00garbage\x81")
    (inp / "corrupt.parquet").write_bytes(os.urandom(4096))
    (inp / "empty.parquet").write_bytes(b"")
    valid = (inp / "orders.parquet").read_bytes()
    (inp / "truncated.parquet").write_bytes(valid[: len(valid) // 2])
    (inp / "ragged.csv").write_text("a,b\n1,2\n3\n4,5,6\n")
    # A ragged row far past the first block pyarrow reads to infer the schema.
    (inp / "ragged_late.csv").write_text(
        "a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(120_000)) + "7\n"
    )
    (inp / "bad.jsonl").write_text('{"a": 1}\n{not json\n')
    (inp / "data.txt").write_text("id\n1\n")
    (inp / "notlance").mkdir()
    (inp / "notlance" / "readme.txt").write_text("not a dataset")
    (inp / "config.toml").write_text('[profiles.dev]\nroot = "/nonexistent/elsewhere"\n')
    (inp / "malformed.toml").write_text('[profiles.dev\nroot = "x"\n')
    (inp / "unknown_key.toml").write_text('[profiles.dev]\nroot = "ROOT"\ncolour = "blue"\n')
    (inp / "bad_bool.toml").write_text(
        '[profiles.dev]\nroot = "ROOT"\nmanifest_enabled = "maybe"\n'
    )
    (inp / "profile_not_table.toml").write_text("[profiles]\ndev = 3\n")


@pytest.fixture(scope="session")
def template_ws(tmp_path_factory) -> Path:
    """ws/ns: a namespace with nested namespaces, V1 and V2 tables, junk; ws/in: input files."""
    import lance
    import pyarrow as pa

    ws = tmp_path_factory.mktemp("template") / "ws"
    ws.mkdir()
    _write_inputs(ws / "in")
    root = ws / "ns"
    for unknown in (ws / "in" / "unknown_key.toml", ws / "in" / "bad_bool.toml"):
        unknown.write_text(unknown.read_text().replace("ROOT", str(root)))
    steps = [
        ["init"],
        ["create", "namespace", "sales", "--property", "owner=ann"],
        ["create", "namespace", "sales.eu"],
        ["create", "namespace", "empty"],
        ["create", "table", "sales.eu.orders", "--from", str(ws / "in" / "orders.parquet")],
        ["create", "table", "events", "--from", str(ws / "in" / "orders.parquet")],
        ["create", "table", "sales.refunds", "--schema", str(ws / "in" / "schema.json")],
    ]
    for step in steps:  # in-process (same code path as the subprocess, much faster)
        result = invoke("--root", str(root), *step)
        assert result.exit_code == 0, (step, result.stderr)
    (root / "junk.lance").mkdir()
    (root / "junk.lance" / "notes.txt").write_text("not a table")
    (root / "plain").mkdir()
    (root / "plain" / "file.bin").write_bytes(b"\x00\x01")
    # A Lance table nobody registered (not `<name>.lance`, so not found by listing).
    lance.write_dataset(pa.table({"x": [1, 2, 3]}), str(root / "loose"))
    return ws


@pytest.fixture
def ws(template_ws, tmp_path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(template_ws, target, symlinks=True)
    return target


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("LANCENS_"):
            monkeypatch.delenv(key)


def _base_env(ws: Path) -> dict[str, str]:
    return {
        "LANCENS_CONFIG": str(ws / "no-such-config.toml"),
        "XDG_CONFIG_HOME": str(ws / "xdg"),
    }


# --- preparations that break the namespace before the snapshot ----------------------------------


def corrupt_manifest(ws: Path) -> None:
    """Overwrite every `__manifest/_versions/*.manifest` with garbage bytes."""
    versions = ws / "ns" / "__manifest" / "_versions"
    found = sorted(versions.glob("*.manifest"))
    assert found
    for path in found:
        path.write_bytes(b"\x00garbage\xff" * 64)


def manifest_flags(key: str, value: str) -> Callable[[Path], None]:
    def prep(ws: Path) -> None:
        import lance

        lance.dataset(str(ws / "ns" / "__manifest")).update_metadata(
            {f"lance.namespace.manifest.{key}": value}
        )

    return prep


def manifest_wrong_schema(ws: Path) -> None:
    """`__manifest` is a Lance table, but not a namespace manifest."""
    import lance
    import pyarrow as pa

    shutil.rmtree(ws / "ns" / "__manifest")
    lance.write_dataset(pa.table({"x": [1]}), str(ws / "ns" / "__manifest"))


# --- the table ------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    args: list[str]
    exit: int
    root: str | None = "{root}"  # None: no --root at all
    env: dict[str, str] = field(default_factory=dict)
    prep: Callable[[Path], None] | None = None
    usage: bool = False  # a usage error caught by the argument parser (exit 2)
    contains: str | None = None  # a fragment the message must contain (case-insensitive)
    json: str | None = None  # run again with --json; the expected error name


def C(*args, **kw) -> Case:
    return Case(args[0], list(args[1:-1]), args[-1], **kw)


SCH = "{in}/schema.json"
ORD = "{in}/orders.parquet"

CASES = [
    # names ------------------------------------------------------------------------------------
    C("name-dollar", "create", "namespace", "a$b", 2, contains="$", json="InvalidInput"),
    C("name-slash", "create", "namespace", "a/b", 2, contains="/"),
    C("name-backslash", "create", "table", "a\\b", "--schema", SCH, 2),
    C(
        "name-empty-part",
        "create",
        "namespace",
        "sales..x",
        2,
        contains="empty",
        json="InvalidInput",
    ),
    C("name-dot-alone", "describe", ".", 2),
    C("name-dot-part", "--delimiter", ":", "create", "namespace", "sales:.", 2),
    C("name-dotdot-part", "--delimiter", ":", "create", "table", "sales:..", "--schema", SCH, 2),
    C("name-empty", "create", "table", "", "--schema", SCH, 2),
    C("name-control-char", "create", "namespace", "a\x01b", 2, contains="control"),
    C("name-tab", "create", "table", "a\tb", "--schema", SCH, 2),
    C("name-newline", "describe", "events\nevil", 2, json="InvalidInput"),
    C("name-del-char", "create", "namespace", "x\x7f", 2),
    C("name-encoded-slash", "create", "namespace", "a%2Fb", 2, contains="encoded"),
    C("name-encoded-dollar", "create", "table", "x%24y", "--schema", SCH, 2),
    C("name-leading-space", "create", "namespace", " sales", 2, contains="whitespace"),
    C("name-trailing-space", "describe", "events ", 2),
    C(
        "name-reserved-manifest",
        "create",
        "table",
        "__manifest",
        "--schema",
        SCH,
        2,
        contains="reserved",
        json="InvalidInput",
    ),
    C("name-reserved-describe", "describe", "__manifest", 2),
    C("name-reserved-child", "create", "namespace", "sales.__manifest", 2),
    C("name-too-long", "create", "namespace", "x" * 300, 2),
    C("name-empty-delimiter", "--delimiter", "", "describe", "events", 2),
    C("name-bad-rename-target", "rename", "events", "x$y", 2),
    C("name-bad-register", "register", "a/b", "loose", 2),
    # not found --------------------------------------------------------------------------------
    C(
        "table-in-missing-namespace",
        "create",
        "table",
        "nope.t",
        "--schema",
        SCH,
        3,
        json="NamespaceNotFound",
    ),
    C("table-in-missing-nested", "create", "table", "sales.nope.t", "--from", ORD, 3),
    C("namespace-missing-parent", "create", "namespace", "nope.child", 3),
    C("describe-missing-table", "describe", "nope", 3, json="TableNotFound"),
    C("ls-missing-namespace", "ls", "nope", 3),
    C("drop-missing", "drop", "nope", "--yes", 3),
    C("drop-missing-child", "drop", "sales.eu.nope", "--yes", 3),
    C("rename-missing", "rename", "nope", "other", 3),
    C("rename-into-missing-namespace", "rename", "events", "nope.events", 3),
    C("deregister-missing", "deregister", "nope", 3),
    C("register-missing-namespace", "register", "nope.t", "loose", 3),
    # conflicts --------------------------------------------------------------------------------
    C(
        "create-existing-root-table",
        "create",
        "table",
        "events",
        "--schema",
        SCH,
        4,
        json="TableAlreadyExists",
    ),
    C("create-existing-child-table", "create", "table", "sales.eu.orders", "--from", ORD, 4),
    C(
        "create-existing-namespace",
        "create",
        "namespace",
        "sales",
        4,
        json="NamespaceAlreadyExists",
    ),
    C("create-table-over-namespace", "create", "table", "sales", "--schema", SCH, 4),
    C("create-namespace-over-table", "create", "namespace", "events", 4),
    C("rename-onto-existing-table", "rename", "events", "sales.refunds", 4),
    C("rename-onto-root-table", "rename", "sales.refunds", "events", 4),
    C("rename-namespace-onto-namespace", "rename", "sales", "empty", 4),
    C("rename-table-onto-namespace", "rename", "sales.eu.orders", "sales.eu", 4),
    C("register-existing", "register", "events", "loose", 4),
    # schema files -----------------------------------------------------------------------------
    C(
        "schema-malformed-json",
        "create",
        "table",
        "t",
        "--schema",
        "{in}/malformed.json",
        2,
        contains="JSON",
        json="InvalidInput",
    ),
    C(
        "schema-unknown-type",
        "create",
        "table",
        "t",
        "--schema",
        "{in}/unknown_type.json",
        2,
        contains="quaternion",
    ),
    C(
        "schema-duplicate-fields",
        "create",
        "table",
        "sales.t",
        "--schema",
        "{in}/dup.json",
        2,
        contains="duplicate",
    ),
    C("schema-not-object", "create", "table", "t", "--schema", "{in}/not_object.json", 2),
    C("schema-bad-nullable", "create", "table", "t", "--schema", "{in}/nullable_str.json", 2),
    C("schema-binary-file", "create", "table", "t", "--schema", "{in}/binary_schema.json", 2),
    C("schema-missing-file", "create", "table", "t", "--schema", "{in}/nope.json", 2),
    C("schema-is-directory", "create", "table", "t", "--schema", "{in}/notlance", 2),
    C("schema-and-from", "create", "table", "t", "--schema", SCH, "--from", ORD, 2),
    C("schema-nor-from", "create", "table", "t", 2),
    # --from sources ---------------------------------------------------------------------------
    C(
        "from-missing-file",
        "create",
        "table",
        "t",
        "--from",
        "{in}/nope.parquet",
        2,
        json="InvalidInput",
    ),
    C("from-corrupt-parquet", "create", "table", "t", "--from", "{in}/corrupt.parquet", 2),
    C("from-empty-parquet", "create", "table", "sales.t", "--from", "{in}/empty.parquet", 2),
    C("from-truncated-parquet", "create", "table", "t", "--from", "{in}/truncated.parquet", 2),
    C("from-ragged-csv", "create", "table", "t", "--from", "{in}/ragged.csv", 2),
    C("from-ragged-csv-late-root", "create", "table", "t", "--from", "{in}/ragged_late.csv", 2),
    C(
        "from-ragged-csv-late-child",
        "create",
        "table",
        "sales.t",
        "--from",
        "{in}/ragged_late.csv",
        2,
    ),
    C("from-bad-jsonl", "create", "table", "t", "--from", "{in}/bad.jsonl", 2),
    C(
        "from-directory-not-lance",
        "create",
        "table",
        "t",
        "--from",
        "{in}/notlance",
        2,
        contains="not a Lance dataset",
    ),
    C("from-unknown-extension", "create", "table", "t", "--from", "{in}/data.txt", 2),
    C("from-unknown-format", "create", "table", "t", "--from", ORD, "--format", "xls", 2),
    C("from-parquet-as-lance", "create", "table", "t", "--from", ORD, "--format", "lance", 2),
    # roots ------------------------------------------------------------------------------------
    C("root-missing-ls", "ls", 3, root="{ws}/missing", json="NamespaceNotFound"),
    C("root-missing-create", "create", "namespace", "x", 3, root="{ws}/missing"),
    C("root-missing-describe", "describe", 3, root="{ws}/missing"),
    C("root-is-a-file", "ls", 2, root="{in}/schema.json", contains="not a directory"),
    C("root-ftp", "ls", 2, root="ftp://x", contains="ftp", json="InvalidInput"),
    C("root-memory", "ls", 2, root="memory://x", contains="memory"),
    C("root-relative-file-uri", "ls", 2, root="file://relative/dir"),
    C("root-s3-no-bucket", "ls", 2, root="s3://"),
    C("root-s3-dotdot", "ls", 2, root="s3://bucket/a/../b"),
    C("root-empty", "ls", 2, root=""),
    C("root-none", "ls", 2, root=None),
    # configuration ----------------------------------------------------------------------------
    C(
        "profile-unknown",
        "--profile",
        "nope",
        "ls",
        2,
        root=None,
        env={"LANCENS_CONFIG": "{in}/config.toml"},
        json="InvalidInput",
    ),
    C("profile-no-config-file", "--profile", "dev", "ls", 2),
    C(
        "config-malformed-toml",
        "--profile",
        "dev",
        "ls",
        2,
        root=None,
        env={"LANCENS_CONFIG": "{in}/malformed.toml"},
        contains="TOML",
    ),
    C(
        "config-malformed-toml-env-profile",
        "ls",
        2,
        root=None,
        env={"LANCENS_CONFIG": "{in}/malformed.toml", "LANCENS_PROFILE": "dev"},
    ),
    C(
        "profile-unknown-key",
        "-p",
        "dev",
        "ls",
        2,
        root=None,
        env={"LANCENS_CONFIG": "{in}/unknown_key.toml"},
        contains="colour",
    ),
    C(
        "profile-bad-bool",
        "-p",
        "dev",
        "ls",
        2,
        root=None,
        env={"LANCENS_CONFIG": "{in}/bad_bool.toml"},
        contains="maybe",
    ),
    C(
        "profile-not-a-table",
        "-p",
        "dev",
        "ls",
        2,
        root=None,
        env={"LANCENS_CONFIG": "{in}/profile_not_table.toml"},
    ),
    C(
        "env-bool-maybe",
        "ls",
        2,
        env={"LANCENS_MANIFEST_ENABLED": "maybe"},
        contains="maybe",
        json="InvalidInput",
    ),
    C("env-bool-empty", "create", "namespace", "x", 2, env={"LANCENS_DIR_LISTING_ENABLED": ""}),
    C("env-int-bad", "ls", 2, env={"LANCENS_COMMIT_RETRIES": "many"}),
    C("storage-option-no-equals", "-s", "region", "ls", 2, contains="key=value"),
    C(
        "property-no-equals",
        "create",
        "namespace",
        "x",
        "--property",
        "owner",
        2,
        contains="key=value",
        json="InvalidInput",
    ),
    C("property-empty-key", "create", "table", "t", "--schema", SCH, "--property", "=v", 2),
    C("property-control-char", "create", "namespace", "x", "--property", "k=a\x07b", 2),
    C("no-manifest-no-dir-listing", "--no-manifest", "--no-dir-listing", "ls", 2),
    C(
        "no-manifest-no-dir-listing-env",
        "create",
        "namespace",
        "x",
        2,
        env={"LANCENS_MANIFEST_ENABLED": "false", "LANCENS_DIR_LISTING_ENABLED": "off"},
    ),
    # --no-manifest: what needs the manifest is unsupported -----------------------------------
    C(
        "no-manifest-child-namespace",
        "create",
        "namespace",
        "sales.x",
        "--no-manifest",
        1,
        json="Unsupported",
    ),
    C("no-manifest-root-namespace", "create", "namespace", "x", "--no-manifest", 1),
    C("no-manifest-before-command", "--no-manifest", "create", "namespace", "sales.x", 1),
    C(
        "manifest-disabled-env-child-namespace",
        "create",
        "namespace",
        "sales.x",
        1,
        env={"LANCENS_MANIFEST_ENABLED": "false"},
    ),
    C("no-dir-listing-describe-junk", "describe", "junk", "--no-dir-listing", 3),
    C(
        "dir-listing-disabled-env-describe-junk",
        "describe",
        "junk",
        3,
        env={"LANCENS_DIR_LISTING_ENABLED": "false"},
    ),
    C("no-manifest-child-table", "create", "table", "sales.t", "--schema", SCH, "--no-manifest", 1),
    C("no-manifest-ls-child", "ls", "sales", "--no-manifest", 1),
    C(
        "no-manifest-table-property",
        "create",
        "table",
        "t",
        "--schema",
        SCH,
        "--property",
        "a=b",
        "--no-manifest",
        1,
    ),
    C("no-manifest-register", "register", "t", "loose", "--no-manifest", 1),
    C("no-manifest-rename", "rename", "events", "e2", "--no-manifest", 1),
    # register locations -----------------------------------------------------------------------
    C("register-absolute", "register", "t", "{root}/loose", 2, json="InvalidInput"),
    C("register-uri", "register", "t", "s3://bucket/loose", 2),
    C("register-file-uri", "register", "t", "file://{root}/loose", 2),
    C("register-dotdot", "register", "t", "../in/notlance", 2),
    C("register-dotdot-inside", "register", "t", "loose/../events.lance", 2),
    C("register-backslash-dotdot", "register", "t", "..\\in", 2),
    C("register-empty-location", "register", "t", "", 2),
    C("register-not-lance", "register", "t", "plain", 2, contains="not a Lance table"),
    C("register-junk-lance", "register", "sales.t", "junk.lance", 2),
    C("register-missing-location", "register", "t", "nowhere", 2),
    # corrupted __manifest: every command fails with exit 1 and names __manifest ---------------
    *[
        C(
            f"corrupt-manifest-{name}",
            *args,
            1,
            prep=corrupt_manifest,
            contains="__manifest",
            json="InvalidTableState" if name == "ls" else None,
        )
        for name, args in [
            ("ls", ["ls"]),
            ("describe-root", ["describe"]),
            ("describe-table", ["describe", "events"]),
            ("create-namespace", ["create", "namespace", "x"]),
            ("create-table", ["create", "table", "t", "--schema", SCH]),
            ("create-child-table", ["create", "table", "sales.t", "--from", ORD]),
            ("drop", ["drop", "sales.eu.orders", "--yes"]),
            ("rename", ["rename", "events", "e2"]),
            ("register", ["register", "t", "loose"]),
        ]
    ],
    C("manifest-wrong-schema-ls", "ls", 1, prep=manifest_wrong_schema, contains="__manifest"),
    C(
        "manifest-wrong-schema-create",
        "create",
        "namespace",
        "x",
        1,
        prep=manifest_wrong_schema,
        contains="__manifest",
    ),
    # unknown feature flags --------------------------------------------------------------------
    *[
        C(
            f"writer-flag-{name}",
            *args,
            1,
            prep=manifest_flags("writer_feature_flags", "4"),
            contains="__manifest",
            json="InvalidTableState" if name == "create-namespace" else None,
        )
        for name, args in [
            ("create-namespace", ["create", "namespace", "x"]),
            ("create-root-table", ["create", "table", "t", "--schema", SCH]),
            ("create-child-table", ["create", "table", "sales.t", "--from", ORD]),
            ("drop-table", ["drop", "sales.eu.orders", "--yes"]),
            ("drop-root-table", ["drop", "events", "--yes"]),
            ("rename", ["rename", "sales.refunds", "sales.r2"]),
            ("rename-root-table", ["rename", "events", "e2"]),
            ("register", ["register", "t", "loose"]),
        ]
    ],
    C(
        "reader-flag-ls",
        "ls",
        1,
        prep=manifest_flags("reader_feature_flags", "2"),
        contains="__manifest",
    ),
    C(
        "reader-flag-describe",
        "describe",
        "events",
        1,
        prep=manifest_flags("reader_feature_flags", "1"),
        contains="__manifest",
    ),
    C(
        "writer-flag-not-a-number",
        "describe",
        1,
        prep=manifest_flags("writer_feature_flags", "lots"),
        contains="__manifest",
    ),
    # not a Lance table ------------------------------------------------------------------------
    C(
        "describe-junk-lance",
        "describe",
        "junk",
        1,
        contains="not a Lance table",
        json="InvalidTableState",
    ),
    # wrong kind of object ---------------------------------------------------------------------
    C("table-under-table", "create", "table", "sales.eu.orders.x", "--schema", SCH, 2),
    C("describe-under-table", "describe", "events.x", 2),
    C("rename-namespace-into-itself", "rename", "sales", "sales.eu.sub", 2),
    C("rename-same-name", "rename", "events", "events", 2),
    C("drop-root", "drop", "", "--yes", 2),
    # safety rails -----------------------------------------------------------------------------
    C(
        "drop-nonempty-namespace",
        "drop",
        "sales",
        "--yes",
        5,
        contains="--cascade",
        json="NamespaceNotEmpty",
    ),
    C("drop-without-yes", "drop", "events", 5, contains="--yes", json="PermissionDenied"),
    C("drop-cascade-without-yes", "drop", "sales", "--cascade", 5),
    # Click usage errors -----------------------------------------------------------------------
    C("limit-zero", "ls", "--limit", "0", 2, usage=True),
    C("limit-negative", "ls", "--limit", "-3", 2, usage=True),
    C("unknown-option", "ls", "--bogus", 2, usage=True),
    C("unknown-command", "frobnicate", 2, usage=True),
    C("commit-retries-negative", "--commit-retries", "-1", "ls", 2, usage=True),
    C("missing-argument", "rename", "events", 2, usage=True),
    C("option-missing-value", "create", "table", "t", "--schema", 2, usage=True),
]

JSON_CASES = [c for c in CASES if c.json]


def _fill(text: str, ws: Path) -> str:
    return (
        text.replace("{root}", str(ws / "ns"))
        .replace("{in}", str(ws / "in"))
        .replace("{ws}", str(ws))
    )


def _run(case: Case, ws: Path, json_mode: bool = False):
    args = [_fill(a, ws) for a in case.args]
    if case.root is not None:
        args = ["--root", _fill(case.root, ws), *args]
    if json_mode:
        args.append("--json")
    env = {**_base_env(ws), **{k: _fill(v, ws) for k, v in case.env.items()}}
    return run_cli(*args, env=env, cwd=ws)


def _snapshots(ws: Path):
    root = ws / "ns"
    return (tree_snapshot(root) if root.exists() else None), tree_snapshot(ws)


def _changes(before, after) -> list[str]:
    problems = []
    for label, old, new in zip(("root", "parent"), before, after, strict=True):
        if old == new:
            continue
        old, new = old or {}, new or {}
        added = sorted(set(new) - set(old))
        removed = sorted(set(old) - set(new))
        changed = sorted(k for k in set(old) & set(new) if old[k] != new[k])
        problems.append(
            f"{label} changed: added={added[:6]} removed={removed[:6]} changed={changed[:6]}"
        )
    return problems


def _common_problems(case: Case, result) -> list[str]:
    problems = []
    if "Traceback" in result.stderr + result.stdout:
        problems.append("a traceback was printed")
    if result.stdout != "":
        problems.append(f"stdout is not empty: {result.stdout[:300]!r}")
    if result.exit_code != case.exit:
        problems.append(f"exit {result.exit_code}, expected {case.exit}")
    return problems


def _report(problems: list[str], result) -> None:
    if problems:
        pytest.fail("; ".join(problems) + f"\nstderr: {result.stderr[:600]!r}", pytrace=False)


def _ids(cases):
    return [c.id for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_bad_input(case: Case, ws: Path) -> None:
    if case.prep:
        case.prep(ws)
    before = _snapshots(ws)
    result = _run(case, ws)
    problems = _common_problems(case, result) + _changes(before, _snapshots(ws))
    err = result.stderr
    # Usage errors too are one line: the CLI turns Click's usage text into one.
    if not err.startswith("lancens: error: "):
        problems.append("stderr does not start with 'lancens: error: '")
    if not (err.endswith("\n") and err.count("\n") == 1):
        problems.append(f"stderr is not exactly one line ({err.count(chr(10))} newlines)")
    if case.contains and case.contains.lower() not in err.lower():
        problems.append(f"message does not mention {case.contains!r}")
    _report(problems, result)


@pytest.mark.parametrize("case", JSON_CASES, ids=_ids(JSON_CASES))
def test_bad_input_json(case: Case, ws: Path) -> None:
    if case.prep:
        case.prep(ws)
    before = _snapshots(ws)
    result = _run(case, ws, json_mode=True)
    problems = _common_problems(case, result) + _changes(before, _snapshots(ws))
    err = result.stderr
    if not (err.endswith("\n") and err.count("\n") == 1):
        problems.append(f"stderr is not exactly one line ({err.count(chr(10))} newlines)")
    try:
        document = json.loads(err)
    except ValueError:
        problems.append("stderr is not one JSON document")
        _report(problems, result)
    if not isinstance(document, dict) or list(document) != ["error"]:
        problems.append(f"not an {{'error': ...}} object: {document!r}")
        _report(problems, result)
    error = document["error"]
    if not isinstance(error, dict) or set(error) != {"name", "code", "message"}:
        problems.append(f"error keys are not name, code, message: {error!r}")
        _report(problems, result)
    if error["name"] != case.json:
        problems.append(f"name {error['name']!r}, expected {case.json!r}")
    if error["code"] != CATALOGUE[case.json]:
        problems.append(f"code {error['code']!r}, expected {CATALOGUE[case.json]}")
    message = error["message"]
    if not isinstance(message, str) or not message or "\n" in message:
        problems.append(f"bad message {message!r}")
    elif case.contains and case.contains.lower() not in message.lower():
        problems.append(f"message does not mention {case.contains!r}")
    _report(problems, result)


def test_writer_flag_still_lists(ws: Path) -> None:
    """An unknown writer feature flag stops changes, not reading."""
    manifest_flags("writer_feature_flags", "4")(ws)
    before = _snapshots(ws)
    result = run_cli("--root", str(ws / "ns"), "ls", "-R", env=_base_env(ws), cwd=ws)
    assert result.exit_code == 0, result.stderr
    assert "sales.eu.orders" in result.stdout and "events" in result.stdout
    assert "Traceback" not in result.stderr
    assert _changes(before, _snapshots(ws)) == []


def test_case_table_is_large_enough() -> None:
    assert len(CASES) >= 35
    assert len({c.id for c in CASES}) == len(CASES)
