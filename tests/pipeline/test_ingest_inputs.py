"""`lancens ingest` of the files users have, against DuckDB's reading of the same files.

Parquet written by pandas (nanosecond timestamps) and by pyarrow, CSV files whose headers list
the columns in different orders, a 0-byte CSV beside good ones, malformed CSV rows, JSON lines:
what is published equals DuckDB's rows (matched by column name), or the command fails in one
line with exit 2, publishes nothing and leaves `check` clean. Real local Spark.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import partitioned_root
from helpers import Root, invoke

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("n", pa.int32()),
    ]
)
COLUMNS = ["id", "name", "ts", "n"]


@pytest.fixture
def target(tmp_path, spark) -> Root:
    """An empty namespace partitioned by bucket(4, id)."""
    return partitioned_root(tmp_path, SCHEMA, "bucket(4, id)")


def published(root: Root) -> list[tuple]:
    result = invoke(*root.args, "scan", "--columns", ",".join(COLUMNS), "--json")
    assert result.exit_code == 0, result.stderr
    out = []
    for row in json.loads(result.stdout)["rows"]:
        stamp = dt.datetime.fromisoformat(row[2]).replace(tzinfo=dt.UTC) if row[2] else None
        out.append((row[0], row[1], stamp, row[3]))
    return sorted(out, key=lambda r: r[0])


def oracle(sql: str) -> list[tuple]:
    """DuckDB's rows for `sql` (SELECT id, name, ts, n ...), timestamps as UTC instants."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rows = []
    for ident, name, stamp, n in con.execute(sql).fetchall():
        if stamp is not None:
            stamp = stamp.astimezone(dt.UTC) if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
        rows.append((ident, name, stamp, n))
    return sorted(rows, key=lambda r: r[0])


def ingest(root: Root, *sources: Path | str):
    return invoke(*root.args, "ingest", *[str(s) for s in sources])


def assert_refused_cleanly(root: Root, result, words: str) -> None:
    assert result.exit_code == 2, result.stderr
    assert words in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("lancens: error:")
    assert "Traceback" not in result.stderr and "Internal" not in result.stderr
    checked = invoke(*root.args, "check", "--json")
    assert checked.exit_code == 0, checked.stdout
    assert published(root) == []


def test_parquet_written_by_pandas_with_nanosecond_timestamps(target, tmp_path):
    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["a", None, "ü"],
            "ts": pd.to_datetime(
                ["1960-01-01 00:00:00.000001", "2024-02-29 23:59:59.999999", None],
                utc=True,
                format="ISO8601",
            ),
            "n": [1, None, 3],
        }
    ).astype({"n": "Int32"})
    path = tmp_path / "pandas.parquet"
    frame.to_parquet(path)
    assert pq.read_schema(path).field("ts").type.unit == "ns"  # what pandas writes
    result = ingest(target, path)
    assert result.exit_code == 0, result.stderr
    assert published(target) == oracle(f"SELECT id, name, ts, n FROM read_parquet('{path}')")


def test_a_timestamp_with_nanoseconds_is_refused_naming_column_and_file(target, tmp_path):
    path = tmp_path / "nanos.parquet"
    frame = pd.DataFrame(
        {"id": [1], "ts": pd.to_datetime(["2024-01-01 00:00:00.000000001"], utc=True)}
    )
    frame.to_parquet(path)
    result = ingest(target, path)
    assert_refused_cleanly(target, result, f"{path}: column 'ts'")
    assert "nanoseconds" in result.stderr


def test_parquet_written_by_pyarrow(target, tmp_path):
    table = pa.table(
        {
            "n": pa.array([5, None], pa.int32()),
            "id": [7, 8],
            "ts": pa.array(
                [dt.datetime(1969, 12, 31, 23, 59, 59, 999999), None], pa.timestamp("us", tz="UTC")
            ),
            "name": ["x", "y"],
        }
    )  # columns in another order than the namespace's
    path = tmp_path / "arrow.parquet"
    pq.write_table(table, path)
    assert ingest(target, path).exit_code == 0
    assert published(target) == oracle(f"SELECT id, name, ts, n FROM read_parquet('{path}')")


def test_csv_headers_in_other_orders_are_matched_by_name(target, tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    (folder / "a.csv").write_text("id,name,n,ts\n1,x,10,2024-01-01 00:00:00\n2,,20,\n")
    (folder / "b.csv").write_text("n,ts,id,name\n30,1999-12-31 23:59:59.5,3,z\n")
    (folder / "c.csv").write_text("name,id\nonly,4\n")  # n and ts are nullable: NULL
    (folder / "empty.csv").write_text("")  # 0 bytes: no rows
    result = ingest(target, folder)
    assert result.exit_code == 0, result.stderr
    expected = oracle(
        f"SELECT id, name, ts::TIMESTAMPTZ AS ts, n FROM read_csv('{folder}/[abc].csv', "
        "union_by_name = true, header = true, types = {'n': 'INTEGER', 'id': 'BIGINT'})"
    )
    assert published(target) == expected
    assert [r[0] for r in expected] == [1, 2, 3, 4]


def test_a_csv_lacking_a_non_nullable_column_is_refused_by_name(target, tmp_path):
    path = tmp_path / "noid.csv"
    path.write_text("name,n\nx,1\n")
    assert_refused_cleanly(target, ingest(target, path), "lacks the non-nullable column 'id'")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("id,name,n\n1,x,1,extra\n", "m.csv"),  # a field too many
        ("id,name,n\nnot-a-number,x,1\n", "m.csv"),  # a value that is not of the column's type
        ("id,name,n,zzz\n1,x,1,2\n", "zzz"),  # a column the namespace has not
    ],
)
def test_malformed_csv_is_one_line_and_publishes_nothing(target, tmp_path, content, words):
    path = tmp_path / "m.csv"
    path.write_text(content)
    assert_refused_cleanly(target, ingest(target, path), words)


def test_only_empty_csv_files_are_refused(target, tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    assert_refused_cleanly(target, ingest(target, path), "empty")


def test_json_lines(target, tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = [
        {"name": "a", "id": 1, "n": 3, "ts": "2024-05-01T10:00:00Z"},
        {"id": 2},
        {"id": 3, "name": "é", "n": None},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert ingest(target, path).exit_code == 0
    expected = oracle(
        f"SELECT id, name, ts::TIMESTAMPTZ AS ts, n FROM read_json('{path}', "
        "columns = {'id': 'BIGINT', 'name': 'VARCHAR', 'ts': 'TIMESTAMPTZ', 'n': 'INTEGER'})"
    )
    assert published(target) == expected
