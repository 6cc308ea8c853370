"""On S3, `check` lists each committed table's files once: the walk that finds its missing
files also gives its `_versions/` (the naming-scheme check) and tells that it has a committed
version; Lance's own open and the branch listing are the only other listings of the table."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from helpers import invoke
from test_prune_s3_requests import TABLES, registered, write_tables

pytestmark = pytest.mark.s3

_UNDER_TABLE = re.compile(r"^/?(?:[^/]+/)?ns/(t\d+)/")


def test_check_lists_each_table_three_times_at_most(counted):
    at_root = registered(counted, write_tables(counted, "checked"))
    counted.calm()
    result = invoke(*at_root, "--json", "check")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["findings"] == []
    traffic = counted.calm()
    lists = Counter(m.group(1) for p in traffic.listed if (m := _UNDER_TABLE.match(p)))
    assert sorted(lists) == [f"t{t}" for t in range(TABLES)]
    # the walk of its files, Lance's open of its latest version, its branches
    assert max(lists.values()) <= 3, (lists, traffic.listed)
