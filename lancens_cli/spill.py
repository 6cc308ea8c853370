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
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
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


class SpilledMap(Mapping[str, T]):
    """Text keys to objects, both kept in a `SpilledList`: memory keeps 8 bytes an entry (its
    key's hash and where its pair is, in one word), not the key. Made for a phase of writes,
    then one of reads (a run's record: read whole, then asked; or filled, then written out):
    the first read after writes sorts the words once, and a key written again counts once, as
    last written. Iteration follows the hashes, not the order of writing. Safe to write from
    several threads."""

    def __init__(self, pairs: Iterable[tuple[str, T]] = ()) -> None:
        self._lock = threading.Lock()
        self._pairs: SpilledList[tuple[str, T]] = SpilledList()
        self._hashes = array("Q")  # of each pair's key, in the order written
        self._index: _HashIndex | None = None
        for key, value in pairs:
            self[key] = value

    def __setitem__(self, key: str, value: T) -> None:
        with self._lock:
            self._pairs.append((key, value))
            self._hashes.append(_hash(key))
            self._index = None

    def __getitem__(self, key: str) -> T:
        for found, value in self._candidates(key):
            if found == key:
                return value
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and any(found == key for found, _ in self._candidates(key))

    def __len__(self) -> int:
        return len(self._sorted().words)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _value in self.pairs())

    def pairs(self) -> Iterator[tuple[str, T]]:
        """Every (key, value), each pair read back once (what `items()` would read twice)."""
        index = self._sorted()
        return (self._pairs[index.position(word)] for word in index.words)

    def _candidates(self, key: str) -> Iterator[tuple[str, T]]:
        """The pairs whose key has `key`'s hash as far as the index keeps it (almost always
        one, or none)."""
        index = self._sorted()
        return (self._pairs[position] for position in index.positions(_hash(key)))

    def _sorted(self) -> _HashIndex:
        with self._lock:
            if self._index is None:
                self._index = _HashIndex(self._hashes, self._pairs)
            return self._index


class _HashIndex:
    """Each written pair as one word, its key's hash above its position, sorted: a lookup
    bisects. The hash keeps what bits the position leaves, so keys alike in those share a
    run of words, told apart by reading their keys. A key's earlier writes are dropped."""

    def __init__(self, hashes: array[int], pairs: SpilledList[tuple[str, Any]]) -> None:
        self.bits = max(1, len(hashes).bit_length())
        self.mask = (1 << self.bits) - 1
        words = array("Q", sorted(self._word(h, p) for p, h in enumerate(hashes)))
        self.words = _last_writes(words, self.bits, self.mask, pairs)

    def _word(self, hash_: int, position: int) -> int:
        return (hash_ >> self.bits) << self.bits | position

    def position(self, word: int) -> int:
        return word & self.mask

    def positions(self, hash_: int) -> Iterator[int]:
        """The positions of the pairs whose key hash is `hash_` as far as the index keeps it."""
        first, words = self._word(hash_, 0), self.words
        at = bisect_left(words, first)
        while at < len(words) and words[at] >> self.bits == first >> self.bits:
            yield words[at] & self.mask
            at += 1


def _hash(key: str) -> int:
    return hash(key) & 0xFFFF_FFFF_FFFF_FFFF  # (this process's hash: the index lives with it)


def _last_writes(words: array[int], bits: int, mask: int, pairs: SpilledList[Any]) -> array[int]:
    """`words` without those of a key's earlier writes. Only where a hash repeats (a key
    written again, or keys alike in hash) are the keys read to tell."""
    repeats = [at for at, (a, b) in enumerate(pairwise(words)) if a >> bits == b >> bits]
    dead: set[int] = set()
    for run in _runs(repeats):
        seen: set[str] = set()
        for word in reversed([words[at] for at in run]):  # the last write first
            key = pairs[word & mask][0]
            if key in seen:
                dead.add(word)
            seen.add(key)
    return array("Q", (word for word in words if word not in dead)) if dead else words


def _runs(repeats: list[int]) -> Iterator[list[int]]:
    """The runs of sorted places with one hash, from the places `at` whose hash the one at
    `at + 1` repeats."""
    run: list[int] = []
    for at in repeats:
        if run and run[-1] != at:
            yield run
            run = []
        run = run or [at]
        run.append(at + 1)
    if run:
        yield run
