"""The namespace handle and the resolution rules of spec 000 (V1, V2, compatibility mode).

Existence: the manifest first, then (root tables, dir listing on) the `<name>.lance` directory.
Listing at the root merges both, deduplicated by location and by name, manifest entries winning.
Child namespaces exist only in the manifest.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.config import NamespaceConfig
from lancens_cli.errors import (
    InvalidInputError,
    NamespaceNotFoundError,
    RefusedError,
    TableNotFoundError,
    UnsupportedError,
)
from lancens_cli.models import (
    DISPLAY,
    KIND_NAMESPACE,
    KIND_TABLE,
    OBJECT_ID_DELIMITER,
    SOURCE_BOTH,
    SOURCE_DIRECTORY,
    SOURCE_MANIFEST,
    Change,
    ChangeSet,
    Identifier,
)
from lancens_cli.service.catalog.manifest_rows import (  # noqa: F401 (callers import the keys here)
    DROPPING_KEY,
    RENAME_INTENT_KEY,
    RENAMED_FROM_KEY,
)
from lancens_cli.store.arrow_text import Names, arrow_strings, names_of
from lancens_cli.store.containment import directory_location_problem
from lancens_cli.store.manifest import (
    ManifestSnapshot,
    ManifestStore,
    decode_properties,
    manifest_schema,
    require_writable,
)
from lancens_cli.store.row_verdicts import require_row
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import V1_SUFFIX, is_deregistered, v1_location


@dataclass
class TableRef:
    """Where a table lives and how we know it."""

    ident: Identifier
    location: str
    source: str
    row: dict[str, Any] | None = None


class Namespace:
    """One directory namespace: its configuration, its storage and its `__manifest`."""

    def __init__(
        self, config: NamespaceConfig, on_warning: Callable[[str], None] | None = None
    ) -> None:
        """`on_warning` takes the store's warnings (the command line prints them)."""
        self.config = config
        self.storage = Storage(config)
        self.manifest = ManifestStore(
            self.storage,
            retries=config.commit_retries,
            build_indexes=config.inline_optimization_enabled,
        )
        if on_warning is not None:
            self.manifest.on_warning = on_warning

    @classmethod
    def from_properties(cls, properties: dict[str, object]) -> Namespace:
        return cls(NamespaceConfig.from_properties(properties))

    def as_of(self, version: str | int | None = None, timestamp: str | None = None) -> Namespace:
        """This namespace as `__manifest` version `version` (or the newest at or before
        `timestamp`) published it: every read goes to that version; writes are refused."""
        if version is None and timestamp is None:
            return self

        other = copy.copy(self)
        other.manifest = self.manifest.pinned(self.manifest.resolve_version(version, timestamp))
        return other

    # --- preconditions ------------------------------------------------------------------
    def require_root(self) -> None:
        self.storage.require_root()

    def require_manifest(self, what: str) -> None:
        if not self.config.manifest_enabled:
            raise UnsupportedError(f"{what} needs the manifest (manifest_enabled is false)")

    def require_writable(self, snapshot: ManifestSnapshot) -> None:
        """Before touching any data: refuse when the manifest could not record the change."""
        if self.config.manifest_enabled and snapshot.exists:
            require_writable(snapshot)

    # --- reading ------------------------------------------------------------------------
    def snapshot(self, columns: Callable[[str], bool] | None = None) -> ManifestSnapshot:
        """`__manifest` as it is now (`columns`: only those, for a reader that knows it needs
        no other; see `Manifest.read`)."""
        if not self.config.manifest_enabled:
            return ManifestSnapshot(0, manifest_schema().empty_table(), {})
        return self.manifest.read(columns)

    def dir_table_columns(self, between: NameRange = (None, None)) -> tuple[Any, Any, list[str]]:
        """Root `<name>.lance` directories, when dir listing is on, as two Arrow arrays (names
        and locations), filtered and cut in Arrow, not a string at a time; and the locations
        whose names are not UTF-8 (Arrow holds no such text; listed, and refused, as before).
        `between`: at least the tables whose names lie in (after, until] (a page of `ls`)."""
        if not self.config.dir_listing_enabled:
            return _NO_NAMES, _NO_NAMES, []
        after, until = between
        last_key = None if until is None else _last_key(until)
        return _table_columns(self.storage.dir_names("", V1_SUFFIX, after, last_key))

    def visible_dir_tables(self, snapshot: ManifestSnapshot) -> dict[str, str]:
        """Directory tables not hidden by a deregistration marker or a finished rename."""
        found = self.visible_dir_table_columns(snapshot)
        listed = zip(found.names.to_pylist(), found.locations.to_pylist(), strict=True)
        return {**dict(listed), **found.odd}

    def visible_dir_table_columns(
        self,
        snapshot: ManifestSnapshot,
        unless: Collection[str] = (),
        between: NameRange = (None, None),
    ) -> DirectoryTables:
        """`visible_dir_tables` as Arrow arrays (`between`: see `dir_table_columns`). Only a
        directory no row names is looked into for a deregistration marker."""
        return self.visible_of(snapshot, self.dir_table_columns(between), unless)

    def visible_of(
        self,
        snapshot: ManifestSnapshot,
        found: tuple[Any, Any, list[str]],
        unless: Collection[str] = (),
    ) -> DirectoryTables:
        """The directory tables of `found` (`dir_table_columns`) that are not hidden."""
        names, locations, odd_locations = found
        claimed = stale_rename_sources(snapshot)
        odd = {  # no row can name these: each is looked into
            loc[: -len(V1_SUFFIX)]: loc
            for loc in odd_locations
            if loc not in claimed and loc not in unless and not is_deregistered(self.storage, loc)
        }
        if not len(names):
            no_names = pa.array([], pa.bool_())
            return DirectoryTables(names, locations, no_names, odd, [], (*claimed, *unless))
        hidden, _ = arrow_strings([*claimed, *unless])
        shown = pc.invert(pc.is_in(locations, value_set=hidden))
        names, locations = names.filter(shown), locations.filter(shown)
        ids = snapshot.table.column("object_id").combine_chunks()
        named = pc.is_in(names, value_set=ids)
        unknown = pc.indices_nonzero(pc.invert(named)).to_pylist()
        marked = [i for i in unknown if is_deregistered(self.storage, locations[i].as_py())]
        hidden_by_marker = [locations[i].as_py() for i in marked]
        if marked:
            keep = pc.invert(pc.is_in(pa.array(range(len(names))), value_set=pa.array(marked)))
            names, locations, named = (a.filter(keep) for a in (names, locations, named))
        every_hidden = (*claimed, *unless, *hidden_by_marker)
        return DirectoryTables(names, locations, named, odd, hidden_by_marker, every_hidden)

    def unregistered_dir_tables(
        self, snapshot: ManifestSnapshot, unnamed: bool = False, unless: Collection[str] = ()
    ) -> dict[str, str]:
        """The visible directory tables (name -> location) at a location no table row has;
        with `unnamed`, only those whose name no row has either; those at a location in
        `unless` neither looked at (a request each on an object store) nor returned. Matched
        in Arrow: over
        a million registered tables a Python set and dict of them are a third of a GB, and
        what is left is the few tables known only from their directory."""
        found = self.visible_dir_table_columns(snapshot, unless)
        table = snapshot.table
        registered = table.column("location").filter(
            pc.equal(table.column("object_type"), KIND_TABLE)
        )
        value_set = registered.combine_chunks()
        keep = pc.invert(pc.is_in(found.locations, value_set=value_set))
        if unnamed and len(found.named):
            keep = pc.and_(keep, pc.invert(found.named))
        names, locations = found.names.filter(keep), found.locations.filter(keep)
        tables = dict(zip(names.to_pylist(), locations.to_pylist(), strict=True))
        if found.odd:  # names that are not UTF-8: no row names them, a few at most
            known = set(value_set.to_pylist())
            tables.update({n: loc for n, loc in found.odd.items() if loc not in known})
        return tables

    def lists_directory(self, snapshot: ManifestSnapshot, location: str) -> bool:
        """Whether `visible_dir_table_columns` of the whole root would hold `location`, asked
        of that one directory by the same rules: a row on a page whose listing covered only
        the page's names may be held by a directory outside them (a table registered at
        another's location)."""
        if (
            not self.config.dir_listing_enabled
            or "/" in location
            or not location.endswith(V1_SUFFIX)
            or not self.storage.is_dir(location)
        ):
            return False
        found = self.visible_of(snapshot, _table_columns(names_of([location])))
        return len(found.locations) > 0 or location in found.odd.values()

    def namespace_exists(self, ident: Identifier, snapshot: ManifestSnapshot) -> bool:
        if ident.is_root:
            return True
        row = snapshot.get(ident.object_id)
        return row is not None and row["object_type"] == KIND_NAMESPACE

    def require_namespace(self, ident: Identifier, snapshot: ManifestSnapshot) -> None:
        if ident.is_root:
            return
        self.require_manifest("a child namespace")
        if not self.namespace_exists(ident, snapshot):
            row = snapshot.get(ident.object_id)
            if row is not None:
                raise InvalidInputError(f"{ident.display()} is a table, not a namespace")
            raise NamespaceNotFoundError(
                f"namespace {ident.display()} does not exist{delimiter_hint(snapshot)}"
            )

    def find_table(self, ident: Identifier, snapshot: ManifestSnapshot) -> TableRef | None:
        """Manifest first, then the root `<name>.lance` directory."""
        if ident.is_root:
            raise InvalidInputError("the root is a namespace, not a table")
        row = snapshot.get(ident.object_id)
        if row is not None:
            if row["object_type"] != KIND_TABLE:
                return None
            require_row(self.storage, snapshot, ident.object_id)
            location = row["location"] or ""
            source = SOURCE_MANIFEST
            if (
                len(ident.parts) == 1
                and self.config.dir_listing_enabled
                and location == v1_location(ident.name)
                and self.storage.exists(location)
            ):
                source = SOURCE_BOTH
            return TableRef(ident, location, source, row)
        if len(ident.parts) == 1 and self.config.dir_listing_enabled:
            location = v1_location(ident.name)
            # Deduplicated by location: a directory some manifest row points at is that row's.
            if location in snapshot.locations() or location in stale_rename_sources(snapshot):
                return None
            # Spec 001: the directory makes the table, even when it is empty.
            if self.storage.exists(location) and not is_deregistered(self.storage, location):
                problem = directory_location_problem(self.storage, location)
                if problem is not None:
                    raise RefusedError(f"{ident.display()}: lancens will not touch it: {problem}")
                return TableRef(ident, location, SOURCE_DIRECTORY)
        return None

    def require_table(self, ident: Identifier, snapshot: ManifestSnapshot) -> TableRef:
        if len(ident.parts) > 1:
            self.require_namespace(ident.parent, snapshot)
        ref = self.find_table(ident, snapshot)
        if ref is None:
            row = snapshot.get(ident.object_id)
            if row is not None and row["object_type"] == KIND_NAMESPACE:
                raise InvalidInputError(f"{ident.display()} is a namespace, not a table")
            raise TableNotFoundError(
                f"table {ident.display()} does not exist{delimiter_hint(snapshot)}"
            )
        return ref

    def kind_of(self, ident: Identifier, snapshot: ManifestSnapshot) -> str | None:
        """'namespace', 'table' or None."""
        if ident.is_root:
            return KIND_NAMESPACE
        row = snapshot.get(ident.object_id)
        if row is not None:
            return row["object_type"]
        return KIND_TABLE if self.find_table(ident, snapshot) else None

    def table_uri(self, location: str) -> str:
        return self.storage.uri(location)


_NO_NAMES = pa.array([], pa.string())
NameRange = tuple[str | None, str | None]  # (after, until]: names of root tables, in byte order


def _table_columns(found: Names) -> tuple[Any, Any, list[str]]:
    """Which directories found are root tables (a name, and no `$` in it), as names and
    locations cut and filtered in Arrow, and the locations whose names are not UTF-8."""
    arrow_found, odd = found
    cut = len(V1_SUFFIX)
    keep = pc.and_(
        pc.greater(pc.utf8_length(arrow_found), cut),
        pc.invert(pc.match_substring(arrow_found, OBJECT_ID_DELIMITER)),
    )
    locations = arrow_found.filter(keep)
    odd = [loc for loc in odd if len(loc) > cut and OBJECT_ID_DELIMITER not in loc]
    return pc.utf8_slice_codeunits(locations, 0, -cut), locations, odd


def _last_key(until: str) -> str:
    """The greatest key (`<name>.lance/`, as an object store lists the prefix) of a name <=
    `until`: a listing that stops past it misses none. Not `until.lance/` itself: a name that
    is a prefix of `until` (`t` beside `t-1`) has a key after it (`t.lance/` > `t-1.lance/`,
    as `.` > `-`)."""
    return max(until[:end] + V1_SUFFIX + "/" for end in range(1, len(until) + 1))


class DirectoryTables(NamedTuple):
    """The root's visible `<name>.lance` directories as Arrow arrays: `names`, `locations`,
    and `named`, whether a catalog row has the same id as the name; `odd`, those whose
    names are not UTF-8 (name -> location), which no row can name; and `marked`, those a
    deregistration marker hid."""

    names: Any
    locations: Any
    named: Any
    odd: dict[str, str]
    marked: list[str]  # the locations a deregistration marker hid
    hidden: tuple[str, ...] = ()  # every location hidden: finished renames, `unless`, markers


def stale_rename_sources(snapshot: ManifestSnapshot) -> set[str]:
    """Old `<name>.lance` directories of renames whose manifest commit has landed.

    Until the last step of a rename deletes the old directory, it must not reappear through
    directory listing; the new row names it in its metadata. Only rows whose metadata text
    holds the key (or a `\\u` escape, which could spell it) are decoded: a pass in Arrow, not
    a JSON parse per row.
    """
    table = snapshot.table
    if "metadata" not in table.column_names or table.num_rows == 0:
        return set()
    metadata = table.column("metadata")
    may_name = pc.or_(
        pc.match_substring(metadata, RENAMED_FROM_KEY), pc.match_substring(metadata, "\\u")
    )
    candidates = table.filter(pc.and_(may_name, pc.equal(table.column("object_type"), KIND_TABLE)))
    stale = set()
    for metadata_text, location in zip(
        candidates.column("metadata").to_pylist(),
        candidates.column("location").to_pylist(),
        strict=True,
    ):
        source = decode_properties(metadata_text).get(RENAMED_FROM_KEY)
        if source and source != location:
            stale.add(source)
    return stale


def init_root(ns: Namespace):
    """Create a local root (parents included); an object-store root needs its bucket to exist."""
    if ns.storage.root_exists():
        return ChangeSet([Change("exists", KIND_NAMESPACE, "(root)", ns.storage.root_uri)])
    if not ns.storage.is_local:
        raise NamespaceNotFoundError(f"bucket of {ns.storage.root_uri} does not exist")
    ns.storage.ensure_root()
    return ChangeSet([Change("create", KIND_NAMESPACE, "(root)", ns.storage.root_uri)])


def delimiter_hint(snapshot: ManifestSnapshot) -> str:
    """For a not-found error: a name here contains the separator, so say how to reach it."""
    delimiter = DISPLAY["delimiter"]
    if not snapshot.exists:
        return ""
    for object_id in snapshot.table.column("object_id").to_pylist():
        if any(delimiter in part for part in object_id.split(OBJECT_ID_DELIMITER)):
            return (
                f" (some names here contain {delimiter!r}, shown in quotes by `ls`; to name "
                "them, choose another separator with --delimiter, e.g. --delimiter /)"
            )
    return ""
