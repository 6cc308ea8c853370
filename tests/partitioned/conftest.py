"""Fixtures of the partitioned-namespace tests (the partitioning spec: specs, transforms,
pruning, writes, schema evolution, branches, join plans)."""

from __future__ import annotations

import pytest
from data import events
from helpers import SPEC1, ok


@pytest.fixture
def partitioned(local_root, files):
    """A local root with SPEC1 over `data.events`' schema, nothing written yet."""
    ok(local_root, "add-partition-spec", "--schema", files("schema.parquet", events(1)), *SPEC1)
    return local_root
