"""Table directories: what state one is in, the marker files, opening and writing Lance tables.

Spec 001: a table directory exists even when it is empty or not a Lance table; listing and
existence checks say so, while loading it fails with an error that says it is not a Lance table.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import lance
import pyarrow as pa

from lancens_cli import interrupt
from lancens_cli.errors import (
    InvalidInputError,
    InvalidTableStateError,
    RefusedError,
    TableAlreadyExistsError,
    TableNotFoundError,
    lance_message,
)
from lancens_cli.models import (
    STATE_DECLARED,
    STATE_MISSING,
    STATE_NOT_LANCE,
    STATE_OK,
    STATE_UNCOMMITTED,
    V1_SUFFIX,
    VERSIONS_DIR,
)
from lancens_cli.store.containment import directory_location_problem, shown
from lancens_cli.store.lance_input import canonical_maps, write_fragments
from lancens_cli.store.storage import DirEntry, Storage

RESERVED_MARKER = ".lance-reserved"
DEREGISTERED_MARKER = ".lance-deregistered"
# In a partition table a restore stopped publishing: which restore, so that once no readable
# `__manifest` version publishes it, `check` and `prune` say what happened, not "a dead write"
UNPUBLISHED_MARKER = ".lancens-unpublished"
HASH_PLACEHOLDER = "<hash>"  # a V2 directory's random prefix, before it is drawn


def v1_location(name: str) -> str:
    return name + V1_SUFFIX


def v2_location(object_id: str) -> str:
    """A fresh `<8 hex>_<object_id>` directory name; random so a recreated name never collides."""
    return f"{secrets.token_hex(4)}_{object_id}"


def v2_location_pattern(object_id: str) -> str:
    """What `v2_location` will return, as a dry run shows it: `<hash>_<object_id>`."""
    return f"{HASH_PLACEHOLDER}_{object_id}"


def is_v2_location(location: str) -> bool:
    head, sep, _ = location.partition("_")
    return bool(sep) and len(head) == 8 and all(c in "0123456789abcdef" for c in head)


def v2_location_object_id(location: str) -> str | None:
    """The object id a V2 directory name carries, or None if it is not one."""
    return location[9:] if is_v2_location(location) and len(location) > 9 else None


def table_state(storage: Storage, location: str) -> str:
    """Classify a table directory without opening it (one listing for a healthy table)."""
    if storage.holds_name_ending(f"{location}/{VERSIONS_DIR}", ".manifest"):
        return STATE_OK
    children = storage.list_dir(location)
    if not children:
        return STATE_MISSING if not storage.exists(location) else STATE_NOT_LANCE
    if RESERVED_MARKER in {c.name for c in children}:
        return STATE_DECLARED
    if uncommitted_write(storage, location, children) is not None:
        return STATE_UNCOMMITTED
    return STATE_NOT_LANCE


# What a `write_new_table` leaves behind when it dies before committing version 1.
_WRITE_DIRS = ("data", "_transactions", VERSIONS_DIR)


def uncommitted_write(
    storage: Storage, location: str, children: list[DirEntry] | None = None
) -> list[str] | None:
    """The files of a table write that never committed, or None if the directory is more.

    The one test of "debris of a write" that `ls`, `create`, `check` and `migrate-v1` share. A
    process killed while it writes a table leaves data files (and perhaps a transaction file)
    but no `_versions/*.manifest`; a copy in progress (`rsync -a`, data before `_versions/`)
    looks the same. Nobody can have read such a table, yet only `check --fix` may delete it,
    once it is older than the grace period: `create` never writes over it. Anything else there
    (a marker, a file of the user's, a committed version) makes the directory something to
    keep, and None is returned. `children` saves a listing the caller already made.
    """
    if children is None:
        children = storage.list_dir(location)
    if not children or any(not c.is_dir or c.name not in _WRITE_DIRS for c in children):
        return None
    files = []
    for name in _WRITE_DIRS:
        for path, _size in storage.walk_files(f"{location}/{name}"):
            if name == VERSIONS_DIR and path.endswith(".manifest"):
                return None
            files.append(f"{name}/{path}")
    return files


def is_deregistered(storage: Storage, location: str) -> bool:
    """The marker `drop --keep-data` and deregister leave. Anything of that name counts, as
    the reference counts it (it lists the table's directory): a file, a directory, a link."""
    return storage.entry_exists(f"{location}/{DEREGISTERED_MARKER}")


def write_unpublished_marker(storage: Storage, location: str, record: dict[str, Any]) -> None:
    storage.write_text(f"{location}/{UNPUBLISHED_MARKER}", json.dumps(record, sort_keys=True))


def unpublished_record(storage: Storage, location: str) -> dict[str, Any] | None:
    """What `write_unpublished_marker` left, or None (none, or not ours to read)."""
    try:
        record = json.loads(storage.read_bytes(f"{location}/{UNPUBLISHED_MARKER}"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_reserved_marker(storage: Storage, location: str) -> None:
    storage.write_text(f"{location}/{RESERVED_MARKER}", "reserved")


def write_deregistered_marker(storage: Storage, location: str) -> None:
    storage.write_text(f"{location}/{DEREGISTERED_MARKER}", "reserved")


def open_table(storage: Storage, location: str, version: int | str | None = None) -> Any:
    """Open a Lance table, with errors that say which state the directory is in.

    The last line of the trust boundary (store/containment.py): a location that leads outside
    the root is refused here too, whichever command asked, before Lance reads anything."""
    problem = directory_location_problem(storage, location)
    if problem is not None:
        raise RefusedError(f"lancens will not open {shown(location)!r}: {problem}")
    try:
        return lance.dataset(
            storage.uri(location), version=version, storage_options=storage.lance_options
        )
    except (ValueError, OSError, RuntimeError) as exc:
        state = table_state(storage, location)
        if state == STATE_MISSING:
            raise TableNotFoundError(f"table directory {location!r} does not exist") from None
        if state == STATE_DECLARED:
            raise InvalidTableStateError(
                f"table at {location!r} is declared but has no data yet"
            ) from None
        if state == STATE_UNCOMMITTED:
            raise InvalidTableStateError(
                f"{location!r} is not a Lance table: it holds only the data files of a table "
                "write that never committed (a killed create, or a copy in progress)"
            ) from None
        if state == STATE_NOT_LANCE:
            raise InvalidTableStateError(
                f"{location!r} is not a Lance table: it has no readable _versions/*.manifest"
            ) from None
        raise InvalidTableStateError(
            f"table at {location!r} cannot be loaded: {lance_message(exc)}"
        ) from None


# Lance's words for a failure of the input stream while it writes.
_INPUT_FAILURE = (
    "lanceerror(arrow)",
    "lanceerror(schema)",
    "invalid user input",
    "parse error",
    "arrowinvalid",
    "invalid:",
)


def write_new_table(
    storage: Storage, location: str, data: Any, *, exclusive: bool, schema: Any = None
) -> Any:
    """Create version 1 of a Lance table at `location`, or fail if anyone else did first.

    The data files are written, then version 1 is committed with put-if-not-exists and no
    retry, so of several writers racing for one directory exactly one wins and nobody's data
    replaces the winner's. A loser removes the data files it wrote and raises
    TableAlreadyExistsError. `exclusive` says whether the directory is ours alone (a fresh V2
    name); only then may a failure remove the whole directory.
    """
    uri = storage.uri(location)
    options = storage.lance_options
    fragments: list[Any] = []
    if hasattr(data, "read_next_batch"):
        data = interrupt.batches_until_interrupted(data)
    try:
        if exclusive or not hasattr(data, "read_next_batch"):
            fragments = write_fragments(data, uri, schema=schema, storage_options=options)
        else:
            # A shared directory: write in bounded chunks so that, should the input fail
            # half-way, we know every file we wrote and remove those alone.
            for chunk in _chunks(data):
                interrupt.checkpoint()
                fragments += write_fragments(chunk, uri, schema=schema, storage_options=options)
        interrupt.checkpoint()  # Ctrl-C: the write ends here, before anything is committed
    except interrupt.Interrupted:
        _delete_fragment_files(storage, location, fragments)
        _discard_failed_write(storage, location, exclusive)
        raise
    except (ValueError, OSError, RuntimeError, pa_errors()) as exc:
        _delete_fragment_files(storage, location, fragments)
        _discard_failed_write(storage, location, exclusive)
        text = lance_message(exc)
        if isinstance(exc, pa_errors()) or any(
            words in str(exc).lower() for words in _INPUT_FAILURE
        ):
            raise InvalidInputError(f"the input data cannot be written: {text}") from None
        raise InvalidTableStateError(f"cannot write table at {location!r}: {text}") from None
    table_schema = canonical_maps(schema if schema is not None else getattr(data, "schema", None))
    try:
        return lance.LanceDataset.commit(
            uri,
            lance.LanceOperation.Overwrite(table_schema, fragments),
            read_version=None,
            max_retries=0,
            storage_options=options,
            enable_v2_manifest_paths=True,
        )
    except (ValueError, OSError, RuntimeError) as exc:
        _delete_fragment_files(storage, location, fragments)
        if table_state(storage, location) == STATE_OK:
            raise TableAlreadyExistsError(f"a table already exists at {location!r}") from None
        _discard_failed_write(storage, location, exclusive)
        raise InvalidTableStateError(
            f"cannot commit table at {location!r}: {lance_message(exc)}"
        ) from None


# Rows and bytes of one chunk of a write to a shared directory.
_CHUNK_ROWS = 1 << 20
_CHUNK_BYTES = 256 << 20


def _chunks(reader: Any) -> Iterator[Any]:
    """The reader's batches grouped into in-memory tables of bounded size."""
    batches: list[Any] = []
    rows = size = 0
    yielded = False
    for batch in reader:
        batches.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= _CHUNK_ROWS or size >= _CHUNK_BYTES:
            yield pa.Table.from_batches(batches, schema=reader.schema)
            batches, rows, size, yielded = [], 0, 0, True
    if batches or not yielded:
        yield pa.Table.from_batches(batches, schema=reader.schema)


def pa_errors() -> type[Exception]:
    """pyarrow's error base class (a failing input stream raises it between Lance calls)."""
    return pa.ArrowException


def _delete_fragment_files(storage: Storage, location: str, fragments: list[Any]) -> None:
    for fragment in fragments:
        for data_file in fragment.files:
            storage.delete_file(f"{location}/data/{data_file.path}")


def _discard_failed_write(storage: Storage, location: str, exclusive: bool) -> None:
    """Remove what a failed write left, but never a directory another writer may be using.

    In a shared directory only our own files go (the caller deletes those); the directory
    itself goes only if nothing at all is left in it.
    """
    if exclusive or not any(True for _ in storage.walk_files(location)):
        storage.delete_tree(location)
