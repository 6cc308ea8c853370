"""Where a namespace schema comes from: a JSON Arrow schema file, a Parquet or Arrow IPC file,
or a table.

Reading Parquet footers and Lance tables is storage work; the command line only names the path.
"""

from __future__ import annotations

import os
from typing import Any

import lance
import pyarrow as pa
import pyarrow.parquet as pq

from lancens_cli.errors import InvalidInputError
from lancens_cli.schema_json import load_schema_file
from lancens_cli.store.sources import format_of_name, open_arrow, require_exists


def load_schema_source(path: str) -> Any:
    """An Arrow schema from a JSON Arrow schema file, a Parquet or Arrow IPC file, or a Lance
    table."""
    require_exists(path, "--schema FILE")
    if os.path.isdir(path):
        try:
            return lance.dataset(path).schema
        except (ValueError, OSError, RuntimeError):
            raise InvalidInputError(f"--schema {path}: not a Lance table") from None
    if path.lower().endswith(".parquet"):
        try:
            return pq.read_schema(path)
        except (OSError, pa.ArrowException) as exc:
            raise InvalidInputError(
                f"--schema {path}: not a readable Parquet file: {exc}"
            ) from None
    if format_of_name(path) == "arrow":
        try:
            return open_arrow(path).schema
        except (OSError, pa.ArrowException) as exc:
            raise InvalidInputError(f"--schema {path}: not a readable Arrow file: {exc}") from None
    return load_schema_file(path)
