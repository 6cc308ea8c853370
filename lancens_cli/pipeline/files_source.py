"""`lancens_files`: Parquet, CSV, JSON lines or ORC files read by Spark tasks with pyarrow.

Spark's own readers reach object stores through the Hadoop connectors (hadoop-aws and its
jars), which a pip-installed tool does not have, and refuse Parquet nanosecond timestamps
(pandas' default). The driver lists the files (fsspec, with the namespace's storage options, or
the local disk) and gives the list to this small Python data source; each task reads its file
with pyarrow and yields Arrow batches in Spark's types, every value converted exactly or refused
in one line naming its column and file.

pyarrow's readers, Lance (through `service.namespace`) and the read and write modules are imported
inside the functions that use them: a task loads only what it runs, and Lance only in the task,
after the Python worker forked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from lancens_cli.pipeline.source_options import STORAGE_PREFIX
from lancens_cli.pipeline.task_failures import carried


class FilePartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class FilesDataSource(DataSource):
    """Options: `files` (JSON list of `bucket/key` paths), `format`, `base` (`s3://bucket`),
    `storage.<key>`; the schema is given by the caller (`.schema(...)`)."""

    @classmethod
    def name(cls) -> str:
        return "lancens_files"

    def reader(self, schema: Any) -> DataSourceReader:
        options = {str(k): str(v) for k, v in dict(self.options).items()}
        storage = {
            k[len(STORAGE_PREFIX) :]: v for k, v in options.items() if k.startswith(STORAGE_PREFIX)
        }
        return FilesReader(
            json.loads(options["files"]),
            options["format"],
            options.get("base") or None,
            storage,
            schema,
        )


class FilesReader(DataSourceReader):
    def __init__(
        self, files: list[str], fmt: str, base: str | None, storage: dict[str, str], schema: Any
    ) -> None:
        self.files, self.fmt, self.base, self.storage = files, fmt, base, storage
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        return [FilePartition(path) for path in self.files]

    def read(self, partition: Any) -> Iterator[Any]:
        from lancens_cli.pipeline.write_commit import arrow_schema

        target = arrow_schema(self.schema)
        try:
            with open_source(self.base, self.storage, partition.path) as handle:
                for batch in read_batches(handle, self.fmt, target, partition.path):
                    yield conform_batch(batch, target, partition.path)
        except Exception as exc:
            raise carried(exc) from None


def open_source(base: str | None, storage: dict[str, str], path: str) -> Any:
    """A binary file object of one source: on the object store of `base`, or local."""
    if base is None:
        return open(path, "rb")  # noqa: SIM115 - the caller closes it (with)
    return remote_fs(base, storage).open(path, "rb")


def remote_fs(base: str, storage: dict[str, str]) -> Any:
    """The fsspec filesystem of `s3://bucket` or `gs://bucket` with these storage options."""
    from lancens_cli.service.namespace import Namespace

    properties: dict[str, Any] = {"root": base}
    properties.update({f"{STORAGE_PREFIX}{k}": v for k, v in storage.items()})
    return Namespace.from_properties(properties).storage.fs


def read_batches(handle: Any, fmt: str, target: Any | None, name: str = "") -> Iterator[Any]:
    """Record batches of one file (a CSV read by `store/csv_rows.py`, JSON typed as the target
    says); a value the format's parser refuses (a row of too many fields, a broken line) is an
    input error naming the file `name` (exit 2), as a local file's is."""
    import pyarrow as pa

    from lancens_cli.errors import InvalidInputError

    try:
        yield from _batches(handle, fmt, target)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidInputError(f"{name or 'the file'} cannot be read: {first}") from None


def _batches(handle: Any, fmt: str, target: Any | None) -> Iterator[Any]:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        yield from pq.ParquetFile(handle).iter_batches()
    elif fmt == "orc":
        import pyarrow.orc as orc

        reader = orc.ORCFile(handle)
        for stripe in range(reader.nstripes):
            yield reader.read_stripe(stripe)
    elif fmt == "csv":
        from lancens_cli.store.csv_rows import open_csv

        yield from open_csv(handle, target)
    else:
        import pyarrow.json as pjson

        explicit = target if target is not None else None
        options = pjson.ParseOptions(explicit_schema=explicit) if explicit is not None else None
        yield from pjson.read_json(handle, parse_options=options).to_batches()


def conform_batch(batch: Any, target: Any, path: str) -> Any:
    """The batch with exactly Spark's columns and types (missing columns are NULL); a value
    the type cannot hold exactly (a timestamp with nanoseconds) is an input error."""
    import pyarrow as pa

    from lancens_cli.pipeline.slice_reader import exact_cast

    columns = []
    for f in target:
        if f.name not in batch.schema.names:
            columns.append(pa.nulls(batch.num_rows, f.type))
            continue
        column = batch.column(f.name)
        columns.append(column if column.type == f.type else exact_cast(column, f, f"{path}: "))
    return pa.RecordBatch.from_arrays(columns, schema=target)
