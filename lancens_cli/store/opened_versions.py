"""Table versions opened once per process and lent to one thread at a time.

A version of a table never changes, and the change feed opens the same ones while it plans
(the steps, then each side's pieces) and while it reads: opening one costs a manifest read and
the containment check, and a feed over a hundred tables opened each version three times. A
pylance dataset must not be used by two threads at once ("Already mutably borrowed"), so a
version is lent: a thread that asks for one another thread holds gets its own, and every
dataset is given back to be lent again. Which datasets wait to be lent is bounded (the least
recently given back go first), and none is lent once it was opened a minute ago: a long-lived
process (a Spark worker, a Connect server) may outlive a table dropped and made anew at the
same location, whose version numbers start again. A dataset is kept under its location and the
storage options it was opened with. Lance (`store.tables`) is imported where a version is
opened: the change feed's reader imports this module in Spark's workers before they fork.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lancens_cli.store.storage import Storage

_KEPT = 256  # datasets waiting to be lent, at most
_FRESH_SECONDS = 60.0  # how long after its opening a dataset is still lent
Key = tuple[str, str, int, str | None]  # storage options, location URI, version, branch


class OpenedVersions:
    """Datasets of exact table versions (location, version, branch), each lent to one thread."""

    def __init__(self, most: int = _KEPT, clock: Callable[[], float] = time.monotonic) -> None:
        self._most = most
        self._clock = clock
        # (key, a number that makes it unique) -> (when it was opened, the dataset)
        self._free: OrderedDict[tuple[Key, int], tuple[float, Any]] = OrderedDict()
        self._numbers: dict[Key, list[int]] = {}  # each key's numbers in `_free`, in order
        self._lock = threading.Lock()
        self._given = 0

    @contextmanager
    def lent(
        self, storage: Storage, location: str, version: int, branch: str | None
    ) -> Iterator[Any]:
        """The table at `version` of its line (main, or `branch`), this thread's alone until
        the block ends."""
        key = version_key(storage, location, version, branch)
        found = self._take(key)
        if found is None:
            found = (self._clock(), _open(storage, location, version, branch))
        try:
            yield found[1]
        finally:
            self._give(key, found)

    def give(self, key: Key, dataset: Any) -> None:
        """Keep `dataset`, just opened (the table version `key` names), to be lent."""
        self._give(key, (self._clock(), dataset))

    def _give(self, key: Key, found: tuple[float, Any]) -> None:
        with self._lock:
            self._given += 1
            self._free[(key, self._given)] = found
            self._numbers.setdefault(key, []).append(self._given)
            self._forget(self._clock() - _FRESH_SECONDS)

    def _take(self, key: Key) -> tuple[float, Any] | None:
        stale = self._clock() - _FRESH_SECONDS
        with self._lock:
            self._forget(stale)
            while key in self._numbers:  # the last given back first
                found = self._drop((key, self._numbers[key][-1]))
                if found[0] >= stale:
                    return found
        return None

    def _forget(self, stale: float) -> None:
        """Drop the least recently given back beyond the bound, and the first in line while
        they were opened before `stale` (the rest go when asked for)."""
        while len(self._free) > self._most:
            self._drop(next(iter(self._free)))
        while self._free and next(iter(self._free.values()))[0] < stale:
            self._drop(next(iter(self._free)))

    def _drop(self, entry: tuple[Key, int]) -> tuple[float, Any]:
        found = self._free.pop(entry)
        numbers = self._numbers[entry[0]]
        numbers.remove(entry[1])
        if not numbers:
            del self._numbers[entry[0]]
        return found


def version_key(storage: Storage, location: str, version: int, branch: str | None) -> Key:
    options = repr(sorted(storage.lance_options.items()))
    return (options, storage.uri(location), version, branch)


def _open(storage: Storage, location: str, version: int, branch: str | None) -> Any:
    from lancens_cli.store.tables import open_table

    if branch is None:
        return open_table(storage, location, version=version)
    return open_table(storage, location).checkout_version((branch, version))


OPENED = OpenedVersions()
