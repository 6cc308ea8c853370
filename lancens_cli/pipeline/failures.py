"""Our errors across Spark's process boundary, as one line with their exit code.

A task or a data source `commit()` runs in a Python worker; what it raises reaches the command
wrapped in a JVM stack trace. The worker raises `PipelineError`, whose text carries a marker
with the exit code; the command finds the marker in Spark's exception and raises the same
error again, so the user sees one line and the documented exit code.
"""

from __future__ import annotations

import re

from lancens_cli.errors import ExitCode, LancensError

_MARK = "LANCENS-ERROR"
_FOUND = re.compile(_MARK + r"\[(\d+):?(\w*)\] ([^\n]*)")


class PipelineError(RuntimeError):
    """A lancens error raised inside a Spark worker, carried as text."""

    def __init__(self, message: str, exit_code: int = ExitCode.ERROR, kind: str = "") -> None:
        super().__init__(f"{_MARK}[{exit_code}:{kind}] {message}")


def carried(exc: BaseException) -> PipelineError:
    """The worker-side form of any exception (ours keep their message, class and exit code)."""
    if isinstance(exc, PipelineError):
        return exc
    if isinstance(exc, LancensError):
        return PipelineError(" ".join(exc.message.split()), exc.exit_code, type(exc).__name__)
    return PipelineError(f"{type(exc).__name__}: {exc}".splitlines()[0])


class SurfacedError(LancensError):
    """A worker's error, back in the command with its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def surfaced(exc: BaseException) -> LancensError | None:
    """Our error inside a Spark exception, if there is one (the last, the root cause), as
    the class it was raised as."""
    from lancens_cli import errors

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
