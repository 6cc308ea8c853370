"""Table versions opened once per process and lent to one thread at a time.

A version of a table never changes, and the change feed opens the same ones while it plans
(the steps, then each side's pieces) and while it reads: opening one costs a manifest read and
the containment check, and a feed over a hundred tables opened each version three times. A
pylance dataset must not be used by two threads at once ("Already mutably borrowed"), so a
version is lent: a thread that asks for one another thread holds gets its own, and every
dataset is given back to be lent again. Which datasets wait to be lent is bounded (the least
recently given back go first), and none waits longer than a minute: a long-lived process (a
Spark worker, a Connect server) may outlive a table dropped and made anew at the same
location, whose version numbers start again. Lance (`store.tables`) is imported where a
version is opened: the change feed's reader imports this module in Spark's workers before they
fork.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lancens_cli.store.storage import Storage

_KEPT = 256  # datasets waiting to be lent, at most
_FRESH_SECONDS = 60.0  # how long one waits to be lent again
_Key = tuple[str, int, str | None]


class OpenedVersions:
    """Datasets of exact table versions (location, version, branch), each lent to one thread."""

    def __init__(self, most: int = _KEPT) -> None:
        self._most = most
        self._free: OrderedDict[tuple[_Key, int], tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._given = 0  # makes each waiting dataset's key unique

    @contextmanager
    def lent(
        self, storage: Storage, location: str, version: int, branch: str | None
    ) -> Iterator[Any]:
        """The table at `version` of its line (main, or `branch`), this thread's alone until
        the block ends."""
        key = (storage.uri(location), version, branch)
        dataset = self._take(key)
        if dataset is None:
            dataset = _open(storage, location, version, branch)
        try:
            yield dataset
        finally:
            self.give(key, dataset)

    def give(self, key: _Key, dataset: Any) -> None:
        """Keep `dataset` (the table version `key` names) to be lent."""
        with self._lock:
            self._given += 1
            self._free[(key, self._given)] = (time.monotonic(), dataset)
            while len(self._free) > self._most:
                self._free.popitem(last=False)

    def _take(self, key: _Key) -> Any:
        stale = time.monotonic() - _FRESH_SECONDS
        with self._lock:
            while self._free and next(iter(self._free.values()))[0] < stale:
                self._free.popitem(last=False)
            for waiting in reversed(self._free):
                if waiting[0] == key:
                    return self._free.pop(waiting)[1]
        return None


def _open(storage: Storage, location: str, version: int, branch: str | None) -> Any:
    from lancens_cli.store.tables import open_table

    if branch is None:
        return open_table(storage, location, version=version)
    return open_table(storage, location).checkout_version((branch, version))


OPENED = OpenedVersions()
