"""Schema evolution of a partitioned namespace (spec 004, Namespace Schema), as pure algebra.

A change is applied to the namespace schema by field id: a rename keeps the id, a widening keeps
it, an added column takes one past the highest id ever used (the current schema and every
earlier one, so a dropped column's id is never handed out again), a drop removes the id.
Applying a change that is already in place does nothing, so a rerun of the same command after
a kill finishes the job instead of failing.

Each partition table is matched to the schema generation it was written under (its column names
and types), which tells which namespace field id each of its columns holds: that is how a table
not yet brought to the current schema is read through it, renamed columns included.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.types as t

from lancens_cli.errors import InvalidInputError, RefusedError
from lancens_cli.partition.schema import (
    FIELD_ID_KEY,
    nested_fields,
    schema_from_text,
    schema_to_text,
    type_text,
    with_field_ids,
)
from lancens_cli.partition.spec import PartitionSpec, damage_of
from lancens_cli.schema_json import TIME_UNITS, TYPE_NAMES, type_from_json, type_to_json

HISTORY_KEY = "lancens.schema_history"  # __manifest metadata: earlier schemas, oldest first


@dataclass(frozen=True)
class Change:
    """One requested change, in the words of the command line."""

    kind: str  # "add", "rename", "drop" or "widen"
    name: str
    value: Any = None  # the type (add, widen) or the new name (rename)

    def text(self) -> str:
        if self.kind == "rename":
            return f"rename {self.name} -> {self.value}"
        if self.kind == "drop":
            return f"drop {self.name}"
        return f"{self.kind} {self.name} {type_words(self.value)}"


@dataclass
class Evolution:
    """The target schema and, per change, whether it changes anything ("applied") or not."""

    schema: Any
    outcomes: list[tuple[Change, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(outcome == "applied" for _, outcome in self.outcomes)


# --- parsing the command line -----------------------------------------------------------------


# `--add` / `--widen` type names beyond the JSON Arrow schema's: a vector, a list
NESTED_TYPE_NAMES = ("fixed_size_list:TYPE:N", "list:TYPE", "large_list:TYPE")


def _type(text: str, where: str) -> Any:
    head, _, rest = text.strip().partition(":")
    try:
        if head.lower() == "fixed_size_list":
            inner, _, size = rest.rpartition(":")
            if not size.strip().isdigit() or int(size) < 1:
                raise InvalidInputError("a vector needs a positive length")
            return pa.list_(_type(inner, where), int(size))
        if head.lower() in ("list", "large_list") and rest:
            maker = pa.list_ if head.lower() == "list" else pa.large_list
            return maker(_type(rest, where))
        return type_from_json({"type": text.strip()})
    except InvalidInputError:
        raise InvalidInputError(
            f"{where}: unknown type {text.strip()!r} (valid types: "
            f"{', '.join((*TYPE_NAMES, *NESTED_TYPE_NAMES))}; UNIT is {', '.join(TIME_UNITS)}; "
            "e.g. fixed_size_list:float32:768 for an embedding)"
        ) from None


def type_words(kind: Any) -> str:
    """A type as `--add` spells it (`fixed_size_list:float32:768`)."""
    if t.is_fixed_size_list(kind):
        return f"fixed_size_list:{type_words(kind.value_type)}:{kind.list_size}"
    if t.is_list(kind) or t.is_large_list(kind):
        return f"{'large_list' if t.is_large_list(kind) else 'list'}:{type_words(kind.value_type)}"
    return type_to_json(kind)["type"]


def parse_changes(
    adds: list[str], renames: list[str], drops: list[str], widens: list[str]
) -> list[Change]:
    """The changes, in the order: drops, renames, widenings, adds (so a dropped or renamed
    name may be taken by an added column in the same command). None at all: only bring the
    partition tables to the current schema."""
    changes = [Change("drop", _name(d, f"--drop {d!r}")) for d in drops]
    for text in renames:
        old, new = _pair(text, "--rename", "old=new")
        changes.append(Change("rename", old, new))
    for text in widens:
        name, kind = _pair(text, "--widen", "name=type")
        changes.append(Change("widen", name, _type(kind, f"--widen {text!r}")))
    for text in adds:
        parts = text.strip().split(None, 1)
        if len(parts) != 2:
            raise InvalidInputError(f"--add {text!r}: write it as 'name type', e.g. 'score int64'")
        changes.append(
            Change("add", _name(parts[0], f"--add {text!r}"), _type(parts[1], f"--add {text!r}"))
        )
    return changes


def _name(text: str, where: str) -> str:
    name = text.strip()
    if not name or any(c in name for c in "\0\n\r\t") or "." in name:
        raise InvalidInputError(f"{where}: {text!r} is not a top-level column name")
    return name


def _pair(text: str, option: str, form: str) -> tuple[str, str]:
    left, sep, right = text.partition("=")
    if not sep or not left.strip() or not right.strip():
        raise InvalidInputError(f"{option} {text!r}: write it as {form}")
    return _name(left, f"{option} {text!r}"), right.strip()


# --- type promotion ---------------------------------------------------------------------------

_INTS = ("int8", "int16", "int32", "int64")


def can_widen(old: Any, new: Any) -> bool:
    """The promotions a widening may make: signed integers to a wider one, float32 to
    float64, date32 to a timestamp without time zone (Iceberg's list, which spec 004's
    type-promotion resistance is built for)."""
    if str(old) in _INTS and str(new) in _INTS:
        return _INTS.index(str(new)) > _INTS.index(str(old))
    if old == pa.float32():
        return new == pa.float64()
    if old == pa.date32():
        return t.is_timestamp(new) and new.tz is None
    return False


def _widen_refusal(name: str, fid: int, old: Any, new: Any, spec: PartitionSpec | None) -> str:
    """Why widening this column would change the partition its rows go to ("" if it would not).

    identity and truncate keep the source type as the field's result type, so a wider source
    no longer fits the `partition_field_*` column; bucket hashes a date as days and a timestamp
    as microseconds (integers of every width hash alike).
    """
    if spec is None:
        return ""
    for f in spec.fields:
        if fid not in f.source_ids or f.transform is None:
            continue
        kind = f.transform.type
        if kind in ("identity", "truncate"):
            return (
                f"{name} is the source of {kind} partition field {f.field_id!r} of spec "
                f"v{spec.id}, whose values keep the column's type; add a spec that does not "
                "partition on it as is first"
            )
        if "bucket" in kind and t.is_date(old) and not t.is_date(new):
            return (
                f"{name} is the source of {kind} partition field {f.field_id!r} of spec "
                f"v{spec.id}: a date and a timestamp hash to different buckets"
            )
    return ""


# --- applying changes -------------------------------------------------------------------------


def _id(f: Any) -> int:
    return int(f.metadata[FIELD_ID_KEY.encode()].decode())


def _with_id(f: Any, fid: int) -> Any:
    return f.with_metadata({**(f.metadata or {}), FIELD_ID_KEY.encode(): str(fid).encode()})


def highest_id(schema: Any, history: list[Any]) -> int:
    """The highest field id any generation of the namespace schema ever used."""
    ids = [_id(f) for s in [schema, *history] for f in nested_fields(list(s)) if f.metadata]
    return max(ids, default=-1)


def evolve(
    schema: Any, history: list[Any], changes: list[Change], spec: PartitionSpec | None
) -> Evolution:
    """The schema after `changes` (RefusedError / InvalidInputError for a change not allowed)."""
    fields = list(schema)
    next_id = highest_id(schema, history) + 1
    ever = {f.name for s in history for f in s}
    result = Evolution(schema)

    def find(name: str) -> int | None:
        return next((i for i, f in enumerate(fields) if f.name == name), None)

    def unknown(name: str) -> InvalidInputError:
        names = ", ".join(f.name for f in fields)
        return InvalidInputError(f"column {name!r} is not in the namespace schema ({names})")

    for change in changes:
        at = find(change.name)
        outcome = "applied"
        if change.kind == "drop":
            if at is None:
                if change.name not in ever:
                    raise unknown(change.name)
                outcome = "already"
            else:
                del fields[at]
                if not fields:
                    raise RefusedError("cannot drop every column of the namespace schema")
        elif change.kind == "rename":
            target = find(change.value)
            if at is not None and target is None:
                fields[at] = fields[at].with_name(change.value)
            elif at is None and target is not None:
                outcome = "already"
            elif at is None:
                raise unknown(change.name)
            else:
                raise InvalidInputError(
                    f"--rename {change.name}={change.value}: column {change.value!r} exists "
                    "already; drop it first or choose another name"
                )
        elif change.kind == "widen":
            if at is None:
                raise unknown(change.name)
            old = fields[at].type
            if old == change.value:
                outcome = "already"
            elif not can_widen(old, change.value):
                raise RefusedError(
                    f"--widen {change.name}: {old} -> {change.value} is not a widening "
                    "(allowed: int8 -> int16 -> int32 -> int64, float32 -> float64, "
                    "date32 -> timestamp)"
                )
            else:
                why = _widen_refusal(change.name, _id(fields[at]), old, change.value, spec)
                if why:
                    raise RefusedError(f"--widen {change.name}: {why}")
                fields[at] = fields[at].with_type(change.value)
        else:  # add
            if at is not None:
                if fields[at].type == change.value and _id(fields[at]) >= _first_new(
                    schema, history
                ):
                    outcome = "already"
                else:
                    raise InvalidInputError(
                        f"--add {change.name}: the namespace schema has a column "
                        f"{change.name!r} already ({fields[at].type})"
                    )
            else:  # a list's element takes the id after it (partition/schema.py)
                added = _with_id(pa.field(change.name, change.value), next_id)
                added = with_field_ids(pa.schema([added])).field(0)
                fields.append(added)
                next_id += len(nested_fields([added]))
        result.outcomes.append((change, outcome))
    result.schema = pa.schema(fields, metadata=schema.metadata)
    return result


def _first_new(schema: Any, history: list[Any]) -> int:
    """Ids from here on were added by the last evolution (what a rerun of `--add` finds)."""
    if not history:
        return highest_id(schema, []) + 1
    return highest_id(history[-1], history[:-1]) + 1


# --- generations and reading through ----------------------------------------------------------


def history_from_metadata(metadata: dict[str, str]) -> list[Any]:
    text = metadata.get(HISTORY_KEY)
    if not text:
        return []
    with damage_of(f"__manifest metadata {HISTORY_KEY}"):
        try:
            documents = json.loads(text)
        except ValueError:
            raise InvalidInputError("it is not valid JSON") from None
        if not isinstance(documents, list):
            raise InvalidInputError("it is not a list of schemas")
        return [schema_from_text(json.dumps(d)) for d in documents]


def history_text(history: list[Any]) -> str:
    return json.dumps([json.loads(schema_to_text(s)) for s in history], separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def shape(schema: Any) -> tuple[tuple[str, str], ...]:
    """What a table's schema is compared by: column names and types, in order (a list's
    element by its type, not its name: decision 27 in docs/decisions.md). Kept for the last
    schemas asked about: a feed or a read asks it of every table, and equal schemas (names,
    types and nullability) have one shape."""
    return tuple((f.name, type_text(f.type)) for f in schema)


def generation_of(table_schema: Any, schema: Any, history: list[Any]) -> Any | None:
    """The newest namespace schema generation the table's columns are exactly those of."""
    wanted = shape(table_schema)
    for candidate in [schema, *reversed(history)]:
        if shape(candidate) == wanted:
            return candidate
    return None


def column_sources(table_schema: Any, schema: Any, history: list[Any]) -> dict[str, str | None]:
    """For each namespace column, the table column holding it (None: the table lacks it).

    Matched by field id through the table's generation; a table of no known generation
    (written by another tool) is matched by name.
    """
    generation = generation_of(table_schema, schema, history)
    if generation is None:
        names = set(table_schema.names)
        return {f.name: f.name if f.name in names else None for f in schema}
    by_id = {_id(f): f.name for f in generation}
    return {f.name: by_id.get(_id(f)) for f in schema}


@dataclass
class TableSteps:
    """What brings one partition table's schema to the namespace schema."""

    drop: list[str] = field(default_factory=list)
    rename: list[tuple[str, str]] = field(default_factory=list)
    cast: list[tuple[str, Any]] = field(default_factory=list)
    add: list[Any] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.drop or self.rename or self.cast or self.add)


def table_steps(table_schema: Any, schema: Any, history: list[Any]) -> TableSteps:
    """Drops, renames, casts and null columns taking the table to `schema`."""
    sources = column_sources(table_schema, schema, history)
    kept = {source for source in sources.values() if source is not None}
    steps = TableSteps(drop=[n for n in table_schema.names if n not in kept])
    types = {f.name: f.type for f in table_schema}
    for f in schema:
        source = sources[f.name]
        if source is None:
            steps.add.append(f.remove_metadata().with_nullable(True))
            continue
        if source != f.name:
            steps.rename.append((source, f.name))
        if types[source] != f.type:
            steps.cast.append((f.name, f.type))
    return steps
