"""What an operator reads in the first hour: a time field that mixes years warns, a write says
which columns it filled with NULL (and refuses a missing partition source), a missing input file
and an unknown type say so plainly, and `describe` and `versions` show times and sizes alike."""

from __future__ import annotations

import datetime as dt
import json
import re

import data
import pyarrow as pa
import pytest
import terminal
from helpers import cli, ok, tree_snapshot

YEAR_FIELDS = ["--field", "year(event_date) as event_year", "--field", "country"]
MONTH_WARNING = (
    "month(event_date) is the month of the year (1-12): January 2024 and January 2025 share a "
    "partition; add --field 'year(event_date)' before it"
)


def _stderr_lines(result) -> list[str]:
    return result.stderr.splitlines()


def _timed(n: int) -> pa.Table:
    """events with a timestamp column `ts`, for hour()."""
    table = data.events(n)
    start = dt.datetime(2024, 11, 1, 9)
    return table.append_column(
        "ts", pa.array([start + dt.timedelta(hours=7 * i) for i in range(n)], pa.timestamp("us"))
    )


@pytest.fixture
def partitioned(local_root, files):
    """A partitioned root over `data.events` columns: year(event_date) as event_year, country."""
    ok(
        local_root,
        "add-partition-spec",
        "--schema",
        files("s.parquet", data.events(1)),
        *YEAR_FIELDS,
    )
    return local_root


# --- 1. time transforms without a coarser field ----------------------------------------------


def test_month_without_year_warns_on_stderr_and_in_json_and_adds_the_spec(local_root, files):
    schema = files("s.parquet", data.events(1))
    result = ok(
        local_root,
        "add-partition-spec",
        "--schema",
        schema,
        "--field",
        "month(event_date)",
        "--field",
        "country",
        "--json",
    )
    doc = result.json()
    assert doc["action"] == "create" and doc["warnings"] == [MONTH_WARNING]
    assert f"warning: {MONTH_WARNING}" in _stderr_lines(result)
    assert len([x for x in _stderr_lines(result) if x.startswith("warning:")]) == 1


def test_dry_run_warns_the_same_and_changes_nothing(local_root, files):
    schema = files("s.parquet", data.events(1))
    before = tree_snapshot(local_root.local_path)
    args = ("add-partition-spec", "--schema", schema, "--field", "month(event_date)")
    result = ok(local_root, *args, "--dry-run", "--json")
    assert result.json()["dry_run"] is True and result.json()["warnings"] == [MONTH_WARNING]
    assert f"warning: {MONTH_WARNING}" in _stderr_lines(result)
    assert tree_snapshot(local_root.local_path) == before


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            ["year(event_date)", "day(event_date)"],
            "day(event_date) is the day of the month (1-31): 5 January and 5 February share a "
            "partition; add --field 'month(event_date)' before it",
        ),
        (
            ["day(event_date)"],
            "day(event_date) is the day of the month (1-31): 5 January and 5 February share a "
            "partition; add --field 'year(event_date)' --field 'month(event_date)' before it",
        ),
        (
            ["year(ts)", "month(ts)", "hour(ts)"],
            "hour(ts) is the hour of the day (0-23): 09:00 on 5 January and 09:00 on 6 January "
            "share a partition; add --field 'day(ts)' before it",
        ),
        (
            ["month(ts)", "day(ts)", "hour(ts)"],
            "hour(ts) is the hour of the day (0-23): 09:00 on 5 January 2024 and 09:00 on "
            "5 January 2025 share a partition; add --field 'year(ts)' before it",
        ),
    ],
)
def test_day_and_hour_warn_naming_each_missing_coarser_field(local_root, files, fields, expected):
    schema = files("s.parquet", _timed(1))
    args = [a for f in fields for a in ("--field", f)]
    result = ok(local_root, "add-partition-spec", "--schema", schema, *args, "--json")
    assert expected in result.json()["warnings"]
    assert f"warning: {expected}" in _stderr_lines(result)


@pytest.mark.parametrize(
    "fields",
    [
        ["year(ts)", "month(ts)", "day(ts)", "hour(ts)"],
        ["month(event_date)", "year(event_date)"],  # order does not matter to the values
        ["event_date", "month(event_date)"],  # the identity tells every date apart
        ["year(event_date)", "country"],
    ],
)
def test_a_spec_whose_time_fields_tell_years_apart_warns_nothing(local_root, files, fields):
    schema = files("s.parquet", _timed(1))
    args = [a for f in fields for a in ("--field", f)]
    result = ok(local_root, "add-partition-spec", "--schema", schema, *args, "--json")
    assert result.json()["warnings"] == []
    assert "warning:" not in result.stderr


# --- 2. missing columns in `write` ------------------------------------------------------------


def test_write_names_the_columns_it_filled_with_null(partitioned, files):
    rows = files("a.parquet", data.events(50).drop_columns(["id", "customer_id"]))
    result = ok(partitioned, "write", "--from", rows, "--json")
    assert result.json()["filled_with_null"] == ["id", "customer_id"]
    assert "write: the input lacks id, customer_id: filled with NULL" in _stderr_lines(result)
    assert result.json()["rows"] == 50


def test_write_of_every_column_fills_nothing(partitioned, files):
    result = ok(partitioned, "write", "--from", files("a.parquet", data.events(20)), "--json")
    assert result.json()["filled_with_null"] == []
    assert "lacks" not in result.stderr


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_write_refuses_an_input_lacking_a_partition_source_column(partitioned, files, dry_run):
    rows = files("a.parquet", data.events(20).drop_columns(["event_date"]))
    before = tree_snapshot(partitioned.local_path)
    result = cli(partitioned, "write", "--from", rows, *dry_run)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = _stderr_lines(result)
    assert line.startswith("lancens: error: the input lacks event_date, which partition field ")
    assert "event_year" in line and "--allow-missing-columns" in line
    assert tree_snapshot(partitioned.local_path) == before


def test_write_refusal_in_json_is_one_invalid_input_error(partitioned, files):
    rows = files("a.parquet", data.events(20).drop_columns(["country", "event_date"]))
    result = cli(partitioned, "write", "--from", rows, "--json")
    assert result.exit_code == 2 and result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["name"] == "InvalidInput"
    assert "event_date" in error["message"] and "country" in error["message"]


def test_allow_missing_columns_writes_the_source_as_null_and_says_so(partitioned, files):
    rows = files("a.parquet", data.events(20).drop_columns(["event_date"]))
    args = ("write", "--from", rows, "--allow-missing-columns", "--json")
    planned = ok(partitioned, *args, "--dry-run")
    assert planned.json()["filled_with_null"] == ["event_date"]
    assert "write: the input lacks event_date: filled with NULL" in _stderr_lines(planned)
    written = ok(partitioned, *args)
    doc = written.json()
    assert doc["filled_with_null"] == ["event_date"] and doc["rows"] == 20
    assert {p["values"]["event_year"] for p in doc["partitions"]} == {None}


def test_dry_run_reports_filled_columns_and_writes_nothing(partitioned, files):
    rows = files("a.parquet", data.events(20).drop_columns(["customer_id"]))
    before = tree_snapshot(partitioned.local_path)
    result = ok(partitioned, "write", "--from", rows, "--dry-run", "--json")
    assert result.json()["dry_run"] is True
    assert result.json()["filled_with_null"] == ["customer_id"]
    assert "write: the input lacks customer_id: filled with NULL" in _stderr_lines(result)
    assert tree_snapshot(partitioned.local_path) == before


# --- 3a. a missing input file -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gone.parquet", "gone.json", "gone_dir"])
def test_a_missing_schema_file_says_it_does_not_exist(local_root, tmp_path, name):
    path = str(tmp_path / name)
    before = tree_snapshot(local_root.local_path)
    result = cli(local_root, "add-partition-spec", "--schema", path, "--field", "country")
    assert result.exit_code == 2
    assert result.stderr == f"lancens: error: --schema FILE: {path} does not exist\n"
    assert tree_snapshot(local_root.local_path) == before


def test_a_missing_write_input_says_it_the_same_way(partitioned, tmp_path):
    path = str(tmp_path / "gone.parquet")
    result = cli(partitioned, "write", "--from", path)
    assert result.exit_code == 2
    assert result.stderr == f"lancens: error: --from FILE: {path} does not exist\n"


# --- 3b. an unknown type --------------------------------------------------------------------------


def test_an_unknown_type_lists_the_valid_type_names(partitioned):
    before = tree_snapshot(partitioned.local_path)
    result = cli(partitioned, "evolve-schema", "--add", "score varchar")
    assert result.exit_code == 2
    (line,) = _stderr_lines(result)
    assert "unknown type 'varchar'" in line and "valid types: " in line
    for name in ("int64", "utf8", "string", "bool", "date32", "timestamp[:UNIT[:ZONE]]"):
        assert name in line
    assert tree_snapshot(partitioned.local_path) == before


# --- 3c / 3d. times and sizes in describe and versions ----------------------------------------

_TEXT_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"  # as JSON has it: to the microsecond


@pytest.fixture
def table(local_root, files):
    ok(local_root, "create", "table", "t", "--from", files("t.parquet", data.events(300)))
    return local_root


def _utc(text: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(text)
    assert re.fullmatch(_TEXT_TIME, text) and when.utcoffset() == dt.timedelta(0)
    return when


def test_json_times_of_describe_and_versions_are_utc_with_z(table):
    described = ok(table, "describe", "t", "--versions", "--json").json()["versions"][0]
    listed = ok(table, "versions", "t", "--json").json()["versions"][0]
    a, b = _utc(described["timestamp"]), _utc(listed["timestamp"])
    assert a == b  # the same commit, its one time: Lance's
    assert abs((dt.datetime.now(dt.UTC) - a).total_seconds()) < 600  # not shifted by a zone


def test_text_times_are_utc_microseconds_with_z_piped_and_on_a_terminal(table):
    piped = ok(table, "versions", "t").stdout.splitlines()
    assert re.fullmatch(_TEXT_TIME, piped[0].split("\t")[1])
    code, shown, _ = terminal.on_terminal(
        *table.args, "describe", "t", "--versions", stream="stdout", columns=110
    )
    assert code == 0 and re.search(rf"│\s+1 │ {_TEXT_TIME} │\s+300 │", terminal.shown(shown))
    code, shown, _ = terminal.on_terminal(*table.args, "versions", "t", stream="stdout")
    assert code == 0 and re.search(_TEXT_TIME, terminal.shown(shown))


def test_versions_sizes_are_binary_units_on_a_terminal_and_integers_piped(table):
    size = ok(table, "versions", "t", "--json").json()["versions"][0]["bytes"]
    assert isinstance(size, int) and size > 1024
    piped = ok(table, "versions", "t").stdout.splitlines()[0].split("\t")
    assert piped[3] == str(size)
    code, shown, _ = terminal.on_terminal(*table.args, "versions", "t", stream="stdout")
    assert code == 0
    text = terminal.shown(shown)
    assert f"{size / 1024:.1f} KiB" in text and str(size) not in text
