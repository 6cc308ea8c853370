"""`scan` read in this process (`--engine local`, and `auto` for small reads) against the same
scan read by Spark (real local Spark), one engine against the other, and both against DuckDB.

A namespace of every type a user keeps (integers at their extremes, floats, decimal(38,10),
strings with tabs and unicode, binary, booleans, far dates, instants and wall times before 1970,
an embedding `fixed_size_list<float32>`, a list, a map, a struct holding an instant and a struct)
with NULLs everywhere, written in two writes under two partition specs, is read by both engines
in processes whose local zone is not UTC: rows (JSON and piped), `--columns`, `--limit`,
`--count`, `--since-version`, `--to` Parquet, and generated conditions (hypothesis) that prune
and filter in Lance. The printed answer is the same byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import duckdb
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import partitioned_root
from helpers import cli, invoke, ok
from hypothesis import given
from hypothesis import strategies as st
from typed_rows import SCHEMA, STAMPS, ZONES, conditions, few_examples, make_rows

from lancens_cli.pipeline.local_read import plan_local
from lancens_cli.pipeline.row_values import arrow_rows
from lancens_cli.pipeline.scan import ScanRequest

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def world(tmp_path_factory, spark):
    """The namespace (two writes, two specs), the version between them, and DuckDB over the
    source rows."""
    folder = tmp_path_factory.mktemp("local_engine")
    root = partitioned_root(folder, SCHEMA, "bucket(4, id)", "year(d)")
    first, second = make_rows(150, 1, 0), make_rows(150, 2, 1000)
    pq.write_table(first, folder / "first.parquet")
    pq.write_table(second, folder / "second.parquet")
    ok(root, "write", "--from", str(folder / "first.parquet"))
    between = int(lance.dataset(str(root.local_path / "__manifest")).version)
    ok(root, "add-partition-spec", "--field", "flag", "--field", "month(ts)")
    ok(root, "write", "--from", str(folder / "second.parquet"))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", pa.concat_tables([first, second]).select(["id", "i8", "i32", "i64"]))
    con.register("first", first.select(["id"]))
    return root, between, con


@pytest.fixture(params=ZONES)
def zone(request, monkeypatch):
    """This process's local zone (what PySpark turns instants into), not UTC."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


def both(root, *args: str) -> tuple:
    """The scan read in this process and by Spark: (local, spark) results, both exit 0."""
    local = cli(root, "scan", *args, "--engine", "local")
    spark = cli(root, "scan", *args, "--engine", "spark")
    assert local.exit_code == 0, (args, local.stderr)
    assert spark.exit_code == 0, (args, spark.stderr)
    assert "(in this process)" in local.stderr and "starting Spark" not in local.stderr, args
    assert "starting Spark" in spark.stderr, args
    return local, spark


def test_every_type_prints_the_same_from_both_engines_in_any_zone(world, zone):
    root, between, _ = world
    for args in [
        ("--json",),
        ("--json", "--columns", "st,emb,id,attrs", "--limit", "7"),
        ("--json", "--since-version", str(between)),
        ("--json", "--where", "d >= DATE '2020-01-01' AND s IS NOT NULL", "--limit", "40"),
    ]:
        local, spark = both(root, *args)
        assert local.stdout == spark.stdout, args
    # piped text: tab-separated cells, the same lines
    local, spark = both(root, "--where", "ts < TIMESTAMP '2000-01-01 00:00:00'")
    assert local.stdout == spark.stdout and local.stdout.count("\n") > 10
    rows = json.loads(cli(root, "--json", "scan", "--engine", "local").stdout)
    first = next(r for r in rows["rows"] if r[rows["columns"].index("ts")] is not None)
    assert first[rows["columns"].index("ts")] in {s.isoformat() for s in STAMPS}  # UTC, no zone


def test_counts_and_since_version_agree_with_duckdb(world):
    root, between, con = world
    local, spark = both(root, "--count", "--where", "i32 > 0 OR i8 IS NULL")
    expected = con.execute("SELECT count(*) FROM t WHERE i32 > 0 OR i8 IS NULL").fetchone()[0]
    assert int(local.stdout) == int(spark.stdout) == expected
    local, spark = both(root, "--json", "--since-version", str(between), "--columns", "id")
    new_ids = sorted(r[0] for r in json.loads(local.stdout)["rows"])
    assert new_ids == list(range(1000, 1150)) and local.stdout == spark.stdout


def test_parquet_files_of_both_engines_read_back_alike(world, tmp_path):
    root, _, _ = world
    where = ("--where", "id BETWEEN 20 AND 1100")
    local = cli(root, "scan", *where, "--to", str(tmp_path / "local"), "--engine", "local")
    spark = cli(root, "scan", *where, "--to", str(tmp_path / "spark"), "--engine", "spark")
    assert local.exit_code == 0 and spark.exit_code == 0, (local.stderr, spark.stderr)
    assert (tmp_path / "local" / "_SUCCESS").exists()
    mine = pq.read_table(tmp_path / "local").sort_by("id")
    theirs = pq.read_table(tmp_path / "spark").sort_by("id")
    assert mine.num_rows == theirs.num_rows > 100
    # Spark writes instants as INT96 by default; the values are the same instants (NaN alike)
    same = json.dumps(list(arrow_rows(mine.cast(theirs.schema))))
    assert same == json.dumps(list(arrow_rows(theirs)))
    again = cli(root, "scan", *where, "--to", str(tmp_path / "local"), "--engine", "local")
    assert again.exit_code == 4 and "already exists" in again.stderr


# --- generated conditions --------------------------------------------------------------------


def test_generated_conditions_read_in_process_equal_spark_and_duckdb(world):
    root, _, con = world

    @few_examples(10)
    @given(conditions(), st.sampled_from([None, 3, 50]))
    def check(where, limit):
        args = ("--json", "--where", where, "--columns", "id,i64,st")
        if limit is not None:
            args += ("--limit", str(limit))
        local, spark = both(root, *args)
        assert local.stdout == spark.stdout, where
        ids = sorted(r[0] for r in json.loads(local.stdout)["rows"])
        expected = sorted(r[0] for r in con.execute(f"SELECT id FROM t WHERE {where}").fetchall())
        if limit is None:
            assert ids == expected, where
        else:
            assert set(ids) <= set(expected) and len(ids) == min(limit, len(expected)), where

    check()


# --- which engine answers --------------------------------------------------------------------

AUTO = {"LANCENS_SPARK_MASTER": None}  # no Spark named: the engine is lancens' choice


def unnamed(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python [flags] -m lancens_cli ARGS` as a user runs it, with no Spark named (the test
    session names local[2]); flags before `-m` (e.g. `-X importtime`) go to Python."""
    flags = list(args[: 2 if args[:1] == ("-X",) else 0])
    full = {k: v for k, v in os.environ.items() if k != "LANCENS_SPARK_MASTER"}
    full.update({"LANCE_LOG": "error", **(env or {})})
    command = [sys.executable, *flags, "-m", "lancens_cli", *args[len(flags) :]]
    return subprocess.run(command, capture_output=True, text=True, env=full, timeout=300)


def test_auto_reads_small_reads_here_and_the_rest_with_spark_saying_why(world):
    root, _, _ = world
    args = (*root.args, "--json", "scan", "--where", "i32 = 7", "--columns", "id")
    small = invoke(*args, env=AUTO)
    assert small.exit_code == 0 and "(in this process)" in small.stderr, small.stderr
    said = invoke(*root.args, "--json", "scan", "--where", "i32 = 7", "--explain", env=AUTO)
    plan = json.loads(said.stdout)
    assert plan["engine"] == "local" and "nothing is left for Spark" in plan["engine_reason"]
    assert plan["tables_read"] >= 1 and plan["left_to_spark"] is None
    named = invoke(*root.args, "--json", "scan", "--explain", "--where", "i32 = 7")
    assert json.loads(named.stdout)["engine"] == "spark"
    assert "LANCENS_SPARK_MASTER names a Spark" in json.loads(named.stdout)["engine_reason"]
    # more planned bytes than allowed: Spark reads it (the reason the CLI prints)
    request = ScanRequest(root=root.uri, storage={}, where="i32 = 7")
    assert "more than --local-max-bytes (1.0 KiB)" in plan_local(request, 1024)
    # a condition Spark must evaluate, in a process of its own with nothing named
    residual = unnamed(*root.args, "scan", "--where", "id % 5 = 0", "--count")
    assert residual.returncode == 0, residual.stderr
    assert "starting Spark (Spark evaluates 'id % 5 = 0')" in residual.stderr
    assert int(residual.stdout) == 60


@pytest.mark.parametrize(
    "args, words",
    [
        (("--engine", "local", "--where", "lower(s) = 'a'"), "--engine local: Spark evaluates"),
        (("--engine", "local", "--to", "{tmp}/x.csv", "--format", "csv"), "csv files are written"),
        (("--local-max-bytes", "lots"), "--local-max-bytes: 'lots' is not a size"),
    ],
)
def test_what_this_process_cannot_read_is_one_line_exit_2(world, tmp_path, args, words):
    root, _, _ = world
    result = cli(root, "scan", *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "starting Spark" not in result.stderr
    assert not (tmp_path / "x.csv").exists()


def test_a_whole_process_read_in_process_never_loads_spark(world, tmp_path):
    root, _, _ = world
    args = [*root.args, "scan", "--where", "id < 30 AND d IS NOT NULL", "--columns", "id,ts,st"]
    proc = unnamed("-X", "importtime", *args, env={"TZ": "America/New_York"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pyspark" not in proc.stderr and "(in this process)" in proc.stderr
    spark = cli(root, "scan", *args[len(root.args) + 1 :], "--engine", "spark")
    assert proc.stdout == spark.stdout and proc.stdout.count("\n") > 5


def test_python_without_pyspark_still_reads_small_scans(world, tmp_path):
    """A user who installed lancens-cli without the spark extra: small reads work."""
    root, _, _ = world
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hidden:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pyspark' or name.startswith('pyspark.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _Hidden())\n"
    )
    path = os.pathsep.join([str(hide), *sys.path])
    args = [*root.args, "--json", "scan", "--where", "id < 5", "--columns", "id"]
    result = unnamed(*args, env={"PYTHONPATH": path})
    assert result.returncode == 0, result.stderr
    assert sorted(r[0] for r in json.loads(result.stdout)["rows"]) == [0, 1, 2, 3, 4]
