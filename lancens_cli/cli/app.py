"""The `lancens` Typer app: the program's options and the list of its commands.

Nothing heavy is imported here: Lance, pyarrow and fsspec load only inside the commands that
touch storage, so `lancens --help` starts fast. `importlib.metadata` (14 ms) is imported inside
`--version`'s callback, the one place that needs it.
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from lancens_cli import interrupt, pandas_late
from lancens_cli.cli import (
    check,
    create,
    delete,
    describe,
    diff,
    drop,
    evolve_schema,
    ingest,
    init,
    join,
    join_plan,
    ls,
    merge,
    migrate,
    partition_spec,
    partitions,
    prune,
    register,
    rename,
    restore,
    scan,
    spark,
    tag_partitions,
    update,
    versions,
    write,
)
from lancens_cli.cli.common import add_command
from lancens_cli.cli.options import pop_session_values, session_parameters
from lancens_cli.cli.output import emit_error
from lancens_cli.cli.session import Session
from lancens_cli.errors import ExitCode, InvalidInputError

try:  # Typer >= 0.24 carries its own copy of Click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older Typer on Click
    from click import exceptions as click_errors


@dataclass(frozen=True)
class Command:
    """One command of `lancens`: its name, what runs it, and its place in the help."""

    name: str
    run: Any  # the command's function, or the Typer app of a command with subcommands
    group: str


_INSPECT = "Inspect"
_CHANGE = "Change"
_MAINTAIN = "Migrate and maintain"
_PARTITIONED = "Partitioned data"
_HISTORY = "History"
_SPARK = "Spark"

# The commands in the order a user meets them; `--help` lists them so, group by group.
COMMANDS: tuple[Command, ...] = (
    Command("ls", ls.ls, _INSPECT),
    Command("describe", describe.describe, _INSPECT),
    Command("partitions", partitions.partitions, _INSPECT),
    Command("scan", scan.scan, _INSPECT),
    Command("init", init.init, _CHANGE),
    Command("create", create.create_app, _CHANGE),
    Command("rename", rename.rename, _CHANGE),
    Command("drop", drop.drop, _CHANGE),
    Command("register", register.register, _CHANGE),
    Command("deregister", register.deregister, _CHANGE),
    Command("migrate-v1", migrate.migrate_v1, _MAINTAIN),
    Command("check", check.check, _MAINTAIN),
    Command("prune", prune.prune, _MAINTAIN),
    Command("add-partition-spec", partition_spec.add_partition_spec, _PARTITIONED),
    Command("evolve-schema", evolve_schema.evolve_schema, _PARTITIONED),
    Command("tag-partitions", tag_partitions.tag_partitions, _PARTITIONED),
    Command("write", write.write, _PARTITIONED),
    Command("ingest", ingest.ingest, _PARTITIONED),
    Command("delete", delete.delete, _PARTITIONED),
    Command("update", update.update, _PARTITIONED),
    Command("merge", merge.merge, _PARTITIONED),
    Command("join-plan", join_plan.join_plan, _PARTITIONED),
    Command("join", join.join, _PARTITIONED),
    Command("versions", versions.versions, _HISTORY),
    Command("diff", diff.diff, _HISTORY),
    Command("restore", restore.restore, _HISTORY),
    Command("spark", spark.spark_app, _SPARK),
)


class _OrderedGroup(TyperGroup):
    """The program's command group: commands in the order of COMMANDS, listed under a heading
    per group (Typer's own panels show only with rich help, which `lancens` turns off)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [c.name for c in COMMANDS if c.name in self.commands]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        shown = [c for c in COMMANDS if not getattr(self.commands.get(c.name), "hidden", True)]
        if not shown:
            return
        width = max(len(c.name) for c in shown)
        limit = formatter.width - 6 - width  # as Typer's listing
        for group in dict.fromkeys(c.group for c in shown):
            rows = [
                (c.name.ljust(width), self.commands[c.name].get_short_help_str(limit))
                for c in shown
                if c.group == group
            ]
            with formatter.section(group):
                formatter.write_dl(rows)


app = typer.Typer(
    name="lancens",
    cls=_OrderedGroup,
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
    """Options of the program itself; the session's are in options.session_parameters()."""


def _callback(ctx: typer.Context, **values: Any) -> None:
    """Administer Lance directory namespaces."""
    ctx.obj = Session()  # this invocation's own session: nothing is carried over from another
    ctx.obj.merge(**pop_session_values(values))
    _global_options(**values)


_callback.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        *inspect.signature(_global_options, eval_str=True).parameters.values(),
        *session_parameters(),
    ]
)
app.callback()(_callback)

for _command in COMMANDS:
    if isinstance(_command.run, typer.Typer):
        app.add_typer(_command.run, name=_command.name, rich_help_panel=_command.group)
    else:
        add_command(app, _command.name, _command.run, rich_help_panel=_command.group)


def main() -> None:
    interrupt.install_for_process()  # Ctrl-C from start-up on: see lancens_cli/interrupt.py

    # Lance logs warnings such as "No existing dataset ... will be created" to stderr; our
    # stderr carries only our own messages unless the user asks for Lance's.
    os.environ.setdefault("LANCE_LOG", "error")
    pandas_late.install()  # importing Lance does not load pandas (lancens_cli/pandas_late.py)
    code = _run_app(sys.argv[1:])
    interrupt.exiting()
    sys.exit(code)


def _run_app(argv: list[str], prog_name: str | None = None) -> int:
    """Run the app; a usage error is one line on stderr too (one JSON object with --json).

    `prog_name` names the program in messages (default: from sys.argv[0], as Click does).
    """
    try:
        code = app(args=argv, prog_name=prog_name, standalone_mode=False)
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
