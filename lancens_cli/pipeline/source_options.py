"""The `lancens` data source's options, parsed once and shipped to the tasks.

Users write them as Spark options: `root`, `storage.<key>` (exactly the CLI's `-s key=value`),
`delimiter` (identifier separator, default `.`), and the identifier as the `load()`/`save()`
path. The object is plain data so that it pickles to executors.

Lance (through `service.namespace`) is imported inside `namespace()`: the options are unpickled in
every Python worker, and Lance loads only in the task, after the worker forked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import Identifier

STORAGE_PREFIX = "storage."
_KNOWN = frozenset(("root", "path", "delimiter", "manifest_enabled", "dir_listing_enabled"))


@dataclass(frozen=True)
class SourceOptions:
    """Which namespace (and which table in it, if any) a read or write is about."""

    root: str
    storage: dict[str, str] = field(default_factory=dict)
    identifier: str | None = None
    delimiter: str = "."
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], extra_keys: frozenset[str] = frozenset()):
        """From Spark's (case-insensitive) option map; unknown keys are refused by name."""
        values = {str(k): str(v) for k, v in dict(options).items()}
        root = values.pop("root", None)
        if not root:
            raise InvalidInputError("the lancens data source needs option('root', ...)")
        storage: dict[str, str] = {}
        extra: dict[str, str] = {}
        for key in list(values):
            lowered = key.lower()
            if lowered.startswith(STORAGE_PREFIX):
                storage[key[len(STORAGE_PREFIX) :]] = values.pop(key)
            elif lowered in extra_keys:
                extra[lowered] = values.pop(key)
        path = values.pop("path", None) or None
        delimiter = values.pop("delimiter", ".") or "."
        unknown = sorted(k for k in values if k.lower() not in _KNOWN)
        if unknown:
            raise InvalidInputError(f"unknown lancens data source option(s): {', '.join(unknown)}")
        return cls(root, storage, path, delimiter, extra)

    def properties(self) -> dict[str, Any]:
        """Namespace properties (spec 000 keys) for `Namespace.from_properties`."""
        props: dict[str, Any] = {"root": self.root}
        props.update({f"{STORAGE_PREFIX}{k}": v for k, v in self.storage.items()})
        return props

    def namespace(self, as_of: bool = True) -> Any:
        """The namespace, as of the `versionAsOf` / `timestampAsOf` options when given (tasks,
        which read exact table versions the driver planned, pass `as_of=False`)."""
        from lancens_cli.service.namespace import Namespace

        ns = Namespace.from_properties(self.properties())
        if not as_of:
            return ns
        return ns.as_of(self.extra.get("versionasof"), self.extra.get("timestampasof"))

    def since(self) -> tuple[str | None, str | None] | None:
        """(`sinceVersion`, `sinceTimestamp`) of an incremental read, or None for a whole read."""
        version, timestamp = self.extra.get("sinceversion"), self.extra.get("sincetimestamp")
        if version is None and timestamp is None:
            return None
        return version, timestamp

    def changes(self) -> bool:
        """Whether the read is the change feed (`readChanges`): every row inserted or deleted
        after the start (`sinceVersion` / `sinceTimestamp`) up to the version read."""
        wanted = self.flag("readchanges", "readChanges")
        if wanted and self.since() is None:
            raise InvalidInputError(
                "option readChanges needs sinceVersion or sinceTimestamp (0: from the start)"
            )
        return wanted

    def flag(self, key: str, name: str) -> bool:
        """A true/false option (absent: false); any other text is refused naming it."""
        text = self.extra.get(key)
        if text is None:
            return False
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise InvalidInputError(f"option {name}: {text!r} is not true or false")
        return lowered == "true"

    def ident(self) -> Any:
        """The identifier given to load()/save(), or None for the whole partitioned root."""
        return (
            None if self.identifier is None else Identifier.parse(self.identifier, self.delimiter)
        )
