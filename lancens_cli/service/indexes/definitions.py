"""A namespace's index definitions, kept in `__manifest`'s table metadata, and the rules of
which index type fits which column.

A partitioned namespace keeps, under `INDEXES_KEY`, the JSON list of the indexes every
partition table must have (`[{"name", "column", "type", "params"}]`): `create index` adds one,
a new partition table gets them at its first write (service/partitioned/write.py), and
`prune --optimize-indexes` builds them where a table lacks them. Everything is checked here
before anything is built, so a bad column or a type that does not fit exits 2 with the disk
unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lancens_cli.errors import CatalogDamagedError, InvalidInputError

INDEXES_KEY = "lancens.indexes"

# Lance's index types by what they index; `FTS` is Lance's other name of `INVERTED`
VALUE_TYPES = ("BTREE", "BITMAP", "ZONEMAP", "BLOOMFILTER")
TEXT_TYPES = ("INVERTED", "NGRAM")
LIST_TYPES = ("LABEL_LIST",)
VECTOR_TYPES = ("IVF_PQ", "IVF_FLAT", "IVF_SQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "IVF_HNSW_FLAT")
ALIASES = {"FTS": "INVERTED"}
METRICS = ("l2", "cosine", "dot", "hamming")
# A product quantizer's codebook has 256 centroids per sub-vector: Lance trains it only on at
# least that many non-null vectors, and on fewer commits an index that holds no rows (every
# query scans them). IVF partitions alone train on any number (fewer than asked: one a vector).
PQ_TYPES = ("IVF_PQ", "IVF_HNSW_PQ")
PQ_TRAINING_VECTORS = 256


@dataclass(frozen=True)
class IndexDefinition:
    """One index as a namespace (or a `create index` on one table) defines it."""

    name: str
    column: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def is_vector(self) -> bool:
        return self.type in VECTOR_TYPES

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "column": self.column, "type": self.type, "params": self.params}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexDefinition:
        return cls(
            str(data["name"]), str(data["column"]), str(data["type"]), dict(data.get("params", {}))
        )


def training_vectors(index: IndexDefinition) -> int | None:
    """The non-null vectors a table needs for `index` to hold its rows (None: any number)."""
    return PQ_TRAINING_VECTORS if index.type in PQ_TYPES else None


def index_type(text: str) -> str:
    """Lance's name of an index type as a user writes it (`fts`, `ivf_pq`, `btree`)."""
    name = ALIASES.get(text.strip().upper(), text.strip().upper())
    if name not in (*VALUE_TYPES, *TEXT_TYPES, *LIST_TYPES, *VECTOR_TYPES):
        known = ", ".join(t.lower() for t in (*VALUE_TYPES, *TEXT_TYPES, *LIST_TYPES, "FTS"))
        vectors = ", ".join(t.lower() for t in VECTOR_TYPES)
        raise InvalidInputError(f"--type {text!r}: not an index type (one of {known}, {vectors})")
    return name


def definition(
    column: str, type_text: str, name: str | None, params: dict[str, Any]
) -> IndexDefinition:
    """A definition from the command line's options; vector options only on vector types."""
    kind = index_type(type_text)
    given = {k: v for k, v in params.items() if v is not None}
    if given and kind not in VECTOR_TYPES:
        options = ", ".join("--" + k.replace("_", "-") for k in sorted(given))
        raise InvalidInputError(f"{options}: only for vector indexes, not {kind.lower()}")
    metric = given.get("metric")
    if metric is not None:
        given["metric"] = metric.lower()
        if given["metric"] not in METRICS:
            raise InvalidInputError(f"--metric {metric!r}: one of {', '.join(METRICS)}")
    if "num_sub_vectors" in given and kind not in ("IVF_PQ", "IVF_HNSW_PQ"):
        raise InvalidInputError("--num-sub-vectors: only for ivf_pq and ivf_hnsw_pq indexes")
    if not column or not column.strip():
        raise InvalidInputError("--column: give the column to index")
    if name is not None and (not name.strip() or any(ord(c) < 32 for c in name)):
        raise InvalidInputError(f"--name {name!r}: not a usable index name")
    return IndexDefinition(name or f"{column}_idx", column, kind, given)


def require_fits(index: IndexDefinition, schema: Any, where: str) -> None:
    """The column exists in `schema` (named `where`) and the index type fits its type."""
    if index.column not in schema.names:
        raise InvalidInputError(f"--column {index.column!r}: {where} has no such column")
    column_type = schema.field(index.column).type
    why = _misfit(index, column_type)
    if why is not None:
        raise InvalidInputError(
            f"--type {index.type.lower()} does not fit column {index.column!r} ({column_type}): "
            + why
        )


def _value_type(t: Any) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_decimal(t)
        or pa.types.is_temporal(t)
    )


def _text_type(t: Any) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _misfit(index: IndexDefinition, t: Any) -> str | None:
    """Why the index type cannot index a column of type `t`, or None."""
    if index.type in VALUE_TYPES:
        return None if _value_type(t) else "it indexes numbers, strings, dates and times"
    if index.type in TEXT_TYPES:
        listed = pa.types.is_list(t) or pa.types.is_large_list(t)
        ok = _text_type(t) or (index.type == "INVERTED" and listed and _text_type(t.value_type))
        return None if ok else "it indexes text"
    if index.type in LIST_TYPES:
        listed = pa.types.is_list(t) or pa.types.is_large_list(t)
        return None if listed and _value_type(t.value_type) else "it indexes lists of values"
    if not pa.types.is_fixed_size_list(t) or not pa.types.is_floating(t.value_type):
        return "a vector index needs a fixed-size list of floats"
    subs = index.params.get("num_sub_vectors")
    if subs is not None and t.list_size % subs:
        return f"--num-sub-vectors {subs} does not divide the dimension {t.list_size}"
    return None


def definitions_of(metadata: dict[str, str]) -> list[IndexDefinition]:
    """The namespace's index definitions (none when the key is absent)."""
    text = metadata.get(INDEXES_KEY)
    if not text:
        return []
    try:
        return [IndexDefinition.from_json(d) for d in json.loads(text)]
    except (ValueError, TypeError, KeyError, AttributeError):
        raise CatalogDamagedError(
            f"__manifest metadata {INDEXES_KEY} is not a list of index definitions"
        ) from None


def readable_definitions(metadata: dict[str, str]) -> list[IndexDefinition]:
    """The definitions for what may go on without them (a write): none when damaged
    (`describe` and `prune --optimize-indexes` name the damage)."""
    try:
        return definitions_of(metadata)
    except CatalogDamagedError:
        return []


def with_definition(
    current: list[IndexDefinition], new: IndexDefinition, replace: bool
) -> list[IndexDefinition]:
    """The definitions with `new` added (or replacing one of its name, with `replace`)."""
    same = [d for d in current if d.name == new.name]
    if same and not replace and same[0] != new:
        raise InvalidInputError(
            f"the namespace already defines an index named {new.name!r} "
            f"({same[0].type.lower()} on {same[0].column}); pass --replace to redefine it"
        )
    return [*(d for d in current if d.name != new.name), new]


def definitions_text(definitions: list[IndexDefinition]) -> str:
    return json.dumps([d.to_json() for d in definitions], separators=(",", ":"), sort_keys=True)
