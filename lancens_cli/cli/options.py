"""The options and arguments more than one command takes, each declared once with one help text.

`session_parameters()` are the session's options (`--root`, `-s`, `--json`, ...), accepted both
before and after the command (cli/app.py adds them to the program, `common.add_command` to every
command) and taken back out of the parsed values by `pop_session_values()`; the `Annotated`
aliases below are what commands put in their signatures so that one option reads the same in
every command.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import typer

from lancens_cli.errors import InvalidInputError

_PANEL = "Namespace options"
_OUTPUT = "Global options"
_SPARK = "Spark options"

# --- options of several commands -----------------------------------------------------------------

DryRun = Annotated[bool, typer.Option("--dry-run", help="Show what would change; change nothing.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
Target = Annotated[
    str | None, typer.Argument(metavar="[ID]", help="Namespace or table (default: the root).")
]
SourceFile = Annotated[
    str | None,
    typer.Option(
        "--from", metavar="FILE", help="Parquet, CSV, JSON lines or a Lance dataset to load."
    ),
]
SourceFormat = Annotated[
    str | None,
    typer.Option("--format", help="Format of --from: parquet, arrow, csv, jsonl, lance."),
]
Branch = Annotated[
    str | None,
    typer.Option(
        "--branch",
        metavar="NAME",
        help="Write to this branch of each partition table (created where missing) and "
        "publish read_branch; main stays as it is.",
    ),
]
AllowMissingColumns = Annotated[
    bool,
    typer.Option(
        "--allow-missing-columns",
        help="Write an input that lacks a column a partition field takes its value from "
        "(the column is NULL in every row); refused without it.",
    ),
]
Property = Annotated[
    list[str] | None,
    typer.Option("--property", metavar="KEY=VALUE", help="A property to store. Repeatable."),
]
ExistOk = Annotated[bool, typer.Option("--exist-ok", help="Succeed if it already exists.")]
# --- the retention policy, as `prune` applies it and `versions` shows it ------------------------

OlderThan = Annotated[
    str, typer.Option("--older-than", help="Expire versions older than this (e.g. 7d, 24h).")
]
Retain = Annotated[int, typer.Option("--retain", min=1, help="Always keep the newest N versions.")]
Grace = Annotated[
    str,
    typer.Option("--grace", help="Remove debris of dead writes older than this (e.g. 24h)."),
]
ForceWindow = Annotated[
    bool, typer.Option("--force", help="Allow --older-than or --grace under 1 hour.")
]
VersionAsOf = Annotated[
    int | None,
    typer.Option(
        "--version-as-of",
        metavar="N",
        min=1,
        help="Read the namespace as __manifest version N published it (time travel).",
    ),
]
TimestampAsOf = Annotated[
    str | None,
    typer.Option(
        "--timestamp-as-of",
        metavar="TS",
        help="Read the namespace as the newest __manifest version committed at or before TS "
        "(ISO 8601; UTC without an offset) published it.",
    ),
]
SinceVersion = Annotated[
    int | None,
    typer.Option(
        "--since-version",
        metavar="A",
        min=0,
        help="Only the rows appended after __manifest version A (exclusive; 0: from the start) "
        "up to the version read (an incremental read).",
    ),
]
SinceTimestamp = Annotated[
    str | None,
    typer.Option(
        "--since-timestamp",
        metavar="TS",
        help="Only the rows appended after the newest __manifest version committed at or "
        "before TS (ISO 8601; UTC without an offset).",
    ),
]

# --- the two namespaces and the keys, as `join-plan` and `join` take them -----------------------

LeftRoot = Annotated[
    str, typer.Argument(metavar="LEFT_ROOT", help="The left partitioned namespace.")
]
RightRoot = Annotated[
    str, typer.Argument(metavar="RIGHT_ROOT", help="The right partitioned namespace.")
]
JoinKeys = Annotated[
    list[str],
    typer.Option(
        "--on",
        metavar="'l.COL = r.COL'",
        help="A join key: a left column equal to a right column. Repeatable.",
    ),
]

# --- the commands that run Spark (`ingest`, `scan`, `join`, `prune --master/--remote`) --------

Master = Annotated[
    str | None,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master: local[*] (default), local[N], spark://host:port. "
        "(env LANCENS_SPARK_MASTER, or the profile's [spark] master)",
        rich_help_panel=_SPARK,
    ),
]
Remote = Annotated[
    str | None,
    typer.Option(
        "--remote",
        metavar="sc://HOST:PORT",
        help="Run on a Spark Connect server instead of a driver of our own. "
        "(env SPARK_REMOTE, or the profile's [spark] remote). A server that does not answer "
        "within LANCENS_SPARK_CONNECT_TIMEOUT seconds (default 20) is an error.",
        rich_help_panel=_SPARK,
    ),
]
Conf = Annotated[
    list[str] | None,
    typer.Option(
        "--conf",
        metavar="KEY=VALUE",
        help="Spark configuration, as spark-submit's --conf. Repeatable.",
        rich_help_panel=_SPARK,
    ),
]

# --- the session's options, on the program and on every command ---------------------------------


RowCondition = Annotated[
    list[str],
    typer.Option(
        "--where",
        help="The rows, as `scan --where` reads a condition (SQL; timestamps without a zone "
        "are UTC). Give it once: join conditions with AND.",
    ),
]


def one_condition(given: list[str]) -> str:
    """The one `--where` of a row change: given twice, a shell would silently keep the last
    (and change other rows than meant), so it is refused."""
    if len(given) != 1:
        raise InvalidInputError("--where: give one condition (join conditions with AND)")
    return given[0]


def _flag(name: str, help: str) -> Any:
    """A `--name/--no-name` namespace setting: None when not given, so lower layers decide."""
    return Annotated[
        bool | None,
        typer.Option(
            f"--{name}/--no-{name}", help=help, rich_help_panel=_PANEL, show_default=False
        ),
    ]


_SESSION_OPTIONS: dict[str, Any] = {
    "root": Annotated[
        str | None,
        typer.Option(
            "--root",
            "-r",
            help="Namespace root: path, file://, s3:// or gs:// URI. (env LANCENS_ROOT)",
            rich_help_panel=_PANEL,
        ),
    ],
    "manifest": _flag("manifest", "Use the __manifest table (manifest_enabled)."),
    "dir_listing": _flag(
        "dir-listing", "Find root tables by listing <name>.lance (dir_listing_enabled)."
    ),
    "indexes": _flag(
        "indexes",
        "Rebuild the __manifest scalar indexes after each commit (inline_optimization_enabled).",
    ),
    "storage": Annotated[
        list[str] | None,
        typer.Option(
            "--storage-option",
            "-s",
            metavar="KEY=VALUE",
            help="Storage option for Lance and fsspec (the spec's storage.*). Repeatable.",
            rich_help_panel=_PANEL,
        ),
    ],
    "profile": Annotated[
        str | None,
        typer.Option(
            "--profile",
            "-p",
            help="Profile from the config file. (env LANCENS_PROFILE)",
            rich_help_panel=_PANEL,
        ),
    ],
    "commit_retries": Annotated[
        int | None,
        typer.Option(
            "--commit-retries",
            min=0,
            help="Retries of a conflicting manifest commit (commit_retries).",
            rich_help_panel=_PANEL,
        ),
    ],
    "json": Annotated[
        bool, typer.Option("--json", help="Print one JSON document.", rich_help_panel=_OUTPUT)
    ],
    "delimiter": Annotated[
        str | None,
        typer.Option(
            "--delimiter",
            help="Separator of identifier parts on the command line and in output (default '.').",
            rich_help_panel=_OUTPUT,
        ),
    ],
    "debug": Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of errors.", rich_help_panel=_OUTPUT)
    ],
}
SESSION_NAMES = tuple(_SESSION_OPTIONS)


def session_parameters() -> list[inspect.Parameter]:
    """The session's options, as keyword parameters Typer reads from a signature."""
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=None)
        for name, kind in _SESSION_OPTIONS.items()
    ]


def pop_session_values(values: dict[str, Any]) -> dict[str, Any]:
    """Take the session's options out of a command's (or the program's) parsed values."""
    return {name: values.pop(name, None) for name in SESSION_NAMES}
