"""Identifiers and the JSON Arrow schema form."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from spec_appendix import APPENDIX_A

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import Identifier
from lancens_cli.schema_json import schema_from_json, schema_to_json, type_from_json, type_to_json


def test_identifier_round_trip():
    ident = Identifier.parse("a.b.c")
    assert ident.parts == ("a", "b", "c")
    assert ident.object_id == "a$b$c"
    assert ident.parent == Identifier.parse("a.b")
    assert Identifier.from_object_id("a$b$c") == ident
    assert Identifier.parse("x::y", delimiter="::").parts == ("x", "y")
    assert Identifier.parse("").is_root and Identifier.parse(None).is_root
    assert Identifier.parse("a").is_ancestor_of(ident)
    assert not ident.is_ancestor_of(Identifier.parse("a"))


@pytest.mark.parametrize(
    "text",
    [
        "a$b",
        "a/b",
        "a\\b",
        "a..b",
        ".",
        "..",
        "a.",
        "__manifest",
        "a\x00b",
        "a\nb",
        "x%2Fy",
        "x%24y",
        " a",
        "a ",
    ],
)
def test_identifier_rejections(text):
    with pytest.raises(InvalidInputError):
        Identifier.parse(text)


def test_identifier_too_long():
    with pytest.raises(InvalidInputError, match="too long"):
        Identifier.parse("x" * 250)


SPEC_SCHEMA = APPENDIX_A["schema"]  # the partitioning spec's own example


def test_spec_schema_round_trips_exactly():
    schema = schema_from_json(SPEC_SCHEMA)
    assert schema.field("id").type == pa.int64() and not schema.field("id").nullable
    assert schema.field("event_date").type == pa.date32()
    assert schema.field("country").metadata == {b"lance:field_id": b"2"}
    assert schema_to_json(schema) == SPEC_SCHEMA


@pytest.mark.parametrize(
    ("json_type", "arrow_type"),
    [
        ({"type": "string"}, pa.string()),
        ({"type": "double"}, pa.float64()),
        ({"type": "timestamp:us"}, pa.timestamp("us")),
        ({"type": "timestamp", "unit": "ms", "timezone": "UTC"}, pa.timestamp("ms", "UTC")),
        ({"type": "decimal:128:10:2"}, pa.decimal128(10, 2)),
        ({"type": "fixed_size_binary", "length": 16}, pa.binary(16)),
        (
            {
                "type": "fixed_size_list",
                "length": 3,
                "fields": [{"name": "item", "type": {"type": "float32"}}],
            },
            pa.list_(pa.float32(), 3),
        ),
        (
            {"type": "struct", "fields": [{"name": "a", "type": {"type": "int8"}}]},
            pa.struct([("a", pa.int8())]),
        ),
    ],
)
def test_type_spellings(json_type, arrow_type):
    assert type_from_json(json_type) == arrow_type
    # the canonical spelling we write reads back as the same type
    assert type_from_json(json.loads(json.dumps(type_to_json(arrow_type)))) == arrow_type


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"fields": "x"},
        {"fields": [{"name": "a"}]},
        {"fields": [{"name": "a", "type": {"type": "nope"}}]},
        {"fields": [{"name": "a", "type": {"type": "int8"}}, {"name": "a", "type": "int8"}]},
        {"fields": [{"name": "", "type": "int8"}]},
        {"fields": [{"name": "a", "type": "list"}]},
        {"fields": [{"name": "a", "type": "int8", "nullable": "yes"}]},
    ],
)
def test_bad_schemas(document):
    with pytest.raises(InvalidInputError, match="invalid JSON Arrow schema"):
        schema_from_json(document)
