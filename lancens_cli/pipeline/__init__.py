"""The Spark data pipeline: the `lancens` PySpark data source and the jobs built on it.

Imported only by the commands that run Spark (and by users' own PySpark jobs), never by the
CLI's start-up. `register(spark)` makes `spark.read.format("lancens")` available in a session
the caller built.

The data source (and pyspark with it) is imported inside `register`, so that the package and its
Spark-free modules (`source_options.py`, `task_failures.py`, and the planning parts of
`scan.py`) import without pyspark.

In Spark's own Python processes (the one that plans a read, the ones that run tasks: their
`__main__` is a pyspark module), importing the package installs `pandas_late`'s hook, as the
CLI does at start: Lance's import then does not load pandas, which the data source never uses
(0.4 s of each such process that opens a table, two of them before a cold `scan`'s first row).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from lancens_cli import pandas_late

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def in_spark_worker() -> bool:
    """Whether this process is one of Spark's Python workers (`python -m pyspark.daemon`, or a
    worker it forked, or `python -m pyspark.worker`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and str(spec.name).startswith("pyspark.")


if in_spark_worker() and not any(isinstance(f, pandas_late.PandasWhenUsed) for f in sys.meta_path):
    pandas_late.install()


def register(spark: SparkSession) -> None:
    """Register the `lancens` data source in a user's own Spark session."""
    from lancens_cli.pipeline.source import LancensDataSource

    spark.dataSource.register(LancensDataSource)
