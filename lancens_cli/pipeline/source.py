"""The `lancens` PySpark data source (Python Data Source API, PySpark >= 4.1).

`spark.read.format("lancens").option("root", R).load("ns.table")` reads a table, `.load()` on a
partitioned root reads the whole partitioned namespace; `df.write.format("lancens")` writes.
This class only dispatches: reading lives in `pipeline/read.py`, writing in
`pipeline/write_commit.py`; each is imported inside the method that uses it, so that a task
imports what it runs and no more.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from lancens_cli.pipeline.source_options import SourceOptions
from lancens_cli.pipeline.task_failures import carried


class LancensDataSource(DataSource):
    """Tables and partitioned namespaces of a Lance directory namespace."""

    @classmethod
    def name(cls) -> str:
        return "lancens"

    def _options(self, extra: frozenset[str] = frozenset()) -> SourceOptions:
        return SourceOptions.parse(self.options, extra)

    def schema(self) -> Any:
        from lancens_cli.pipeline.read import source_schema
        from lancens_cli.pipeline.read_plan import READ_OPTIONS

        return source_schema(self._options(READ_OPTIONS))

    def reader(self, schema: Any) -> Any:
        from lancens_cli.pipeline.read import LancensReader
        from lancens_cli.pipeline.read_plan import READ_OPTIONS

        return LancensReader(self._options(READ_OPTIONS), schema)

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from lancens_cli.pipeline.write_commit import WRITE_OPTIONS, LancensWriter

        try:
            opts = SourceOptions.parse(self.options, WRITE_OPTIONS)
        except Exception as exc:
            raise carried(exc) from None
        return LancensWriter(opts, schema, overwrite)
