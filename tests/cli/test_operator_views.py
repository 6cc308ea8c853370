"""What an operator sees of maintenance on a terminal: `versions` says why every version stays or
goes (in prune's own words), a prune on a terminal lists only the tables with something to do,
and a narrow terminal leaves out the least important columns rather than cutting a value."""

from __future__ import annotations

import re

import data
import pyarrow.parquet as pq
import pytest
import terminal
from helpers import Root, ok

AT_ONCE = ("--older-than", "0s", "--grace", "0s", "--retain", "1", "--force")
POLICIES = {"everything old": AT_ONCE, "the defaults": ()}
NARROW = 80


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory):
    """A root partitioned by country: a first write into four partition tables, then two more
    into the US table alone (three versions there, one in the others). Built once: every test
    here only reads it (`versions`, `prune --dry-run`)."""
    tmp = tmp_path_factory.mktemp("operator_views")
    root = Root(str(tmp / "ns"), {}, tmp / "ns")
    root.local_path.mkdir()

    def files(name, table):
        pq.write_table(table, tmp / name)
        return str(tmp / name)

    ok(
        root,
        "add-partition-spec",
        "--schema",
        files("s.parquet", data.events(1)),
        "--field",
        "country",
    )
    ok(root, "write", "--from", files("r.parquet", data.events(200)))
    for n in (1, 2):
        us = data.events(20, seed=n, start=1000 * n, countries=("US",))
        ok(root, "write", "--from", files(f"us{n}.parquet", us))
    return root


def _tables(root) -> dict[str, str]:
    """partition table id -> its partition text (`country=US`), from `partitions --json`."""
    found = {}
    for match in ok(root, "partitions", "--json").json()["partitions"]:
        values = ", ".join(f"{k}={'null' if v is None else v}" for k, v in match["values"].items())
        found[match["table"]] = values
    return found


def _us_table(root) -> str:
    (table,) = [t for t, values in _tables(root).items() if values == "country=US"]
    return table


def _on_terminal(root, *args: str) -> tuple[str, str]:
    """stdout as an 80-column terminal showed it, and stderr (piped)."""
    code, stdout, stderr = terminal.on_terminal(*root.args, *args, stream="stdout", columns=NARROW)
    assert code == 0, stderr
    return terminal.shown(stdout), stderr


# --- versions: every version says why ---------------------------------------------------------


@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
def test_every_version_kept_or_expiring_says_why(partitioned, policy):
    args = POLICIES[policy]
    for table in (_us_table(partitioned), "__manifest"):
        lines = ok(partitioned, "versions", table, *args, "--json").json()["versions"]
        assert len(lines) >= 3
        assert all(line["reasons"] for line in lines), lines
        for line in lines:
            if line["fate"] == "expires":
                assert line["reasons"][0] == "older than 0s"
                assert "no tag, branch, publication or clone keeps it" in line["reasons"]
                assert not any("newest" in r for r in line["reasons"])  # --retain 1: the latest
    text = ok(partitioned, "versions", _us_table(partitioned), *args).stdout.splitlines()
    assert all(row.split("\t")[-1] not in ("", "-") for row in text)  # the `why` column


def test_an_expiring_version_names_the_retain_it_is_outside_of(partitioned):
    args = ("--older-than", "0s", "--grace", "0s", "--retain", "2", "--force")
    lines = ok(partitioned, "versions", _us_table(partitioned), *args, "--json").json()["versions"]
    (expiring,) = [line for line in lines if line["fate"] == "expires"]
    assert expiring["reasons"] == [
        "older than 0s",
        "not among the newest 2",
        "no tag, branch, publication or clone keeps it",
    ]


@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
def test_what_versions_says_expires_is_what_a_dry_run_prune_removes(partitioned, policy):
    args = POLICIES[policy]
    said = {}
    for table in ok(partitioned, "versions", *args, "--json").json()["tables"]:
        detail = ok(partitioned, "versions", table["table"], *args, "--json").json()
        said[table["location"]] = sorted(detail["expiring"])
    manifest = ok(partitioned, "versions", "__manifest", *args, "--json").json()
    report = ok(partitioned, "prune", "--dry-run", *args, "--json").json()
    removed = {t["location"]: sorted(t["versions_removed"]) for t in report["tables"]}
    assert said == removed
    assert sorted(manifest["expiring"]) == sorted(report["manifest"]["versions_removed"])
    assert bool(report["totals"]["versions_removed"]) == (policy == "everything old")


# --- prune on a terminal: a summary -----------------------------------------------------------


def test_a_dry_run_on_a_terminal_lists_only_the_tables_with_something_to_do(partitioned):
    tables = _tables(partitioned)
    us = _us_table(partitioned)
    shown, stderr = _on_terminal(partitioned, "prune", "--dry-run", *AT_ONCE)
    assert "prune: would remove" in shown
    assert us in shown
    assert not [t for t in tables if t != us and t in shown]
    assert "3 tables with nothing to do not shown (--verbose lists them)" in shown
    assert "dry run: nothing changed" in stderr


def test_prune_verbose_on_a_terminal_lists_every_table(partitioned):
    shown, _ = _on_terminal(partitioned, "prune", "--dry-run", "--verbose", *AT_ONCE)
    assert all(table in shown for table in _tables(partitioned))
    assert "nothing to do not shown" not in shown


def test_a_prune_with_nothing_to_do_shows_no_table_row_on_a_terminal(partitioned):
    shown, _ = _on_terminal(partitioned, "prune", "--dry-run")
    assert not [t for t in _tables(partitioned) if t in shown]
    assert "5 tables with nothing to do not shown" in shown  # four partitions and __manifest


@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
def test_piped_prune_still_lists_every_table_and_debris(partitioned, policy):
    args = POLICIES[policy]
    report = ok(partitioned, "prune", "--dry-run", *args, "--json").json()
    piped = ok(partitioned, "prune", "--dry-run", *args).stdout.splitlines()
    rows = len(report["tables"]) + 1 + len(report["debris"]) + len(report["refused"])
    assert len(piped) == rows
    assert all(table in "\n".join(piped) for table in _tables(partitioned))


# --- a narrow terminal ------------------------------------------------------------------------


def test_no_cell_is_cut_on_an_80_column_terminal(partitioned):
    us = _us_table(partitioned)
    for args in (
        ("ls", "--recursive"),
        ("versions",),
        ("versions", us, *AT_ONCE),
        ("prune", "--dry-run", "--verbose", *AT_ONCE),
        ("partitions",),
    ):
        shown, _ = _on_terminal(partitioned, *args)
        assert "…" not in shown, (args, shown)


def test_partition_values_appear_whole_on_an_80_column_terminal(partitioned):
    values = set(_tables(partitioned).values())
    assert values == {"country=US", "country=DE", "country=FR", "country=null"}
    shown, _ = _on_terminal(partitioned, "partitions")
    assert all(value in shown for value in values)
    listed = ok(partitioned, "ls", "--recursive").stdout
    shown, _ = _on_terminal(partitioned, "ls", "--recursive")
    for value in set(re.findall(r"country=[^,\s]+", listed)):
        assert value in shown


def test_a_narrow_terminal_leaves_out_optional_columns_and_says_so(partitioned):
    shown, stderr = _on_terminal(partitioned, "prune", "--dry-run", "--verbose", *AT_ONCE)
    header = next(line for line in shown.splitlines() if "table" in line and "status" in line)
    assert "kept" not in header and "location" not in header
    assert "columns left out for width: kept, location" in stderr
    report = ok(partitioned, "prune", "--dry-run", *AT_ONCE, "--json").json()
    piped = ok(partitioned, "prune", "--dry-run", *AT_ONCE).stdout
    assert all(t["location"] in piped for t in report["tables"])  # a pipe keeps every column
    wide, stderr = terminal.on_terminal(*partitioned.args, "ls", stream="stdout", columns=200)[1:]
    assert "location" in terminal.shown(wide) and "left out" not in stderr
