"""Partition specs, fields and transforms of spec 004, with exact JSON round-trip.

`partition_spec_v<N>` (in the `__manifest` table metadata) is a JSON object
`{"id": N, "fields": [...]}`; each field has `field_id`, `source_ids`, exactly one of
`transform` / `expression`, and `result_type` (a JsonArrowDataType). Keys we do not know are
kept and written back unchanged, so a newer writer's additions survive our rewrites.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import CatalogDamagedError, InvalidInputError
from lancens_cli.schema_json import type_from_json, type_to_json

SPEC_KEY_PREFIX = "partition_spec_v"
SCHEMA_KEY = "schema"
PARTITION_COLUMN_PREFIX = "partition_field_"

TIME_TRANSFORMS = ("year", "month", "day", "hour")
TRANSFORM_TYPES = ("identity", *TIME_TRANSFORMS, "bucket", "multi_bucket", "truncate")

# A field id becomes part of a column name (`partition_field_<id>`) that filters name unquoted.
_FIELD_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _fail(message: str) -> InvalidInputError:
    return InvalidInputError(f"partition spec: {message}")


def _int(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(f"{what} must be an integer >= {minimum}, got {json.dumps(value)}")
    return value


def validate_field_id(field_id: Any) -> str:
    if not isinstance(field_id, str) or not _FIELD_ID.match(field_id):
        raise _fail(
            f"field_id {json.dumps(field_id)} must be letters, digits and _ (not first a digit)"
        )
    return field_id


@dataclass(frozen=True)
class Transform:
    """A well-known transform: `{"type": ..., "num_buckets": N}` / `{"type": ..., "width": W}`."""

    type: str
    num_buckets: int | None = None
    width: int | None = None
    extra: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.type not in TRANSFORM_TYPES:
            known = ", ".join(TRANSFORM_TYPES)
            raise _fail(f"unknown transform {self.type!r} (known: {known})")
        needs_buckets = self.type in ("bucket", "multi_bucket")
        if needs_buckets:
            _int(self.num_buckets, f"{self.type} num_buckets", 1)
        elif self.num_buckets is not None:
            raise _fail(f"{self.type} takes no num_buckets")
        if self.type == "truncate":
            _int(self.width, "truncate width", 1)
        elif self.width is not None:
            raise _fail(f"{self.type} takes no width")

    @classmethod
    def from_json(cls, value: Any) -> Transform:
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise _fail(f'a transform is an object with a "type", got {json.dumps(value)}')
        known = {"type", "num_buckets", "width"}
        return cls(
            value["type"],
            value.get("num_buckets"),
            value.get("width"),
            tuple((k, v) for k, v in value.items() if k not in known),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.num_buckets is not None:
            out["num_buckets"] = self.num_buckets
        if self.width is not None:
            out["width"] = self.width
        out.update(self.extra)
        return out

    def display(self, sources: list[str]) -> str:
        """The readable form `add-partition-spec --field` accepts."""
        if self.type == "identity":
            return sources[0]
        if self.type in ("bucket", "multi_bucket"):
            return f"{self.type}({self.num_buckets}, {', '.join(sources)})"
        if self.type == "truncate":
            return f"truncate({self.width}, {sources[0]})"
        return f"{self.type}({sources[0]})"


@dataclass(frozen=True)
class PartitionField:
    field_id: str
    source_ids: tuple[int, ...]
    result_type: Any  # a pyarrow DataType
    transform: Transform | None = None
    expression: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        validate_field_id(self.field_id)
        if not self.source_ids:
            raise _fail(f"field {self.field_id}: source_ids must not be empty")
        if (self.transform is None) == (self.expression is None):
            raise _fail(f"field {self.field_id}: give exactly one of transform or expression")
        if self.expression is not None and not self.expression.strip():
            raise _fail(f"field {self.field_id}: the expression is empty")
        if self.transform is not None:
            arity = len(self.source_ids)
            if self.transform.type == "multi_bucket" and arity < 1:
                raise _fail(f"field {self.field_id}: multi_bucket needs source columns")
            if self.transform.type != "multi_bucket" and arity != 1:
                raise _fail(
                    f"field {self.field_id}: {self.transform.type} takes one source column, "
                    f"got {arity}"
                )

    @property
    def column(self) -> str:
        """Its `__manifest` column (spec: `partition_field_<field_id>`)."""
        return PARTITION_COLUMN_PREFIX + self.field_id

    def same_definition(self, other: PartitionField) -> bool:
        """Spec: a field with the same source ids and transform (or expression) is the same."""
        return (
            self.source_ids == other.source_ids
            and self.transform == other.transform
            and self.expression == other.expression
        )

    @classmethod
    def from_json(cls, value: Any) -> PartitionField:
        if not isinstance(value, dict):
            raise _fail(f"a partition field is an object, got {json.dumps(value)}")
        for key in ("field_id", "source_ids", "result_type"):
            if key not in value:
                raise _fail(f"a partition field needs {key!r}: {json.dumps(value)}")
        source_ids = value["source_ids"]
        if not isinstance(source_ids, list):
            raise _fail(f"source_ids must be a list of integers, got {json.dumps(source_ids)}")
        expression = value.get("expression")
        if expression is not None and not isinstance(expression, str):
            raise _fail(f"expression must be a string, got {json.dumps(expression)}")
        known = {"field_id", "source_ids", "transform", "expression", "result_type"}
        return cls(
            field_id=validate_field_id(value["field_id"]),
            source_ids=tuple(_int(s, "a source id", 0) for s in source_ids),
            result_type=type_from_json(value["result_type"]),
            transform=(
                Transform.from_json(value["transform"])
                if value.get("transform") is not None
                else None
            ),
            expression=expression,
            extra=tuple((k, v) for k, v in value.items() if k not in known),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"field_id": self.field_id, "source_ids": list(self.source_ids)}
        if self.transform is not None:
            out["transform"] = self.transform.to_json()
        else:
            out["expression"] = self.expression
        out["result_type"] = type_to_json(self.result_type)
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class PartitionSpec:
    id: int
    fields: tuple[PartitionField, ...]
    extra: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        _int(self.id, "the spec id", 1)
        seen: set[str] = set()
        for f in self.fields:
            if f.field_id in seen:
                raise _fail(f"field_id {f.field_id!r} appears twice in spec v{self.id}")
            seen.add(f.field_id)

    @property
    def key(self) -> str:
        """Its `__manifest` metadata key."""
        return f"{SPEC_KEY_PREFIX}{self.id}"

    @property
    def namespace(self) -> str:
        """The spec-version namespace data written under this spec lives in."""
        return f"v{self.id}"

    @classmethod
    def from_json(cls, value: Any) -> PartitionSpec:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise _fail(f"not valid JSON: {exc}") from None
        if not isinstance(value, dict) or "id" not in value or "fields" not in value:
            raise _fail('a partition spec is an object with "id" and "fields"')
        if not isinstance(value["fields"], list):
            raise _fail('"fields" must be a list')
        return cls(
            id=value["id"],
            fields=tuple(PartitionField.from_json(f) for f in value["fields"]),
            extra=tuple((k, v) for k, v in value.items() if k not in ("id", "fields")),
        )

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "fields": [f.to_json() for f in self.fields], **dict(self.extra)}

    def to_text(self) -> str:
        """The compact JSON string stored in the metadata (and shown as Appendix E shows it)."""
        return json.dumps(self.to_json(), separators=(",", ":"))


def specs_from_metadata(metadata: dict[str, str]) -> list[PartitionSpec]:
    """Every `partition_spec_v<N>` in a `__manifest` table metadata, by version."""
    specs = []
    for key, text in metadata.items():
        if key.startswith(SPEC_KEY_PREFIX):
            with damage_of(f"__manifest metadata {key}"):
                suffix = key[len(SPEC_KEY_PREFIX) :]
                spec = PartitionSpec.from_json(text)
                if not suffix.isdigit() or int(suffix) != spec.id:
                    raise _fail(f"it holds a spec with id {spec.id}")
            specs.append(spec)
    return sorted(specs, key=lambda s: s.id)


# The name of a spec-version namespace: `v1`, `v2`, ... (never `v0` or `v01`).
SPEC_NAMESPACE = re.compile(r"^v[1-9][0-9]*$")


@contextmanager
def damage_of(what: str) -> Iterator[None]:
    """Turn a failure to read what `__manifest` records (not JSON, nested too deeply, not a
    spec or schema) into CatalogDamagedError naming `what`: another writer's damage, not the
    user's input."""
    try:
        yield
    except InvalidInputError as exc:
        raise CatalogDamagedError(f"{what} cannot be read: {exc.message}") from None
    except RecursionError:
        raise CatalogDamagedError(f"{what} cannot be read: it is nested too deeply") from None


def all_fields(specs: list[PartitionSpec]) -> dict[str, PartitionField]:
    """Every partition field of every version by field_id (one column each in `__manifest`)."""
    fields: dict[str, PartitionField] = {}
    for spec in specs:
        for f in spec.fields:
            known = fields.get(f.field_id)
            if known is not None and not known.same_definition(f):
                raise _fail(f"field_id {f.field_id!r} means two different things across versions")
            if known is not None and known.result_type != f.result_type:
                raise _fail(f"field_id {f.field_id!r} has two result types across versions")
            fields.setdefault(f.field_id, f)
    return fields
