"""Package metadata: the license is an SPDX expression (PEP 639), not a legacy table."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_license_is_an_spdx_string():
    document = tomllib.loads(PYPROJECT.read_text())
    assert document["project"]["license"] == "Apache-2.0"
    # A `License ::` classifier beside an SPDX license is an error for setuptools.
    classifiers = document["project"].get("classifiers", [])
    assert not [c for c in classifiers if c.startswith("License ::")]


def test_build_backend_understands_spdx_licenses():
    """setuptools reads `license = "<SPDX>"` from version 77 on; older ones reject it."""
    document = tomllib.loads(PYPROJECT.read_text())
    (setuptools,) = [r for r in document["build-system"]["requires"] if "setuptools" in r]
    match = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools)
    assert match and int(match.group(1)) >= 77
