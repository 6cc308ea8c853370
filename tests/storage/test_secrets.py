"""Secret storage options never reach stdout or stderr.

Three distinctive credentials (access key id, secret access key, session token; the secret and
the token carry `/`, `+` and `=`, so their URL-quoted forms differ from the raw ones) are given by
`-s`, by `LANCENS_STORAGE__*` environment variables, by a profile, and (S3 only) by the standard
`AWS_*` variables. Every command runs against a moto S3 root (moto accepts any credentials) and a
local root, plain, with `--json` and with `--debug`, succeeding and failing (missing table, bad
bucket or root, invalid input, a crash, a black-hole endpoint), and nothing it prints may contain
a secret: raw, URL-quoted, or any 10+ character alphanumeric run of it (which catches repr, JSON
and other escaped forms). `describe --json` shows `****` for each of them.

The full matrix runs in-process (the executable's entry point, `_run_app`) with output captured
at the file-descriptor level too (Lance logs from Rust straight to fd 2); a subset runs as real
subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from helpers import Result, invoke, run_cli

_HEX = secrets.token_hex(8).upper()
_HEX2 = secrets.token_hex(6)
ACCESS_KEY_ID = f"AKIASECRETTEST{_HEX[:10]}"
SECRET_ACCESS_KEY = f"wJalrSECRETx{secrets.token_hex(8)}/K7MDENG+bPxRfiCY={_HEX2}EXAMPLEKEY"
SESSION_TOKEN = f"FwoGZXIvYXdzSECRETTOKEN/{secrets.token_hex(10)}+Zm9vYmFy/{_HEX}=="
SECRETS = {
    "access_key_id": ACCESS_KEY_ID,
    "secret_access_key": SECRET_ACCESS_KEY,
    "session_token": SESSION_TOKEN,
}
# GCS: a static access token (Lance's `google_bearer_token`), sent by Lance and gcsfs alike.
GCS_SECRETS = {"google_bearer_token": f"ya29.SECRETgcs{secrets.token_hex(10)}/x+y={_HEX2}"}
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
    "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
    "AWS_SESSION_TOKEN": SESSION_TOKEN,
}
SCHEMA = {"fields": [{"name": "id", "type": "int64"}, {"name": "city", "type": "utf8"}]}
# Reaches the generic "unexpected exception" path today (pyarrow TypeError; see test_hostile).
CRASH_SCHEMA = {"fields": [{"name": "a", "type": "int8"}], "metadata": {"k": 5}}
BAD_SCHEMA = {"fields": [{"name": "a", "type": "quaternion"}]}
LANCE_ERROR_SCHEMA = {"fields": [{"name": "a.b", "type": "int64"}]}  # refused by Lance itself

RUNS = {"count": 0}


def leak_forms() -> dict[str, list[str]]:
    forms = {}
    for key, value in {**SECRETS, **GCS_SECRETS}.items():
        found = {value, quote(value, safe=""), quote_plus(value), quote(value)}
        found.update(re.findall(r"[A-Za-z0-9]{10,}", value))
        forms[key] = sorted(found)
    return forms


LEAK_FORMS = leak_forms()


def assert_no_leak(what: str, *texts: str) -> None:
    RUNS["count"] += 1
    for text in texts:
        for key, forms in LEAK_FORMS.items():
            for form in forms:
                assert form not in text, f"{what}: {key} leaked as {form!r} in:\n{text[:4000]}"


# --- where the secrets come from ----------------------------------------------------------------

SOURCES = ("flag", "env", "profile", "aws-env")


def source_setup(
    source: str, tmp_path: Path, given: dict[str, str] = SECRETS
) -> tuple[list[str], dict[str, str]]:
    """CLI arguments and environment that hand the secrets over (S3's three by default)."""
    env = {"LANCENS_CONFIG": str(tmp_path / "no-such-config.toml")}
    if source == "flag":
        return [a for k, v in given.items() for a in ("-s", f"{k}={v}")], env
    if source == "env":
        env.update({f"LANCENS_STORAGE__{k.upper()}": v for k, v in given.items()})
        return [], env
    if source == "profile":
        path = tmp_path / "config.toml"
        lines = ["[profiles.sec.storage]"] + [f"{k} = {json.dumps(v)}" for k, v in given.items()]
        path.write_text("\n".join(lines) + "\n")
        env["LANCENS_CONFIG"] = str(path)
        return ["--profile", "sec"], env
    assert source == "aws-env"
    env.update(AWS_ENV)
    return [], env


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith(("LANCENS_", "AWS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("LANCE_LOG", "error")


# --- running the CLI ----------------------------------------------------------------------------


def lancens_with(args: list[str], env: dict[str, str]) -> Result:
    """`lancens ARGS` in-process through the executable's entry point."""
    return invoke(*args, env=env)


def _lifecycle(ctx: dict) -> Iterator[tuple[str, list[str], set[int], bool]]:
    """(name, arguments, allowed exit codes, against the bad root): every command, succeeding.
    A generator: `register` reads the location `describe-moved` put into ctx."""
    yield "init", ["init"], {0}, False
    yield "ls-empty", ["ls"], {0}, False
    yield "create-namespace", ["create", "namespace", "ns1", "--property", "owner=ann"], {0}, False
    yield "create-table", ["create", "table", "ns1.t", "--schema", ctx["schema"]], {0}, False
    yield "create-root-table", ["create", "table", "rt", "--schema", ctx["schema"]], {0}, False
    yield "create-declared", ["create", "table", "ns1.d", "--declare"], {0}, False
    yield "ls", ["ls"], {0}, False
    yield "ls-R", ["ls", "-R"], {0}, False
    yield "describe-root", ["describe"], {0}, False
    yield "describe-namespace", ["describe", "ns1"], {0}, False
    yield "describe-table", ["describe", "ns1.t", "--versions"], {0}, False
    yield "rename-table", ["rename", "ns1.t", "ns1.t2"], {0}, False
    yield "rename-root-table", ["rename", "rt", "rt2"], {0}, False
    yield "describe-moved", ["describe", "ns1.t2", "--json"], {0}, False  # -> ctx["location"]
    yield "deregister", ["deregister", "ns1.t2"], {0}, False
    yield "register", ["register", "ns1.t3", ctx.get("location", "?")], {0}, False
    yield "migrate-v1-dry-run", ["migrate-v1", "--dry-run"], {0, 6}, False
    yield "migrate-v1", ["migrate-v1"], {0, 6}, False
    yield "migrate-v1-check", ["migrate-v1", "--check"], {0, 6}, False
    yield "check", ["check"], {0, 1}, False
    yield "check-fix", ["check", "--fix", "--dry-run"], {0, 1}, False
    yield "create-exists", ["create", "table", "rt2", "--declare"], {4}, False
    yield "drop-table", ["drop", "ns1.t3", "--yes"], {0}, False
    yield "drop-namespace", ["drop", "ns1", "--cascade", "--yes"], {0}, False


def _failures(ctx: dict, short: bool = False) -> Iterator[tuple[str, list[str], set[int], bool]]:
    """Commands that fail: not found, invalid input, a crash, a Lance error, a bad root."""
    schema = ["create", "table", "s", "--schema"]
    yield "describe-missing-table", ["describe", "nope.t"], {3}, False
    yield "drop-missing", ["drop", "missing", "--yes"], {3}, False
    yield "register-not-lance", ["register", "x", "nothing-here"], {2}, False
    yield "create-crash", [*schema, ctx["crash_schema"]], {1, 2}, False
    yield "create-lance-error", [*schema, ctx["lance_schema"]], {1, 2}, False
    yield "bad-root-ls", ["ls"], {3}, True
    yield "bad-root-create", ["create", "namespace", "x"], {3}, True
    if short:
        return
    yield "describe-missing-root-table", ["describe", "nope"], {3}, False
    yield "rename-missing", ["rename", "missing", "other"], {3}, False
    yield "deregister-missing", ["deregister", "missing"], {3}, False
    yield "register-escape", ["register", "x", "../escape"], {2}, False
    yield "create-bad-schema", [*schema, ctx["bad_schema"]], {2}, False
    yield "create-from-missing", ["create", "table", "y", "--from", ctx["missing_file"]], {2}, False
    yield "bad-name", ["create", "namespace", "a$b"], {2}, False
    yield "bad-option", ["ls", "--commit-retries", "many"], {2}, False
    yield "bad-root-describe", ["describe"], {3}, True
    yield "bad-root-check", ["check"], {3}, True


def _context(tmp_path: Path) -> dict:
    inputs = tmp_path / "in"
    inputs.mkdir(exist_ok=True)
    ctx = {"missing_file": str(inputs / "missing.parquet")}
    for key, doc in (
        ("schema", SCHEMA),
        ("bad_schema", BAD_SCHEMA),
        ("crash_schema", CRASH_SCHEMA),
        ("lance_schema", LANCE_ERROR_SCHEMA),
    ):
        (inputs / f"{key}.json").write_text(json.dumps(doc))
        ctx[key] = str(inputs / f"{key}.json")
    return ctx


MODES = {"plain": [], "json": ["--json"], "debug": ["--debug"]}


def _run_steps(
    steps, ctx, root_args, bad_root_args, sources, mode, tmp_path, capfd, given=SECRETS
) -> list[str]:
    """Run each step with the secrets of sources[i % len(sources)]; check every output."""
    setups = [source_setup(source, tmp_path, given) for source in sources]
    ran = []
    capfd.readouterr()
    for index, (name, args, allowed, bad_root) in enumerate(steps):
        extra, env = setups[index % len(setups)]
        base = bad_root_args if bad_root else root_args
        res = lancens_with([*MODES[mode], *base, *extra, *args], env)
        fd = capfd.readouterr()
        what = f"{sources[index % len(sources)]}/{mode}/{name}"
        assert_no_leak(what, res.stdout, res.stderr, fd.out, fd.err)
        assert res.exit_code in allowed, (what, res)
        if res.exit_code != 0 and mode == "debug" and name != "bad-option":
            assert "Traceback" in res.stderr, (what, res.stderr)
        if name == "describe-moved":
            ctx["location"] = json.loads(res.stdout)["location"]
        ran.append(name)
    return ran


def _assert_redacted(root_args, source, tmp_path, given=SECRETS) -> None:
    """describe --json shows **** for each secret it was given."""
    extra, env = source_setup(source, tmp_path, given)
    res = lancens_with([*root_args, *extra, "describe", "--json"], env)
    assert_no_leak(f"{source}/describe-json", res.stdout, res.stderr)
    assert res.exit_code == 0, res
    config = json.loads(res.stdout)["config"]
    if source != "aws-env":
        for key in given:
            assert config[f"storage.{key}"] == "****", config


def _report(label: str, ran: list[str]) -> None:
    print(f"\n[secrets] {label}: {len(ran)} commands checked; {RUNS['count']} outputs so far")


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("source", ["flag", "env", "profile"])
def test_local_root_never_prints_secrets(source, mode, tmp_path, capfd):
    """Local root: every command, succeeding and failing, with each source in each mode."""
    root = ["--root", str(tmp_path / "ns")]
    bad = ["--root", str(tmp_path / "no-such-root")]
    ctx = _context(tmp_path)
    steps = (step for part in (_lifecycle(ctx), _failures(ctx)) for step in part)  # lazy
    ran = _run_steps(steps, ctx, root, bad, [source], mode, tmp_path, capfd)
    _assert_redacted(root, source, tmp_path)
    _report(f"local/{source}/{mode}", ran)


def _s3_args(bucket: str, endpoint: str) -> list[str]:
    return [
        "--root",
        f"s3://{bucket}/ns",
        "-s",
        f"endpoint={endpoint}",
        "-s",
        "region=us-east-1",
        "-s",
        "allow_http=true",
    ]


@pytest.mark.s3
def test_s3_lifecycle_never_prints_secrets(s3_bucket, moto_endpoint, tmp_path, capfd):
    """S3 (moto): every command succeeding; from one command to the next the secrets' source
    rotates over the four and the mode over plain, --json and --debug (4 and 3: coprime, so
    all twelve pairs occur)."""
    root = _s3_args(s3_bucket, moto_endpoint)
    bad = _s3_args(f"no-such-bucket-{secrets.token_hex(4)}", moto_endpoint)
    ctx = _context(tmp_path)
    ran = []
    for index, step in enumerate(_lifecycle(ctx)):
        mode = ("plain", "json", "debug")[index % 3]
        source = SOURCES[index % len(SOURCES)]
        ran += _run_steps([step], ctx, root, bad, [source], mode, tmp_path, capfd)
    for source in SOURCES:
        _assert_redacted(root, source, tmp_path)
    _report("s3/lifecycle", ran)


@pytest.mark.s3
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("source", SOURCES)
def test_s3_failures_never_print_secrets(source, mode, s3_bucket, moto_endpoint, tmp_path, capfd):
    """S3 (moto): failing commands (where messages and tracebacks quote requests and options),
    with each source in each mode."""
    root = _s3_args(s3_bucket, moto_endpoint)
    bad = _s3_args(f"no-such-bucket-{secrets.token_hex(4)}", moto_endpoint)
    ctx = _context(tmp_path)
    ran = _run_steps(_failures(ctx, short=True), ctx, root, bad, [source], mode, tmp_path, capfd)
    _report(f"s3/failures/{source}/{mode}", ran)


@pytest.mark.gcs
def test_gcs_lifecycle_and_failures_never_print_secrets(gcs_fs, gcs_proxy, tmp_path, capfd):
    """GCS (fake-gcs-server behind the write proxy), reached with Lance's own keys and a bearer
    token: every command succeeding, then the failing ones, the token's source rotating over
    flag, environment and profile and the mode over plain, --json and --debug."""
    bucket = f"sec-{secrets.token_hex(6)}"
    gcs_fs.mkdir(bucket)

    def gcs_args(name: str) -> list[str]:
        return [
            "--root", f"gs://{name}/ns",
            "-s", f"google_base_url={gcs_proxy.url}",
            "-s", "allow_http=true",
        ]  # fmt: skip

    root, bad = gcs_args(bucket), gcs_args(f"no-such-bucket-{secrets.token_hex(4)}")
    ctx = _context(tmp_path)
    sources, ran = ("flag", "env", "profile"), []
    steps = (step for part in (_lifecycle(ctx), _failures(ctx)) for step in part)  # lazy
    for index, step in enumerate(steps):
        mode = ("plain", "json", "debug")[index % 3]
        source = sources[(index // 3) % len(sources)]
        ran += _run_steps([step], ctx, root, bad, [source], mode, tmp_path, capfd, GCS_SECRETS)
    for source in sources:
        _assert_redacted(root, source, tmp_path, GCS_SECRETS)
    _report("gcs/lifecycle+failures", ran)


# --- real processes -------------------------------------------------------------------------------


@pytest.mark.s3
def test_subprocess_never_prints_secrets(s3_bucket, moto_endpoint, tmp_path):
    """Real processes (everything they print, Lance's own logging included), each source."""
    crash = tmp_path / "crash.json"
    crash.write_text(json.dumps(CRASH_SCHEMA))
    runs = [
        (["--json", "describe"], {0}),  # the redacted configuration
        (["--debug", "--json", "create", "table", "crash", "--schema", str(crash)], {1, 2}),
        (["--debug", "describe", "ns1.missing"], {3}),
        (["--debug", "drop", "missing", "--yes"], {3}),
    ]
    for index, source in enumerate(SOURCES):
        extra, env = source_setup(source, tmp_path)
        base = [*_s3_args(s3_bucket, moto_endpoint), *extra]
        for args, allowed in (runs[0], runs[1], runs[2 + index % 2]):
            res = run_cli(*base, *args, env=env)
            assert_no_leak(f"subprocess/{source}/{args}", res.stdout, res.stderr)
            assert res.exit_code in allowed, (args, res)
            if "--debug" in args:
                assert "Traceback" in res.stderr, res.stderr
    # Lance's own debug log (LANCE_LOG=debug goes straight from Rust to stderr, unscrubbed)
    extra, env = source_setup("flag", tmp_path)
    for args in (["create", "namespace", "logged"], ["ls", "-R"]):
        res = run_cli(
            *_s3_args(s3_bucket, moto_endpoint), *extra, *args, env={**env, "LANCE_LOG": "debug"}
        )
        assert_no_leak(f"subprocess/LANCE_LOG=debug/{args}", res.stdout, res.stderr)
        assert res.exit_code == 0, res


# --- a black-hole endpoint: accepts TCP, never answers -------------------------------------------


@pytest.fixture
def black_hole() -> Iterator[str]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.s3
@pytest.mark.parametrize(
    ("source", "mode", "command"),
    [
        ("flag", [], ["ls"]),
        ("env", ["--json"], ["describe"]),
        ("profile", ["--debug"], ["create", "namespace", "x"]),
    ],
)
def test_black_hole_endpoint_never_prints_secrets(source, mode, command, black_hole, tmp_path):
    extra, env = source_setup(source, tmp_path)
    args = [
        "--root",
        "s3://bucket/ns",
        "-s",
        f"endpoint={black_hole}",
        "-s",
        "allow_http=true",
        "-s",
        "region=us-east-1",
        "-s",
        "timeout=1s",
        "-s",
        "connect_timeout=1s",
        *extra,
    ]
    res = run_cli(*mode, *args, *command, env=env)
    assert_no_leak(f"black-hole/{source}", res.stdout, res.stderr)
    assert res.exit_code == 1, res
    if "--debug" in mode:
        assert "Traceback" in res.stderr
    else:
        assert len(res.stderr.splitlines()) == 1, res.stderr


# --- every spelling of a credential the supported stores take is redacted ------------------------

CREDENTIAL_OPTIONS = [
    # S3 (object_store / Lance spellings, and the ones our fsspec translation reads)
    "access_key_id",
    "aws_access_key_id",
    "secret_access_key",
    "aws_secret_access_key",
    "session_token",
    "aws_session_token",
    "token",
    "aws_token",
    "aws_security_token",
    # GCS
    "service_account_key",
    "google_service_account_key",
    "service_account",
    "google_service_account",
    "google_application_credentials",
    "google_bearer_token",
    "bearer_token",
    "google_storage_token",
    # spelled in capitals (keys from LANCENS_STORAGE__* are lowercased; flags are taken as given)
    "AWS_SECRET_ACCESS_KEY",
    "Session_Token",
]


@pytest.mark.parametrize("key", CREDENTIAL_OPTIONS)
def test_every_credential_spelling_is_redacted(key, tmp_path):
    value = f"credSECRET{secrets.token_hex(8)}"
    res = lancens_with(
        ["--root", str(tmp_path / "ns"), "-s", f"{key}={value}", "describe", "--json"],
        {"LANCENS_CONFIG": str(tmp_path / "none.toml")},
    )
    assert res.exit_code == 3, res  # the root does not exist: an error, which must not quote it
    assert value not in res.stdout + res.stderr
    (tmp_path / "ns").mkdir()
    res = lancens_with(
        ["--root", str(tmp_path / "ns"), "-s", f"{key}={value}", "describe", "--json"],
        {"LANCENS_CONFIG": str(tmp_path / "none.toml")},
    )
    assert res.exit_code == 0, res
    assert value not in res.stdout + res.stderr
    assert json.loads(res.stdout)["config"][f"storage.{key}"] == "****"
