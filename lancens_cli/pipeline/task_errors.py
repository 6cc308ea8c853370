"""Our errors across Spark's process boundary, and back to one line in the driver.

Code that Spark runs in its Python workers (planning a read, reading a partition) can only
fail with an exception whose text Spark wraps in its own (a JVM stack trace around a Python
one). `marked()` puts a tag with our error's class in that text; `from_spark()` finds it again
in the driver and rebuilds the error, so a command still prints one line with its exit code.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

from lancens_cli import errors
from lancens_cli.errors import InvalidInputError, LancensError

F = TypeVar("F", bound=Callable[..., Any])
_TAG = re.compile(r"\[lancens:([A-Za-z]+)\] ([^\n]*)")
_INPUT_STATE = re.compile(r"SQLSTATE: (22|42)[0-9A-Z]{3}\b")


class LancensTaskError(RuntimeError):
    """A LancensError raised where Spark runs our code; its text carries the tag."""


def tag(error: LancensError) -> str:
    return f"[lancens:{type(error).__name__}] {' '.join(error.message.split())}"


def marked(func: F) -> F:
    """Run `func`, turning a LancensError into a tagged error Spark passes on as text."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except LancensError as error:
            raise LancensTaskError(tag(error)) from None

    return wrapper


def marked_iter(func: F) -> F:
    """`marked` for a generator function (the error comes while it is iterated)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            yield from func(*args, **kwargs)
        except LancensError as error:
            raise LancensTaskError(tag(error)) from None

    return wrapper  # type: ignore[return-value]


def from_spark(exc: BaseException, doing: str) -> LancensError:
    """The error to report for an exception a Spark call raised in the driver."""
    text = str(exc)
    found = _TAG.search(text)
    if found:
        kind = getattr(errors, found.group(1), None)
        if isinstance(kind, type) and issubclass(kind, LancensError):
            return kind(found.group(2).strip())
        return LancensError(found.group(2).strip())
    first = _first_line(text) or type(exc).__name__
    if type(exc).__name__ in ("AnalysisException", "ParseException", "IllegalArgumentException"):
        return InvalidInputError(f"{doing}: {first}")
    if _INPUT_STATE.search(text[:4000]):  # a data exception (22), a bad statement (42)
        return InvalidInputError(f"{doing}: {first}")
    return LancensError(f"{doing} failed in Spark: {first}")


def _first_line(text: str) -> str:
    """The line that says what went wrong: Spark's error-class line, else the first line."""
    lines = [line.strip() for line in text.strip().splitlines()[:200]]
    for line in lines:
        if _ERROR_CLASS.search(line) and not line.startswith("at "):
            return _JVM_CLASS.sub("", line)[:500]
    for line in lines:
        if line and not line.startswith(("Traceback", "File ", "at ", "An error occurred while")):
            return _JVM_CLASS.sub("", line)[:500]
    return ""


_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*\] ")

# ": org.apache.spark.SparkNumberFormatException: " before the words of a JVM error
_JVM_CLASS = re.compile(r"^:?\s*(?:[a-z_][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): ")
