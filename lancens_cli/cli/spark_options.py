"""The Spark session of the commands that run Spark (`ingest`, `scan`, `join`, `prune --master`).

Their `--master`, `--remote` and `--conf` options are in cli/options.py. When nothing names a Spark
(`spark_named`), a live server of `lancens spark start` is used (its record in the state directory,
`pipeline/server_record.py`; a session of `pipeline/server_sessions.py`), said in one line on
stderr; a stale record (its server is gone) is never used: the command runs a fresh local Spark and
says so in one line, leaving the record for `lancens spark start|status|stop` to replace or remove
(a reader that removed it could race a `spark start` writing a new one). Nor is a server whose
Python workers run another interpreter or lancens version: they would import another lancens than
this command's.

The Spark pipeline is imported inside `spark_session` so that `lancens --help` starts without it.
"""

from __future__ import annotations

import os
from typing import Any

from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.config import load_spark_profile


def spark_session(
    master: str | None,
    conf: list[str] | None,
    remote: str | None = None,
    *,
    data_source: bool = True,
) -> Any:
    """The Spark session for this invocation: flags > environment > profile > the server of
    `lancens spark start` > local mode (`data_source=False`: the `lancens` data source left for
    the command to register)."""

    from lancens_cli.pipeline.spark_session import SparkSettings, require_pyspark
    from lancens_cli.pipeline.spark_session import spark_session as start

    require_pyspark()
    if spark_named(master, conf, remote) is None:
        remote = warm_server_url()
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


def warm_server_url() -> str | None:
    """The URL of the live server `lancens spark start` recorded, said on stderr (None: none
    recorded, or a stale record, said too). No pyspark: a pid check and one TCP connect."""
    from lancens_cli.pipeline.server_record import HINT, mismatch, recorded
    from lancens_cli.pipeline.server_sessions import session_url

    found = recorded()
    if found.live:
        assert found.server is not None
        unlike = mismatch(found.server)
        if unlike is not None:
            message(
                f"lancens: not using the Spark Connect server of 'lancens spark start' "
                f"({found.server.url}): {unlike}; `lancens spark stop` and `lancens spark "
                "start` start one for this lancens. Running a fresh local Spark instead"
            )
            return None
        message(
            f"lancens: using the Spark Connect server of 'lancens spark start' "
            f"({found.server.url}); --master 'local[*]' for a fresh local Spark"
        )
        return session_url(found.server)
    if found.stale is not None:
        message(f"lancens: {found.stale}; running a fresh local Spark instead ({HINT})")
    return None
