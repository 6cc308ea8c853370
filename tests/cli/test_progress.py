"""Progress bars: on stderr when it is a terminal, never in a pipe or beside --json.

The command runs as a user runs it, in a subprocess whose stderr is a pseudo-terminal (the
way `lancens ... | jq` or a plain terminal session has it) and whose stdout is a pipe.
"""

from __future__ import annotations

import re

import pytest
from data import events
from helpers import SPEC1, run_cli
from terminal import on_terminal, shown


@pytest.fixture
def root(tmp_path, local_root):
    schema = tmp_path / "s.json"
    schema.write_text('{"fields": [{"name": "x", "type": "int64"}]}')
    ok = run_cli(*local_root.args, "create", "namespace", "a")
    assert ok.exit_code == 0, ok.stderr
    for i in range(5):
        made = run_cli(*local_root.args, "create", "table", f"a.t{i}", "--schema", str(schema))
        assert made.exit_code == 0, made.stderr
    return local_root


def test_check_shows_a_bar_on_a_terminal_and_nothing_when_piped(root):
    piped = run_cli(*root.args, "check")
    assert piped.exit_code == 0
    assert piped.stderr == "5 tables, 1 namespace checked: healthy\n"  # the line, nothing else
    code, stdout, stderr = on_terminal(*root.args, "check")
    assert code == 0 and stdout == piped.stdout  # the result is the same
    screen = shown(stderr)
    assert "checking tables" in screen and "5/5" in screen  # the bar, at its end
    assert screen.rstrip().endswith("5 tables, 1 namespace checked: healthy")
    code, stdout, stderr = on_terminal(*root.args, "check", "--json")
    assert code == 0 and stdout == run_cli(*root.args, "check", "--json").stdout
    assert stderr == ""  # never a bar beside a JSON document


def test_drop_cascade_shows_a_bar_per_table_deleted(root):
    piped_dry = run_cli(*root.args, "drop", "a", "--cascade", "--dry-run")
    code, stdout, stderr = on_terminal(*root.args, "drop", "a", "--cascade", "--yes")
    assert code == 0
    assert stdout == piped_dry.stdout.replace("would ", "")  # the same changes, done
    screen = shown(stderr)
    assert "deleting table data" in screen and "5/5" in screen
    assert run_cli(*root.args, "ls").stdout == ""


def test_write_shows_a_bar_per_partition_table(local_root, files):
    schema = files("schema.parquet", events(1))
    spec = run_cli(*local_root.args, "add-partition-spec", "--schema", schema, *SPEC1)
    assert spec.exit_code == 0, spec.stderr
    rows = files("rows.parquet", events(200, seed=3))
    code, stdout, stderr = on_terminal(*local_root.args, "write", "--from", rows)
    assert code == 0, stderr
    screen = shown(stderr)
    counts = re.findall(r"writing partition tables .*?(\d+)/(\d+)", screen)
    done, total = counts[-1]  # the bar at its end: every partition table written
    assert done == total and int(total) > 1
    written = re.search(r"200 rows into (\d+) partitions of spec v1", screen)
    assert written and written.group(1) == total
    assert len(stdout.splitlines()) == int(total)  # one result row per partition
    piped = run_cli(*local_root.args, "write", "--from", rows)
    assert piped.exit_code == 0
    assert piped.stderr.splitlines() == [
        f"wrote 200 rows into {written.group(1)} partitions of spec v1 (0 new), "
        "__manifest version 4"
    ]


@pytest.mark.spark
def test_scan_to_files_shows_spark_tasks_on_a_terminal_only(local_root, files, tmp_path):
    schema = files("schema.parquet", events(1))
    spec = run_cli(*local_root.args, "add-partition-spec", "--schema", schema, *SPEC1)
    assert spec.exit_code == 0, spec.stderr
    rows = files("rows.parquet", events(300, seed=4))
    assert run_cli(*local_root.args, "write", "--from", rows).exit_code == 0
    target = tmp_path / "out"
    code, _, stderr = on_terminal(
        *local_root.args, "scan", "--to", str(target), "--master", "local[1]"
    )
    assert code == 0, stderr
    counts = re.findall(r"scan --to .*?(\d+)/(\d+)", shown(stderr))
    # the bar counted the job's tasks (it is transient: its last frame may be any moment)
    assert counts and all(0 <= int(done) <= int(total) for done, total in counts), shown(stderr)
    assert max(int(total) for _, total in counts) > 0
    again = str(tmp_path / "again")
    piped = run_cli(*local_root.args, "scan", "--to", again, "--master", "local[1]")
    assert piped.exit_code == 0, piped.stderr
    assert "scan --to" not in piped.stderr
