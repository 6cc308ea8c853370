"""What `describe` reports about one Lance table (spec 003 table format, spec 002 layout)."""

from __future__ import annotations

from typing import Any

from lancens_cli.store.protobuf import ManifestFormatError, read_varint
from lancens_cli.store.storage import Storage
from lancens_cli.words import utc_iso

# Lance's table feature flags (spec 003).
FEATURE_NAMES = {
    1: "deletion_files",
    2: "move_stable_row_ids",
    4: "use_v2_format",
    8: "table_config",
}


def manifest_scheme(version_files: list[str]) -> str:
    """V1 `{version}.manifest`, V2 `{u64::MAX - version:020}.manifest`, or mixed (an error)."""
    schemes = set()
    for name in version_files:
        stem = name[: -len(".manifest")] if name.endswith(".manifest") else None
        if not stem or not stem.isdigit():
            continue
        schemes.add("V2" if len(stem) == 20 and int(stem) > 2**63 else "V1")
    if not schemes:
        return "none"
    return schemes.pop() if len(schemes) == 1 else "mixed"


def feature_flags(serialized_manifest: bytes) -> tuple[int, int]:
    """Reader and writer feature flags (Manifest fields 9 and 10) from the protobuf bytes."""
    reader = writer = 0
    position = 0
    data = serialized_manifest
    try:
        while position < len(data):
            key, position = read_varint(data, position)
            field_number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                value, position = read_varint(data, position)
                if field_number == 9:
                    reader = value
                elif field_number == 10:
                    writer = value
            elif wire_type == 2:
                length, position = read_varint(data, position)
                position += length
            elif wire_type == 1:
                position += 8
            elif wire_type == 5:
                position += 4
            else:
                break
    except ManifestFormatError:
        pass  # a truncated message: the flags read before the break
    return reader, writer


def flag_names(value: int) -> list[str]:
    names = [name for bit, name in FEATURE_NAMES.items() if value & bit]
    unknown = value & ~sum(FEATURE_NAMES)
    if unknown:
        names.append(f"unknown({unknown})")
    return names


def describe_dataset(ds: Any, storage: Storage, location: str) -> dict[str, Any]:
    """Everything `describe TABLE` shows, as JSON-ready values."""
    fragments = ds.get_fragments()
    data_files = 0
    deletion_files = []
    for fragment in fragments:
        meta = fragment.metadata
        data_files += len(meta.files)
        deletion = meta.deletion_file
        if deletion is not None:
            deletion_files.append(
                {
                    "fragment": meta.id,
                    "path": deletion.path(meta.id),
                    "type": "bitmap" if deletion.file_type == "bitmap" else "arrow",
                    "deleted_rows": deletion.num_deleted_rows,
                }
            )
    version_files = [e.name for e in storage.list_dir(f"{location}/_versions")]
    bytes_on_storage = sum(size for _, size in storage.walk_files(location))
    reader_flags: int | None
    writer_flags: int | None
    try:
        reader_flags, writer_flags = feature_flags(ds._ds.serialized_manifest())
    except Exception:  # private API; describe still works without the flags
        reader_flags = writer_flags = None
    return {
        "version": ds.version,
        "latest_version": ds.latest_version,
        "rows": ds.count_rows(),
        "fragments": len(fragments),
        "data_files": data_files,
        "deletion_files": deletion_files,
        "deleted_rows": sum(d["deleted_rows"] for d in deletion_files),
        "bytes_on_storage": bytes_on_storage,
        "schema": schema_fields(ds.schema),
        "indices": index_summaries(ds),
        "tags": {name: tag.get("version") for name, tag in sorted(ds.tags.list().items())},
        "branches": sorted(ds.branches.list()),
        "base_paths": [_base_path(b) for b in ds.base_paths().values()],
        "manifest_naming_scheme": manifest_scheme(version_files),
        "reader_feature_flags": _flags(reader_flags),
        "writer_feature_flags": _flags(writer_flags),
        "data_storage_version": ds.data_storage_version,
        "config": dict(ds.config()),
        "metadata": dict(ds.metadata or {}),
    }


def index_summaries(ds: Any) -> list[dict[str, Any]]:
    """Name, type and fields of each index (`/lance.table.BTreeIndexDetails` -> `BTree`)."""
    found = []
    for index in ds.describe_indices():
        kind = (index.type_url or "").rsplit(".", 1)[-1].removesuffix("IndexDetails")
        found.append(
            {
                "name": index.name,
                "type": kind,
                "fields": list(index.field_names),
                "rows": index.num_rows_indexed,
            }
        )
    return sorted(found, key=lambda i: i["name"])


def _flags(value: int | None) -> dict[str, Any] | None:
    return None if value is None else {"value": value, "names": flag_names(value)}


def _base_path(base: Any) -> dict[str, Any]:
    return {
        "id": getattr(base, "id", None),
        "name": getattr(base, "name", None),
        "path": getattr(base, "path", None),
        "is_dataset_root": getattr(base, "is_dataset_root", None),
    }


def schema_fields(schema: Any) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


def list_versions(ds: Any) -> list[dict[str, Any]]:
    found = []
    for entry in ds.versions():
        metadata = entry.get("metadata") or {}
        timestamp = entry.get("timestamp")
        found.append(
            {
                "version": entry.get("version"),
                "timestamp": utc_iso(timestamp) if timestamp is not None else None,
                "rows": _int_or_none(metadata.get("total_rows")),
                "fragments": _int_or_none(metadata.get("total_fragments")),
                "deleted_rows": _int_or_none(metadata.get("total_deletion_file_rows")),
            }
        )
    return found


def _int_or_none(text: Any) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
