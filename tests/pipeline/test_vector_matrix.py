"""A namespace of embeddings through every command, as a user runs them.

One partitioned namespace whose schema has a vector column (`fixed_size_list<float32>`) before
list, struct and map columns goes through write, ingest, scan, join, evolve-schema, indexes
(ivf_pq, ivf_hnsw_sq, btree), diff, incremental reads, restore and prune. After every step:
the command exits 0, `check` is healthy, every published partition table carries the namespace
schema's field ids exactly as Lance numbers them, and an exact vector search on each table
answers as a numpy brute force over the rows read back. The reference namespace and lancedb
read the same tables.
"""

from __future__ import annotations

import json

import lance
import lance_namespace as ln
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from helpers import invoke

from lancens_cli.partition.schema import field_ids_by_path, lance_ids_by_path
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import layout_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DIM = 8
CITIES = ("Oslo", "Lima", "Pune")


def batch(start: int, n: int, *, evolved: bool = False, last: bool = False) -> pa.Table:
    """`n` rows from id `start`: the vector second (or `last`), then list, struct and map
    columns; after the evolution `score` is `rating`, `tags` is gone and `note` is new. Oslo
    has most rows: a product quantizer trains on its table only (256 vectors)."""
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + n)
    vectors = rng.standard_normal(n * DIM).astype("float32")
    columns = {
        "id": pa.array(ids, pa.int64()),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(vectors), DIM),
        "city": pa.array([CITIES[i % 7] if i % 7 < 3 else "Oslo" for i in ids]),
        "tags": pa.array([[f"t{i}", "x"] if i % 5 else None for i in ids]),
        "s": pa.array([{"a": int(i), "b": str(i)} for i in ids]),
        "m": pa.array([[("k", int(i))] for i in ids], pa.map_(pa.string(), pa.int64())),
        "score": pa.array(rng.random(n)),
    }
    if evolved:
        columns["rating"] = columns.pop("score")
        del columns["tags"]
        columns["note"] = pa.array(ids % 7, pa.int32())
    if last:
        columns["emb"] = columns.pop("emb")
    return pa.table(columns)


class Matrix:
    """The namespace under test and the checks every step ends with."""

    def __init__(self, tmp_path) -> None:
        self.tmp = tmp_path
        self.root = tmp_path / "ns"
        self.args = ("--root", str(self.root))
        self.files = 0

    def ok(self, *args: str) -> dict | str:
        result = invoke(*self.args, *args)
        assert result.exit_code == 0, (args, result.stderr[-2000:])
        return result.stdout

    def file(self, table: pa.Table, kind: str = "parquet") -> str:
        """The rows as a file of `kind` (parquet, arrow, lance), as users hand them over."""
        self.files += 1
        path = self.tmp / f"in{self.files}.{kind}"
        if kind == "parquet":
            pq.write_table(table, path)
        elif kind == "arrow":
            feather.write_feather(table, path)
        else:
            lance.write_dataset(table, path)
        return str(path)

    def published(self) -> list[tuple[dict, lance.LanceDataset]]:
        ns = Namespace.from_properties({"root": str(self.root)})
        out = []
        for row in ns.snapshot().rows:
            if row["object_type"] == "table" and row.get("read_version"):
                ds = lance.dataset(str(self.root / row["location"]), version=row["read_version"])
                out.append((row, ds))
        return out

    def healthy(self, step: str) -> None:
        result = invoke(*self.args, "check", "--json")
        assert result.exit_code == 0, (step, result.stdout)
        ns = Namespace.from_properties({"root": str(self.root)})
        wanted = field_ids_by_path(layout_of(ns.snapshot()).schema)
        for row, ds in self.published():
            assert lance_ids_by_path(ds.lance_schema) == wanted, (step, row["object_id"])
            self.search_is_exact(ds, step)

    def search_is_exact(self, ds: lance.LanceDataset, step: str) -> None:
        rows = ds.to_table(columns=["id", "emb"])
        if rows.num_rows == 0:
            return
        vectors = np.stack(rows.column("emb").to_numpy(zero_copy_only=False))
        query = vectors[0] + 0.01
        k = min(5, rows.num_rows)
        distances = ((vectors - query) ** 2).sum(axis=1)
        expected = [rows.column("id")[int(i)].as_py() for i in np.argsort(distances)[:k]]
        nearest = {"column": "emb", "q": query, "k": k, "use_index": False}
        found = ds.to_table(columns=["id"], nearest=nearest).column("id").to_pylist()
        assert found == expected, (step, found, expected)

    def rows(self) -> list[dict]:
        """Every published row, by id."""
        tables = [ds.to_table() for _, ds in self.published()]
        return sorted(pa.concat_tables(tables, promote_options="default").to_pylist(), key=_id)

    def version(self) -> int:
        return Namespace.from_properties({"root": str(self.root)}).snapshot().version


def _id(row: dict) -> int:
    return row["id"]


def scanned(m: Matrix, *args: str) -> list[dict]:
    """`scan ... --to DIR --format parquet`, read back (vectors come out as lists)."""
    out = m.tmp / f"scan{m.files}"
    m.files += 1
    m.ok("scan", *args, "--to", str(out), "--format", "parquet")
    return sorted(pq.read_table(out).to_pylist(), key=_id)


@pytest.mark.parametrize(
    ("kind", "last"), [("parquet", False), ("arrow", True), ("lance", False)], ids=str
)
def test_a_namespace_of_embeddings_through_every_command(spark, tmp_path, kind, last):
    """The schema from a Parquet file, an Arrow IPC file or a Lance table, the vector before
    or after the other columns; the first write from the same kind of file."""
    m = Matrix(tmp_path)
    first = batch(0, 400, last=last)
    m.ok("init")
    m.ok("add-partition-spec", "--schema", m.file(first, kind), "--field", "city")
    m.ok("write", "--from", m.file(first, kind))
    m.healthy("write")
    after_write = m.version()

    m.ok("ingest", m.file(batch(1000, 45, last=last)))
    m.healthy("ingest")
    stored = m.rows()
    assert [r["id"] for r in stored] == list(range(400)) + list(range(1000, 1045))

    # scan: every row and its vector, exactly; counts, whole and pruned
    read = scanned(m)
    assert [r["emb"] for r in read] == [r["emb"] for r in stored]
    assert [r["m"] for r in read] == [r["m"] for r in stored]
    assert json.loads(m.ok("scan", "--count", "--json"))["count"] == len(stored)
    oslo = json.loads(m.ok("scan", "--count", "--where", "city = 'Oslo'", "--json"))["count"]
    assert oslo == sum(r["city"] == "Oslo" for r in stored)

    # join: a self-join on id matches every row once; the vectors come back as arrays
    on = ("--on", "l.city = r.city", "--on", "l.id = r.id")
    joined = json.loads(invoke("join", str(m.root), str(m.root), *on, "--count", "--json").stdout)
    assert joined["count"] == len(stored)
    out = m.tmp / "joined"
    columns = ("--columns", "l_id,l_emb,r_emb")
    done = invoke(
        "join", str(m.root), str(m.root), *on, *columns, "--to", str(out), "--format", "parquet"
    )
    assert done.exit_code == 0, done.stderr[-2000:]
    pairs = sorted(pq.read_table(out).to_pylist(), key=lambda r: r["l_id"])
    assert [(r["l_id"], r["l_emb"], r["r_emb"]) for r in pairs] == [
        (r["id"], r["emb"], r["emb"]) for r in stored
    ]

    # evolve around the vector, then write in the new shape
    m.ok("evolve-schema", "--rename", "score=rating", "--drop", "tags", "--add", "note int32")
    m.healthy("evolve-schema")
    m.ok("write", "--from", m.file(batch(2000, 30, evolved=True)))
    m.healthy("write after evolve-schema")

    # indexes: two vector index types and a scalar one, across every partition table
    pq_index = "--type ivf_pq --name emb_pq --num-partitions 2 --num-sub-vectors 2"
    m.ok("create", "index", "--column", "emb", *pq_index.split())
    m.healthy("create index ivf_pq")
    hnsw_index = "--type ivf_hnsw_sq --name emb_hnsw --num-partitions 2"
    m.ok("create", "index", "--column", "emb", *hnsw_index.split())
    m.ok("create", "index", "--column", "id", "--type", "btree")
    m.healthy("create index")
    before_more = m.version()
    m.ok("write", "--from", m.file(batch(3000, 12, evolved=True)))
    m.healthy("write after indexes")

    # history: what the last write added, as diff and as an incremental read
    diff = json.loads(m.ok("diff", "--from-version", str(before_more), "--json"))
    assert sum(c["rows_delta"] for c in diff["changed"]) == 12
    since = json.loads(m.ok("scan", "--since-version", str(before_more), "--count", "--json"))[
        "count"
    ]
    assert since == 12
    new_rows = scanned(m, "--since-version", str(before_more))
    assert [r["id"] for r in new_rows] == list(range(3000, 3012))

    # restore to before the last write: its rows are gone, the rest reads as before
    kept = [r for r in m.rows() if r["id"] < 3000]
    restored = json.loads(m.ok("restore", "--to-version", str(before_more), "--yes", "--json"))
    assert restored["changes"] and not any(c["to_current_schema"] for c in restored["changes"])
    m.healthy("restore")
    assert [r["id"] for r in m.rows()] == [r["id"] for r in kept]
    assert [r["emb"] for r in m.rows()] == [r["emb"] for r in kept]
    assert after_write < before_more

    # maintenance: compaction and index upkeep keep every row and id
    m.ok("prune", "--compact", "--optimize-indexes", "--yes", "--older-than", "1h", "--grace", "1h")
    m.healthy("prune --compact --optimize-indexes")
    assert [r["emb"] for r in m.rows()] == [r["emb"] for r in kept]

    # the reference namespace and lancedb read every partition table, vectors included
    import lancedb
    from lance.namespace import DirectoryNamespace

    reference = DirectoryNamespace(root=str(m.root))
    db = lancedb.connect_namespace("dir", {"root": str(m.root)})
    for row, ds in m.published():
        ident = row["object_id"].split("$")
        described = reference.describe_table(ln.DescribeTableRequest(id=ident))
        assert described.location.rstrip("/").endswith(row["location"])
        table = db.open_table(ident[-1], namespace_path=ident[:-1])
        assert table.count_rows() == ds.count_rows()
        rows = ds.to_table(columns=["id", "emb"])
        vectors = np.stack(rows.column("emb").to_numpy(zero_copy_only=False))
        query = vectors[-1] + 0.01
        nearest = np.argsort(((vectors - query) ** 2).sum(axis=1))[:3]
        search = table.search(query, vector_column_name="emb").bypass_vector_index().limit(3)
        assert [h["id"] for h in search.to_list()] == [rows["id"][int(i)].as_py() for i in nearest]
