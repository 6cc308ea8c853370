"""Fixtures of the history tests (`restore`, `diff`): a partitioned root to build a history on."""

from __future__ import annotations

import pytest
from data import events
from helpers import SPEC1, ok


@pytest.fixture
def partitioned(local_root, files):
    """A local root with SPEC1 over `data.events`' schema, nothing written yet."""
    ok(local_root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    return local_root
