"""What every command shares: the session's options, error handling, confirmation.

Every session option (`--root`, `-s`, `--profile`, `--commit-retries`, `--json`, `--delimiter`,
`--debug`, ...) is accepted both before the command (`lancens --root R ls`) and after it
(`lancens ls --root R`); `add_command()` adds them to each command's signature so they are
declared once (cli/options.py). `run()` gives every command the same handling of errors and of
Ctrl-C.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import select
import sys
import traceback
from collections.abc import Callable
from typing import Any

import typer

from lancens_cli import interrupt
from lancens_cli.cli.options import pop_session_values, session_parameters
from lancens_cli.cli.output import emit_error, scrub
from lancens_cli.cli.session import session
from lancens_cli.config import is_secret_key
from lancens_cli.errors import ExitCode, LancensError, RefusedError, describe_exception
from lancens_cli.errors import LancensError as Base
from lancens_cli.store.commit_record import CommitOrigin, committing_as


def add_command(typer_app: typer.Typer, name: str, func: Callable, **kwargs: Any) -> None:
    """Register `func` as command `name` of `typer_app`, with the session's options added."""
    signature = inspect.signature(func, eval_str=True)
    group = typer_app.info.name
    command = name if group in (None, "lancens") else f"{group} {name}"  # `create index`
    flags = _flags(signature)

    @functools.wraps(func)
    def wrapper(*args: Any, **values: Any) -> Any:
        session().merge(**pop_session_values(values))
        origin = CommitOrigin(command, recorded_options(values, flags))
        return run(lambda: _as(origin, lambda: func(*args, **values)))

    params = list(signature.parameters.values())
    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*params, *session_parameters()]
    )
    typer_app.command(name, **kwargs)(wrapper)


def _flags(signature: inspect.Signature) -> dict[str, str]:
    """Each parameter's name on the command line: its long flag, or an argument's metavar."""
    flags = {}
    for parameter in signature.parameters.values():
        for info in getattr(parameter.annotation, "__metadata__", ()):
            if isinstance(info, typer.models.OptionInfo):
                decls = [d for d in (info.default, *(info.param_decls or ())) if _is_flag(d)]
                longs = [d for d in decls if d.startswith("--")]
                flags[parameter.name] = (longs or decls or [parameter.name])[0]
            elif isinstance(info, typer.models.ArgumentInfo):
                flags[parameter.name] = (info.metavar or parameter.name.upper()).rstrip(".")
    return flags


def _is_flag(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("-")


def recorded_options(values: dict[str, Any], flags: dict[str, str]) -> dict[str, Any]:
    """A command's options as its commits record them, by their names on the command line
    (`--type`): those given, secrets masked (a `--conf` of a secret key keeps its key only)."""
    recorded: dict[str, Any] = {}
    for name, value in values.items():
        if value is None or value is False or value == [] or value == ():
            continue
        if isinstance(value, list | tuple):
            value = [_masked(str(v), is_secret_key) for v in value]
        elif not isinstance(value, bool | int | float):
            value = _masked(str(value), is_secret_key)
        recorded[flags.get(name, name)] = value
    secrets = session().secrets()
    return json.loads(scrub(json.dumps(recorded), secrets)) if secrets else recorded


def _masked(text: str, is_secret: Callable[[str], bool]) -> str:
    key, sep, _ = text.partition("=")
    return f"{key}=****" if sep and is_secret(key) else text


def _as(origin: CommitOrigin, body: Callable[[], Any]) -> Any:
    with committing_as(origin):
        return body()


def confirm_destruction(what: str, yes: bool, harm: str = "destroy data") -> None:
    """Ask before destroying data on a terminal; refuse without --yes when not on one. `harm`
    says what is refused (a restore changes what readers see; it destroys nothing)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise RefusedError(f"{what}: refusing to {harm} without --yes (stdin is not a terminal)")
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
    try:
        interrupt.checkpoint()
        return body()
    except LancensError as error:
        if session().debug:
            _print_traceback()
        emit_error(error, json_mode=session().json, secrets=session().secrets())
        raise typer.Exit(error.exit_code) from None
    except KeyboardInterrupt:
        sys.stderr.write("lancens: interrupted\n")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except BrokenPipeError:  # the reader went away (`lancens ls | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(ExitCode.ERROR) from None
    except Exception as error:  # an unexpected failure: still one line unless --debug
        if session().debug:
            _print_traceback()

        wrapped = Base(describe_exception(error))
        emit_error(wrapped, json_mode=session().json, secrets=session().secrets())
        raise typer.Exit(ExitCode.ERROR) from None


def _print_traceback() -> None:
    """The current traceback on stderr (for --debug), with every secret value masked."""
    sys.stderr.write(scrub(traceback.format_exc(), session().secrets()))
