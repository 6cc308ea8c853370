"""The session of one invocation: the shared options it was given and the Namespace they build.

Each invocation builds its own `Session` in the root click context (`ctx.obj`, by the app's
callback); commands reach it through `session()`. Nothing is kept between invocations, so
in-process runs (tests, a notebook) start clean without resetting a global.

The service layer is imported inside `Session.namespace` so that `lancens --help` starts without
pyarrow or Lance.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.cli.output import emit
from lancens_cli.config import (
    ENV_STORAGE_PREFIX,
    is_secret_key,
    parse_key_values,
    resolve_config,
    unknown_env_warning,
)
from lancens_cli.models import Identifier, set_display_delimiter

try:  # Typer >= 0.24 carries its own copy of Click
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - older Typer on Click
    from click import get_current_context


@dataclass
class Session:
    """Options resolved for one invocation; builds the Namespace on first use."""

    root: str | None = None
    manifest: bool | None = None
    dir_listing: bool | None = None
    indexes: bool | None = None
    commit_retries: int | None = None
    storage: list[str] = field(default_factory=list)
    profile: str | None = None
    delimiter: str = "."
    json: bool = False
    debug: bool = False
    _namespace: Any = None
    _roots_opened: list[Any] = field(default_factory=list)  # by namespace_at (join, join-plan)
    _config: Any = None

    def __post_init__(self) -> None:
        set_display_delimiter(self.delimiter)

    def merge(self, **values: Any) -> None:
        if values.get("delimiter") is not None:
            set_display_delimiter(values["delimiter"])
        for key, value in values.items():
            if key == "storage":
                self.storage = [*self.storage, *(value or [])]
            elif key in ("json", "debug"):
                setattr(self, key, getattr(self, key) or bool(value))  # a plain flag: any place
            elif value is not None:  # None: not given here; False is a real --no-... choice
                setattr(self, key, value)

    def config(self):
        """The root's configuration (flags > environment > profile), without opening it:
        no Lance imported (`prune` answers a run with nothing to do from this alone)."""
        if self._config is None:
            self._config = self._resolve_config()
        return self._config

    def _resolve_config(self):
        warning = unknown_env_warning(os.environ)
        if warning:  # a misspelt setting would otherwise be silently ignored
            sys.stderr.write(warning + "\n")
        flags = {
            "root": self.root,
            "manifest_enabled": self.manifest,
            "dir_listing_enabled": self.dir_listing,
            "inline_optimization_enabled": self.indexes,
            "commit_retries": self.commit_retries,
        }
        storage = parse_key_values(self.storage, "storage option")
        return resolve_config(flags, storage, self.profile)

    @property
    def namespace(self):
        if self._namespace is None:
            from lancens_cli.service.namespace import Namespace

            self._namespace = Namespace(
                self.config(),
                on_warning=lambda text: sys.stderr.write(f"warning: {text}\n"),
            )
        return self._namespace

    def namespace_at(self, root: str) -> Any:
        """A namespace at `root` with this invocation's storage options, profile and flags.

        `join-plan` and `join` take their roots as arguments: a copy of the session with
        another root builds the same configuration (flags > environment > profile) for each.
        """
        opened = dataclasses.replace(self, root=root, _namespace=None, _config=None).namespace
        self._roots_opened.append(opened)  # its profile's secrets are masked in messages too
        return opened

    def ident(self, text: str | None):
        return Identifier.parse(text, self.delimiter)

    def secrets(self) -> list[str]:
        """Secret values this invocation was given, to keep them out of every message."""
        values = []
        for pair in self.storage:
            key, _, value = pair.partition("=")
            if is_secret_key(key):
                values.append(value)
        for key, value in os.environ.items():
            if key.startswith(ENV_STORAGE_PREFIX) and is_secret_key(key):
                values.append(value)
        for ns in [self._namespace, *self._roots_opened]:
            if ns is not None:
                options = ns.config.storage_options
                values += [v for k, v in options.items() if is_secret_key(k)]
        return values

    def emit(self, result: Any) -> None:
        emit(result, json_mode=self.json)


def session() -> Session:
    """The session of the invocation running now (made by the app's callback)."""
    return get_current_context().find_root().ensure_object(Session)
