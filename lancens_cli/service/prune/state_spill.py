"""Every table's state as read for a prune or `versions`, kept in a temporary file, not in memory.

A run decides over every table at once: which tables are shallow clones of which is known only
once all are read (service/prune/decide.py). Holding each table's `TableState` meanwhile cost
about 2 KB a table, 2 GB over a million tables. Here each state is kept in a `SpillFile`
(spill.py) as it is stored and read back when asked for; memory keeps a place per table, and
the base paths of the few tables that have any (the clone map reads those of every table). A
state holding an open dataset (`handle`, store/lance_session.py) stays in memory as it is, as
does every state once the temporary directory takes no more.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, MutableMapping

from lancens_cli.service.prune.protect import TableState
from lancens_cli.spill import SpillFile


class SpilledStates(MutableMapping[str, TableState]):
    """location -> `TableState`. Safe to use from several threads (a run reads tables and
    plans them in threads). A state read back is a copy: changing it changes nothing stored;
    store it again (`states[location] = ...`). One with an open dataset is the one stored."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file = SpillFile()
        # location -> its place in the file, shifted left one bit: the low bit says whether
        # the state carries the last run's record entry (no set of a million locations)
        self._where: dict[str, int] = {}
        self._live: dict[str, TableState] = {}  # held as they are (open datasets; no room)
        self._bases: dict[str, tuple[str, ...]] = {}  # only the tables with base paths

    # --- what a run asks of every table without reading any state back -------------------

    def with_bases(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """(location, base paths) of every table that reads others through base paths."""
        with self._lock:
            return iter(list(self._bases.items()))

    def bases_of(self, location: str) -> tuple[str, ...]:
        """The base paths of a stored table (none for a table not stored)."""
        return self._bases.get(location, ())

    def is_recorded(self, location: str) -> bool:
        """Whether a stored table's state carries the last run's record entry (`recorded`)."""
        with self._lock:
            live = self._live.get(location)
            if live is not None:
                return live.recorded is not None
            return bool(self._where.get(location, 0) & 1)

    # --- the mapping ---------------------------------------------------------------------

    def __setitem__(self, location: str, state: TableState) -> None:
        place = self._file.put(state) if state.handle is None else None
        with self._lock:  # stored before the old one goes: never missing to `in`
            if place is None:
                self._live[location] = state
                self._where.pop(location, None)
            else:
                self._where[location] = place << 1 | (state.recorded is not None)
                self._live.pop(location, None)
            if state.bases:
                self._bases[location] = tuple(state.bases)
            else:
                self._bases.pop(location, None)

    def __getitem__(self, location: str) -> TableState:
        with self._lock:
            live = self._live.get(location)
            place = self._where[location] >> 1 if live is None else None  # (KeyError: none)
        if live is not None:
            return live
        assert place is not None
        state: TableState = self._file.get(place)
        return state

    def __delitem__(self, location: str) -> None:
        with self._lock:
            found = self._where.pop(location, None) is not None
            found = self._live.pop(location, None) is not None or found
            self._bases.pop(location, None)
        if not found:
            raise KeyError(location)

    def __contains__(self, location: object) -> bool:
        return location in self._where or location in self._live

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter([*self._where, *self._live])

    def __len__(self) -> int:
        return len(self._where) + len(self._live)

    def clear(self) -> None:
        with self._lock:
            self._where.clear()
            self._live.clear()
            self._bases.clear()
            self._file.clear()
