"""Tables the tests write: one builder per shape of data, shared by every test file that needs it.

The builders are deterministic (a seed, no clock), so a failing test fails the same way again.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable

import pyarrow as pa

INT64 = pa.int64()


def events(
    n: int,
    seed: int = 0,
    start: int = 0,
    *,
    first: dt.date = dt.date(2024, 11, 1),
    days: int = 120,
    countries: tuple[str | None, ...] = ("US", "DE", "FR", None),
    customers: int = 500,
    customer_type: pa.DataType = INT64,
    country: str = "country",
) -> pa.Table:
    """Rows of a partitioned namespace's events: id (from `start`), event_date over `days` days
    from `first`, a country column (named `country`, NULLs among its values) and customer_id."""
    rng = random.Random(seed)
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "event_date": pa.array(
                [first + dt.timedelta(days=rng.randrange(days)) for _ in range(n)], pa.date32()
            ),
            country: pa.array([rng.choice(countries) for _ in range(n)], pa.string()),
            "customer_id": pa.array([rng.randrange(customers) for _ in range(n)], customer_type),
        }
    )


def country_rows(start: int, n: int = 5) -> pa.Table:
    """Up to five rows of id (from `start`) and a country, none NULL."""
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "country": pa.array(["US", "DE", "FR", "US", "DE"][:n], pa.string()),
        }
    )


VECTOR_DIM = 8


def city_vectors(start: int, sizes: dict[str, int], seed: int = 0) -> pa.Table:
    """Rows from id `start`, `sizes[city]` of each city, an embedding (`fixed_size_list` of
    VECTOR_DIM float32) last: partitions of very different sizes for vector index tests."""
    import numpy as np

    cities = [city for city, n in sizes.items() for _ in range(n)]
    vectors = np.random.default_rng(seed + start).standard_normal(len(cities) * VECTOR_DIM)
    return pa.table(
        {
            "id": pa.array(range(start, start + len(cities)), pa.int64()),
            "city": cities,
            "emb": pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.astype("float32")), VECTOR_DIM
            ),
        }
    )


def numbered(n: int = 10) -> pa.Table:
    """A plain table: x = 0..n-1 and s = "v<x>"."""
    return pa.table({"x": list(range(n)), "s": [f"v{i}" for i in range(n)]})


def random_predicate(rng: random.Random, atoms: list[Callable[[], str]], depth: int = 0) -> str:
    """A random filter: an atom, or two joined by AND / OR (nested twice at most), maybe NOT-ed."""
    if depth > 1 or rng.random() < 0.4:
        return rng.choice(atoms)()
    op = rng.choice([" AND ", " OR "])
    left, right = (random_predicate(rng, atoms, depth + 1) for _ in range(2))
    text = f"({left}{op}{right})"
    return f"NOT {text}" if rng.random() < 0.2 else text


def partitioned_root(folder, schema: pa.Schema, *fields: str):
    """An empty partitioned namespace at `folder/ns`: `schema` as its namespace schema and one
    spec of `fields` (`add-partition-spec --field ...` through the CLI)."""
    import pyarrow.parquet as pq
    from helpers import Root, invoke

    root = Root(str(folder / "ns"), {}, folder / "ns")
    root.local_path.mkdir()
    pq.write_table(schema.empty_table(), folder / "schema.parquet")
    spec = [arg for field in fields for arg in ("--field", field)]
    result = invoke(
        *root.args, "add-partition-spec", "--schema", str(folder / "schema.parquet"), *spec
    )
    assert result.exit_code == 0, result.stderr
    return root
