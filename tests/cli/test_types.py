"""store/ and service/ type-check: mypy, run as a developer runs it (`python -m mypy` from the
repository root, with pyproject.toml's `[tool.mypy]`: what it checks and how strictly)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_mypy_finds_nothing():
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is part of the test extra: pip install -e '.[test]'")
    run = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
