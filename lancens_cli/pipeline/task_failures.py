"""The one path of an error from a Spark task (or a data source call) to the user's terminal.

Code that Spark runs in its Python workers (planning a read, reading or writing a partition,
a join group, a prune task) can only fail with an exception whose text Spark wraps in its own:
a JVM stack trace around a Python one. On the worker side `carried()` (and the `marked`
decorators) put a tag with our error's class and exit code into that text; in the driver,
`from_spark()` finds the tag again and rebuilds the error, or says in one line what Spark said
(the input's fault is exit 2). Every Spark command (`ingest`, `scan`, `join`, `prune --master`)
goes through `spark_errors()`, so a task's error reaches the user the same way from each, and
so does a Ctrl-C: the jobs are cancelled and the command stops in one line, exit 130.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from lancens_cli import errors, interrupt
from lancens_cli.errors import ExitCode, InvalidInputError, LancensError, lance_message
from lancens_cli.pipeline.spark_session import SparkSetupError, cancelled_on_interrupt

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "LANCENS-ERROR"
_FOUND = re.compile(_MARK + r"\[(\d+):?(\w*)\] ([^\n]*)")
_INPUT_STATE = re.compile(r"SQLSTATE: (22|42)[0-9A-Z]{3}\b")
# Spark error classes that mean the input files are at fault (exit 2).
_INPUT_ERRORS = re.compile(
    r"\[((?:MALFORMED|CANNOT_PARSE|CAST_INVALID_INPUT|PATH_NOT_FOUND|UNABLE_TO_INFER|"
    r"INVALID_JSON|FAILED_READ_FILE)[A-Z_.]*)\]([^\n]*)"
)
_PYTHON_TRACEBACK = "Traceback (most recent call last):"
_QUALIFIED = re.compile(r"^(?:[a-z_][\w]*\.)+(?=[A-Z]\w*: )")
_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*\] ")
# ": org.apache.spark.SparkNumberFormatException: " before the words of a JVM error
_JVM_CLASS = re.compile(r"^:?\s*(?:[a-z_][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): ")


class TaskFailure(RuntimeError):
    """An error raised where Spark runs our code, carried as tagged text."""

    def __init__(self, message: str, exit_code: int = ExitCode.ERROR, kind: str = "") -> None:
        super().__init__(f"{_MARK}[{exit_code}:{kind}] {message}")


def carried(exc: BaseException) -> TaskFailure:
    """The worker-side form of any exception (ours keep their message, class and exit code)."""
    if isinstance(exc, TaskFailure):
        return exc
    if isinstance(exc, LancensError):
        return TaskFailure(" ".join(exc.message.split()), exc.exit_code, type(exc).__name__)
    return TaskFailure(f"{type(exc).__name__}: {exc}".splitlines()[0])


def marked(func: F) -> F:
    """Run `func`, turning our error into one Spark passes on as tagged text (any other error
    is left to Spark's own words)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except LancensError as error:
            raise carried(error) from None

    return wrapper  # type: ignore[return-value]


def marked_iter(func: F) -> F:
    """`marked` for a generator function (the error comes while it is iterated)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            yield from func(*args, **kwargs)
        except LancensError as error:
            raise carried(error) from None

    return wrapper  # type: ignore[return-value]


class SurfacedError(LancensError):
    """A worker's error of a class the driver does not rebuild, with its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def surfaced(exc: BaseException) -> LancensError | None:
    """Our error inside a Spark exception, if there is one (the last: the root cause), as the
    class it was raised as."""
    found = _FOUND.findall(str(exc))
    if not found:
        return None
    code, kind, message = found[-1]
    cls = getattr(errors, kind, None) if kind else None
    if isinstance(cls, type) and issubclass(cls, LancensError) and cls.exit_code == int(code):
        try:
            return cls(message.strip())
        except TypeError:
            pass
    return SurfacedError(message.strip(), int(code))


_NO_PACKAGE = re.compile(r"No module named '?lancens_cli")


def from_spark(exc: BaseException, doing: str) -> LancensError:
    """The one-line error to report for an exception a Spark call raised in the driver."""
    ours = surfaced(exc)
    if ours is not None:
        return ours
    text = str(exc)
    if _NO_PACKAGE.search(text[:20000]):
        return SparkSetupError(
            f"{doing}: the Python of the Spark server or its executors cannot import lancens_cli:"
            " install it where Spark runs (python -m pip install 'lancens-cli[spark]')"
        )
    found = _INPUT_ERRORS.search(text)
    if found:
        detail = " ".join(found.group(2).split())[:300]
        return InvalidInputError(f"the input cannot be read: [{found.group(1)}] {detail}")
    first = _first_line(text) or type(exc).__name__
    if type(exc).__name__ in ("AnalysisException", "ParseException", "IllegalArgumentException"):
        return InvalidInputError(f"{doing}: {first}")
    if _INPUT_STATE.search(text[:4000]):  # a data exception (22), a bad statement (42)
        return InvalidInputError(f"{doing}: {first}")
    return LancensError(f"{doing} failed in Spark: {first}")


@contextmanager
def spark_errors(doing: str) -> Iterator[None]:
    """Run Spark calls; our errors pass through, Spark's become one line (`from_spark`). After a
    Ctrl-C (its jobs cancelled: `cancelled_on_interrupt`) a failure is the interruption: the
    command stops with `interrupt.Interrupted` (exit 130, one line), not with the cancel's
    error."""
    with cancelled_on_interrupt():
        try:
            yield
        except LancensError:
            stop_if_interrupted()
            raise
        except Exception as exc:
            stop_if_interrupted()
            raise from_spark(exc, doing) from exc


def stop_if_interrupted() -> None:
    """A Spark call failed after a Ctrl-C: the cancel failed it (what the failure removed, an
    aborted write's files, is no change to finish), so the command stops as interrupted."""
    if interrupt.pending():
        raise interrupt.Interrupted from None


def _first_line(text: str) -> str:
    """The line that says what went wrong: the exception a Python worker raised, else Spark's
    error-class line, else the first line."""
    raised = _python_exception_line(text)
    if raised:
        return raised
    lines = [line.strip() for line in text.strip().splitlines()[:200]]
    for line in lines:
        if _ERROR_CLASS.search(line) and not line.startswith("at "):
            return _JVM_CLASS.sub("", line)[:500]
    for line in lines:
        if line and not line.startswith(("Traceback", "File ", "at ", "An error occurred while")):
            return _JVM_CLASS.sub("", line)[:500]
    return ""


def _python_exception_line(text: str) -> str:
    """`Type: message` of the exception a Python worker's traceback ends with (module path and
    Lance's Rust source locations removed), or "" when the text carries no traceback."""
    if _PYTHON_TRACEBACK not in text:
        return ""
    after = text.split(_PYTHON_TRACEBACK, 1)[1].splitlines()
    for line in after:
        if line.strip() and not line[0].isspace():
            return lance_message(_QUALIFIED.sub("", line.strip()))[:500]
    return ""
