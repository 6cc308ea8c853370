"""Fixtures of the Spark pipeline tests (ingest, the `lancens` data source, scan, join, time
travel; `spark` itself is in the root conftest, prune --master uses it too)."""

from __future__ import annotations

import pytest


@pytest.fixture
def shared_master(monkeypatch):
    """In-process commands reuse the test process's local[2] session: LANCENS_SPARK_MASTER names
    it (flags > env > local[*])."""
    monkeypatch.setenv("LANCENS_SPARK_MASTER", "local[2]")
