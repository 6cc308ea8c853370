"""A CSV file gives the same rows whichever reader takes it: `write`, `merge` in this process,
`merge` and `ingest` on Spark, and a Spark task's pyarrow reader of an object-store file, each
against DuckDB's `read_csv` of the same file with the namespace's types.

The fields users' files hold: empty fields quoted and not (NULL in every column, text too, as
Spark and DuckDB read them), `NULL`, `N/A` and `NaN` as text, `NaN` and the infinities as
floats, quoted commas and doubled quotes, padded text, integer extremes, dates.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import duckdb
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import Root, invoke, ok, published_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("s", pa.string()),
        ("d", pa.float64()),
        ("i", pa.int32()),
        ("b", pa.bool_()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
DUCK_TYPES = (
    "{'id': 'BIGINT', 's': 'VARCHAR', 'd': 'DOUBLE', 'i': 'INTEGER', 'b': 'BOOLEAN', "
    "'day': 'DATE', 'ts': 'TIMESTAMPTZ'}"
)
# RFC 4180, as every engine here reads CSV (DuckDB's sniffer would guess it from the first rows)
DIALECT = "delim = ',', quote = '\"', escape = '\"'"
TEXT = ["", '""', "NULL", "null", "N/A", "NaN", " x ", "a,b", 'say "hi"', "é ü", "0"]
FLOATS = ["", '""', "NaN", "Infinity", "-Infinity", "Inf", "-Inf", "1.5", "-0.0", "1e308", "7"]
INTS = ["", '""', "0", "-2147483648", "2147483647", "42", "+7", "+2147483647", " 9 ", "0x1F"]
BOOLS = ["", "true", "false"]
STAMPS = [
    "", "2024-01-02 03:04:05", "1999-12-31 23:59:59.5", "2024-02-29T00:00:00",  # UTC
    "2024-01-02", "2024-01-02T03:04", "2024-01-02T03:04Z", "2024-01-02 03:04:05-0700",
    "2024-01-02 03:04:05+05", "2024-01-02T03:04:05.123456000Z",  # pandas' nine digits, exact
]  # fmt: skip


def field(text: str) -> str:
    """A value as a CSV field: quoted when it holds a comma or a quote ('""' is an empty
    field written quoted)."""
    if text == '""' or not ("," in text or '"' in text):
        return text
    return '"' + text.replace('"', '""') + '"'


def csv_text(rows: list[tuple[str, ...]]) -> str:
    lines = ["id,s,d,i,b,day,ts"]
    lines += [",".join([str(n), *(field(v) for v in row)]) for n, row in enumerate(rows)]
    return "\n".join(lines) + "\n"


def oracle(path: Path) -> list[tuple]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # a time without an offset is UTC, as Spark's session
    rows = con.sql(
        f"SELECT * FROM read_csv('{path}', header = true, columns = {DUCK_TYPES}, {DIALECT}) "
        "ORDER BY id"
    ).fetchall()
    return [_cells(r) for r in rows]


def _cells(row) -> tuple:
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row)


def published(root: Root) -> list[tuple]:
    table = published_rows(root).select(SCHEMA.names).sort_by("id")
    return [_cells(tuple(r.values())) for r in table.to_pylist()]


def namespace(folder: Path) -> Root:
    folder.mkdir(parents=True, exist_ok=True)
    seed = folder / "seed.parquet"
    pq.write_table(SCHEMA.empty_table(), seed)
    root = Root(str(folder / "ns"), {}, folder / "ns")
    ok(root, "init")
    ok(root, "add-partition-spec", "--schema", str(seed), "--field", "bucket(2, id)")
    return root


ROWS = st.lists(
    st.tuples(
        st.sampled_from(TEXT)
        | st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=6),
        st.sampled_from(FLOATS) | st.floats(allow_nan=False).map(repr),
        st.sampled_from(INTS),
        st.sampled_from(BOOLS),
        st.sampled_from(["", "2024-02-29", "1970-01-01"])
        | st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)).map(dt.date.isoformat),
        st.sampled_from(STAMPS),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=ROWS)
def test_write_and_merge_read_a_csv_as_duckdb_reads_it(tmp_path_factory, rows):
    folder = tmp_path_factory.mktemp("csv")
    path = folder / "rows.csv"
    path.write_text(csv_text(rows), encoding="utf-8")
    expected = oracle(path)
    written = namespace(folder / "write")
    done = invoke(*written.args, "write", "--from", str(path))
    assert done.exit_code == 0, done.stderr
    assert published(written) == expected
    merged = namespace(folder / "merge")
    done = invoke(*merged.args, "merge", "--from", str(path), "--on", "id", "--engine", "local")
    assert done.exit_code == 0, done.stderr
    assert published(merged) == expected


def edge_rows() -> list[tuple[str, ...]]:
    """Every listed field at least once, in every column."""
    width = max(len(TEXT), len(FLOATS), len(INTS))
    return [
        (TEXT[n % len(TEXT)], FLOATS[n % len(FLOATS)], INTS[n % len(INTS)],
         BOOLS[n % len(BOOLS)], ["", "2024-02-29", "0001-01-01"][n % 3],
         STAMPS[n % len(STAMPS)])
        for n in range(width)
    ]  # fmt: skip


def test_a_tasks_pyarrow_reader_reads_a_csv_as_duckdb_reads_it(tmp_path):
    """What a Spark task runs on an `s3://` or `gs://` CSV (pipeline/files_source.py)."""
    from lancens_cli.pipeline.files_source import conform_batch, read_batches

    path = tmp_path / "rows.csv"
    path.write_text(csv_text(edge_rows()), encoding="utf-8")
    with open(path, "rb") as handle:
        batches = [conform_batch(b, SCHEMA, str(path)) for b in read_batches(handle, "csv", SCHEMA)]
    table = pa.Table.from_batches(batches)
    got = [_cells(tuple(r.values())) for r in table.sort_by("id").to_pylist()]
    assert got == oracle(path)


@pytest.mark.spark
def test_merge_and_ingest_on_spark_read_a_csv_as_this_process_does(tmp_path, spark):
    path = tmp_path / "rows.csv"
    path.write_text(csv_text(edge_rows()), encoding="utf-8")
    expected = oracle(path)
    assert [r[1] for r in expected][:2] == [None, None]  # the premise: "" and '""' are NULL
    here = namespace(tmp_path / "here")
    ok(here, "merge", "--from", str(path), "--on", "id", "--engine", "local")
    there = namespace(tmp_path / "there")
    merged = ok(there, "--json", "merge", "--from", str(path), "--on", "id", "--engine", "spark")
    assert json.loads(merged.stdout)["rows_inserted"] == len(expected)
    ingested = namespace(tmp_path / "ingested")
    ok(ingested, "ingest", str(path))
    assert published(here) == published(there) == published(ingested) == expected


def test_a_merge_into_one_table_keeps_csv_text_as_text(tmp_path):
    """A text column holds `02139`, not the number 2139 a guess from the values would make."""
    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    ok(root, "init")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "zip": ["02134", "99999"]})
    lance.write_dataset(rows, str(tmp_path / "ns" / "t.lance"))
    path = tmp_path / "zips.csv"
    path.write_text("id,zip\n1,02139\n3,00501\n4,\n", encoding="utf-8")
    done = invoke(*root.args, "merge", "t", "--from", str(path), "--on", "id")
    assert done.exit_code == 0, done.stderr
    table = lance.dataset(str(tmp_path / "ns" / "t.lance")).to_table().sort_by("id")
    assert table.column("zip").to_pylist() == ["02139", "99999", "00501", None]


def late_values_csv(path: Path) -> None:
    """More than pyarrow's first block (1 MiB) of rows whose `d` and `day` are empty, `i` whole
    numbers and `ts` naive, then the values that a guess from that block would refuse; each
    text a quoted field across three lines (pyarrow's blocks end inside some)."""
    lines = ["id,s,d,i,b,day,ts"]
    lines += [f'{n},"row\n\nof\n{n}",,{n % 1000},,,' for n in range(90_000)]
    lines += [
        "90000,late,1.5,7,true,2024-02-29,2024-01-02T03:04:05+02:00",
        "90001,later,NaN,-2147483648,false,0001-01-01,2024-01-02 03:04:05",
        '90002,"two\nlines",-0.0,,,,2024-01-02T03:04:05Z',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > 1 << 20  # the premise: the values lie past the first block


def test_values_past_the_first_block_are_read_as_duckdb_reads_them(tmp_path):
    path = tmp_path / "late.csv"
    late_values_csv(path)
    written = namespace(tmp_path / "write")
    done = invoke(*written.args, "write", "--from", str(path))
    assert done.exit_code == 0, done.stderr
    assert published(written) == oracle(path)


# spellings pyarrow's and Spark's own CSV parsers read differently; every engine here reads them
# with one parser (store/csv_rows.py), so each is taken alike or refused alike
SPELLINGS = {
    "bool one": ("b", "1"),
    "bool zero": ("b", "0"),
    "bool mixed case": ("b", "True"),
    "lowercase nan": ("d", "nan"),
    "lowercase inf": ("d", "-inf"),
    "padded int": ("i", " 42"),
    "int with a plus": ("i", "+5"),
    "hex int": ("i", "0x10"),
    "int with a fraction": ("i", "1.0"),
    "date with a time": ("day", "2024-01-02 00:00:00"),
    "offset without colon": ("ts", "2024-01-02T03:04:05+0200"),
    "padded time": ("ts", " 2024-01-02 03:04:05 "),
}


def spelling_csv(path: Path, column: str, text: str) -> None:
    cells = {name: "" for name in SCHEMA.names}
    cells.update(id="1", s="x", **{column: text})
    path.write_text(",".join(SCHEMA.names) + "\n" + ",".join(cells.values()) + "\n")


def outcome(root: Root, result) -> tuple:
    """(exit code, the rows published): a refusal must publish nothing."""
    return result.exit_code, published(root) if result.exit_code == 0 else None


@pytest.mark.parametrize("case", sorted(SPELLINGS))
def test_write_and_merge_read_each_spelling_alike(tmp_path, case):
    path = tmp_path / "one.csv"
    spelling_csv(path, *SPELLINGS[case])
    written = namespace(tmp_path / "write")
    merged = namespace(tmp_path / "merge")
    wrote = outcome(written, invoke(*written.args, "write", "--from", str(path)))
    merge = invoke(*merged.args, "merge", "--from", str(path), "--on", "id", "--engine", "local")
    assert outcome(merged, merge) == wrote
    assert wrote[0] in (0, 2)  # taken, or refused as bad input


@pytest.mark.spark
def test_ingest_on_spark_reads_every_spelling_and_late_value_as_write_does(tmp_path, spark):
    """One Spark job over a directory holding every spelling this process takes, and the file
    whose values lie past the first block: the rows `write` publishes from the same files."""
    folder = tmp_path / "in"
    folder.mkdir()
    late_values_csv(folder / "late.csv")
    here = namespace(tmp_path / "here")
    ok(here, "write", "--from", str(folder / "late.csv"))
    refused = []
    for n, case in enumerate(sorted(SPELLINGS)):
        path = folder / f"{n}.csv"
        spelling_csv(path, *SPELLINGS[case])
        path.write_text(path.read_text().replace("\n1,", f"\n{100_000 + n},"))  # its own id
        if invoke(*here.args, "write", "--from", str(path)).exit_code:
            refused.append(path)
    assert refused and len(refused) < len(SPELLINGS)  # the premise: some of each
    for path in refused:
        path.rename(tmp_path / path.name)
    there = namespace(tmp_path / "there")
    ok(there, "ingest", str(folder))
    assert published(there) == published(here)
    for path in refused:  # each alone: refused in one line, nothing published
        lone = namespace(tmp_path / f"lone-{path.stem}")
        done = invoke(*lone.args, "ingest", str(path))
        assert done.exit_code == 2 and path.name in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert published_rows(lone).num_rows == 0


def test_a_table_made_from_a_csv_is_typed_from_all_its_values(tmp_path):
    """`create table --from` has no target types: a column of whole numbers for the first
    megabyte and `1.5` after is a double, as DuckDB types it from the whole file."""
    path = tmp_path / "grow.csv"
    lines = ["id,amount,note"] + [f"{n},{n % 97},x" for n in range(150_000)]
    path.write_text("\n".join([*lines, "150000,1.5,", "150001,,late"]) + "\n")
    assert path.stat().st_size > 1 << 20
    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    ok(root, "init")
    ok(root, "create", "table", "t", "--from", str(path))
    table = lance.dataset(str(tmp_path / "ns" / "t.lance")).to_table().sort_by("id")
    expected = duckdb.sql(
        f"SELECT * FROM read_csv('{path}', header = true, sample_size = -1) ORDER BY id"
    ).to_arrow_table()
    assert table.schema.field("amount").type == pa.float64() == expected.schema.field(1).type
    assert table.to_pylist() == expected.to_pylist()


def test_a_bad_time_late_in_a_big_file_is_one_line_naming_column_and_value(tmp_path):
    path = tmp_path / "late-bad.csv"
    rows = [f"{n},,,,,,2024-01-02T03:04:05Z" for n in range(60_000)]
    path.write_text("id,s,d,i,b,day,ts\n" + "\n".join([*rows, "60000,,,,,,bad"]) + "\n")
    root = namespace(tmp_path / "ns")
    done = invoke(*root.args, "write", "--from", str(path))
    assert done.exit_code == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"lancens: error: cannot read {path} as csv: In CSV column 'ts': 'bad' is not a time a "
        "timestamp[us, tz=UTC] column holds exactly"
    ]
    assert published_rows(root).num_rows == 0
