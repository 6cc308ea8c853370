"""A version's time, as any command prints it, names that version when given back.

Every command that prints a version's time (`versions`, `versions __manifest`, `describe
--versions`, `diff`, `restore`), in every form (piped, on a terminal, `--json`), prints Lance's
commit time to the microsecond; every command that takes a time (`restore --to-timestamp`, `diff
--from-timestamp` / `--to-timestamp`, `--timestamp-as-of`, `--since-timestamp`) resolves it to
the newest version committed at or before it. So each printed time, given back, must select the
very version it was printed for: the same answer as naming the version by number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import lance
import pytest
import terminal
from data import events
from helpers import Root, cli, ok, restored_history_root

from lancens_cli.store.version_pick import parse_moment, pick_version
from lancens_cli.words import utc_iso

TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"  # how every output writes a time
ANY_TIME = r"\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)?"  # what a command might print


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Root:
    """A partitioned root with writes and a restore (its `__manifest` versions), and a plain
    table `t` with appends and a restore of its own. Built once: the tests only read it."""
    tmp = tmp_path_factory.mktemp("version_times")
    made = restored_history_root(tmp, write_after=True)
    location = ok(made, "describe", "t", "--json").json()["location"]
    for n in range(2):
        lance.write_dataset(
            events(5, seed=n, start=1000 + 10 * n), tmp / "ns" / location, mode="append"
        )
    ok(made, "restore", "t", "--to-version", "2", "--yes")
    return made


# --- what the commands print ------------------------------------------------------------------


def _rows(text: str) -> list[tuple[int, str]]:
    """(version, time) of each line that starts with a version and holds a time (piped lines and
    a terminal table's rows alike: `1<TAB>T...`, `│ 1 │ T │`)."""
    found = []
    for line in text.splitlines():
        match = re.match(rf"^[│\s]*(\d+)\s*[│\t]\s*({ANY_TIME})", line)
        if match:
            found.append((int(match.group(1)), match.group(2)))
    return found


def _on_terminal(root: Root, *args: str) -> str:
    code, out, err = terminal.on_terminal(*root.args, *args, stream="stdout", columns=200)
    assert code == 0, err
    return terminal.shown(out)


def printed(root: Root, target: str) -> dict[int, set[str]]:
    """version -> every text of its time a command prints for `target` (`__manifest` or a
    table): `versions`, `diff`, `restore`, `describe --versions`; piped, on a terminal, JSON."""
    found: dict[int, set[str]] = {}
    for version, text in [*_listed(root, target), *_planned_and_described(root, target)]:
        assert text is not None, version
        found.setdefault(int(version), set()).add(text)
    return found


def _listed(root: Root, target: str) -> Iterator[tuple[int, str]]:
    """What `versions` and `diff` print: (version, its time)."""
    lines = ok(root, "versions", target, "--json").json()["versions"]
    yield from ((line["version"], line["timestamp"]) for line in lines)
    yield from _rows(ok(root, "versions", target).stdout)
    yield from _rows(_on_terminal(root, "versions", target))
    first = str(lines[0]["version"])
    whole = ok(root, "diff", target, "--from-version", first, "--json").json()
    yield whole["from_version"], whole["from_timestamp"]
    yield from ((line["version"], line["timestamp"]) for line in whole["versions"])
    yield from _rows(ok(root, "diff", target, "--from-version", first).stdout)


def _planned_and_described(root: Root, target: str) -> Iterator[tuple[int, str]]:
    """What `restore --dry-run --json` prints, and the root's `diff` (`__manifest`) or
    `describe --versions` (a table): (version, its time)."""
    versions = [
        line["version"] for line in ok(root, "versions", target, "--json").json()["versions"]
    ]
    restore = () if target == "__manifest" else (target,)
    for version in versions:
        plan = ok(root, "restore", *restore, "--to-version", str(version), "--dry-run", "--json")
        yield plan.json()["restored_to"], plan.json()["restored_to_time"]
    if target == "__manifest":
        for version in versions[1:]:  # the root's diff (version 1 holds no partitioning yet)
            both = ok(root, "diff", "--from-version", str(version), "--json").json()
            yield both["from_version"], both["from_timestamp"]
            yield both["to_version"], both["to_timestamp"]
        return
    described = ok(root, "describe", target, "--versions", "--json").json()["versions"]
    yield from ((line["version"], line["timestamp"]) for line in described)
    piped = ok(root, "describe", target, "--versions").stdout
    yield from ((int(v), t) for v, t in re.findall(r'"version":(\d+),"timestamp":"([^"]+)"', piped))
    yield from _rows(_on_terminal(root, "describe", target, "--versions"))


# --- given back -------------------------------------------------------------------------------


def _same(root: Root, by_time: list[str], by_version: list[str]) -> None:
    """A command given a time answers exactly as given the version (exit, stdout, stderr but
    for how long it took)."""

    def answer(args: list[str]) -> tuple[int, str, str]:
        result = cli(root, *args)
        return result.exit_code, result.stdout, re.sub(r"\d+(\.\d+)?\s?s\b", "", result.stderr)

    assert answer(by_time) == answer(by_version), (by_time, by_version)


@pytest.mark.parametrize("target", ["__manifest", "t"])
def test_every_printed_time_selects_its_own_version(root, target):
    times = printed(root, target)
    assert len(times) >= 4, times
    restore = () if target == "__manifest" else (target,)
    for version, text in [(v, text) for v, texts in times.items() for text in sorted(texts)]:
        for spelled in (text, text.removesuffix("Z")):  # UTC without an offset: the same
            plan = ok(root, "restore", *restore, "--to-timestamp", spelled, "--dry-run", "--json")
            assert plan.json()["restored_to"] == version, (spelled, version)
        diffed = ok(
            root, "diff", target, "--from-timestamp", text, "--to-timestamp", text, "--json"
        ).json()
        assert (diffed["from_version"], diffed["to_version"]) == (version, version), text
        if target == "__manifest" and version > 1:
            ns = ok(root, "diff", "--from-timestamp", text, "--to-timestamp", text, "--json")
            assert ns.json()["from_version"] == ns.json()["to_version"] == version, text
            _same(
                root,
                ["partitions", "--timestamp-as-of", text, "--json"],
                ["partitions", "--version-as-of", str(version), "--json"],
            )
    for version, texts in times.items():  # one time a version, everywhere, to the microsecond
        assert len(texts) == 1 and re.fullmatch(TIME, *texts), (version, texts)


def test_the_oldest_time_an_error_names_selects_the_oldest_version(root):
    """`no version was committed at or before T (the oldest ..., is from T1)`: T1 given back
    names that oldest version."""
    oldest = min(printed(root, "t"))
    result = cli(root, "restore", "t", "--to-timestamp", "2001-01-01T00:00:00Z", "--dry-run")
    assert result.exit_code == 3
    (named,) = re.findall(rf"is from ({TIME})", result.stderr)
    again = ok(root, "restore", "t", "--to-timestamp", named, "--dry-run", "--json")
    assert again.json()["restored_to"] == oldest


@pytest.mark.spark
def test_scan_selects_the_version_whose_time_versions_printed(root, spark):
    (version, text), *_ = [  # the restore's version: rows appended after it, by one write
        (v, t) for v, t in _rows(ok(root, "versions", "__manifest").stdout) if v >= 6
    ]
    _same(
        root,
        ["scan", "--timestamp-as-of", text, "--count"],
        ["scan", "--version-as-of", str(version), "--count"],
    )
    _same(
        root,
        ["scan", "--since-timestamp", text, "--count"],
        ["scan", "--since-version", str(version), "--count"],
    )


# --- versions close together ------------------------------------------------------------------


def test_times_a_millisecond_or_a_microsecond_apart_each_select_their_version():
    """Commits within one millisecond (or one second) are told apart: the text keeps every
    microsecond, the `Z` form parses back to the same instant, and the rule picks each."""
    start = datetime(2026, 11, 28, 10, 6, 25, tzinfo=UTC)
    steps = [0, 1, 2, 999, 1000, 1001, 999_999, 1_000_000]
    history = [(n + 1, start + timedelta(microseconds=us)) for n, us in enumerate(steps)]
    for version, when in history:
        text = utc_iso(when)
        assert re.fullmatch(TIME, text) and parse_moment(text) == when
        assert pick_version(history, None, text, "t") == version
        assert pick_version(history, None, text.removesuffix("Z"), "t") == version


def test_versions_committed_in_one_microsecond_are_named_by_the_newest():
    """The one case a time cannot name: two commits in the same microsecond. The rule names
    the newest of them (as it always names the newest at or before the time); a version
    number names either."""
    when = datetime(2026, 11, 28, 10, 6, 25, 123456, tzinfo=UTC)
    history = [(1, when - timedelta(seconds=1)), (2, when), (3, when), (4, when + timedelta(1))]
    assert pick_version(history, None, utc_iso(when), "t") == 3
    assert pick_version(history, "2", None, "t") == 2


def test_a_shown_time_is_the_commit_not_the_file(root):
    """`versions` shows Lance's commit time, which `ds.versions()` gives: not the manifest
    file's modification time, which can fall before it (and name the version before)."""
    dataset = lance.dataset(str(root.local_path / "__manifest"))
    commits = {int(v["version"]): utc_iso(v["timestamp"]) for v in dataset.versions()}
    listed = ok(root, "versions", "__manifest", "--json").json()["versions"]
    assert {line["version"]: line["timestamp"] for line in listed} == commits
