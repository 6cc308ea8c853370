"""What every command shares: the configuration options, the session, error handling.

Every global option (`--root`, `-s`, `--profile`, `--commit-retries`, `--json`, `--delimiter`,
`--debug`, ...) is accepted both before the command (`lancens --root R ls`) and after it
(`lancens ls --root R`); `command()` adds them to each command's signature so they are declared
once. `run()` gives every command the same handling of errors and of Ctrl-C.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from lancens_cli import interrupt
from lancens_cli.errors import ExitCode, LancensError, RefusedError

_PANEL = "Namespace options"
_OUTPUT = "Global options"


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

    def __post_init__(self) -> None:
        from lancens_cli.models import set_display_delimiter

        set_display_delimiter(self.delimiter)

    def merge(self, **values: Any) -> None:
        from lancens_cli.models import set_display_delimiter

        if values.get("delimiter") is not None:
            set_display_delimiter(values["delimiter"])
        for key, value in values.items():
            if key == "storage":
                self.storage = [*self.storage, *(value or [])]
            elif key in ("json", "debug"):
                setattr(self, key, getattr(self, key) or bool(value))  # a plain flag: any place
            elif value is not None:  # None: not given here; False is a real --no-... choice
                setattr(self, key, value)

    @property
    def namespace(self):
        if self._namespace is None:
            import os

            from lancens_cli.config import parse_key_values, resolve_config, unknown_env_warning
            from lancens_cli.service.namespace import Namespace

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
            self._namespace = Namespace(
                resolve_config(flags, storage, self.profile),
                on_warning=lambda text: sys.stderr.write(f"warning: {text}\n"),
            )
        return self._namespace

    def ident(self, text: str | None):
        from lancens_cli.models import Identifier

        return Identifier.parse(text, self.delimiter)

    def secrets(self) -> list[str]:
        """Secret values this invocation was given, to keep them out of every message."""
        import os

        from lancens_cli.config import ENV_STORAGE_PREFIX, is_secret_key

        values = []
        for pair in self.storage:
            key, _, value = pair.partition("=")
            if is_secret_key(key):
                values.append(value)
        for key, value in os.environ.items():
            if key.startswith(ENV_STORAGE_PREFIX) and is_secret_key(key):
                values.append(value)
        if self._namespace is not None:
            options = self._namespace.config.storage_options
            values += [v for k, v in options.items() if is_secret_key(k)]
        return values

    def emit(self, result: Any) -> None:
        from lancens_cli.output import emit

        emit(result, json_mode=self.json)


SESSION = Session()


def common_parameters() -> list[inspect.Parameter]:
    """The shared options, as parameters Typer reads from a signature."""

    def opt(name: str, annotation: Any) -> inspect.Parameter:
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None
        )

    return [
        opt(
            "root",
            Annotated[
                str | None,
                typer.Option(
                    "--root",
                    "-r",
                    help="Namespace root: path, file://, s3:// or gs:// URI. (env LANCENS_ROOT)",
                    rich_help_panel=_PANEL,
                ),
            ],
        ),
        opt(
            "manifest",
            Annotated[
                bool | None,
                typer.Option(
                    "--manifest/--no-manifest",
                    help="Use the __manifest table (manifest_enabled).",
                    rich_help_panel=_PANEL,
                    show_default=False,
                ),
            ],
        ),
        opt(
            "dir_listing",
            Annotated[
                bool | None,
                typer.Option(
                    "--dir-listing/--no-dir-listing",
                    help="Find root tables by listing <name>.lance (dir_listing_enabled).",
                    rich_help_panel=_PANEL,
                    show_default=False,
                ),
            ],
        ),
        opt(
            "indexes",
            Annotated[
                bool | None,
                typer.Option(
                    "--indexes/--no-indexes",
                    help="Rebuild the __manifest scalar indexes after each commit "
                    "(inline_optimization_enabled).",
                    rich_help_panel=_PANEL,
                    show_default=False,
                ),
            ],
        ),
        opt(
            "storage",
            Annotated[
                list[str] | None,
                typer.Option(
                    "--storage-option",
                    "-s",
                    metavar="KEY=VALUE",
                    help="Storage option for Lance and fsspec (the spec's storage.*). Repeatable.",
                    rich_help_panel=_PANEL,
                ),
            ],
        ),
        opt(
            "profile",
            Annotated[
                str | None,
                typer.Option(
                    "--profile",
                    "-p",
                    help="Profile from the config file. (env LANCENS_PROFILE)",
                    rich_help_panel=_PANEL,
                ),
            ],
        ),
        opt(
            "commit_retries",
            Annotated[
                int | None,
                typer.Option(
                    "--commit-retries",
                    min=0,
                    help="Retries of a conflicting manifest commit (commit_retries).",
                    rich_help_panel=_PANEL,
                ),
            ],
        ),
        opt(
            "json",
            Annotated[
                bool,
                typer.Option("--json", help="Print one JSON document.", rich_help_panel=_OUTPUT),
            ],
        ),
        opt(
            "delimiter",
            Annotated[
                str | None,
                typer.Option(
                    "--delimiter",
                    help="Separator of identifier parts on the command line and in output "
                    "(default '.').",
                    rich_help_panel=_OUTPUT,
                ),
            ],
        ),
        opt(
            "debug",
            Annotated[
                bool,
                typer.Option("--debug", help="Show tracebacks of errors.", rich_help_panel=_OUTPUT),
            ],
        ),
    ]


COMMON_NAMES = (
    "root",
    "manifest",
    "dir_listing",
    "indexes",
    "storage",
    "profile",
    "commit_retries",
    "json",
    "delimiter",
    "debug",
)


def command(app: typer.Typer, name: str, **kwargs: Any) -> Callable:
    """Register `func` as a command with the shared options added to its signature."""

    def decorate(func: Callable) -> Callable:
        signature = inspect.signature(func, eval_str=True)

        @functools.wraps(func)
        def wrapper(*args: Any, **values: Any) -> Any:
            SESSION.merge(**{k: values.pop(k, None) for k in COMMON_NAMES})
            return run(lambda: func(*args, **values))

        params = list(signature.parameters.values())
        wrapper.__signature__ = signature.replace(parameters=[*params, *common_parameters()])
        app.command(name, **kwargs)(wrapper)
        return func

    return decorate


def confirm_destruction(what: str, yes: bool) -> None:
    """Ask before destroying data on a terminal; refuse without --yes when not on one."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise RefusedError(
            f"{what}: refusing to destroy data without --yes (stdin is not a terminal)"
        )
    with interrupt.immediate():  # waiting on the user: Ctrl-C stops at once
        confirmed = _ask_yes_no(f"{what}? [y/N]: ")
    if not confirmed:
        raise RefusedError(f"{what}: not confirmed")


def _ask_yes_no(question: str) -> bool:
    """A y/N question on the terminal that Ctrl-C always interrupts.

    The answer is awaited in short `select` rounds rather than one blocking read: a SIGINT
    the kernel hands to one of Lance's native threads does not interrupt the main thread's
    read, but Python runs our handler as soon as the main thread runs Python again.
    """
    import select

    sys.stderr.write(question)
    sys.stderr.flush()
    while True:
        interrupt.checkpoint(force=True)
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if ready:
            break
    answer = sys.stdin.readline()
    if not answer:  # end of input: no answer is no
        sys.stderr.write("\n")
        return False
    return answer.strip().lower() in ("y", "yes")


def run(body: Callable[[], Any]) -> Any:
    """Run a command body, turning every failure into one line on stderr and an exit code."""
    with interrupt.deferred():
        result = _run(body)
        if interrupt.pending():  # Ctrl-C after the last safe point: the change is complete
            sys.stderr.write("lancens: interrupted (after the command had finished)\n")
            raise typer.Exit(ExitCode.INTERRUPTED)
        return result


def _run(body: Callable[[], Any]) -> Any:
    from lancens_cli.output import emit_error

    try:
        interrupt.checkpoint()
        return body()
    except LancensError as error:
        if SESSION.debug:
            _print_traceback()
        emit_error(error, json_mode=SESSION.json, secrets=SESSION.secrets())
        raise typer.Exit(error.exit_code) from None
    except KeyboardInterrupt:
        sys.stderr.write("lancens: interrupted\n")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except BrokenPipeError:  # the reader went away (`lancens ls | head`): stop quietly
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(ExitCode.ERROR) from None
    except Exception as error:  # an unexpected failure: still one line unless --debug
        if SESSION.debug:
            _print_traceback()
        from lancens_cli.errors import LancensError as Base
        from lancens_cli.errors import describe_exception

        wrapped = Base(describe_exception(error))
        emit_error(wrapped, json_mode=SESSION.json, secrets=SESSION.secrets())
        raise typer.Exit(ExitCode.ERROR) from None


def _print_traceback() -> None:
    """The current traceback on stderr (for --debug), with every secret value masked."""
    import traceback

    from lancens_cli.output import scrub

    sys.stderr.write(scrub(traceback.format_exc(), SESSION.secrets()))
