"""Options shared by the commands that run Spark (`ingest`, `scan`, `join`, `prune --master`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

_PANEL = "Spark options"

MasterOption = Annotated[
    str | None,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master: local[*] (default), local[N], spark://host:port. "
        "(env LANCENS_SPARK_MASTER, or the profile's [spark] master)",
        rich_help_panel=_PANEL,
    ),
]
ConfOption = Annotated[
    list[str] | None,
    typer.Option(
        "--conf",
        metavar="KEY=VALUE",
        help="Spark configuration, as spark-submit's --conf. Repeatable.",
        rich_help_panel=_PANEL,
    ),
]


def spark_session(master: str | None, conf: list[str] | None) -> Any:
    """The Spark session for this invocation: flags > environment > profile > local mode."""
    import os

    from lancens_cli.cli.common import SESSION
    from lancens_cli.config import load_spark_profile
    from lancens_cli.pipeline.session import SparkSettings, require_pyspark
    from lancens_cli.pipeline.session import spark_session as start

    require_pyspark()
    profile = load_spark_profile(SESSION.profile or os.environ.get("LANCENS_PROFILE"))
    settings = SparkSettings.resolve(master, conf, profile, debug=SESSION.debug)
    return start(settings)
