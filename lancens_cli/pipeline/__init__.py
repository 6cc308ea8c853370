"""The Spark data pipeline: the `lancens` PySpark data source and the jobs built on it.

Imported only by the commands that run Spark (and by users' own PySpark jobs), never by the
CLI's start-up. `register(spark)` makes `spark.read.format("lancens")` available in a session
the caller built.

The data source (and pyspark with it) is imported inside `register`, so that the package and its
Spark-free modules (`source_options.py`, `task_failures.py`, and the planning parts of
`scan.py`) import without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the `lancens` data source in a user's own Spark session."""
    from lancens_cli.pipeline.source import LancensDataSource

    spark.dataSource.register(LancensDataSource)
