"""Ctrl-C without a torn write: SIGINT is deferred to safe points while a command runs.

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread happens to be,
including inside a Lance call whose native threads still call back into Python (reading the
input stream of a write). The exception then unwinds and the interpreter shuts down while those
threads run, which aborts the process (`Fatal Python error: PyGILState_Release`, SIGABRT) and
leaves the write's files behind.

So while a command runs, SIGINT only sets a flag. The code asks for it at safe points
(`checkpoint()`: before a commit, between chunks of a write), where raising `Interrupted` lets
the usual clean-up remove what this process staged. Once a command has made a change that
cannot be taken back (a `__manifest` commit, a deleted directory: `mark_durable()`), it runs to
its end instead, so what it leaves is the finished change; either way the process exits 130.
A second Ctrl-C stops at once (`os._exit`), as a kill would: every command is safe against a
kill, and the next run or `check` picks up the pieces.

pyarrow is imported inside `batches_until_interrupted`: this module is loaded at start-up, and
`lancens --help` starts without pyarrow.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

EXIT_CODE = 130


class Interrupted(KeyboardInterrupt):
    """SIGINT arrived; raised at a safe point, where the clean-up of the step can run."""


class _State:
    pending = False  # a SIGINT arrived
    durable = False  # the command made a change it cannot take back: finish it
    immediate = 0  # > 0: inside pure-Python waiting (a prompt): raise at once
    installed = 0  # nesting depth of deferred()
    previous: Any = None


_STATE = _State()


def _handler(_signum: int, _frame: Any) -> None:
    if _STATE.immediate:
        _STATE.pending = True
        raise KeyboardInterrupt
    if _STATE.pending:  # the second Ctrl-C: leave now, as a kill would
        os.write(2, b"lancens: interrupted again; stopping at once\n")
        os._exit(EXIT_CODE)
    _STATE.pending = True
    with contextlib.suppress(Exception):
        if sys.stderr.isatty():
            os.write(2, b"lancens: stopping at the next safe point (Ctrl-C again to force)\n")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT sets a flag instead of raising, for the duration (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _STATE.installed == 0:
        _STATE.previous = signal.signal(signal.SIGINT, _handler)
        _STATE.pending = _STATE.durable = False
    _STATE.installed += 1
    try:
        yield
    finally:
        _STATE.installed -= 1
        if _STATE.installed == 0:
            signal.signal(signal.SIGINT, _STATE.previous or signal.default_int_handler)
            _STATE.pending = _STATE.durable = False


def install_for_process() -> None:
    """Defer SIGINT from start-up on (the CLI process: nothing restores Python's handler)."""
    if threading.current_thread() is threading.main_thread() and _STATE.installed == 0:
        _STATE.previous = signal.signal(signal.SIGINT, _handler)
        _STATE.installed = 1


def exiting() -> None:
    """The exit code is decided: a Ctrl-C now is ignored rather than killing the shutdown.

    Python's finalization puts back the default SIGINT action, which would make a late Ctrl-C a
    signal death (while Lance's threads wind down) instead of the exit code already decided.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def immediate() -> Iterator[None]:
    """Let SIGINT raise KeyboardInterrupt at once: for waiting on the user, not on Lance."""
    checkpoint(force=True)
    _STATE.immediate += 1
    try:
        yield
    finally:
        _STATE.immediate -= 1


def pending() -> bool:
    """Whether a SIGINT arrived during this command."""
    return _STATE.pending


def checkpoint(*, force: bool = False) -> None:
    """A safe point: raise Interrupted if SIGINT arrived and nothing irrevocable happened yet."""
    if _STATE.pending and (force or not _STATE.durable):
        raise Interrupted


def mark_durable() -> None:
    """The command changed something it cannot take back: from now on it runs to its end."""
    _STATE.durable = True


def batches_until_interrupted(reader: Any) -> Any:
    """The reader's batches, ending early (not failing) once SIGINT arrived.

    Ending the stream makes a Lance write return at its next batch instead of writing the whole
    input first; the caller's checkpoint before the commit then discards what was written.
    """
    import pyarrow as pa

    def batches() -> Iterator[Any]:
        for batch in reader:
            if _STATE.pending:
                return
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())
