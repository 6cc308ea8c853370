"""Table directories: what state one is in, the marker files, opening and writing Lance tables.

Spec 001: a table directory exists even when it is empty or not a Lance table; listing and
existence checks say so, while loading it fails with an error that says it is not a Lance table.
"""

from __future__ import annotations

import secrets
from typing import Any

from lancens_cli.errors import (
    InvalidInputError,
    InvalidTableStateError,
    TableAlreadyExistsError,
    TableNotFoundError,
    lance_message,
)
from lancens_cli.models import (
    OBJECT_ID_DELIMITER,
    STATE_DECLARED,
    STATE_MISSING,
    STATE_NOT_LANCE,
    STATE_OK,
)
from lancens_cli.store.storage import Storage

V1_SUFFIX = ".lance"
RESERVED_MARKER = ".lance-reserved"
DEREGISTERED_MARKER = ".lance-deregistered"
VERSIONS_DIR = "_versions"


def v1_location(name: str) -> str:
    return name + V1_SUFFIX


def v2_location(object_id: str) -> str:
    """A fresh `<8 hex>_<object_id>` directory name; random so a recreated name never collides."""
    return f"{secrets.token_hex(4)}_{object_id}"


def is_v2_location(location: str) -> bool:
    head, sep, _ = location.partition("_")
    return bool(sep) and len(head) == 8 and all(c in "0123456789abcdef" for c in head)


def v2_location_object_id(location: str) -> str | None:
    """The object id a V2 directory name carries, or None if it is not one."""
    return location[9:] if is_v2_location(location) and len(location) > 9 else None


def table_state(storage: Storage, location: str) -> str:
    """Classify a table directory without opening it (one listing for a healthy table)."""
    versions = storage.list_dir(f"{location}/{VERSIONS_DIR}")
    if any(v.name.endswith(".manifest") for v in versions):
        return STATE_OK
    children = storage.list_dir(location)
    if not children:
        return STATE_MISSING if not storage.exists(location) else STATE_NOT_LANCE
    if RESERVED_MARKER in {c.name for c in children}:
        return STATE_DECLARED
    return STATE_NOT_LANCE


def is_deregistered(storage: Storage, location: str) -> bool:
    return storage.exists(f"{location}/{DEREGISTERED_MARKER}")


def write_reserved_marker(storage: Storage, location: str) -> None:
    storage.write_text(f"{location}/{RESERVED_MARKER}", "reserved")


def write_deregistered_marker(storage: Storage, location: str) -> None:
    storage.write_text(f"{location}/{DEREGISTERED_MARKER}", "reserved")


def open_table(storage: Storage, location: str, version: int | str | None = None) -> Any:
    """Open a Lance table, with errors that say which state the directory is in."""
    import lance

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
        if state == STATE_NOT_LANCE:
            raise InvalidTableStateError(
                f"{location!r} is not a Lance table: it has no readable _versions/*.manifest"
            ) from None
        raise InvalidTableStateError(
            f"table at {location!r} cannot be loaded: {lance_message(exc)}"
        ) from None


# Lance's words for losing the race to create version 1 of a table.
_CREATE_RACE_LOST = ("already exists", "0.manifest was not found")
# Lance's words for a failure of the input stream while it writes.
_INPUT_FAILURE = ("lanceerror(arrow)", "parse error", "arrowinvalid", "invalid:")


def write_new_table(storage: Storage, location: str, data: Any, schema: Any = None) -> Any:
    """Create a Lance table at `location`.

    Raises TableAlreadyExistsError when a table is (or just got) there, InvalidInputError when
    the input data fails while being written, InvalidTableStateError otherwise.
    """
    import lance

    try:
        return lance.write_dataset(
            data,
            storage.uri(location),
            schema=schema,
            mode="create",
            storage_options=storage.lance_options,
        )
    except (ValueError, OSError, RuntimeError) as exc:
        text = lance_message(exc)
        lowered = str(exc).lower()
        if any(words in lowered for words in _CREATE_RACE_LOST):
            raise TableAlreadyExistsError(f"a table already exists at {location!r}") from None
        if any(words in lowered for words in _INPUT_FAILURE):
            raise InvalidInputError(f"the input data cannot be written: {text}") from None
        raise InvalidTableStateError(f"cannot write table at {location!r}: {text}") from None


def object_id_for_location(location: str) -> str | None:
    """The object id a root V1 directory or a V2 directory name implies."""
    if location.endswith(V1_SUFFIX) and "/" not in location:
        name = location[: -len(V1_SUFFIX)]
        return name if name and OBJECT_ID_DELIMITER not in name else None
    return v2_location_object_id(location)
