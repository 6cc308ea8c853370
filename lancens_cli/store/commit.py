"""Compare-and-swap commits to Lance tables and `__manifest`: one conflict test, one retry policy.

Every commit we make names the version it was planned on (`read_version`, `max_retries=0`), so
Lance refuses it when another writer got there first. What such a refusal looks like, how many
times a table commit is tried again and how long `__manifest` waits between rounds live here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from lance.commit import CommitConflictError

from lancens_cli.errors import ConcurrentModificationError

T = TypeVar("T")

# What a Lance commit raises: CommitConflictError is an OSError; others arrive as these.
COMMIT_ERRORS = (OSError, ValueError, RuntimeError)
TABLE_COMMIT_ATTEMPTS = 20  # tries per table when another writer commits to it meanwhile


def is_conflict(exc: BaseException, *also: str) -> bool:
    """Whether a commit failed because another writer committed first (`also`: more words)."""
    if isinstance(exc, CommitConflictError):
        return True
    text = str(exc).lower()
    return any(word in text for word in ("conflict", *also))


def retry_on_conflict(
    attempt: Callable[[], T | None],
    *,
    failed: Callable[[Exception], Exception],
    gave_up: str,
    also: tuple[str, ...] = (),
    attempts: int = TABLE_COMMIT_ATTEMPTS,
) -> T:
    """Run `attempt` until it returns a result; a conflict (or a None result) runs it again.

    Any other commit error becomes `failed(error)`; after `attempts` tries the commit gives up
    with ConcurrentModificationError(`gave_up`).
    """
    for _ in range(attempts):
        try:
            result = attempt()
        except COMMIT_ERRORS as exc:
            if is_conflict(exc, *also):
                continue
            raise failed(exc) from None
        if result is not None:
            return result
    raise ConcurrentModificationError(gave_up)


def backoff(attempt: int) -> None:
    """The jittered, doubling wait before `__manifest` round `attempt` (at most ~1.5 s)."""
    time.sleep(min(0.02 * 2 ** (attempt - 1), 1.0) * random.uniform(0.5, 1.5))
