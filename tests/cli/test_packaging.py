"""The installed distribution, as a user's process sees it: its metadata (read back with
importlib.metadata in a fresh interpreter outside the checkout), the `lancens` console script it
installed, the extras the README tells users to install, and the package data Spark is started
with."""

from __future__ import annotations

import importlib.resources
import json
import re
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIST = "lancens-cli"

# Run outside the checkout (cwd = a temporary directory), so that a build's leftover
# `lancens_cli.egg-info` in the repository is not what is read: this is the installed metadata.
_READ_METADATA = """
import importlib.metadata as m, json
d = m.distribution("lancens-cli")
print(json.dumps({
    "name": d.metadata["Name"],
    "version": d.version,
    "metadata_version": d.metadata["Metadata-Version"],
    "license": d.metadata.get("License"),
    "license_expression": d.metadata.get("License-Expression"),
    "classifiers": d.metadata.get_all("Classifier") or [],
    "extras": d.metadata.get_all("Provides-Extra") or [],
    "requires": d.requires or [],
    "scripts": {e.name: e.value for e in d.entry_points if e.group == "console_scripts"},
}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _READ_METADATA],
        capture_output=True,
        text=True,
        cwd=tmp_path_factory.mktemp("elsewhere"),
        timeout=120,
    )
    assert proc.returncode == 0, f"{DIST} is not installed: pip install -e '.[test]'\n{proc.stderr}"
    return json.loads(proc.stdout)


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_license_reaches_the_metadata_as_an_spdx_expression(installed):
    """PEP 639: the build backend understood pyproject's SPDX string (Metadata-Version 2.4,
    `License-Expression`), with no legacy `License:` field and no `License ::` classifier."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    assert _version_key(installed["metadata_version"]) >= (2, 4), installed["metadata_version"]
    assert installed["license_expression"] == declared
    assert installed["license"] is None
    assert not [c for c in installed["classifiers"] if c.startswith("License ::")]


def test_the_console_script_runs_and_prints_the_installed_version(installed, tmp_path):
    """The `lancens` executable pip installed beside this interpreter is the distribution's own
    entry point, and `--version` prints the distribution's version."""
    assert set(installed["scripts"]) == {"lancens"}
    script = Path(sysconfig.get_path("scripts")) / "lancens"
    assert script.is_file(), f"no console script at {script}"
    proc = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"lancens {installed['version']}\n"
    assert proc.stderr == ""


def test_every_extra_the_readme_installs_exists(installed):
    """`pip install 'lancens-cli[spark]'` and `pip install -e '.[test]'` in the README name
    extras the distribution provides, each bringing requirements of its own."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    named = set()
    for command in re.findall(r"pip install[^\n`]*", readme):
        for extras in re.findall(r"(?:lancens-cli|\.)\[([^\]]+)\]", command):
            named.update(e.strip() for e in extras.split(","))
    assert named >= {"spark", "test"}, named  # the README's own install lines were found
    missing = named - set(installed["extras"])
    assert not missing, f"the README installs extras the distribution lacks: {missing}"
    for extra in named:
        brought = [r for r in installed["requires"] if re.search(rf"extra == ['\"]{extra}['\"]", r)]
        assert brought, f"extra {extra!r} brings no requirement"


def test_the_requirements_of_the_readme_extras_are_installed(installed):
    """The README's test line (`pip install -e '.[test]'`) leaves an environment satisfying the
    distribution's own requirements and those of its `spark` and `test` extras."""
    from packaging.requirements import Requirement

    unmet = []
    for text in installed["requires"]:
        requirement = Requirement(text)
        wanted = requirement.marker is None or any(
            requirement.marker.evaluate({"extra": extra}) for extra in ("spark", "test")
        )
        if not wanted:
            continue  # another platform's requirement
        try:
            found = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            unmet.append(f"{text} (not installed)")
            continue
        if not requirement.specifier.contains(found, prereleases=True):
            unmet.append(f"{text} (found {found})")
    assert not unmet, unmet


def test_spark_logging_config_is_package_data_of_the_installed_package():
    """`lancens_cli/pipeline/log4j2.properties` (what Spark's JVM is started with) is found
    through the installed package, not only in the checkout."""
    resource = importlib.resources.files("lancens_cli.pipeline").joinpath("log4j2.properties")
    assert resource.is_file()
    text = resource.read_text(encoding="utf-8")
    assert re.search(r"^rootLogger\.level\s*=", text, re.M), text[:200]
