"""The `lancens` Typer app: global options and the command modules.

Nothing heavy is imported here: Lance, pyarrow and fsspec load only inside the commands that
touch storage, so `lancens --help` starts fast.
"""

from __future__ import annotations

import inspect
import sys
from typing import Annotated

import typer

from lancens_cli.cli import common
from lancens_cli.cli.common import SESSION

app = typer.Typer(
    name="lancens",
    help="Administer Lance directory namespaces: V1 directories, the V2 __manifest, "
    "compatibility mode, migration and partitioned namespaces.\n\n"
    "Exit codes: 0 ok, 1 error, 2 usage or invalid input, 3 not found, 4 conflict or already "
    "exists, 5 refused by a safety rail, 6 partial failure, 7 migration pending, 130 interrupted.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"lancens {version('lancens-cli')}")
        raise typer.Exit()


def _global_options(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = None,
) -> None:
    """Options of the program itself; the shared ones are in common.common_parameters()."""


def _callback(**values) -> None:
    """Administer Lance directory namespaces."""
    SESSION.merge(**{k: values.pop(k, None) for k in common.COMMON_NAMES})
    _global_options(**values)


_callback.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        *inspect.signature(_global_options, eval_str=True).parameters.values(),
        *common.common_parameters(),
    ]
)
app.callback()(_callback)


def _register_commands() -> None:
    from lancens_cli.cli import (  # noqa: F401
        check,
        create,
        describe,
        drop,
        evolve_schema,
        ingest,
        init,
        join,
        join_plan,
        ls,
        migrate,
        partition_spec,
        partitions,
        prune,
        register,
        rename,
        scan,
        tag_partitions,
        write,
    )


_register_commands()


# Commands that never hand data to pandas; for them, importing Lance need not load pandas.
_PANDAS_FREE = frozenset(
    (
        "ls",
        "describe",
        "create",
        "rename",
        "drop",
        "register",
        "deregister",
        "init",
        "check",
        "migrate-v1",
        "add-partition-spec",
        "evolve-schema",
        "join-plan",
        "write",
        "prune",
        "tag-partitions",
    )
)
_VALUE_OPTIONS = frozenset(
    ("--root", "-r", "--storage-option", "-s", "--profile", "-p", "--delimiter", "--commit-retries")
)


def _command_name(argv: list[str]) -> str | None:
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


class _NoPandas:
    """Import hook that reports pandas as absent.

    pyarrow probes for pandas while Lance imports (about 0.2 s, a third of a cold `ls`); the
    commands in _PANDAS_FREE never use it, so they tell pyarrow it is not there.
    """

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"pandas is not loaded by this command: {name}")
        return None


def main() -> None:
    import os

    from lancens_cli import interrupt

    interrupt.install_for_process()  # Ctrl-C from start-up on: see lancens_cli/interrupt.py

    # Lance logs warnings such as "No existing dataset ... will be created" to stderr; our
    # stderr carries only our own messages unless the user asks for Lance's.
    os.environ.setdefault("LANCE_LOG", "error")
    if _command_name(sys.argv[1:]) in _PANDAS_FREE and "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
    code = _run_app(sys.argv[1:])
    interrupt.exiting()
    sys.exit(code)


def _run_app(argv: list[str]) -> int:
    """Run the app; a usage error is one line on stderr too (one JSON object with --json)."""
    try:  # Typer >= 0.24 carries its own copy of Click
        from typer._click import exceptions as click_errors
    except ImportError:  # pragma: no cover - older Typer on Click
        from click import exceptions as click_errors

    from lancens_cli import interrupt
    from lancens_cli.errors import ExitCode, InvalidInputError
    from lancens_cli.output import emit_error

    try:
        code = app(args=argv, standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()
        return exc.exit_code
    except click_errors.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        error = InvalidInputError(exc.format_message() + hint)
        emit_error(error, json_mode="--json" in argv)
        return ExitCode.USAGE
    except click_errors.ClickException as exc:
        emit_error(InvalidInputError(exc.format_message()), json_mode="--json" in argv)
        return exc.exit_code
    except typer.Abort:
        sys.stderr.write("lancens: aborted\n")
        return ExitCode.ERROR
    except KeyboardInterrupt:  # outside a command (parsing options, --help)
        sys.stderr.write("lancens: interrupted\n")
        return ExitCode.INTERRUPTED
    code = code if isinstance(code, int) else ExitCode.OK
    if code == ExitCode.OK and interrupt.pending():  # a Ctrl-C no command saw
        sys.stderr.write("lancens: interrupted\n")
        return ExitCode.INTERRUPTED
    return code
