"""Objects kept in an unnamed temporary file instead of memory, each read back by its place.

A namespace-wide command holds something of every table until it has seen them all: a prune or
`versions` every table's state until the clone map is known (service/prune/state_spill.py),
`versions` every table's line until the total is known. At a million tables that is gigabytes
held; here each object is pickled to a temporary file (in the system's temporary directory,
never in the root, removed however the process ends) and memory keeps one int a place. When
that directory cannot take them (none, read-only, full), `put` says so and the caller holds the
object: a command costs memory, never its answer.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
import threading
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, Any, TypeVar, overload

BLOCK = 1 << 16  # bytes gathered before a write
_LENGTH_BITS = 32  # a place: offset << 32 | length, one int an object
_LENGTH_MASK = (1 << _LENGTH_BITS) - 1

T = TypeVar("T")


class SpillFile:
    """Pickled objects appended to a temporary file; safe to use from several threads. An
    object read back is a copy: changing it changes nothing kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = bytearray()  # pickled after `_end`, not yet written
        self._end = 0  # bytes written to the file
        self._writable = False
        self._file: IO[bytes] | None = None
        with contextlib.suppress(OSError):  # none to be had: `put` keeps nothing
            self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 - closed with us
            self._writable = True

    def put(self, item: Any) -> int | None:
        """`item` kept: its place; None when the file takes no more (the caller holds it)."""
        if not self._writable:
            return None
        data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > _LENGTH_MASK:  # (a place holds a length under 4 GiB)
            return None
        with self._lock:
            if not self._writable:
                return None
            place = (self._end + len(self._pending)) << _LENGTH_BITS | len(data)
            self._pending += data
            if len(self._pending) >= BLOCK:
                self._flush()
            return place

    def get(self, place: int) -> Any:
        offset, length = place >> _LENGTH_BITS, place & _LENGTH_MASK
        with self._lock:
            if offset >= self._end:
                start = offset - self._end
                data = bytes(self._pending[start : start + length])
            else:
                assert self._file is not None
                data = os.pread(self._file.fileno(), length, offset)
        if len(data) != length:
            raise OSError(f"a spilled object's temporary file ends before {offset + length} bytes")
        return pickle.loads(data)  # noqa: S301 - our own file, written by `put`

    def clear(self) -> None:
        """Nothing kept any more; the file's space given back."""
        with self._lock:
            self._pending.clear()
            self._end = 0
            if self._file is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._file.fileno(), 0)
                    self._writable = True

    def _flush(self) -> None:
        """The pending objects written (under the lock). When the write fails (the directory
        is full), what is pending stays in memory, still readable, and no more is taken."""
        assert self._file is not None
        data, written = bytes(self._pending), 0
        try:
            while written < len(data):  # a write may take part of it (then the rest fails)
                done = os.pwrite(self._file.fileno(), data[written:], self._end + written)
                if done <= 0:
                    raise OSError("the temporary file takes no more")
                written += done
        except OSError:
            self._writable = False  # (a part written past `_end` is never read)
            return
        self._end += len(data)
        self._pending.clear()


class SpilledList(Sequence[T]):
    """An append-only list whose items live in a `SpillFile`; read in order, as often as
    wanted (each iteration reads them back from the start)."""

    def __init__(self) -> None:
        self._file = SpillFile()
        self._places = array("Q")  # the place of each item; HELD: in `_held`
        self._held: dict[int, T] = {}  # the items the file did not take, by index

    def append(self, item: T) -> None:
        place = self._file.put(item)
        if place is None or place >= _HELD:  # (a file past 4 GiB: held from then on)
            self._held[len(self._places)] = item
            place = _HELD
        self._places.append(place)

    def __len__(self) -> int:
        return len(self._places)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        position = range(len(self))[index]  # (an IndexError past the end)
        return self._item(position, self._places[position])

    def __iter__(self) -> Iterator[T]:
        for position, place in enumerate(self._places):
            yield self._item(position, place)

    def _item(self, position: int, place: int) -> T:
        item: T = self._held[position] if place == _HELD else self._file.get(place)
        return item


_HELD = (1 << 64) - 1  # a `SpilledList` place: the item is held in memory
