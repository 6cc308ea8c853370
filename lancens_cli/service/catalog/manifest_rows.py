"""The catalog's row vocabulary: how a `__manifest` row is built and what its keys mean.

Kept apart from the services that write rows (create, rename, drop, migrate, check, the
partitioned writes) so that each of them speaks the same words without importing another.
"""

from __future__ import annotations

import json
from typing import Protocol

from lancens_cli.errors import NamespaceAlreadyExistsError, TableAlreadyExistsError
from lancens_cli.models import KIND_NAMESPACE, KIND_TABLE, Identifier
from lancens_cli.store.manifest import ManifestSnapshot, decode_properties, encode_properties

# Table-row metadata keys we use for crash-safe renames (see service/catalog/rename.py).
RENAME_INTENT_KEY = "lancens.rename_to"
RENAMED_FROM_KEY = "lancens.renamed_from"
# Set on a table row in the commit before drop deletes its data (see service/catalog/drop.py).
DROPPING_KEY = "lancens.dropping"


def table_row(object_id: str, location: str, properties: dict[str, str] | None) -> dict:
    return {
        "object_id": object_id,
        "object_type": KIND_TABLE,
        "location": location,
        "metadata": encode_properties(properties),
        "base_objects": None,
    }


# spec 004 Appendix C: partition namespaces and tables (and the spec-version namespaces) carry
# `metadata` `{}`, an object without properties
PARTITION_METADATA = "{}"


def partition_namespace_row(object_id: str, **columns) -> dict:
    """A row of the partitioned layout: a spec-version or partition namespace."""
    return {**namespace_row(object_id, **columns), "metadata": PARTITION_METADATA}


def partition_table_row(object_id: str, location: str, **columns) -> dict:
    """A partition table's row (its `read_*` and partition columns in `columns`)."""
    return {**table_row(object_id, location, None), "metadata": PARTITION_METADATA, **columns}


def namespace_row(object_id: str, properties: dict[str, str] | None = None, **columns) -> dict:
    """A namespace row; `columns` are extra ones (a partition namespace's values)."""
    return {
        "object_id": object_id,
        "object_type": KIND_NAMESPACE,
        "location": None,
        "metadata": encode_properties(properties),
        "base_objects": None,
        **columns,
    }


class _Catalog(Protocol):
    """What `refuse_taken` asks of a namespace (service/namespace.py's `Namespace`)."""

    def kind_of(self, ident: Identifier, snapshot: ManifestSnapshot) -> str | None: ...


def refuse_taken(ns: _Catalog, ident: Identifier, snapshot: ManifestSnapshot) -> None:
    """Raise the right 'already exists' error if anything answers to `ident`."""
    existing = ns.kind_of(ident, snapshot)
    if existing == KIND_NAMESPACE:
        raise NamespaceAlreadyExistsError(f"namespace {ident.display()} already exists")
    if existing == KIND_TABLE:
        raise TableAlreadyExistsError(f"table {ident.display()} already exists")


def rename_intent(row: dict | None) -> dict | None:
    """The pending rename a table row records, if any."""
    if not row or not row.get("metadata"):
        return None
    text = decode_properties(row["metadata"]).get(RENAME_INTENT_KEY)
    try:
        intent = json.loads(text) if text else None
    except ValueError:
        return None
    return intent if isinstance(intent, dict) else None  # another writer's value: no intent
