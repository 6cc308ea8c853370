"""`prune --delete-rate-limit N`: at most N objects deleted a second, over the whole run.

A shared bucket pays for deletes and throttles a client that sends too many; a cron job must
not slow down everyone else on it. The run's deletes come from two places, so the rate is
shared between them:

- lancens' own (`Storage.delete_file`/`delete_files`/`delete_tree`) take a token per object
  from one bucket that refills at what is left of the rate (`take`);
- a Lance cleanup deletes by itself, at most `delete_rate_limit` objects a second (pylance's
  own option, one object per request when set): each cleanup reserves its share of the rate
  for as long as it runs (`lance_share`), and the bucket refills that much slower meanwhile.
  A share is the rate over the tables pruned at once, at least 1; a cleanup waits for a share
  while the others hold the whole rate.

So at any moment the shares plus the bucket's refill add up to at most N; the bucket holds at
most a tenth of a second's worth, and a batch of lancens' deletes waits for all its tokens, so
no second of the run deletes much more than N objects. With Spark, each task running at the
same time gets its part of N (at least 1 object a second each).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from lancens_cli.errors import InvalidInputError


class DeletePace:
    """A token bucket of objects deleted per second, with reserved shares for Lance."""

    def __init__(
        self,
        per_second: int,
        slots: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_second < 1:
            raise InvalidInputError("--delete-rate-limit: must be at least 1 object a second")
        self.per_second = per_second
        self.share = max(1, per_second // max(1, slots))
        self._clock = clock
        self._tokens = 0.0
        self._reserved = 0
        self._at = clock()
        self._changed = threading.Condition()

    @property
    def batch(self) -> int:
        """Objects deleted in one request: never more than a second's worth (S3: at most 1,000)."""
        return max(1, min(1000, self.per_second))

    @property
    def _rate(self) -> int:
        return self.per_second - self._reserved

    def _refill(self) -> None:
        """Tokens accrue at what the shares leave of the rate, up to a tenth of a second's
        worth (an idle bucket never releases a burst)."""
        now = self._clock()
        room = max(1.0, self._rate / 10)
        self._tokens = min(room, self._tokens + (now - self._at) * self._rate)
        self._at = now

    def take(self, count: int) -> None:
        """Wait until `count` objects may be deleted: tokens are taken as they accrue."""
        with self._changed:
            while count > 0:
                self._refill()
                got = min(count, int(self._tokens))
                if got:
                    self._tokens -= got
                    count -= got
                    continue
                # woken early when a Lance share is given back and the refill speeds up
                rate = self._rate
                self._changed.wait((1 - self._tokens) / rate if rate > 0 else None)

    @contextmanager
    def lance_share(self) -> Iterator[int]:
        """The `delete_rate_limit` for one Lance cleanup, reserved while it runs."""
        with self._changed:
            while self._reserved + self.share > self.per_second:
                self._changed.wait()
            self._refill()
            self._reserved += self.share
            self._tokens = min(self._tokens, max(1.0, self._rate / 10))
        try:
            yield self.share
        finally:
            with self._changed:
                self._refill()
                self._reserved -= self.share
                self._changed.notify_all()


def lance_rate(pace: DeletePace | None) -> AbstractContextManager[int | None]:
    """The `delete_rate_limit` to give a Lance cleanup (reserved while it runs), or None."""
    return pace.lance_share() if pace is not None else nullcontext(None)
