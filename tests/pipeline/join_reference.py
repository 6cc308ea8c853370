"""Partitioned namespaces for `lancens join` and the answer it must give, computed without it.

Namespaces are built through the CLI (`add-partition-spec`, `write`; in-process by default, or
with `run_cli` as a real subprocess); the reference answer is a nested-dict join in plain
Python, so the check does not share the Arrow join the tasks run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from helpers import invoke

from lancens_cli.schema_json import schema_to_json

ON = ("--on", "l.customer_id = r.customer_id")


def build(tmp_path: Path, name: str, table: pa.Table, fields: list[str], cli=invoke) -> str:
    """A partitioned namespace at tmp_path/name holding `table`, partitioned by `fields`."""
    root = tmp_path / name
    root.mkdir()
    schema = tmp_path / f"{name}.schema.json"
    schema.write_text(json.dumps(schema_to_json(table.schema)))
    spec_args = [a for f in fields for a in ("--field", f)]
    done = cli("--root", str(root), "add-partition-spec", "--schema", str(schema), *spec_args)
    assert done.exit_code == 0, done.stderr
    write(root, table, tmp_path, name, cli)
    return str(root)


def write(root: str | Path, table: pa.Table, tmp_path: Path, name: str, cli=invoke) -> None:
    data = tmp_path / f"{name}-{random.randrange(10**9)}.parquet"
    pq.write_table(table, data)
    done = cli("--root", str(root), "write", "--from", str(data))
    assert done.exit_code == 0, done.stderr


def brute_join(
    left: pa.Table, right: pa.Table, lk: list[str], rk: list[str], how: str
) -> list[tuple]:
    """The brute-force answer as sorted tuples of every column (sorted by name)."""
    out = brute_rows(left, right, lk, rk, how)
    names = sorted(out[0]) if out else []
    return sorted(tuple(str(r[n]) for n in names) for r in out)


def brute_rows(
    left: pa.Table, right: pa.Table, lk: list[str], rk: list[str], how: str
) -> list[dict]:
    """Nested-dict join in Python with SQL semantics (a NULL key matches nothing).

    Output columns follow `join`'s rule: a name on both sides becomes l_<name> / r_<name>.
    """
    clash = set(left.column_names) & set(right.column_names)
    lnames = [f"l_{n}" if n in clash else n for n in left.column_names]
    rnames = [f"r_{n}" if n in clash else n for n in right.column_names]
    index: dict[tuple, list[dict]] = {}
    for row in right.to_pylist():
        key = tuple(row[k] for k in rk)
        if None not in key:
            index.setdefault(key, []).append(row)
    out = []
    empty = dict.fromkeys(right.column_names)
    for row in left.to_pylist():
        key = tuple(row[k] for k in lk)
        matches = [] if None in key else index.get(key, [])
        if not matches and how == "left":
            matches = [empty]
        for other in matches:
            values = dict(zip(lnames, row.values(), strict=True))
            values.update(zip(rnames, other.values(), strict=True))
            out.append(values)
    return out


def result_rows(payload: dict) -> list[tuple]:
    names = sorted(payload["columns"])
    return sorted(tuple(str(r[n]) for n in names) for r in payload["rows"])


def orders_and_customers(n: int = 1500, m: int = 600) -> tuple[pa.Table, pa.Table]:
    """Orders keyed by customer (some NULL, some without a customer) and the customers."""
    rng = random.Random(7)
    keys = [None if i % 97 == 0 else rng.randrange(m + 100) for i in range(n)]
    orders = pa.table(
        {
            "order_id": pa.array(range(n), pa.int64()),
            "customer_id": pa.array(keys, pa.int64()),
            "amount": pa.array([rng.randrange(1, 10_000) / 100 for _ in range(n)]),
        }
    )
    customers = pa.table(
        {
            "customer_id": pa.array(range(m), pa.int64()),
            "name": pa.array([f"customer {i}" for i in range(m)]),
        }
    )
    return orders, customers
