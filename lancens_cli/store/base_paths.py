"""Relocating a table's base paths after its directory moved (spec 002, Dataset Portability).

A branch (`tree/<branch>/`) and a shallow clone reach files of another dataset through a base
path that holds that dataset's absolute location. When a table directory moves, every manifest
below it whose base paths point into the old location must name the new one, or the branch (every
version of it) stops resolving. Spec 002 calls this a light metadata change: only the
`base_paths` field of the manifest changes, no data file.

pylance 14.0.2 offers no operation that changes an existing base path (`add_bases` only adds,
and a new commit would leave every older version of a branch broken), so each manifest file is
rewritten. A manifest file ends with `[u32 length][Manifest protobuf][u64 position][u16 major]
[u16 minor]["LANC"]`; everything before the protobuf (index and transaction sections, addressed
by absolute offsets) is kept byte for byte, and inside the protobuf only field 4 (`path`) of the
`base_paths` entries (field 18) changes; every other byte is copied as it was. Anything we do not
understand stops the rewrite before a byte is written.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass

from lancens_cli.errors import RefusedError
from lancens_cli.store.manifest_names import version_from_manifest_name
from lancens_cli.store.protobuf import (
    ManifestFormatError,
    encode_varint,
    field_spans,
    has_field,
    read_varint,
    value_end,
)
from lancens_cli.store.storage import Storage

MAGIC = b"LANC"
_FOOTER = 16  # u64 position, u16 major, u16 minor, 4 bytes magic
MANIFEST_BASE_PATHS = 18
BASE_PATH_PATH = 4


def _fields(data: bytes):
    """(field number, wire type, raw bytes of the whole field, payload) of one message level."""
    position = 0
    while position < len(data):
        start = position
        key, position = read_varint(data, position)
        number, wire = key >> 3, key & 7
        end = value_end(data, position, wire)
        if end > len(data):
            raise ManifestFormatError("a field runs past the end of the manifest")
        payload = data[read_varint(data, position)[1] : end] if wire == 2 else b""
        yield number, wire, data[start:end], payload
        position = end


def _length_field(number: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def base_path_strings(manifest: bytes) -> list[str]:
    """The `path` of every base path in a Manifest protobuf."""
    return [
        manifest[start:end].decode("utf-8")
        for entry_start, entry_end in field_spans(manifest, 0, len(manifest), MANIFEST_BASE_PATHS)
        for start, end in field_spans(manifest, entry_start, entry_end, BASE_PATH_PATH)
    ]


MANIFEST_FRAGMENTS = 2
FRAGMENT_FILES = 2
DATA_FILE_BASE_ID = 7


def own_data_files(manifest: bytes) -> int:
    """How many data files of a Manifest protobuf lie in the table's own `data/`: those with no
    `base_id` (a file with one lives below another base path, spec 002)."""
    count = 0
    for start, end in field_spans(manifest, 0, len(manifest), MANIFEST_FRAGMENTS):
        for file_start, file_end in field_spans(manifest, start, end, FRAGMENT_FILES):
            count += not has_field(manifest, file_start, file_end, DATA_FILE_BASE_ID)
    return count


def rewrite_manifest_message(manifest: bytes, relocate: Callable[[str], str | None]) -> bytes:
    """The Manifest protobuf with each base path `relocate` maps to a new path changed."""
    out = bytearray()
    for number, wire, raw, payload in _fields(manifest):
        if number != MANIFEST_BASE_PATHS or wire != 2:
            out += raw
            continue
        entry = bytearray()
        for sub, sub_wire, sub_raw, value in _fields(payload):
            is_path = sub == BASE_PATH_PATH and sub_wire == 2
            new = relocate(value.decode("utf-8")) if is_path else None
            entry += sub_raw if new is None else _length_field(BASE_PATH_PATH, new.encode("utf-8"))
        out += raw if bytes(entry) == payload else _length_field(MANIFEST_BASE_PATHS, bytes(entry))
    return bytes(out)


def split_manifest_file(data: bytes) -> tuple[bytes, bytes, bytes]:
    """(bytes before the protobuf, the Manifest protobuf, the version bytes of the footer)."""
    if len(data) < _FOOTER + 4 or data[-4:] != MAGIC:
        raise ManifestFormatError("no Lance manifest footer")
    position, major, minor = struct.unpack("<QHH", data[-_FOOTER:-4])
    if position + 4 > len(data) - _FOOTER:
        raise ManifestFormatError("the manifest position points past the footer")
    (length,) = struct.unpack("<I", data[position : position + 4])
    if position + 4 + length != len(data) - _FOOTER:
        raise ManifestFormatError("the manifest protobuf is not the last section of the file")
    message = data[position + 4 : position + 4 + length]
    return data[:position], message, struct.pack("<HH", major, minor)


def rewrite_manifest_file(data: bytes, relocate: Callable[[str], str | None]) -> bytes | None:
    """The rewritten manifest file, or None when no base path of it moves."""
    prefix, message, versions = split_manifest_file(data)
    if not any(relocate(path) is not None for path in base_path_strings(message)):
        return None
    new = rewrite_manifest_message(message, relocate)
    moved = [(path, relocate(path)) for path in base_path_strings(message)]
    expected = [path if new is None else new for path, new in moved]
    if base_path_strings(new) != expected:
        raise ManifestFormatError("the rewritten manifest does not parse back")
    position = len(prefix)
    return (
        prefix + struct.pack("<I", len(new)) + new + struct.pack("<Q", position) + versions + MAGIC
    )


def prefix_mover(
    old: list[str], new: str, canonical: Callable[[str], str | None] | None = None
) -> Callable[[str], str | None]:
    """Maps a path equal to or below one of the `old` spellings to the same place below `new`.

    With `canonical`, a path is also compared in its one canonical form (a real local path, a
    normalised object key), so a base path spelt through a symlinked root, a `//` or a `..`
    moves as well as the spellings Lance writes.
    """
    olds = [o.rstrip("/") for o in old if o]
    canonical_olds = (
        [c.rstrip("/") for c in map(canonical, olds) if c] if canonical is not None else []
    )

    def below(path: str, prefixes: list[str]) -> str | None:
        for prefix in prefixes:
            if path.rstrip("/") == prefix:
                return new
            if path.startswith(prefix + "/"):
                return new + path[len(prefix) :]
        return None

    def relocate(path: str) -> str | None:
        moved = below(path, olds)
        if moved is not None or canonical is None:
            return moved
        spelt = canonical(path)
        return below(spelt, canonical_olds) if spelt else None

    return relocate


def spellings(storage: Storage, location: str) -> list[str]:
    """The ways a base path may name `location` (Lance writes the URI it was given)."""
    uri = storage.uri(location)
    found = [uri, f"{storage.root_uri.rstrip('/')}/{location}"]
    if storage.is_local:
        found.append("file://" + uri)
    else:
        found.append(uri.split("://", 1)[1])
    return list(dict.fromkeys(found))


@dataclass
class Relocation:
    """What moving the base paths below one table directory changed."""

    manifests: list[str]
    refs: list[str]


def relocate_table(
    storage: Storage, location: str, old: list[str], new: str, *, dry_run: bool = False
) -> Relocation:
    """Rewrite the base paths of every manifest below `location` that point into `old`.

    With `dry_run` nothing is written: every manifest is parsed, so that a manifest we cannot
    rewrite stops a move before anything changed.

    Used on the fresh copy of a moving table, before any name points at it: a file is replaced
    as a whole (a hard link to the source is broken, never written through), so the source
    stays intact, and a rerun after a crash rewrites what is left (a rewritten path no longer
    matches). Tags and branch records that carry a rewritten manifest's size are updated too.
    """
    relocate = prefix_mover(old, new, storage.canonical)
    rewritten: dict[tuple[str, int], int] = {}
    names = []
    for path, _size in storage.walk_files(location):
        if ".lancens-" in path and path.endswith(".tmp") and not dry_run:
            storage.delete_file(f"{location}/{path}")  # a replacement a killed run left half-way
            continue
        if not path.endswith(".manifest") or "_versions/" not in path:
            continue
        # Every manifest is parsed: a base path may spell `old` in a way no byte search finds.
        data = storage.read_bytes(f"{location}/{path}")
        try:
            new_data = rewrite_manifest_file(data, relocate)
        except ManifestFormatError as exc:
            raise RefusedError(
                f"cannot move the base paths of {location}/{path}: {exc}; "
                "use --keep-location to rename without moving the directory"
            ) from None
        if new_data is None:
            continue
        names.append(path)
        if dry_run:
            continue
        storage.write_bytes(f"{location}/{path}", new_data)
        branch = _branch_of(path)
        version = version_from_manifest_name(path.rsplit("/", 1)[-1])
        if version is not None:
            rewritten[(branch, version)] = len(new_data)
    refs = _update_ref_sizes(storage, location, rewritten) if rewritten else []
    return Relocation(sorted(names), refs)


def _branch_of(manifest_path: str) -> str:
    """'' for the main branch, else the branch name (`tree/<branch>/_versions/...`)."""
    head = manifest_path.rsplit("/_versions/", 1)[0] if "/_versions/" in manifest_path else ""
    return head[len("tree/") :] if head.startswith("tree/") else ""


def _update_ref_sizes(
    storage: Storage, location: str, sizes: dict[tuple[str, int], int]
) -> list[str]:
    """Tags and branches record the size of the manifest they point at; keep them exact."""
    changed = []
    for kind, branch_key, version_key in (
        ("tags", "branch", "version"),
        ("branches", "parentBranch", "parentVersion"),
    ):
        directory = f"{location}/_refs/{kind}"
        for path, _size in storage.walk_files(directory):
            if not path.endswith(".json"):
                continue
            try:
                ref = json.loads(storage.read_bytes(f"{directory}/{path}"))
            except ValueError:
                continue
            key = (ref.get(branch_key) or "", ref.get(version_key))
            if key in sizes and ref.get("manifestSize") != sizes[key]:
                ref["manifestSize"] = sizes[key]
                storage.write_bytes(f"{directory}/{path}", json.dumps(ref, indent=2).encode())
                changed.append(f"_refs/{kind}/{path}")
    return changed
