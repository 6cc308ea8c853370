"""Identifiers and the typed results the service layer returns.

Results are plain dataclasses so that the output layer can render any of them as a table, as
tab-separated text or as JSON without knowing which command produced them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from lancens_cli.errors import InvalidInputError

OBJECT_ID_DELIMITER = "$"
MANIFEST_TABLE = "__manifest"
V1_SUFFIX = ".lance"  # a table directory's name: `<name>.lance`
VERSIONS_DIR = "_versions"  # a Lance table's manifests, one file per version
REFS_DIR = "_refs"  # a table's tags and branches (spec 002)
RESERVED_NAMES = frozenset({MANIFEST_TABLE})
# Longest name part we accept: a table directory is `<8 hex>_<object_id>` and most file
# systems cap a path component at 255 bytes.
MAX_LOCATION_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c|24|2e|00)", re.IGNORECASE)


def validate_name(part: str) -> str:
    """Refuse a name part that could escape the root or collide with the `$` joining."""
    if part == "":
        raise InvalidInputError("invalid name: a name part is empty")
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 on the command line
        raise InvalidInputError(f"invalid name {part!r}: it is not valid UTF-8") from None
    if part in (".", ".."):
        raise InvalidInputError(f"invalid name {part!r}: '.' and '..' are not names")
    for bad in (OBJECT_ID_DELIMITER, "/", "\\"):
        if bad in part:
            raise InvalidInputError(f"invalid name {part!r}: it contains {bad!r}")
    if _CONTROL.search(part):
        raise InvalidInputError(f"invalid name {part!r}: it contains a control character")
    if _ENCODED_SEPARATOR.search(part):
        raise InvalidInputError(f"invalid name {part!r}: it contains an encoded separator")
    if part in RESERVED_NAMES:
        raise InvalidInputError(f"invalid name {part!r}: it is reserved")
    if part != part.strip():
        raise InvalidInputError(f"invalid name {part!r}: leading or trailing whitespace")
    return part


@dataclass(frozen=True)
class Identifier:
    """A namespace or table path; the root namespace is the empty path."""

    parts: tuple[str, ...]

    @classmethod
    def parse(cls, text: str | None, delimiter: str = ".") -> Identifier:
        """Parse a command-line identifier such as `ns1.ns2.events`."""
        if text is None or text == "":
            return cls(())
        if not delimiter:
            raise InvalidInputError("the delimiter must not be empty")
        parts = tuple(text.split(delimiter))
        for part in parts:
            validate_name(part)
        ident = cls(parts)
        if len(ident.object_id.encode()) + 9 > MAX_LOCATION_BYTES:
            raise InvalidInputError(f"identifier {text!r} is too long")
        return ident

    @classmethod
    def from_object_id(cls, object_id: str) -> Identifier:
        return cls(tuple(object_id.split(OBJECT_ID_DELIMITER))) if object_id else cls(())

    @property
    def object_id(self) -> str:
        return OBJECT_ID_DELIMITER.join(self.parts)

    @property
    def is_root(self) -> bool:
        return not self.parts

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def parent(self) -> Identifier:
        return Identifier(self.parts[:-1])

    def child(self, name: str) -> Identifier:
        return Identifier((*self.parts, name))

    def display(self, delimiter: str | None = None) -> str:
        """The identifier as the command line writes it (`--delimiter`, else `.`).

        A part that contains the delimiter is shown in double quotes (`sales."a.b"`), so that
        it cannot be read as two parts.
        """
        delimiter = delimiter or DISPLAY["delimiter"]
        return delimiter.join(_quoted(part, delimiter) for part in self.parts)

    @classmethod
    def display_of(cls, object_id: str, delimiter: str | None = None) -> str:
        """`from_object_id(object_id).display(delimiter)`, without the parts when none holds
        the delimiter (`ls` shows a million ids)."""
        shown_with = delimiter or DISPLAY["delimiter"]
        if shown_with not in object_id:
            return object_id.replace(OBJECT_ID_DELIMITER, shown_with)
        return cls.from_object_id(object_id).display(delimiter)

    def is_ancestor_of(self, other: Identifier) -> bool:
        return len(other.parts) > len(self.parts) and other.parts[: len(self.parts)] == self.parts


DISPLAY = {"delimiter": "."}  # the invocation's --delimiter, for every message and output


def set_display_delimiter(delimiter: str) -> None:
    DISPLAY["delimiter"] = delimiter or "."


def _quoted(part: str, delimiter: str) -> str:
    if delimiter in part:
        return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return part


def to_plain(value: Any) -> Any:
    """Turn results (dataclasses, tuples, Identifiers) into JSON-ready values."""
    if isinstance(value, Identifier):
        return value.object_id
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


def json_value(value: Any) -> Any:
    """A value as JSON holds it: dates and times in ISO 8601, decimals as text (exact),
    bytes as hex; everything else as it is."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return value


class Result:
    """What a command hands to `cli/output.py`: plain data whose JSON document is `to_json()`
    (its fields, unless the type says otherwise). Every result derives from it, so rendering
    never asks a result what it can do."""

    def to_json(self) -> Any:
        return to_plain(self)


class Streamed(list):
    """A read-only list whose items are made when read: the JSON encoder writes them one at a
    time (cli/output.py `write_json`), so a report of 100,000 tables never exists whole as
    plain data. `make` turns each of `items` into its plain value."""

    def __init__(self, items: Sequence[Any], make: Callable[[Any], Any]) -> None:
        super().__init__()
        self._items, self._make = items, make

    def __iter__(self) -> Iterator[Any]:
        return map(self._make, self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._make(item) for item in self._items[index]]
        return self._make(self._items[index])

    def __eq__(self, other: object) -> bool:
        return list(self) == other

    __hash__ = None

    def __repr__(self) -> str:
        return f"Streamed({len(self)} items)"


# --- listing -------------------------------------------------------------------------------

KIND_NAMESPACE = "namespace"
KIND_TABLE = "table"

SOURCE_MANIFEST = "manifest"
SOURCE_DIRECTORY = "directory"
SOURCE_BOTH = "both"

STATE_OK = "ok"
STATE_DECLARED = "declared"
STATE_NOT_LANCE = "not a Lance table"
# Only the data files of a table write that never committed a version (a killed `create`, or a
# copy in progress): a table for listing and existence (spec 001), but nobody ever read it.
STATE_UNCOMMITTED = "uncommitted write"
STATE_MISSING = "missing"


@dataclass
class Entry:
    """One line of `ls`: a namespace or a table."""

    id: str
    kind: str
    location: str | None
    source: str
    state: str
    # a partition table: which partition it is (service/partitioned/label.py PartitionLabel)
    label: Any = field(default=None, repr=False)
    # a spec-version namespace `v<N>`: its spec as the user writes it, whether it is the
    # current one, and how many partition tables it has
    spec: str | None = None
    current: bool = False
    partitions: int | None = None

    def to_json(self) -> dict[str, Any]:
        plain: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "location": self.location,
            "source": self.source,
            "state": self.state,
        }
        if self.label is not None:
            plain.update(self.label.json_fields())
        if self.partitions is not None:
            plain.update(spec=self.spec, current=self.current, partitions=self.partitions)
        return plain

    def partition_text(self) -> str | None:
        """What the `partition` column of `ls` shows for this entry."""
        if self.label is not None:
            return self.label.text()
        if self.partitions is not None:
            current = " (current)" if self.current else ""
            return f"spec {self.id}{current}: {self.spec}; {self.partitions} partition tables"
        return None


@dataclass
class Listing(Result):
    namespace: str
    entries: Sequence[Entry]  # a long page's are made as they are read (service/catalog/listing)
    next_page_token: str | None = None
    partitioning: dict[str, Any] | None = None  # the root of a partitioned namespace (spec 004)

    def to_json(self) -> dict[str, Any]:
        plain: dict[str, Any] = {
            "namespace": self.namespace,
            "entries": Streamed(self.entries, Entry.to_json),  # a line each, as encoded
            "next_page_token": self.next_page_token,
        }
        if self.partitioning is not None:
            plain["partitioning"] = self.partitioning
        return plain


# --- describe --------------------------------------------------------------------------------


@dataclass
class RootDescription(Result):
    root: str
    mode: str
    config: dict[str, Any]
    namespaces: int
    tables: int
    manifest: dict[str, Any] | None


@dataclass
class NamespaceDescription(Result):
    id: str
    properties: dict[str, str]
    namespaces: int
    tables: int
    damaged: str | None = None  # why the stored properties cannot be read (shown as none)

    def to_json(self) -> dict[str, Any]:
        plain = to_plain(self)
        if self.damaged is None:
            del plain["damaged"]
        return plain


@dataclass
class TableDescription(Result):
    id: str
    location: str
    uri: str
    source: str
    state: str
    properties: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] | None = None
    versions: list[dict[str, Any]] | None = None
    # a partition table: which partition it is (service/partitioned/label.py PartitionLabel)
    label: Any = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        plain = {
            name: to_plain(getattr(self, name))
            for name in ("id", "location", "uri", "source", "state", "properties")
        }
        if self.label is not None:
            plain.update(self.label.json_fields(), partition_text=self.label.text())
        plain.update(details=to_plain(self.details), versions=to_plain(self.versions))
        return plain


# --- mutations -------------------------------------------------------------------------------


@dataclass
class Change:
    """What a mutating command did (or, with --dry-run, would do)."""

    action: str
    kind: str
    id: str
    location: str | None = None
    dry_run: bool = False
    detail: str | None = None


@dataclass
class ChangeSet(Result):
    changes: list[Change]
    dry_run: bool = False
    message: str | None = None
    # `rename` / `drop`: tables that read the touched directories through base paths.
    dependents: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        plain = to_plain(self)
        if self.dependents is None:  # only commands that look for dependents report them
            plain.pop("dependents")
        return plain
