"""The output contract (README "Output and exit codes").

stdout carries only the result: exactly one JSON document with --json, tab-separated lines when
piped. An error prints nothing on stdout and one line on stderr (`lancens: error: ...`), or with
--json one `{"error": {"name", "code", "message"}}` object carrying the Lance namespace error code.
Exit codes are stable. No traceback unless --debug. Secrets are never printed.
"""

from __future__ import annotations

import json
import os
import re

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import S3_KEY, S3_SECRET, Root, cli, invoke, ok, run_cli

ANSI = re.compile(r"\x1b\[")
BOX = re.compile(r"[\u2500-\u257f]")  # rich's box-drawing characters


def one_json_document(text: str):
    """Parse `text` as exactly one JSON document (and nothing else but whitespace)."""
    decoder = json.JSONDecoder()
    stripped = text.strip()
    assert stripped, "expected a JSON document, got nothing"
    value, end = decoder.raw_decode(stripped)
    assert stripped[end:].strip() == "", f"more than one document: {text!r}"
    return value


def assert_plain_error(result, exit_code: int, needle: str | None = None) -> str:
    assert result.exit_code == exit_code, result
    assert result.stdout == "", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lancens: error: "), result.stderr
    assert "Traceback" not in result.stderr
    if needle is not None:
        assert needle.lower() in lines[0].lower()
    return lines[0]


def assert_json_error(result, exit_code: int, name: str, code: int) -> dict:
    assert result.exit_code == exit_code, result
    assert result.stdout == "", result
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    payload = json.loads(lines[0])
    assert set(payload) == {"error"}
    error = payload["error"]
    assert set(error) == {"name", "code", "message"}, error
    assert (error["name"], error["code"]) == (name, code), error
    assert isinstance(error["message"], str) and error["message"].strip()
    assert "\n" not in error["message"]
    return error


@pytest.fixture
def parquet(tmp_path) -> str:
    path = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "city": ["a\tb", "c d", "e"]}), path)
    return str(path)


@pytest.fixture
def populated(local_root: Root, parquet: str) -> Root:
    """a (namespace) > a.inner (namespace), a.t (table with data), d (declared root table),
    junk.lance (not a Lance table)."""
    ok(local_root, "init")
    ok(local_root, "create", "namespace", "a", "--property", "owner=ann")
    ok(local_root, "create", "namespace", "a.inner")
    ok(local_root, "create", "table", "a.t", "--from", parquet)
    ok(local_root, "create", "table", "d", "--declare")
    (local_root.local_path / "junk.lance").mkdir()
    (local_root.local_path / "junk.lance" / "stray.txt").write_text("x")
    return local_root


# --- --json success: one document on stdout, nothing on stderr --------------------------------


MUTATIONS = ("create", "rename", "drop", "register", "deregister")


def test_every_command_prints_one_json_document(local_root, parquet, tmp_path):
    root = local_root
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"fields": [{"name": "x", "type": {"type": "int32"}}]}))
    lance.write_dataset(pa.table({"v": [1, 2]}), str(root.local_path / "ext" / "t"))
    commands = [
        ("init",),
        ("create", "namespace", "a", "--property", "k=v"),
        ("create", "namespace", "a.b", "--dry-run"),
        ("create", "table", "a.t", "--from", parquet),
        ("create", "table", "s", "--schema", str(schema)),
        ("create", "table", "d", "--declare"),
        ("create", "table", "d", "--declare", "--exist-ok"),
        ("ls",),
        ("ls", "--recursive"),
        ("ls", "--limit", "1"),
        ("ls", "a"),
        ("describe",),
        ("describe", "a"),
        ("describe", "a.t", "--versions"),
        ("describe", "d"),
        ("rename", "a.t", "a.u"),
        ("rename", "s", "s2"),
        ("register", "a.ext", "ext/t"),
        ("deregister", "a.ext"),
        ("drop", "a.u", "--dry-run"),
        ("drop", "a.u", "--yes"),
        ("drop", "a", "--cascade", "--yes"),
    ]
    for command in commands:
        for where in ("before", "after"):
            if where == "after" and command[0] in MUTATIONS:
                continue  # a mutation runs once; read-only commands also with --json last
            args = ("--json", *command) if where == "before" else (*command, "--json")
            result = cli(root, *args)
            assert result.exit_code == 0, (command, result)
            assert result.stderr == "", (command, result.stderr)
            document = one_json_document(result.stdout)
            assert isinstance(document, dict), command
    # The paginated listing above said where to continue in the document, not on stderr.
    page = one_json_document(cli(root, "--json", "ls", "--limit", "1").stdout)
    assert page["next_page_token"] == page["entries"][0]["id"]


def test_json_through_a_real_process(populated):
    result = run_cli(*populated.args, "ls", "-R", "--limit", "2", "--json")
    assert result.exit_code == 0, result
    assert result.stderr == ""
    document = one_json_document(result.stdout)
    assert [e["id"] for e in document["entries"]] == ["a", "a.inner"]
    assert document["next_page_token"] == "a.inner"


# --- errors -----------------------------------------------------------------------------------

ERROR_CASES = [
    # (args, exit code, error name, namespace error code)
    (("describe", "nope"), 3, "TableNotFound", 4),
    (("drop", "nope", "--yes"), 3, "TableNotFound", 4),
    (("deregister", "a.nope"), 3, "TableNotFound", 4),
    (("ls", "nope"), 3, "NamespaceNotFound", 1),
    (("create", "table", "nope.t", "--declare"), 3, "NamespaceNotFound", 1),
    (("describe", "nope.t"), 3, "NamespaceNotFound", 1),
    (("create", "table", "a.t", "--declare"), 4, "TableAlreadyExists", 5),
    (("rename", "d", "a.t"), 4, "TableAlreadyExists", 5),
    (("create", "namespace", "a"), 4, "NamespaceAlreadyExists", 2),
    (("drop", "a", "--yes"), 5, "NamespaceNotEmpty", 3),
    (("drop", "a.t"), 5, "PermissionDenied", 15),
    (("create", "namespace", "bad$name"), 2, "InvalidInput", 13),
    (("create", "table", "x", "--declare", "--property", "novalue"), 2, "InvalidInput", 13),
    (("register", "x", "/etc/passwd"), 2, "InvalidInput", 13),
    (("register", "x", "../outside"), 2, "InvalidInput", 13),
    (("ls", "a.t"), 2, "InvalidInput", 13),
    (("create", "table", "x"), 2, "InvalidInput", 13),
    (("describe", "junk"), 1, "InvalidTableState", 19),
]


@pytest.mark.parametrize(("args", "exit_code", "name", "code"), ERROR_CASES)
def test_errors_plain_and_json(populated, args, exit_code, name, code):
    before = sorted(os.listdir(populated.local_path))
    assert_plain_error(cli(populated, *args), exit_code)
    error = assert_json_error(cli(populated, "--json", *args), exit_code, name, code)
    # The same failure with --json placed after the command.
    again = assert_json_error(cli(populated, *args, "--json"), exit_code, name, code)
    assert again == error
    assert sorted(os.listdir(populated.local_path)) == before


def test_unsupported_in_v1_mode_is_exit_1(populated, monkeypatch):
    monkeypatch.setenv("LANCENS_MANIFEST_ENABLED", "false")
    assert_plain_error(cli(populated, "create", "namespace", "x"), 1, "manifest")
    assert_json_error(cli(populated, "--json", "create", "namespace", "x"), 1, "Unsupported", 0)


def test_config_errors_are_invalid_input(local_root):
    cases = [
        ("--root", "memory://x", "ls"),
        ("--root", "hdfs://host/p", "ls"),
        ("--root", local_root.uri, "-s", "novalue", "ls"),
    ]
    for args in cases:
        assert_plain_error(invoke(*args), 2)
        assert_json_error(invoke("--json", *args), 2, "InvalidInput", 13)


def test_errors_through_a_real_process(populated):
    result = run_cli(*populated.args, "describe", "nope")
    assert_plain_error(result, 3, "nope")
    result = run_cli(*populated.args, "--json", "drop", "a")
    assert_json_error(result, 5, "NamespaceNotEmpty", 3)
    # stdin is not a terminal: no prompt, a refusal.
    result = run_cli(*populated.args, "drop", "a.t", input="y\n")
    assert_plain_error(result, 5, "--yes")
    assert "?" not in result.stderr.split("error:", 1)[0]


def test_usage_error_with_json_is_a_json_error(local_root):
    """README: with --json an error is one {"error": ...} object on stderr; exit 2
    covers an unknown option. Usage errors are caught where the process starts (`main`), so this
    runs the real command."""
    result = run_cli(*local_root.args, "--json", "ls", "--no-such-option")
    error = assert_json_error(result, 2, "InvalidInput", 13)
    assert "--no-such-option" in error["message"]


# --- no tracebacks -----------------------------------------------------------------------------


def test_corrupt_manifest_is_one_line_without_traceback(populated):
    versions = populated.local_path / "__manifest" / "_versions"
    for manifest in versions.glob("*.manifest"):
        manifest.write_bytes(b"garbage\n")
    result = run_cli(*populated.args, "ls")
    assert_plain_error(result, 1, "__manifest")
    error = assert_json_error(cli(populated, "--json", "describe"), 1, "InvalidTableState", 19)
    assert "__manifest" in error["message"]
    assert_plain_error(cli(populated, "create", "namespace", "z"), 1)


def test_broken_input_file_is_one_line(local_root, tmp_path):
    ok(local_root, "init")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    assert_plain_error(cli(local_root, "create", "table", "t", "--from", str(broken)), 2)
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("a,b\n1,2\n3\n")
    result = cli(local_root, "--json", "create", "table", "t", "--from", str(bad_csv))
    assert result.exit_code != 0 and result.stdout == "" and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    json.loads(result.stderr)
    assert os.listdir(local_root.local_path) == []


def test_debug_shows_the_traceback(populated):
    result = cli(populated, "--debug", "describe", "nope")
    assert result.exit_code == 3
    assert "Traceback" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("lancens: error: ")


# --- piped output --------------------------------------------------------------------------------


def test_piped_output_is_tab_separated(populated):
    ls = run_cli(*populated.args, "ls", "--recursive")
    assert ls.exit_code == 0 and ls.stderr == ""
    lines = ls.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["a", "a.inner", "a.t", "d", "junk"]
    for line in lines:
        assert len(line.split("\t")) == 5, line
    fields = dict((line.split("\t")[0], line.split("\t")) for line in lines)
    assert fields["a"] == ["a", "namespace", "-", "manifest", "ok"]
    assert fields["d"] == ["d", "table", "d.lance", "both", "declared"]
    assert fields["junk"] == ["junk", "table", "junk.lance", "directory", "not a Lance table"]

    describe = run_cli(*populated.args, "describe", "a.t")
    assert describe.exit_code == 0 and describe.stderr == ""
    pairs = [line.split("\t") for line in describe.stdout.splitlines()]
    assert all(len(p) == 2 for p in pairs), describe.stdout
    values = dict(pairs)
    assert values["id"] == "a.t"
    assert values["details.rows"] == "3"
    assert json.loads(values["details.schema"])[1]["name"] == "city"

    for result in (ls, describe):
        assert not ANSI.search(result.stdout) and not BOX.search(result.stdout)


def test_piped_cells_never_split_a_row(local_root, parquet):
    """A tab or newline inside a value must not break the one-row-per-line format."""
    ok(local_root, "init")
    ok(local_root, "create", "table", "t", "--from", parquet)
    ds = lance.dataset(str(local_root.local_path / "t.lance"))
    ds.update_metadata({"note": "x\ty\nz"})
    lines = ok(local_root, "describe", "t").stdout.splitlines()
    assert all(len(line.split("\t")) == 2 for line in lines), lines
    assert "details.metadata.note\tx y z" in lines


def test_dry_run_and_changes_are_tab_separated(populated, parquet):
    result = ok(populated, "create", "table", "new", "--from", parquet, "--dry-run")
    assert result.stdout == "would create\ttable\tnew\tnew.lance\t-\n"
    result = ok(populated, "rename", "a", "b")
    assert result.stdout == "rename\tnamespace\ta\t-\t-> b\n"


# --- secrets ------------------------------------------------------------------------------------


def _assert_no_secret(result, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in result.stdout, result.stdout
        assert secret not in result.stderr, result.stderr


def test_secrets_never_appear_in_describe_on_s3(s3_root, parquet):
    root = s3_root
    token = "session-token-SECRET-777"
    ok(root, "create", "namespace", "a", "--property", "owner=ann")
    ok(root, "create", "table", "a.t", "--from", parquet)
    lance.write_dataset(
        pa.table({"v": [1]}), f"{root.uri}/legacy.lance", storage_options=root.storage_options
    )
    results = []
    for args in [
        ("describe",),
        ("describe", "a"),
        ("describe", "a.t", "--versions"),
        ("describe", "legacy"),
        ("describe", "a.nope"),
        ("describe", "nope.x"),
    ]:
        results.append(cli(root, "--json", *args))
        _assert_no_secret(results[-1], S3_SECRET)
    assert [r.exit_code for r in results] == [0, 0, 0, 0, 3, 3]
    config = one_json_document(results[0].stdout)["config"]
    assert config["storage.secret_access_key"] == "****"
    assert config["storage.access_key_id"] == "****"
    assert config["storage.region"] == "us-east-1"
    _assert_no_secret(results[0], S3_KEY)
    # Plain output is redacted too.
    plain = ok(root, "describe")
    _assert_no_secret(plain, S3_SECRET, S3_KEY)
    assert "config.storage.secret_access_key\t****" in plain.stdout.splitlines()
    # A root whose bucket does not exist: an error, still no secret.
    options = {**root.storage_options, "session_token": token}
    storage_args = [arg for k, v in options.items() for arg in ("-s", f"{k}={v}")]
    missing = invoke("--root", "s3://no-such-bucket-xyz/ns", *storage_args, "--json", "describe")
    assert missing.exit_code != 0
    _assert_no_secret(missing, S3_SECRET, token)


def test_secrets_redacted_in_describe_of_a_local_root(local_root):
    ok(local_root, "init")
    secret = "very-secret-value-123"
    args = [
        "-s",
        f"secret_access_key={secret}",
        "-s",
        f"session_token={secret}-tok",
        "-s",
        "aws_secret_access_key=other-secret-456",
        "-s",
        "region=eu-west-1",
    ]
    result = invoke(*local_root.args, *args, "describe", "--json")
    assert result.exit_code == 0, result
    config = one_json_document(result.stdout)["config"]
    assert config["storage.secret_access_key"] == "****"
    assert config["storage.session_token"] == "****"
    assert config["storage.aws_secret_access_key"] == "****"
    assert config["storage.region"] == "eu-west-1"
    _assert_no_secret(result, secret, "other-secret-456")
    # ... also through the environment.
    env = {"LANCENS_ROOT": local_root.uri, "LANCENS_STORAGE__SECRET_ACCESS_KEY": secret}
    result = run_cli("describe", "--json", env=env)
    assert result.exit_code == 0, result
    _assert_no_secret(result, secret)
    assert one_json_document(result.stdout)["config"]["storage.secret_access_key"] == "****"
