"""Which root directories no catalog row names, as `check` and `prune` look for orphans: matched
in Arrow over the rows' columns (service/debris_check.py), never a Python set of a million
locations. Differential against the plain reading of every row, over generated catalogs whose
rename properties are written as any JSON writer may write them (keys escaped too)."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lancens_cli.models import KIND_NAMESPACE, KIND_TABLE
from lancens_cli.service.catalog.manifest_rows import (
    RENAME_INTENT_KEY,
    RENAMED_FROM_KEY,
    rename_intent,
)
from lancens_cli.service.debris_check import _unreferenced_directories
from lancens_cli.service.namespace import Namespace
from lancens_cli.store.manifest import ManifestSnapshot, decode_properties

DIRECTORIES = [f"0000000{i}_t{i}" for i in range(6)] + ["a.lance", "b.lance", "caf\u00e9.lance"]


def _escaped(text: str) -> str:
    """JSON with every character of every key written as a \\u escape."""
    value = json.loads(text)
    keys = {k: "".join(f"\\u{ord(c):04x}" for c in k) for k in value}
    return "{" + ", ".join(f'"{keys[k]}": {json.dumps(v)}' for k, v in value.items()) + "}"


@st.composite
def catalogs(draw: st.DrawFn) -> list[dict]:
    rows = []
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from([KIND_TABLE, KIND_TABLE, KIND_NAMESPACE]))
        location = draw(st.none() | st.sampled_from(DIRECTORIES))
        properties: dict[str, str] = {}
        if draw(st.booleans()):
            properties[RENAMED_FROM_KEY] = draw(st.sampled_from(DIRECTORIES))
        if draw(st.booleans()):
            properties[RENAME_INTENT_KEY] = json.dumps(
                {"location": draw(st.sampled_from(DIRECTORIES)), "to": "x"}
            )
        spelled = draw(st.sampled_from(["plain", "ascii", "escaped", "none", "garbage"]))
        if spelled == "none" or not properties and spelled != "garbage":
            metadata = None
        elif spelled == "garbage":
            metadata = draw(st.sampled_from(["[1]", "not json", '{"lancens.rename_to": 3}']))
        else:
            metadata = json.dumps(properties, ensure_ascii=spelled == "ascii")
            metadata = _escaped(metadata) if spelled == "escaped" else metadata
        rows.append(
            {"object_id": f"o{i}", "object_type": kind, "location": location, "metadata": metadata}
        )
    return rows


def _referenced(rows: list[dict]) -> set[str]:
    """Every row read as it is: the tables' locations and both sides of every rename."""
    found = {r["location"] for r in rows if r["object_type"] == KIND_TABLE and r["location"]}
    for row in rows:
        properties = decode_properties(row["metadata"])
        if RENAMED_FROM_KEY in properties:
            found.add(properties[RENAMED_FROM_KEY])
        intent = rename_intent(row)
        if intent and intent.get("location"):
            found.add(intent["location"])
    return found


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(catalogs(), st.sets(st.sampled_from(DIRECTORIES)))
def test_the_unreferenced_directories_are_those_no_row_names(tmp_path, rows, present):
    root = tmp_path / "root"
    for name in DIRECTORIES:
        (root / name).mkdir(parents=True, exist_ok=True)
        if name not in present:
            (root / name).rmdir()
    root.mkdir(exist_ok=True)
    (root / "a-file").write_text("not a directory")
    schema = pa.schema(
        [(name, pa.string()) for name in ("object_id", "object_type", "location", "metadata")]
    )
    snapshot = ManifestSnapshot(3, pa.Table.from_pylist(rows, schema), {})
    ns = Namespace.from_properties({"root": str(root)})
    found = _unreferenced_directories(ns.storage, snapshot)
    assert sorted(found) == sorted(present - _referenced(rows))
