"""Progress bars on stderr, shown only when stderr is a terminal and the output is not --json.

rich is imported inside `_progress`, so that `lancens --help` and runs without a terminal start
without it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lancens_cli.cli.session import session
from lancens_cli.words import human_bytes


def showing() -> bool:
    """A bar is for a person watching: never in a pipe or a log, never beside a JSON document."""
    return sys.stderr.isatty() and not session().json


def _progress(*columns: Any):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        *columns,
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    )


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int], Callable[[], None]]]:
    """Yields `start(total) -> advance()`; a no-op when no bar is shown.

    `advance` may be called from worker threads (rich's Progress is thread-safe).
    """
    if not showing():
        yield lambda total: lambda: None
        return
    with _progress() as bar:

        def start(total: int) -> Callable[[], None]:
            task = bar.add_task(description, total=total)
            return lambda: bar.advance(task)

        yield start


@contextmanager
def freed_progress_bar(
    description: str, unit: str
) -> Iterator[Callable[[int], Callable[[int], None]]]:
    """Yields `start(total) -> advance(bytes_freed)`: items done and the bytes freed so far.
    A no-op when no bar is shown; `advance` may be called from worker threads."""
    if not showing():
        yield lambda total: lambda freed: None
        return

    with _progress(unit + ", {task.fields[freed]} freed") as bar:
        lock = threading.Lock()

        def start(total: int) -> Callable[[int], None]:
            task = bar.add_task(description, total=total, freed="0 B")
            freed = [0]

            def advance(size: int) -> None:
                with lock:
                    freed[0] += size
                    bar.update(task, advance=1, freed=human_bytes(freed[0]))

            return advance

        yield start


@contextmanager
def spark_progress(description: str) -> Iterator[Callable[[Any], Any]]:
    """Yields `watch(spark) -> spark`: from then on the bar counts the Spark tasks finished.

    Spark's own console bar is off (pipeline/spark_session.py); this one polls the status tracker
    in a thread, so the job itself is untouched. A no-op when no bar is shown.
    """
    if not showing():
        yield lambda spark: spark
        return
    stop = threading.Event()
    threads: list[threading.Thread] = []
    with _progress("Spark tasks") as bar:
        task = bar.add_task(description, total=None)

        def poll(spark: Any) -> None:
            stages: dict[int, tuple[int, int]] = {}  # stage id -> (completed, total)
            try:
                tracker = spark.sparkContext.statusTracker()
            except Exception:  # a Spark Connect session: no tracker here, the bar only spins
                return
            while not stop.wait(0.25):
                try:
                    for stage_id in {*tracker.getActiveStageIds(), *stages}:
                        info = tracker.getStageInfo(stage_id)
                        if info is not None:
                            stages[stage_id] = (info.numCompletedTasks, info.numTasks)
                except Exception:  # the session is stopping: the bar just stops moving
                    return
                if stages:
                    done = sum(c for c, _ in stages.values())
                    bar.update(task, completed=done, total=sum(t for _, t in stages.values()))

        def watch(spark: Any) -> Any:
            thread = threading.Thread(target=poll, args=(spark,), daemon=True)
            thread.start()
            threads.append(thread)
            return spark

        try:
            yield watch
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=2)
