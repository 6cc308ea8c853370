"""Through the CLI: Ctrl-C during a write, a damaged `__manifest`, a root that is a file,
a root of the wrong type in a profile, names that contain the delimiter, global options after the
command, and failures told in words (never a Python class name)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Root, invoke, ok, run_cli, tree_snapshot

CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|\[Errno")


# --- Ctrl-C ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_parquet(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sigint") / "big.parquet"
    ids = pa.array(range(2_000_000), pa.int64())
    pq.write_table(pa.table({"id": ids, "s": pa.compute.cast(ids, pa.string())}), path)
    return path


def _interrupted(root: Root, argv: list[str], delay: float) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *root.args, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LANCE_LOG": "error"},
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_ctrl_c_during_a_root_create_exits_130_and_leaves_nothing(tmp_path, big_parquet):
    """SIGINT while `create table --from big.parquet` writes: exit 130 (never an abort or a
    death by signal) and either no trace of the table or the finished table; a rerun creates it."""
    argv = ["create", "table", "t", "--from", str(big_parquet)]
    timing = tmp_path / "timing"
    timing.mkdir()
    start = time.monotonic()
    assert run_cli("--root", str(timing), *argv).exit_code == 0
    runtime = time.monotonic() - start
    rng = random.Random(9)
    codes = []
    for trial in range(int(os.environ.get("LANCENS_SIGINT_TRIALS", "5"))):
        path = tmp_path / f"r{trial}"
        path.mkdir()
        root = Root(str(path), {}, path)
        code, err = _interrupted(root, argv, rng.uniform(0.3, 0.9) * runtime)
        codes.append(code)
        assert code in (0, 130), (code, err)
        assert "Fatal Python error" not in err and "Traceback" not in err, err
        if code == 130:
            assert "lancens: interrupted" in err
        listed = invoke(*root.args, "ls").stdout
        if (path / "t.lance").exists():  # the write finished before the Ctrl-C was seen
            assert "t\ttable\tt.lance\t" in listed and "ok" in listed, listed
        else:
            assert listed == ""
            assert invoke(*root.args, *argv).exit_code == 0
        assert invoke(*root.args, "check").exit_code == 0
    assert 130 in codes, codes


def test_ctrl_c_at_a_prompt_stops_at_once(local_root):
    """Waiting on the user is not Lance work: Ctrl-C at the drop prompt ends it now, exit 130."""
    ok(local_root, "create", "table", "t", "--declare")
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: lancens on a terminal
        os.execvpe(
            sys.executable,
            [sys.executable, "-m", "lancens_cli", *local_root.args, "drop", "t"],
            {**os.environ, "LANCE_LOG": "error"},
        )
    seen = b""
    deadline = time.monotonic() + 30
    while b"?" not in seen and time.monotonic() < deadline:
        seen += os.read(fd, 1024)
    os.kill(pid, signal.SIGINT)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 130, seen
    assert "t\ttable" in invoke(*local_root.args, "ls").stdout  # nothing was dropped


@pytest.mark.parametrize("answer, code", [(b"y\n", 0), (b"n\n", 5), (b"\n", 5)])
def test_the_drop_prompt_takes_an_answer(local_root, answer, code):
    """On a terminal, drop asks; `y` drops, anything else (or Enter) refuses with exit 5."""
    ok(local_root, "create", "table", "t", "--declare")
    import pty

    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(
            sys.executable,
            [sys.executable, "-m", "lancens_cli", *local_root.args, "drop", "t"],
            {**os.environ, "LANCE_LOG": "error"},
        )
    seen = b""
    while b"[y/N]" not in seen:
        seen += os.read(fd, 1024)
    os.write(fd, answer)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == code, seen
    listed = "t\ttable" in invoke(*local_root.args, "ls").stdout
    assert listed == (code != 0)


# --- a damaged __manifest --------------------------------------------------------------------


def _catalog(root: Root) -> None:
    ok(root, "create", "namespace", "sales")
    ok(root, "create", "namespace", "sales.eu")
    ok(root, "create", "table", "sales.t", "--declare")


def _files(root: Root) -> set[str]:
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace

    storage = Namespace(NamespaceConfig.from_properties(root.properties)).storage
    return {name for name, _ in storage.walk_files("")}


def test_deleted_versions_on_s3(s3_root):
    from lancens_cli.config import NamespaceConfig
    from lancens_cli.service.namespace import Namespace

    _catalog(s3_root)
    Namespace(NamespaceConfig.from_properties(s3_root.properties)).storage.delete_tree(
        "__manifest/_versions"
    )
    before = _files(s3_root)
    for args in (["ls"], ["create", "namespace", "other"], ["check"]):
        result = run_cli(*s3_root.args, *args)
        assert result.exit_code == 1, (args, result.stderr)
        assert "has no _versions/" in result.stderr + result.stdout
    assert _files(s3_root) == before


def test_deleted_versions_is_unreadable_for_every_command(local_root):
    _catalog(local_root)
    for path in (local_root.local_path / "__manifest" / "_versions").iterdir():
        path.unlink()
    (local_root.local_path / "__manifest" / "_versions").rmdir()
    before = tree_snapshot(local_root.local_path)
    for args in (
        ["ls"],
        ["ls", "sales"],
        ["describe"],
        ["create", "namespace", "other"],
        ["create", "table", "x", "--declare"],
        ["migrate-v1"],
        ["check", "--fix", "--grace-minutes", "0"],
    ):
        result = run_cli(*local_root.args, *args, "--json")
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        if args[0] == "check":
            findings = result.json()["findings"]
            assert [f["code"] for f in findings] == ["manifest_unreadable"], findings
            message = findings[0]["message"]
            assert "still hold the catalog rows" in message and "restore" in message
        else:
            assert "__manifest cannot be read" in result.stderr, (args, result.stderr)
        assert tree_snapshot(local_root.local_path) == before, (
            args
        )  # nothing changed, nothing deleted


def test_a_first_commit_caught_while_lance_writes_its_files_is_in_flight_not_damage(
    local_root, monkeypatch
):
    """Lance writes a transaction file under a staging name (`.tmpXYZ`) and renames it into
    place: a reader listing `_transactions/` of a `__manifest` whose first commit is landing
    sees that name, or one gone when it asks its time. That is a writer at work, not a
    damaged catalog (found by two processes racing: `rename` making a root's first commit,
    `drop` reading it); a committed transaction of long ago with no `_versions/` still is."""
    from lancens_cli.errors import ManifestError
    from lancens_cli.service.namespace import Namespace
    from lancens_cli.store.storage import Storage

    transactions = local_root.local_path / "__manifest" / "_transactions"
    transactions.mkdir(parents=True)
    (local_root.local_path / "__manifest" / "data").mkdir()
    (local_root.local_path / "__manifest" / "data" / "rows.lance").write_bytes(b"rows")
    (transactions / ".tmpQ1w2e3").write_bytes(b"half a transaction")
    ns = Namespace.from_properties(local_root.properties)
    assert ns.manifest.exists() is False
    real = Storage.walk_files

    def listing(self, rel):
        found = list(real(self, rel))
        if rel.endswith("_transactions"):
            found.append(("0-5f2c.txn", 10))  # listed, renamed away before its time is asked
        return iter(found)

    monkeypatch.setattr(Storage, "walk_files", listing)
    assert ns.manifest.exists() is False
    monkeypatch.undo()
    (transactions / "0-5f2c.txn").write_bytes(b"txn")
    os.utime(transactions / "0-5f2c.txn", (1e9, 1e9))
    with pytest.raises(ManifestError, match="has no _versions/"):
        ns.manifest.exists()


def test_a_first_commit_landing_between_the_open_and_the_look_is_read(local_root, monkeypatch):
    """`__manifest` is opened first and looked for only when that fails: another writer's first
    commit landing in between makes the look find it, and the catalog is opened again and read
    (the writer that lost the race for version 1 retries on top of it), never taken for
    damage."""
    import lance

    real = lance.dataset
    landed: list[int | None] = []

    def racing(uri, *args, **kwargs):
        try:
            return real(uri, *args, **kwargs)
        except Exception:
            if "__manifest" in str(uri) and not landed:
                landed.append(None)  # (the other writer's own opens pass through)
                landed[0] = invoke(*local_root.args, "create", "namespace", "b").exit_code
            raise

    monkeypatch.setattr(lance, "dataset", racing)
    result = invoke(*local_root.args, "create", "namespace", "a")
    monkeypatch.undo()
    assert landed == [0]
    assert result.exit_code == 0, result.stderr
    listed = run_cli(*local_root.args, "ls", "--json").json()
    assert sorted(entry["id"] for entry in listed["entries"]) == ["a", "b"]


def test_manifest_that_is_a_file_is_unreadable(local_root):
    (local_root.local_path / "__manifest").write_text("not a table")
    for args in (["ls"], ["create", "namespace", "a"], ["check"]):
        result = run_cli(*local_root.args, *args)
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        assert "not a directory" in result.stderr + result.stdout
    check = run_cli(*local_root.args, "check", "--json")
    assert [f["code"] for f in check.json()["findings"]] == ["manifest_unreadable"]
    assert (local_root.local_path / "__manifest").read_text() == "not a table"


def test_a_first_commit_that_never_landed_is_no_manifest(local_root):
    """Data files of a first commit killed before its version: nothing to lose, no catalog yet."""
    import lance

    from lancens_cli.store.manifest import manifest_schema

    table = manifest_schema().empty_table()
    rows = pa.Table.from_pylist(
        [{"object_id": "a", "object_type": "namespace"}], schema=table.schema
    )
    uri = str(local_root.local_path / "__manifest")
    assert lance.fragment.write_fragments(rows, uri, schema=rows.schema)  # staged, no commit
    assert invoke(*local_root.args, "ls").exit_code == 0
    ok(local_root, "create", "namespace", "b")
    assert invoke(*local_root.args, "ls").stdout.startswith("b\tnamespace")


# --- roots, profiles, delimiters ----------------------------------------------------------------


def test_a_root_that_is_a_file_is_not_a_directory(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    for args in (["ls"], ["init"], ["check"], ["create", "namespace", "a"]):
        result = run_cli("--root", str(path), *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert "is not a directory" in result.stderr and "does not exist" not in result.stderr
    result = run_cli("--root", str(path / "below"), "init")
    assert result.exit_code == 2 and "a file is in the way" in result.stderr, result.stderr
    assert not CLASS_NAME.search(result.stderr), result.stderr


def test_a_root_of_the_wrong_type_in_a_profile(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[profiles.p]\nroot = 5\n")
    result = run_cli("--profile", "p", "ls", env={"LANCENS_CONFIG": str(config)})
    assert result.exit_code == 2, result.stderr
    assert "root" in result.stderr and "string" in result.stderr
    assert not CLASS_NAME.search(result.stderr), result.stderr


def test_names_with_the_delimiter_are_quoted_and_reachable(local_root):
    ok(local_root, "create", "namespace", "a")
    out = ok(local_root, "--delimiter", "/", "create", "namespace", "a/x.y").stdout
    assert out.startswith("create\tnamespace\ta/x.y\t")
    out = ok(local_root, "create", "table", "a/x.y/t", "--declare", "--delimiter", "/").stdout
    assert out.startswith("create\ttable\ta/x.y/t\t")
    listed = ok(local_root, "ls", "a", "--recursive").stdout
    assert 'a."x.y"\tnamespace' in listed and 'a."x.y".t\ttable' in listed
    assert "a/x.y/t\ttable" in ok(local_root, "ls", "a", "--recursive", "--delimiter", "/").stdout
    missing = invoke(*local_root.args, "describe", "a.x.y.t")
    assert missing.exit_code == 3
    assert "does not exist" in missing.stderr and "--delimiter" in missing.stderr


def test_write_and_partitions_output_honour_the_delimiter(local_root, tmp_path):
    from data import events
    from helpers import SPEC1

    pq.write_table(events(1), tmp_path / "schema.parquet")
    ok(local_root, "add-partition-spec", "--schema", str(tmp_path / "schema.parquet"), *SPEC1)
    pq.write_table(events(50), tmp_path / "rows.parquet")
    rows = str(tmp_path / "rows.parquet")
    written = ok(local_root, "write", "--from", rows, "--delimiter", "/").stdout
    parts = ok(local_root, "partitions", "--delimiter", "/").stdout
    tables = re.findall(r"\bv1\S*dataset\b", written + parts)
    assert len(tables) >= 2 * 4, written + parts  # one per partition, in both outputs
    assert all(t.startswith("v1/") and t.count("/") == 3 for t in tables), tables
    assert not any("." in t for t in tables), tables


# --- global options, messages --------------------------------------------------------------


def test_every_global_option_works_after_the_command(local_root):
    result = run_cli(
        "ls", *local_root.args, "--debug", "--delimiter", "/", "--commit-retries", "2", "--json"
    )
    assert result.exit_code == 0, result.stderr
    result = run_cli(
        "create", "namespace", "a/b", *local_root.args, "--delimiter", "/", "--commit-retries", "0"
    )
    assert result.exit_code == 3 and "namespace a does not exist" in result.stderr
    result = run_cli("describe", "nosuch", *local_root.args, "--debug")
    assert result.exit_code == 3 and "Traceback" in result.stderr
    result = run_cli("ls", *local_root.args, "--commit-retries", "-1")
    assert result.exit_code == 2


def test_unexpected_failures_are_told_in_words(tmp_path):
    if not os.path.isdir("/sys/kernel"):
        pytest.skip("needs a Linux /sys, where nobody may create a directory")
    result = run_cli("--root", "/sys/lancens-test-root", "init")
    assert result.exit_code == 1
    assert "operation not permitted" in result.stderr.lower() or "denied" in result.stderr
    assert "/sys/lancens-test-root" in result.stderr
    assert not CLASS_NAME.search(result.stderr), result.stderr
    schema = tmp_path / "s.json"
    schema.write_text(
        '{"fields": [{"name": "x", "type": {"type": "fixed_size_binary", "length": 2147483648}}]}'
    )
    root = tmp_path / "r"
    root.mkdir()
    result = run_cli("--root", str(root), "create", "table", "t", "--schema", str(schema))
    assert result.exit_code == 2 and "out of range" in result.stderr, result.stderr
    assert not CLASS_NAME.search(result.stderr), result.stderr
