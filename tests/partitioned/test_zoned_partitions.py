"""Time transforms on zoned timestamps, end to end through the CLI (the partitioning spec: each
transform IS its derived expression, `date_part(<part>, col0)`).

Generated rows in zones with DST changes, half- and quarter-hour offsets and a skipped day are
written with `lancens write`; then every partition table's `partition_field_*` value equals
what DataFusion computes for each of its rows, and `partitions --where` over a generated range
keeps every partition holding a matching row (the rows of the kept tables, filtered, are
exactly the matching rows of the source).
"""

from __future__ import annotations

import datetime as dt
import json

import lance
import pyarrow as pa
import pyarrow.parquet as pq
from helpers import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ZONES = ["America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia", "+05:30"]
# Instants (seconds) near DST changes of those zones, and Apia's skipped 30 December 2011.
NEAR = [1710054000, 1730613600, 1712415600, 1728144000, 1325239200, 1317468000]
SECONDS = st.one_of(
    st.sampled_from(NEAR).flatmap(lambda t: st.integers(t - 2 * 86_400, t + 2 * 86_400)),
    st.integers(-86_400 * 400, 86_400 * 400),  # around 1970, before it too
)


def datafusion_part(part: str, values: pa.Array) -> list:
    import datafusion

    batch = pa.RecordBatch.from_arrays([values], ["col0"])
    expression = datafusion.functions.date_part(datafusion.lit(part), datafusion.col("col0"))
    query = datafusion.SessionContext().from_arrow(batch).select(expression.alias("v"))
    return query.to_arrow_table()["v"].cast(pa.int32()).to_pylist()


def literal(seconds: int) -> str:
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    return stamp.isoformat(sep=" ")  # with its +00:00 offset: an instant in any zone


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    zone=st.sampled_from(ZONES),
    part=st.sampled_from(["hour", "day", "month", "year"]),
    seconds=st.lists(SECONDS, min_size=1, max_size=20, unique=True),
    low=SECONDS,
    span=st.sampled_from([1800, 3 * 3600, 86_400, 20 * 86_400]),
)
def test_zoned_time_partitions_are_their_expressions_and_prune_exactly(
    tmp_path_factory, zone, part, seconds, low, span
):
    tmp = tmp_path_factory.mktemp("zoned")
    root = tmp / "ns"
    root.mkdir()
    kind = pa.timestamp("us", tz=zone)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", kind)])
    micros = [s * 1_000_000 + 250_000 for s in seconds]
    rows = pa.table({"id": list(range(len(micros))), "ts": pa.array(micros, kind)}, schema)
    pq.write_table(rows, tmp / "rows.parquet")
    args = ("--root", str(root))
    field = f"{part}(ts) as p"
    result = invoke(
        *args, "add-partition-spec", "--schema", str(tmp / "rows.parquet"), "--field", field
    )
    assert result.exit_code == 0, result.stderr
    result = invoke(*args, "write", "--from", str(tmp / "rows.parquet"))
    assert result.exit_code == 0, result.stderr

    manifest = lance.dataset(str(root / "__manifest"))
    tables = manifest.to_table(filter="read_version IS NOT NULL").to_pylist()
    for table in tables:  # the stored value is the derived expression of every row
        data = lance.dataset(str(root / table["location"]), version=table["read_version"])
        values = data.to_table(columns=["ts"])["ts"].combine_chunks()
        assert set(datafusion_part(part, values)) == {table["partition_field_p"]}, table

    where = f"ts BETWEEN '{literal(low)}' AND '{literal(low + span)}'"
    result = invoke(*args, "partitions", "--where", where, "--json")
    assert result.exit_code == 0, result.stderr
    kept = {m["location"] for m in json.loads(result.stdout)["partitions"]}
    read = []
    for table in tables:
        if table["location"] in kept:
            data = lance.dataset(str(root / table["location"]), version=table["read_version"])
            read += data.to_table(columns=["id", "ts"]).to_pylist()
    start, end = (
        dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=s) for s in (low, low + span)
    )
    expected = sorted(r["id"] for r in rows.to_pylist() if start <= r["ts"] <= end)
    assert sorted(r["id"] for r in read if start <= r["ts"] <= end) == expected, where


def test_check_finds_hours_an_older_writer_took_in_utc(tmp_path):
    """A namespace written when hour() was taken in UTC: `check` names each partition table
    whose value is not `date_part` in the column's zone, and says how to rewrite it."""
    from lancens_cli.service.namespace import Namespace

    root = tmp_path / "ns"
    root.mkdir()
    kind = pa.timestamp("us", tz="America/New_York")
    three_utc = dt.datetime(2025, 6, 1, 3, tzinfo=dt.UTC)  # 23:00 the day before in New York
    rows = pa.table({"id": [1, 2], "ts": pa.array([three_utc, three_utc], kind)})
    pq.write_table(rows, tmp_path / "rows.parquet")
    args = ("--root", str(root))
    spec = ("add-partition-spec", "--schema", str(tmp_path / "rows.parquet"), "--field", "hour(ts)")
    assert invoke(*args, *spec).exit_code == 0
    assert invoke(*args, "write", "--from", str(tmp_path / "rows.parquet")).exit_code == 0
    assert invoke(*args, "check").exit_code == 0
    ns = Namespace.from_properties({"root": str(root)})
    table = next(r for r in ns.snapshot().rows if r.get("read_version"))
    assert table["partition_field_ts_hour"] == 23
    # what the older writer stored: the UTC hour
    ns.manifest.mutate(
        lambda snapshot, edit: edit.replace(table["object_id"], partition_field_ts_hour=3)
    )
    result = invoke(*args, "check", "--json")
    assert result.exit_code == 1
    findings = [f for f in json.loads(result.stdout)["findings"]]
    (found,) = [f for f in findings if f["code"] == "partition_value_disagrees"]
    assert found["location"] == table["location"] and "[23]" in found["message"]
