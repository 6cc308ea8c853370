"""The verdict on every catalog row's location in one `__manifest` snapshot (`RowLocations`):
which rows a command may open, write or delete, by the rules of store/containment.py.

Apart from containment.py because it reads the rows as Arrow columns: a prune answered from its
record needs the boundary's names, not pyarrow.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import RefusedError
from lancens_cli.models import KIND_TABLE, Identifier
from lancens_cli.store.arrow_text import arrow_strings, contiguous, sorted_repeats
from lancens_cli.store.containment import (
    RESERVED_TOP,
    LocalResolver,
    RefusedLocation,
    canonical,
    canonical_root,
    inside,
    shown,
    syntax_problem,
)

# One plain path component (what lancens and the reference name a table's directory): no
# separator, no control or special character, not `.`/`..`; `$` joins a child's name parts.
# RE2 syntax: Arrow matches every row's location against it at once.
PLAIN_LOCATION = r"^[A-Za-z0-9_$\-][A-Za-z0-9_.$\-]{0,254}$"
ROW_COLUMNS = ("object_id", "object_type", "location")


class RowLocations:
    """The verdict on every table row's location in one `__manifest` snapshot.

    Most rows name one plain directory right below the root. Such a row is inside the root by
    its spelling (unless that name is a link, or reserved), and can overlap only a row with the
    same location or one whose directory lies inside it. So the rows are split in Arrow, in
    one pass over the columns: the plain rows whose location no other row repeats are accepted
    without a Python object each, and only the others (and the plain ones they touch) are
    resolved and sorted. A catalog of a million plain rows costs a few column passes."""

    def __init__(self, storage: Any, rows: Any) -> None:
        """`rows`: an Arrow table with the columns of ROW_COLUMNS, or each row's
        (object_id, object_type, location)."""
        if not isinstance(rows, pa.Table):
            rows = _rows_table(rows)
        self.storage = storage
        self.refused: dict[str, RefusedLocation] = {}
        self._root = canonical_root(storage)
        resolver = LocalResolver(self._root) if storage.is_local else None
        # masks over the whole columns, never a copy of the table rows: at a million rows
        # (a partitioned root's are half namespaces) a copy is 100 MiB held for nothing
        tables = pc.fill_null(pc.equal(rows.column("object_type"), KIND_TABLE), False)
        ids, locations = rows.column("object_id"), rows.column("location")
        plain = self._plain_and_alone(locations, tables, resolver)
        rest = rows.filter(pc.and_(tables, pc.invert(plain)))
        placed: list[tuple[str, str, str]] = []  # (canonical, object_id, location)
        for object_id, location in zip(
            rest.column("object_id").to_pylist(), rest.column("location").to_pylist(), strict=True
        ):
            self._place(object_id, location, resolver, placed)
        kept = self._join_plain_rows_they_touch(ids, locations, plain, placed)
        self._overlaps(placed)
        self._simple = (ids, locations, kept)  # the rows accepted as they are; no sort
        self._placed = [(real, oid) for real, oid, _ in placed if oid not in self.refused]
        self._sorted_owners: list[tuple[str, str]] | None = None

    @property
    def by_spelling_alone(self) -> bool:
        """Whether every table row was accepted by its location's spelling alone: then no
        verdict can change while the root's entries (and so its links) do not."""
        return not self.refused and not self._placed

    def _plain_and_alone(self, locations: Any, tables: Any, resolver: LocalResolver | None) -> Any:
        """Which rows are tables (the `tables` mask) naming one plain directory (no link,
        nothing reserved) that no other row names: accepted as they are."""
        plain = pc.and_(tables, _named_plainly(locations, self._root, resolver))
        # repeats found in sorted order: a sort holds less than a hash of every location
        candidates = contiguous(locations.filter(plain))
        repeated = sorted_repeats(candidates, pc.sort_indices(candidates))
        del candidates
        if len(repeated):
            plain = pc.and_(plain, pc.invert(pc.is_in(locations, value_set=repeated)))
        return plain

    def _place(
        self,
        object_id: str,
        location: Any,
        resolver: LocalResolver | None,
        placed: list[tuple[str, str, str]],
    ) -> None:
        """Judge one row alone (syntax, where it resolves); placed if it may be compared."""
        problem = syntax_problem(location)
        if problem is None:
            try:
                real = resolver.resolve(location) if resolver else location
            except (OSError, ValueError) as exc:
                problem = f"the location cannot be resolved ({exc})"
            else:
                if resolver and not inside(real, self._root, True):
                    problem = f"the location resolves outside the root, to {shown(real)}"
                else:
                    placed.append((real, object_id, location))
        if problem is not None:
            self._refuse(object_id, location, problem)

    def _join_plain_rows_they_touch(
        self, ids: Any, locations: Any, plain: Any, placed: list[tuple[str, str, str]]
    ) -> Any:
        """Move into `placed` each `plain` row that a placed row lies at or below, and every
        plain row of an id that is placed already (one id twice is judged as a whole), until
        none is left to move: the rows that `_overlaps` must compare. Returns the plain rows
        kept."""
        moved = pc.invert(plain)  # a row that is not plain is not moved again
        pending = list(placed)
        while pending:
            tops, _ = arrow_strings(sorted({self._top(real) for real, _, _ in pending}))
            pending_ids = pa.array(sorted({oid for _, oid, _ in pending}), pa.string())
            hit = pc.or_(pc.is_in(locations, value_set=tops), pc.is_in(ids, value_set=pending_ids))
            hit = pc.and_(pc.fill_null(hit, False), pc.invert(moved))
            pending = [
                (self._canonical_plain(loc), oid, loc)
                for oid, loc in zip(
                    ids.filter(hit).to_pylist(), locations.filter(hit).to_pylist(), strict=True
                )
            ]
            placed.extend(pending)
            moved = pc.or_(moved, hit)
        return pc.invert(moved)

    def _canonical_plain(self, location: str) -> str:
        """The canonical form of a plain one-component location (no link: see __init__)."""
        return (
            f"{self._root.rstrip(os.sep)}{os.sep}{location}" if self.storage.is_local else location
        )

    def _top(self, real: str) -> str:
        """The first component below the root of a canonical location inside it."""
        if not self.storage.is_local:
            return real.split("/", 1)[0]
        return real[len(self._root.rstrip(os.sep)) + 1 :].split(os.sep, 1)[0]

    @property
    def _owners(self) -> list[tuple[str, str]]:
        """The accepted rows' canonical locations, sorted: made when `admit` first asks."""
        if self._sorted_owners is None:
            all_ids, all_locations, kept = self._simple
            ids, locations = (c.filter(kept).to_pylist() for c in (all_ids, all_locations))
            owners = [
                (self._canonical_plain(loc), oid)
                for oid, loc in zip(ids, locations, strict=True)
                if oid not in self.refused  # one id twice, refused for its other row
            ]
            self._sorted_owners = sorted(owners + self._placed)
        return self._sorted_owners

    def admit(self, object_id: str, location: str) -> str | None:
        """Why a row about to be added at `location` would be refused beside the rows judged
        so far, or None, and then it counts as placed (a later candidate that shares or nests
        with it is refused). `migrate-v1` asks this of each directory before it opens it."""
        problem = syntax_problem(location)
        if problem is not None:
            return problem
        try:
            real = canonical(self.storage, location)
        except (OSError, ValueError) as exc:
            return f"the location cannot be resolved ({exc})"
        local = self.storage.is_local
        if local and not inside(real, self._root, True):
            return f"the location leads outside the root (it resolves to {shown(real)})"
        clash = self._clash(real, local)
        if clash is not None:
            return clash
        bisect.insort(self._owners, (real, object_id))
        return None

    def _clash(self, real: str, local: bool) -> str | None:
        """Which accepted row's location equals, holds or lies inside `real`, in words."""
        sep = os.sep if local else "/"
        at = bisect.bisect_left(self._owners, (real, ""))
        if at < len(self._owners):
            other_real, other_id = self._owners[at]
            if other_real == real:
                return f"its directory is also that of {_display(other_id)} (a link to it?)"
            if other_real.startswith(real.rstrip(sep) + sep):
                return f"its directory holds that of {_display(other_id)}"
        parent = real
        while sep in parent:
            parent = parent.rsplit(sep, 1)[0]
            if len(parent) <= len(self._root):
                break
            at = bisect.bisect_left(self._owners, (parent, ""))
            if at < len(self._owners) and self._owners[at][0] == parent:
                return f"its directory lies inside that of {_display(self._owners[at][1])}"
        return None

    def _refuse(self, object_id: str, location: Any, reason: str) -> None:
        text = location if isinstance(location, str) else ""
        self.refused.setdefault(object_id, RefusedLocation(object_id, text, reason))

    def _overlaps(self, placed: list[tuple[str, str, str]]) -> None:
        """Rows sharing a directory, or one row's directory inside another's: all refused.

        Sorted, what equals or lies below a location comes right after it, together with the
        siblings whose names start alike; each row looks only that far (no copy of the rest of
        the list), so a catalog of distinct names costs a sort and one pass."""
        local = self.storage.is_local
        ordered = sorted(placed)
        location_of: dict[str, str] = {}
        for _, oid, loc in ordered:
            location_of.setdefault(oid, loc)
        for i, (real, object_id, location) in enumerate(ordered):
            j = i + 1
            while j < len(ordered) and ordered[j][0].startswith(real):
                other_real, other_id, _ = ordered[j]
                j += 1
                if other_id == object_id:
                    continue  # one id twice: `check` reports duplicate_object_id
                if other_real == real:
                    why = "its location is also that of"
                elif inside(other_real, real, local):
                    why = "its location holds that of"
                else:
                    continue  # a sibling whose name starts alike (`cat-sib` beside `cat`)
                self._refuse(object_id, location, f"{why} {_display(other_id)}")
                self._refuse(
                    other_id,
                    location_of[other_id],
                    f"its location overlaps that of {_display(object_id)}",
                )

    def problem(self, object_id: str) -> RefusedLocation | None:
        return self.refused.get(object_id)

    def require(self, object_id: str) -> None:
        """Refuse (exit 5) a command that would open, write or delete this row's location."""
        found = self.refused.get(object_id)
        if found is not None:
            raise RefusedError(
                f"{_display(object_id)}: lancens will not touch its location "
                f"{shown(found.location)!r}: {found.reason} (see `lancens check`)"
            )


LONE_CHECKS = 4  # rows of one snapshot judged alone before the whole catalog is judged once


def require_row(storage: Any, snapshot: Any, object_id: str) -> None:
    """`row_locations(...).require(object_id)` for a command about one table (`describe`,
    `scan`, a write to it): when every table row names one plain directory and no other row
    has this one's id or location, that row is accepted by the same rules without judging
    the whole catalog (whose sort of every location takes 1-2 s at a million rows). A
    snapshot asked of many rows is judged whole once."""
    checks = getattr(snapshot, "_lone_checks", 0)
    if getattr(snapshot, "_containment", None) is None and checks < LONE_CHECKS:
        snapshot._lone_checks = checks + 1
        if _alone_by_spelling(storage, snapshot, object_id):
            return
    row_locations(storage, snapshot).require(object_id)


def _alone_by_spelling(storage: Any, snapshot: Any, object_id: str) -> bool:
    """Whether `RowLocations` accepts this row by its spelling alone, found in column passes:
    every table row plain (none placed but those repeating another's location, whose own
    directory this row's is not), and this row's id and location held by no other row."""
    if not snapshot.exists or not set(ROW_COLUMNS) <= set(snapshot.table.column_names):
        return False
    rows = snapshot.table
    tables = pc.fill_null(pc.equal(rows.column("object_type"), KIND_TABLE), False)
    ids, locations = rows.column("object_id").filter(tables), rows.column("location").filter(tables)
    try:
        mine = pc.equal(ids, object_id)
    except (UnicodeError, pa.ArrowException):
        return False  # an id that is not UTF-8: the whole judgement names it
    if pc.sum(mine).as_py() != 1:
        return False
    location = locations.filter(mine)[0].as_py()
    if not isinstance(location, str) or pc.sum(pc.equal(locations, location)).as_py() != 1:
        return False
    root = canonical_root(storage)
    resolver = LocalResolver(root) if storage.is_local else None
    return bool(pc.all(_named_plainly(locations, root, resolver)).as_py())


def _named_plainly(locations: Any, root: str, resolver: LocalResolver | None) -> Any:
    """Which locations name one plain directory right below the root: by their spelling,
    neither a link there nor a name lancens reserves."""
    plain = pc.fill_null(pc.match_substring_regex(locations, PLAIN_LOCATION), False)
    links = resolver.links_in(root) if resolver else frozenset()
    excluded, _ = arrow_strings(sorted(RESERVED_TOP | links))  # an odd name is no row's
    return pc.and_(plain, pc.invert(pc.is_in(locations, value_set=excluded)))


def row_locations(storage: Any, snapshot: Any) -> RowLocations:
    """The verdicts for a snapshot, computed once per snapshot."""
    cached = getattr(snapshot, "_containment", None)
    if cached is None:
        present = snapshot.exists and set(ROW_COLUMNS) <= set(snapshot.table.column_names)
        rows = snapshot.table.select(list(ROW_COLUMNS)) if present else _rows_table([])
        cached = RowLocations(storage, rows)
        snapshot._containment = cached
    return cached


def _rows_table(rows: Iterable[tuple[str, Any, Any]]) -> Any:
    """(object_id, object_type, location) tuples as the Arrow table RowLocations reads."""
    columns = list(zip(*rows, strict=True)) or [(), (), ()]
    return pa.table(
        {
            name: pa.array(list(values), pa.string())
            for name, values in zip(ROW_COLUMNS, columns, strict=True)
        }
    )


def _display(object_id: str) -> str:
    try:
        return shown(Identifier.from_object_id(object_id).display())
    except Exception:  # noqa: BLE001 - a hostile id is shown as it is, escaped
        return shown(object_id)
