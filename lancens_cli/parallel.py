"""Running one function over many items in threads, with memory bounded in the number of items.

`ThreadPoolExecutor.map` submits every item at once: one `Future` (about 1.6 KB) per item lives
until its result is read, 160 MB for a prune over 100,000 tables. `completed_map` keeps at most
a few items per worker in flight and hands each result on as soon as it is done, with its
item's position, so that one slow item never leaves the other workers idle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from queue import SimpleQueue
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

AHEAD_PER_WORKER = 4  # items in flight (submitted, result not yet handed on), per worker


def completed_map(
    fn: Callable[[T], R], items: Iterable[T], workers: int
) -> Iterator[tuple[int, R]]:
    """`(position, fn(item))` for every item, `workers` at a time, in the order they finish.

    At most `workers * AHEAD_PER_WORKER` items are in flight. An exception raised by `fn` is
    raised here when its item finishes (items not yet submitted then never are); one raised
    by `items` itself, when the next item is asked for. One worker runs `fn` in the calling
    thread: a pool of one only adds a hand-over between two threads per item."""
    if workers <= 1:
        for position, item in enumerate(items):
            yield position, fn(item)
        return
    finished: SimpleQueue[tuple[int, Future[R]]] = SimpleQueue()  # filled as items finish
    source = enumerate(items)
    with ThreadPoolExecutor(max_workers=workers) as pool:

        def submit_next() -> bool:
            for position, item in source:
                future = pool.submit(fn, item)

                def on_done(done: Future[R], at: int = position) -> None:
                    finished.put((at, done))

                future.add_done_callback(on_done)
                return True
            return False

        in_flight = 0
        while in_flight < workers * AHEAD_PER_WORKER and submit_next():
            in_flight += 1
        while in_flight:
            position, future = finished.get()
            in_flight -= 1
            if submit_next():  # before handing the result on: the workers stay busy
                in_flight += 1
            yield position, future.result()


def ordered(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """`fn` of every item in the items' order, each handed on once those before it are: only
    the results that finished ahead of a slower earlier one wait (`completed_map`: no worker
    idles behind a slow item, so what waits behind one grows while it runs)."""
    waiting: dict[int, R] = {}
    next_position = 0
    for position, result in completed_map(fn, items, workers):
        waiting[position] = result
        while next_position in waiting:
            yield waiting.pop(next_position)
            next_position += 1


def ordered_chain(fn: Callable[[T], Iterable[R]], items: Sequence[T], workers: int) -> Iterator[R]:
    """What `fn` yields for every item, item after item in the items' order, `workers` items
    worked on at once. An item's results are gathered before they are handed on, and at most
    `workers * AHEAD_PER_WORKER` items are gathered or being gathered: what waits behind a slow
    item is bounded. Stopped early (a `--limit` met, an interrupt, an error), the items not
    yet started never are. One worker, or one item, runs in this thread as a plain loop."""
    if workers <= 1 or len(items) <= 1:
        for item in items:
            yield from fn(item)
        return
    pending = iter(items)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        ahead: deque[Future[list[R]]] = deque()

        def gathered(item: T) -> list[R]:
            return list(fn(item))

        def submit(count: int) -> None:
            for item in islice(pending, count):
                ahead.append(pool.submit(gathered, item))

        try:
            submit(workers * AHEAD_PER_WORKER)
            while ahead:
                results = ahead.popleft().result()
                submit(1)
                yield from results
        finally:
            for future in ahead:
                future.cancel()
