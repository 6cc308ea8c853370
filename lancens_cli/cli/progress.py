"""A progress bar on stderr, shown only when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int], Callable[[], None]]]:
    """Yields `start(total) -> advance()`; a no-op when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield lambda total: lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    ) as bar:

        def start(total: int) -> Callable[[], None]:
            task = bar.add_task(description, total=total)
            return lambda: bar.advance(task)

        yield start
