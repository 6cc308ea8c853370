"""The error hierarchy.

Every error carries two numbers: the process exit code of the CLI contract (`ExitCode` below,
listed in `lancens --help` and in the README's "Output and exit codes") and the numeric code of
the Lance namespace error catalogue, so that JSON consumers can match errors the same way they
match those of the reference implementation (pylance's `DirectoryNamespace`). An error raised
in a command becomes one line on stderr and its exit code in `cli/common.py` (`run`); a usage
error Click finds before any command runs gets the same treatment in `cli/app.py` (exit 2).
"""

from __future__ import annotations

import re

_RUST_LOCATION = re.compile(r",\s*(?:location:\s*)?/\S+\.rs:\d+:\d+")


class ExitCode:
    """Stable process exit codes (documented in the README)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    REFUSED = 5
    PARTIAL = 6
    PENDING = 7  # `migrate-v1 --check`: there are tables left to migrate
    INTERRUPTED = 130


class LancensError(Exception):
    """Base of every error the tool reports to a user."""

    exit_code: int = ExitCode.ERROR
    namespace_code: int = 18  # Internal
    name: str = "Internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "code": self.namespace_code, "message": self.message}


class UnsupportedError(LancensError):
    namespace_code, name = 0, "Unsupported"


class NamespaceNotFoundError(LancensError):
    exit_code, namespace_code, name = ExitCode.NOT_FOUND, 1, "NamespaceNotFound"


class NamespaceAlreadyExistsError(LancensError):
    exit_code, namespace_code, name = ExitCode.CONFLICT, 2, "NamespaceAlreadyExists"


class NamespaceNotEmptyError(LancensError):
    exit_code, namespace_code, name = ExitCode.REFUSED, 3, "NamespaceNotEmpty"


class TableNotFoundError(LancensError):
    exit_code, namespace_code, name = ExitCode.NOT_FOUND, 4, "TableNotFound"


class TableAlreadyExistsError(LancensError):
    exit_code, namespace_code, name = ExitCode.CONFLICT, 5, "TableAlreadyExists"


class TableVersionNotFoundError(LancensError):
    exit_code, namespace_code, name = ExitCode.NOT_FOUND, 11, "TableVersionNotFound"


class InvalidInputError(LancensError):
    exit_code, namespace_code, name = ExitCode.USAGE, 13, "InvalidInput"


class ConfigError(InvalidInputError):
    """A bad configuration key, value, profile or root."""


class ConcurrentModificationError(LancensError):
    exit_code, namespace_code, name = ExitCode.CONFLICT, 14, "ConcurrentModification"


class RefusedError(LancensError):
    """A safety rail refused the operation (e.g. destroying data without --yes)."""

    exit_code, namespace_code, name = ExitCode.REFUSED, 15, "PermissionDenied"


class StorageUnavailableError(LancensError):
    namespace_code, name = 17, "ServiceUnavailable"


class InvalidTableStateError(LancensError):
    """A directory that should hold a Lance table does not (or holds a broken one)."""

    namespace_code, name = 19, "InvalidTableState"


class ManifestError(LancensError):
    """`__manifest` cannot be read or is not one we understand."""

    namespace_code, name = 19, "InvalidTableState"


class CatalogDamagedError(ManifestError):
    """What `__manifest` records about the namespace (its schema, a partition spec, the schema
    history) cannot be read: damage for `check` to report. Reads show what they can; a
    command that needs the unreadable part refuses (exit 3: what it needs is not there)."""

    exit_code = ExitCode.NOT_FOUND


def lance_message(exc: BaseException) -> str:
    """The first line of a (Lance) error, without the Rust source locations it carries."""
    text = str(exc).splitlines()[0] if str(exc).strip() else "no details"
    # an error of a Python input stream Lance read: its message, not the traceback that follows
    text = text.split(" Detail: Python exception")[0]
    return _RUST_LOCATION.sub("", text).strip()


def describe_exception(exc: BaseException) -> str:
    """An unexpected failure in words: what failed and on which path, never a class name."""
    if isinstance(exc, OSError) and (exc.strerror or exc.filename):
        what = (exc.strerror or "input/output error").rstrip(".")
        what = what[0].lower() + what[1:]
        paths = [str(p) for p in (exc.filename, exc.filename2) if p]
        return f"storage error: {what}" + (f" ({' -> '.join(paths)})" if paths else "")
    if isinstance(exc, OverflowError):
        return f"a number is out of range: {lance_message(exc)}"
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply"
    if not str(exc).strip():
        return "an unexpected internal failure (rerun with --debug for the details)"
    return lance_message(exc)
