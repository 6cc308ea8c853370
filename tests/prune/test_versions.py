"""`lancens versions`: every version, kept or expiring, with every reason; and exactly what
`prune` then removes (one decision for both: `service.prune.decide.decide`)."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from helpers import Root, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_namespace import build, copy_tree, expiring_by_table


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The prune test namespace: tags, a branch, shallow clones, partitioned writes, a dead
    write, debris; built once and copied for each example."""
    tmp = tmp_path_factory.mktemp("versions")
    root = Root(str(tmp / "ns"), {}, tmp / "ns")
    root.local_path.mkdir()
    built = build(root, tmp)
    time.sleep(1.2)
    return built


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(retain=st.integers(1, 6), window=st.sampled_from(["1s", "1h", "7d"]))
def test_what_versions_says_expires_is_exactly_what_prune_removes(
    template, tmp_path_factory, retain, window
):
    path = tmp_path_factory.mktemp("copy") / "ns"
    copy_tree(template.path, path)
    args = ("--root", str(path))
    policy = ["--older-than", window, "--retain", str(retain), "--grace", "1s", "--force"]
    said = expiring_by_table(args, *policy)
    result = invoke(*args, "prune", *policy, "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    removed = {
        t["location"]: sorted(t["versions_removed"])
        for t in json.loads(result.stdout)["tables"]
        if t["versions_removed"]
    }
    assert {k: sorted(v) for k, v in said.items()} == removed
    shutil.rmtree(path.parent)


def test_every_reason_a_version_is_kept_is_named(template):
    args = ("--root", str(template.path))  # the clones read it here (versions changes nothing)
    result = invoke(*args, "versions", "plain.t", "--older-than", "1s", "--force", "--json")
    assert result.exit_code == 0, result.stderr
    lines = {v["version"]: v for v in json.loads(result.stdout)["versions"]}
    reasons = [r for v in lines.values() for r in v["reasons"]]
    assert any(r.startswith("tag ") for r in reasons)
    assert any(r.startswith("branch ") for r in reasons)
    assert any(r.startswith("shallow clone") for r in reasons)
    assert any(r == "latest" for r in reasons)
    assert all(v["reasons"] for v in lines.values())  # an expiring version says why too
    assert all(v["reasons"][0] == "older than 1s" for v in lines.values() if v["fate"] == "expires")
    assert all(v["timestamp"] and v["rows"] is not None for v in lines.values())
    tagged = [v for v in lines.values() if v["tags"]]
    assert tagged and all(v["fate"] == "kept" for v in tagged)
    piped = invoke(*args, "versions", "plain.t", "--older-than", "1s", "--force")
    assert piped.exit_code == 0 and len(piped.stdout.splitlines()) == len(lines)
    catalog = invoke(*args, "versions", "__manifest", "--json")
    assert catalog.exit_code == 0, catalog.stderr
    assert any(
        "publishes" in r for v in json.loads(catalog.stdout)["versions"] for r in v["reasons"]
    )


def test_versions_changes_nothing_and_refuses_bad_input(template, tmp_path):
    from helpers import tree_snapshot

    path = tmp_path / "ns"
    copy_tree(template.path, path)
    before = tree_snapshot(path)
    assert invoke("--root", str(path), "versions", "--json").exit_code == 0
    assert invoke("--root", str(path), "versions", "nosuch").exit_code == 3
    assert invoke("--root", str(path), "versions", "--older-than", "1s").exit_code == 5
    assert invoke("--root", str(path), "versions", "--older-than", "x").exit_code == 2
    assert tree_snapshot(path) == before
