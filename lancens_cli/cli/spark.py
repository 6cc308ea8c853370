"""`lancens spark start|status|stop`: a warm local Spark Connect server for the Spark commands.

A thin layer over `pipeline/spark_server.py`, which owns the server's processes (its record and
the liveness rule are `pipeline/server_record.py`'s). The pipeline module is imported inside the
commands, so that `lancens --help` starts without it (and `status` and `stop` never import
pyspark at all).
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.common import add_command
from lancens_cli.cli.options import Conf
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of

spark_app = typer.Typer(
    name="spark",
    help="A warm local Spark Connect server that the Spark commands (scan, join, ingest) use "
    "while it runs.",
    no_args_is_help=True,
)

ServerMaster = Annotated[
    str,
    typer.Option("--master", metavar="URL", help="The server's Spark master: local[*], local[N]."),
]
ServerPort = Annotated[
    int | None,
    typer.Option("--port", min=1, max=65535, help="The port on 127.0.0.1 (default: a free one)."),
]
StartTimeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        min=1,
        help="How long to wait for the server to answer before giving up (and stopping it).",
    ),
]


def start(
    master: ServerMaster = "local[*]",
    conf: Conf = None,
    port: ServerPort = None,
    timeout: StartTimeout = 240.0,
) -> None:
    """Start a Spark Connect server on 127.0.0.1 in the background and print its URL; the
    Spark commands use it (rather than a fresh local Spark) while it runs. Already running:
    says so, starts nothing."""
    from lancens_cli.pipeline.spark_server import start_server

    result = start_server(master, conf, port, timeout, debug=session().debug, say=message)
    session().emit(result)
    message(summary_of(result))


def status() -> None:
    """Whether the server of `lancens spark start` runs: its URL, pid and uptime (exit 0), or
    why not (exit 3; a stale record is removed)."""
    from lancens_cli.pipeline.spark_server import server_status

    session().emit(server_status())


def stop() -> None:
    """Stop the server of `lancens spark start` and remove its record; nothing running is
    exit 0 too."""
    from lancens_cli.pipeline.spark_server import stop_server

    result = stop_server()
    session().emit(result)
    message(summary_of(result))


add_command(spark_app, "start", start)
add_command(spark_app, "status", status)
add_command(spark_app, "stop", stop)
