"""How `lancens` presents its commands, and that in-process invocations share nothing."""

from __future__ import annotations

import json

from helpers import invoke

# The commands as a user meets them, group by group (the explicit list in cli/app.py).
GROUPS = {
    "Inspect": ["ls", "describe", "partitions", "scan"],
    "Change": ["init", "create", "rename", "drop", "register", "deregister"],
    "Migrate and maintain": ["migrate-v1", "check", "prune"],
    "Partitioned data": [
        "add-partition-spec",
        "evolve-schema",
        "tag-partitions",
        "write",
        "ingest",
        "delete",
        "update",
        "merge",
        "join-plan",
        "join",
    ],
    "History": ["versions", "diff", "restore"],
    "Spark": ["spark"],
}


def _listing(help_text: str) -> dict[str, list[str]]:
    """Headings after the options and the command names under each, in the order shown."""
    listing: dict[str, list[str]] = {}
    heading = None
    for line in help_text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line[:-1]
            listing[heading] = []
        elif heading is not None and line.startswith("  ") and not line.startswith("   "):
            listing[heading].append(line.split()[0])
    return {h: names for h, names in listing.items() if h not in ("Options", "Arguments")}


def test_help_lists_the_commands_in_order_grouped():
    res = invoke("--help")
    assert res.exit_code == 0, res.stderr
    assert _listing(res.stdout) == GROUPS


def test_bare_lancens_shows_the_same_listing():
    res = invoke()
    assert res.exit_code == 2
    assert _listing(res.stdout + res.stderr) == GROUPS


def test_every_listed_command_runs_its_help():
    for name in [n for names in GROUPS.values() for n in names]:
        res = invoke(name, "--help")
        assert res.exit_code == 0, (name, res.stderr)
        assert f"Usage: lancens {name} " in res.stdout, name


def test_no_session_state_leaks_between_invocations(local_root):
    """--json and --delimiter given to one run are not seen by the next."""
    assert invoke(*local_root.args, "create", "namespace", "a").exit_code == 0
    assert invoke(*local_root.args, "create", "namespace", "a.b").exit_code == 0
    first = invoke(*local_root.args, "--json", "--delimiter", "/", "ls", "--recursive")
    assert first.exit_code == 0, first.stderr
    assert "a/b" in {e["id"] for e in first.json()["entries"]}
    second = invoke(*local_root.args, "ls", "--recursive")
    assert second.exit_code == 0, second.stderr
    try:
        json.loads(second.stdout)
    except ValueError:
        pass
    else:
        raise AssertionError(f"the second run printed JSON: {second.stdout!r}")
    assert "a.b" in second.stdout and "a/b" not in second.stdout
