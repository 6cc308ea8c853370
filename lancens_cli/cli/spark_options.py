"""The Spark session of the commands that run Spark (`ingest`, `scan`, `join`, `prune --master`).

Their `--master`, `--remote` and `--conf` options are in cli/options.py.

The Spark pipeline is imported inside `spark_session` so that `lancens --help` starts without it.
"""

from __future__ import annotations

import os
from typing import Any

from lancens_cli.cli.session import session
from lancens_cli.config import load_spark_profile


def spark_session(
    master: str | None,
    conf: list[str] | None,
    remote: str | None = None,
    *,
    data_source: bool = True,
) -> Any:
    """The Spark session for this invocation: flags > environment > profile > local mode
    (`data_source=False`: the `lancens` data source left for the command to register)."""

    from lancens_cli.pipeline.spark_session import SparkSettings, require_pyspark
    from lancens_cli.pipeline.spark_session import spark_session as start

    require_pyspark()
    profile = load_spark_profile(session().profile or os.environ.get("LANCENS_PROFILE"))
    settings = SparkSettings.resolve(master, conf, profile, debug=session().debug, remote=remote)
    return start(settings, data_source=data_source)


def spark_named(master: str | None, conf: list[str] | None, remote: str | None) -> str | None:
    """What names a Spark for this invocation, in words (None: nothing; local mode is only the
    default): a flag, `LANCENS_SPARK_MASTER` / `SPARK_REMOTE`, or the profile's `spark` table.
    An answer that needs no Spark is still given by Spark when one is named (decision 25)."""
    if master is not None or remote is not None or conf:
        return "--master, --remote or --conf"
    for variable in ("LANCENS_SPARK_MASTER", "SPARK_REMOTE"):
        if os.environ.get(variable):
            return variable
    if load_spark_profile(session().profile or os.environ.get("LANCENS_PROFILE")):
        return "the profile's spark settings"
    return None
