"""An operator's mistakes in `--where` are refused in one sentence (exit 2), before anything runs.

A literal that can be no value of its column's type (`'abc'` for an int column, the date
`'2025-02-30'`, 300 for an int8 column), an unquoted string (`country = US`) and a condition
that does not parse (a trailing AND) each get one line on stderr that names the mistake, and
nothing on disk changes; a literal of the right type is never refused.
"""

from __future__ import annotations

import datetime as dt
import json
import string

import pyarrow as pa
import pytest
from data import events, partitioned_root
from helpers import cli, ok, tree_snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@pytest.fixture
def written(partitioned, files):
    """The partitioned root (`year(event_date)`, `country`) with `data.events` rows."""
    ok(partitioned, "write", "--from", files("rows.parquet", events(200)))
    return partitioned


def refused(root, where: str, command: str = "partitions"):
    """`command --where WHERE`, which must be exit 2 with one line on stderr and no change."""
    before = tree_snapshot(root.local_path)
    result = cli(root, command, "--where", where)
    assert result.exit_code == 2, (where, result.exit_code, result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""
    assert "<class" not in result.stderr and "sqlglot" not in result.stderr
    assert tree_snapshot(root.local_path) == before
    return result.stderr.strip()


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("customer_id = 'abc'", "--where: 'abc' is not a int64 value for column customer_id"),
        ("customer_id IN (1, 'x')", "'x' is not a int64 value for column customer_id"),
        ("NOT (customer_id BETWEEN 1 AND 'z')", "'z' is not a int64 value"),
        ("country = 'US' OR customer_id = 'q'", "'q' is not a int64 value"),
        ("event_date = '2025-02-30'", "'2025-02-30' is not a valid date for column event_date"),
        ("event_date = DATE '2025-02-30'", "DATE '2025-02-30' is not a valid date"),
        ("event_date >= '2025-13-01'", "'2025-13-01' is not a valid date"),
        ("event_date = 'yesterday'", "'yesterday' is not a valid date"),
        ("event_date = 20250101", "20250101 is not a valid date for column event_date"),
        (
            "customer_id = 9223372036854775808",
            "9223372036854775808 is out of range for column customer_id",
        ),
    ],
)
def test_a_literal_that_cannot_be_the_columns_type_is_refused(written, where, words):
    assert words in refused(written, where)


def test_a_number_out_of_a_small_integer_columns_range_is_refused(tmp_path):
    root = partitioned_root(tmp_path, pa.schema([("id", pa.int64()), ("tiny", pa.int8())]), "tiny")
    line = refused(root, "tiny = 300")
    assert "300 is out of range for column tiny (int8: -128 to 127)" in line
    assert "-129 is out of range" in refused(root, "tiny > -129")
    ok(root, "partitions", "--where", "tiny = 127 OR tiny = -128")


@pytest.mark.parametrize(
    ("where", "hint"),
    [
        ("country = US", "(quote strings with '...': country = 'US')"),
        ('country = "US"', "(quote strings with '...': country = 'US')"),
        ("country IN (US, 'DE')", "(quote strings with '...': country IN ('US', 'DE'))"),
    ],
)
def test_an_unquoted_string_is_an_unknown_column_with_a_hint_to_quote_it(written, where, hint):
    line = refused(written, where)
    assert "unknown column 'US'" in line and line.endswith(hint)


def test_a_misspelt_column_gets_no_quoting_hint(written):
    line = refused(written, "contry = 'US'")
    assert "unknown column 'contry'" in line and "quote strings" not in line


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("country = 'US' AND", "the condition ends after AND (at character 16)"),
        ("country = 'US' AND AND customer_id = 1", "unexpected AND (at character 20)"),
        ("country = ", "the condition ends after ="),
        ("(country = 'US'", "a closing ) is missing"),
        ("country = 'US", "the quote ' opened at character 11 is never closed"),
        ("country = 'US' AND\n  AND", "the condition ends after AND (at line 2, character 3)"),
    ],
)
def test_a_condition_that_does_not_parse_names_the_place(written, where, words):
    line = refused(written, where)
    assert line.startswith("lancens: error: --where: cannot parse") and words in line


def test_a_mistake_in_json_mode_is_one_error_document(written):
    result = cli(written, "--json", "partitions", "--where", "customer_id = 'abc'")
    assert result.exit_code == 2 and result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["name"] == "InvalidInput"
    assert error["message"] == "--where: 'abc' is not a int64 value for column customer_id"


@pytest.mark.parametrize(
    "where",
    [
        "customer_id = '12'",  # a number in quotes: the engine casts it
        "customer_id < 1.5",
        "event_date = '2025-02'",  # Spark reads a month as its first day
        "country = 5",
        "upper(country) = 'US'",
        "event_date = DATE '2024-02-29'",
    ],
)
def test_conditions_an_engine_can_read_are_not_refused(written, where):
    ok(written, "partitions", "--where", where)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("customer_id = 'abc'", "--where: 'abc' is not a int64 value for column customer_id"),
        ("event_date = '2025-02-30'", "'2025-02-30' is not a valid date for column event_date"),
        ("country = US", "(quote strings with '...': country = 'US')"),
        ("country = 'US' AND", "the condition ends after AND (at character 16)"),
    ],
)
def test_scan_refuses_the_same_mistakes_before_spark_starts(written, monkeypatch, where, words):
    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
    line = refused(written, where, command="scan")
    assert words in line and "starting Spark" not in line


# --------------------------------------------------------------------------- generated literals

GENERATED = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _impossible_date() -> st.SearchStrategy[str]:
    def text(year: int, month: int, day: int) -> str:
        return f"{year:04d}-{month:02d}-{day:02d}"

    bad_month = st.builds(text, st.integers(1, 9999), st.integers(13, 99), st.integers(1, 28))
    bad_day = st.builds(
        lambda d, extra: text(d.year, d.month, 28 + extra),
        st.dates(),
        st.integers(1, 3),
    ).filter(lambda t: not _valid_date(t))
    return st.one_of(bad_month, bad_day)


def _valid_date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


RIGHT = st.one_of(
    st.integers(INT64_MIN, INT64_MAX).map(lambda n: f"customer_id = {n}"),
    st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=1, max_size=4).map(
        lambda ns: f"customer_id IN ({', '.join(map(str, ns))})"
    ),
    st.dates().map(lambda d: f"event_date = '{d.isoformat()}'"),
    st.dates().map(lambda d: f"event_date < DATE '{d.isoformat()}'"),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=12).map(
        lambda s: f"country = {_quoted(s)}"
    ),
)

WRONG = st.one_of(
    st.text(string.ascii_letters + " _-", min_size=1, max_size=10)
    .filter(lambda s: s.strip())
    .map(lambda s: f"customer_id = {_quoted(s)}"),
    st.one_of(st.integers(min_value=INT64_MAX + 1), st.integers(max_value=INT64_MIN - 1)).map(
        lambda n: f"customer_id = {n}"
    ),
    _impossible_date().map(lambda t: f"event_date = '{t}'"),
    _impossible_date().map(lambda t: f"event_date >= DATE '{t}'"),
    st.integers(0, 10**9).map(lambda n: f"event_date = {n}"),
)


@GENERATED
@given(where=RIGHT)
def test_literals_of_the_columns_type_are_never_refused(written, where):
    result = cli(written, "partitions", "--where", where)
    assert result.exit_code == 0, (where, result.stderr)


@GENERATED
@given(where=WRONG)
def test_literals_of_another_type_are_always_refused(written, where):
    result = cli(written, "partitions", "--where", where)
    assert result.exit_code == 2, (where, result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--where:" in result.stderr and "column" in result.stderr
