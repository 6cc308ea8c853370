"""Rows for the index tests: a partition key, a sentence of two words, a small vector."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

DIM = 8
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("k", pa.string()),
        pa.field("text", pa.string()),
        pa.field("vec", pa.list_(pa.float32(), DIM)),
    ]
)
WORDS = ["apple", "banana", "cherry", "delta", "echo", "falcon", "garnet", "harbor"]


def rows(start: int, n: int, keys: tuple[str, ...] = ("a",), seed: int = 0) -> pa.Table:
    """`n` rows from id `start`: a partition key, a sentence of two words, a random vector."""
    rng = np.random.default_rng(seed + start)
    vectors = rng.standard_normal(n * DIM).astype("float32")
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": [keys[i % len(keys)] for i in ids],
            "text": [f"{WORDS[i % 8]} {WORDS[(i // 8) % 8]} n{i}" for i in ids],
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors), DIM),
        },
        schema=SCHEMA,
    )
