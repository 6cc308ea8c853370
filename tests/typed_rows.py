"""A namespace's rows of every type a user keeps, with NULLs everywhere, and generated
conditions over them (hypothesis), for tests that check an answer against DuckDB: integers at
their extremes, floats with NaN and infinities, decimal(38,10), strings with tabs and unicode,
binary, booleans, far dates, instants and wall times before 1970, an embedding
`fixed_size_list<float32>`, a list, a map, a struct holding an instant and a struct."""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

UTC = dt.UTC
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i8", pa.int8()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(38, 10)),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("flag", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("emb", pa.list_(pa.float32(), 4)),
        ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.int64())),
        (
            "st",
            pa.struct(
                [
                    ("x", pa.int32()),
                    ("at", pa.timestamp("us", tz="UTC")),
                    ("inner", pa.struct([("y", pa.string())])),
                ]
            ),
        ),
    ]
)
STRINGS = ["", "a", "it's", "tab\there", "back\\slash", "ünï", "日本", "zz"]
DATES = [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(2020, 2, 29), dt.date(9999, 12, 31)]
STAMPS = [
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1900, 1, 1, 0, 0, 0, 1),
    dt.datetime(2020, 6, 1, 12, 30),
    dt.datetime(2025, 3, 9, 2, 30),  # New York's spring gap
    dt.datetime(2025, 11, 2, 1, 30),  # and its fall overlap
]
DECIMALS = [
    Decimal("1234567890123456789012345678.0123456789"),
    Decimal("-9999999999999999999999999999.9999999999"),
    Decimal("0E-10"),
    Decimal("-1.5000000000"),
]
I64 = (-(2**63), 2**63 - 1)
ZONES = ["America/New_York", "Asia/Kolkata"]


def make_rows(n: int, seed: int, start: int) -> pa.Table:
    rng = random.Random(seed)

    def maybe(values):
        return None if rng.random() < 0.15 else rng.choice(values)

    rows = []
    for i in range(n):
        stamp = maybe(STAMPS)
        rows.append(
            {
                "id": start + i,
                "i8": maybe([-128, 127, 0, 5]),
                "i32": maybe([-(2**31), 2**31 - 1, 0, 7]),
                "i64": maybe([*I64, 0, 42]),
                "f32": maybe([0.0, -0.0, 0.1, math.inf, math.nan]),
                "f64": maybe([0.1, -1.5, math.inf, -math.inf, math.nan, 3.4e38]),
                "dec": maybe(DECIMALS),
                "s": maybe(STRINGS),
                "b": maybe([b"", b"\x00\xff", b"abc"]),
                "flag": maybe([True, False]),
                "d": maybe(DATES),
                "ts": None if stamp is None else stamp.replace(tzinfo=UTC),
                "ntz": maybe(STAMPS),
                "emb": None if rng.random() < 0.1 else [rng.uniform(-1, 1) for _ in range(4)],
                "tags": maybe([[], ["a"], ["b", None]]),
                "attrs": maybe([[], [("k", 1)], [("k", None), ("j", -2)]]),
                "st": None
                if rng.random() < 0.15
                else {
                    "x": maybe([1, 2]),
                    "at": maybe([s.replace(tzinfo=UTC) for s in STAMPS]),
                    "inner": maybe([{"y": "q"}, {"y": None}]),
                },
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


ATOM_COLUMNS = {
    "id": st.integers(-5, 1200),
    "i8": st.sampled_from([-128, 127, 0, 5, 6]),
    "i32": st.sampled_from([-(2**31), 2**31 - 1, 0, 7]),
    "i64": st.sampled_from([*I64, 0, 42, 43]),
}


@st.composite
def atoms(draw) -> str:
    column = draw(st.sampled_from(sorted(ATOM_COLUMNS)))
    values = ATOM_COLUMNS[column]
    shape = draw(st.sampled_from(["cmp", "cmp", "in", "between", "null"]))
    if shape == "null":
        return f"{column} {draw(st.sampled_from(['IS NULL', 'IS NOT NULL']))}"
    if shape == "in":
        items = [str(draw(values)) for _ in range(draw(st.integers(1, 3)))]
        return f"{column} IN ({', '.join(items)})"
    if shape == "between":
        low, high = sorted([draw(values), draw(values)])
        return f"{column} BETWEEN {low} AND {high}"
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    return f"{column} {op} {draw(values)}"


@st.composite
def conditions(draw, depth: int = 0) -> str:
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        return draw(atoms())
    word = draw(st.sampled_from(["AND", "OR"]))
    parts = [draw(conditions(depth + 1)) for _ in range(draw(st.integers(2, 3)))]
    text = f" {word} ".join(f"({p})" for p in parts)
    return f"NOT ({text})" if draw(st.booleans()) else text


def few_examples(count: int) -> settings:
    """Hypothesis settings of a differential test over a namespace a fixture built once: the
    same examples every run, no example database, the fixture shared by every example."""
    return settings(
        max_examples=count,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
