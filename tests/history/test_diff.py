"""`lancens diff`: every answer checked against time-travel reads made with pylance alone.

A partitioned root gets a generated history through the CLI (writes to different partitions, a
second spec, a schema evolution with an add, a rename and a widening, a published tag, a
compaction, a branch write, a drop); then for every pair of `__manifest` versions the diff must
equal what reading `__manifest` at each version and the partition tables at their published
versions says. A plain table's diff is checked against the operations the test made.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.parquet as pq
from data import events, numbered
from helpers import Root, cli, ok, tree_snapshot

INT32 = pa.int32()


# --- the oracle: pylance reads only -----------------------------------------------------------


class Oracle:
    """What a root's `__manifest` versions and partition tables say, read with pylance."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self._published: dict[tuple, tuple] = {}
        self._rows: dict[tuple, int] = {}

    def uri(self, location: str) -> str:
        return str(self.root.local_path / location)

    def versions(self) -> list[int]:
        return sorted(v["version"] for v in lance.dataset(self.uri("__manifest")).versions())

    def state(self, version: int) -> dict[str, Any]:
        """Specs, schema (field id -> (name, type)) and partition tables at `version`."""
        m = lance.dataset(self.uri("__manifest"), version=version)
        metadata = m.metadata or {}
        prefix = "partition_spec_v"
        specs = {
            int(key[len(prefix) :]): json.loads(text)
            for key, text in metadata.items()
            if key.startswith(prefix)
        }
        schema = {}
        if "schema" in metadata:
            for f in json.loads(metadata["schema"])["fields"]:
                schema[int(f["metadata"]["lance:field_id"])] = (f["name"], f["type"]["type"])
        parts = {}
        for row in m.to_table().to_pylist():
            oid, top = row["object_id"], row["object_id"].split("$")[0]
            if row["object_type"] != "table" or "$" not in oid:
                continue
            if not top[1:].isdigit() or int(top[1:]) not in specs:
                continue
            spec = specs[int(top[1:])]
            parts[oid] = {
                "row": row,
                "spec_version": spec["id"],
                "partition": {
                    f["field_id"]: row[f"partition_field_{f['field_id']}"] for f in spec["fields"]
                },
            }
        return {"specs": specs, "schema": schema, "parts": parts}

    def published(self, row: dict[str, Any]) -> tuple[int | None, int | None, str | None]:
        """(table version, rows, branch of that version) a reader of the row gets."""
        tag, branch, version = row.get("read_tag"), row.get("read_branch"), row["read_version"]
        key = (row["location"], version, tag, branch)
        if key not in self._published:
            uri = self.uri(row["location"])
            try:
                if tag is not None:
                    ds = lance.dataset(uri, version=tag)
                    line = lance.dataset(uri).tags.list()[tag]["branch"]
                elif branch is not None:
                    ds = lance.dataset(uri).checkout_version((branch, version))
                    line = branch
                else:
                    ds, line = lance.dataset(uri, version=version), None
                self._published[key] = (ds.version, ds.count_rows(), line)
            except (OSError, ValueError, RuntimeError):
                self._published[key] = (None, None, None)
        return self._published[key]

    def side(self, row: dict[str, Any]) -> dict[str, Any]:
        version, rows, _ = self.published(row)
        plain = {"read_version": row["read_version"]}
        if row.get("read_tag") is not None:
            plain["read_tag"] = row["read_tag"]
        if row.get("read_branch") is not None:
            plain["read_branch"] = row["read_branch"]
        return {**plain, "version": version, "rows": rows}

    def walk(self, location: str, start: tuple, end: tuple) -> list[tuple]:
        """(branch, version, pylance operation class, rows) after `start` up to `end`."""
        uri = self.uri(location)
        main = lance.dataset(uri)

        def on(line: str | None, after: int, upto: int) -> list[tuple]:
            found = []
            for v in range(after + 1, upto + 1):
                ds = main.checkout_version((line, v)) if line else lance.dataset(uri, version=v)
                op = type(ds.read_transaction(v).operation).__name__
                found.append((line, v, op, self.count(uri, line, v)))
            return found

        if start[0] == end[0]:
            return on(end[0], start[1], end[1])
        fork = main.branches.list()[end[0]]["parent_version"]
        return on(None, start[1], fork) + on(end[0], fork - 1, end[1])

    def count(self, uri: str, line: str | None, version: int) -> int:
        key = (uri, line, version)
        if key not in self._rows:
            main = lance.dataset(uri)
            ds = main.checkout_version((line, version)) if line else main.checkout_version(version)
            self._rows[key] = ds.count_rows()
        return self._rows[key]


def expected_diff(oracle: Oracle, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The diff of two states, as sets and plain values (operations checked apart)."""
    old, new = a["parts"], b["parts"]
    untouched, entries = 0, {}
    for oid in old.keys() | new.keys():
        before, after = old.get(oid), new.get(oid)
        if before is not None and after is not None:
            ref = ("read_version", "read_tag", "read_branch", "location")
            if all(before["row"].get(k) == after["row"].get(k) for k in ref):
                untouched += 1
                continue
        either = after or before
        entries[oid] = {
            "change": "added" if before is None else "removed" if after is None else "changed",
            "table": oid.replace("$", "."),
            "partition": either["partition"],
            "spec_version": either["spec_version"],
            "location": either["row"]["location"],
            "from": None if before is None else oracle.side(before["row"]),
            "to": None if after is None else oracle.side(after["row"]),
        }
    schema = set()
    for fid in a["schema"].keys() | b["schema"].keys():
        if fid not in a["schema"]:
            schema.add(("added", fid, *b["schema"][fid]))
        elif fid not in b["schema"]:
            schema.add(("removed", fid, *a["schema"][fid]))
        else:
            (old_name, old_type), (new_name, new_type) = a["schema"][fid], b["schema"][fid]
            if old_name != new_name:
                schema.add(("renamed", fid, new_name, old_name, new_name))
            if old_type != new_type:
                schema.add(("type_changed", fid, new_name, old_type, new_type))
    return {
        "entries": entries,
        "untouched": untouched,
        "specs_added": sorted(set(b["specs"]) - set(a["specs"])),
        "schema": schema,
    }


def check_pair(oracle: Oracle, got: dict[str, Any], want: dict[str, Any], b: dict) -> None:
    entries = {}
    for change in ("added", "removed", "changed"):
        for entry in got[change]:
            oid = entry["table"].replace(".", "$")
            entries[oid] = entry
            assert entry["rows_delta"] == _delta(entry), entry
            sides = {"from": entry["from"], "to": entry["to"]}
            shown = {
                k: v and {x: y for x, y in v.items() if x != "bytes"} for k, v in sides.items()
            }
            assert {
                "change": change,
                "table": entry["table"],
                "partition": entry["partition"],
                "spec_version": entry["spec_version"],
                "location": entry["location"],
                **shown,
            } == want["entries"][oid]
            check_operations(oracle, entry, want["entries"][oid])
    assert set(entries) == set(want["entries"])
    assert got["untouched"] == want["untouched"]
    assert [s["spec_version"] for s in got["spec_versions_added"]] == want["specs_added"]
    for added in got["spec_versions_added"]:
        assert len(added["fields"]) == len(b["specs"][added["spec_version"]]["fields"])
    assert {_schema_tuple(c) for c in got["schema_changes"]} == want["schema"]


def _delta(entry: dict[str, Any]) -> int | None:
    old = 0 if entry["from"] is None else entry["from"]["rows"]
    new = 0 if entry["to"] is None else entry["to"]["rows"]
    return None if old is None or new is None else new - old


def _schema_tuple(change: dict[str, Any]) -> tuple:
    if change["change"] in ("added", "removed"):
        return (change["change"], change["field_id"], change["name"], change["type"])
    return (change["change"], change["field_id"], change["name"], change["from"], change["to"])


def check_operations(oracle: Oracle, entry: dict[str, Any], want: dict[str, Any]) -> None:
    """The versions between the published ones, as pylance's transactions name them."""
    ops = entry["operations"]
    before, after = want["from"], want["to"]
    if after is None or after["version"] is None or (before and before["version"] is None):
        assert ops == []
        return
    location = want["location"]
    _, _, end_line = oracle.published(_row_of(after, location))
    start = (None, 0)
    if before is not None:
        start = (oracle.published(_row_of(before, location))[2], before["version"])
    end = (end_line, after["version"])
    if start == end:
        assert ops == [] and "published differently" in entry["note"]
        return
    walked = oracle.walk(location, start, end)
    assert [(o.get("branch"), o["version"], o["lance_operation"], o["rows"]) for o in ops] == (
        walked
    )
    previous = 0 if before is None else before["rows"]
    for op in ops:
        assert op["rows_delta"] == op["rows"] - previous
        previous = op["rows"]
    assert previous == after["rows"]


def _row_of(side: dict[str, Any], location: str) -> dict[str, Any]:
    return {
        "location": location,
        "read_version": side["read_version"],
        "read_tag": side.get("read_tag"),
        "read_branch": side.get("read_branch"),
    }


# --- a generated history ----------------------------------------------------------------------


def _rows(n: int, seed: int, start: int, countries: tuple, customer: str = "customer_id"):
    table = events(n, seed=seed, start=start, countries=countries, customer_type=INT32)
    return table.rename_columns(["id", "event_date", "country", customer])


def build_history(root: Root, folder: Path) -> None:
    def file(name: str, table: pa.Table) -> str:
        pq.write_table(table, folder / name)
        return str(folder / name)

    schema = file("schema.parquet", _rows(1, 0, 0, ("US",)))
    spec1 = ["--field", "year(event_date) as event_year", "--field", "country"]
    ok(root, "add-partition-spec", "--schema", schema, *spec1)
    ok(root, "write", "--from", file("a.parquet", _rows(60, 1, 0, ("US", "DE"))))
    ok(root, "write", "--from", file("b.parquet", _rows(30, 2, 60, ("FR",))))
    ok(root, "write", "--from", file("c.parquet", _rows(20, 3, 90, ("US",))))
    ok(root, "add-partition-spec", "--field", "country")
    ok(root, "write", "--from", file("d.parquet", _rows(40, 4, 110, ("US", None))))
    ok(
        root,
        "evolve-schema",
        "--add",
        "score int64",
        "--rename",
        "customer_id=customer",
        "--widen",
        "customer=int64",
    )
    ok(root, "tag-partitions", "snap", "--publish")
    later = _rows(10, 5, 150, ("US",), customer="customer").cast(
        pa.schema(
            [("id", pa.int64()), ("event_date", pa.date32()), ("country", pa.string())]
            + [("customer", pa.int64())]
        )
    )
    ok(root, "write", "--from", file("e.parquet", later))
    ok(root, "prune", "--compact", "--yes")
    branch_rows = later.slice(0, 5).set_column(2, "country", pa.array(["DE"] * 5))
    ok(root, "write", "--branch", "b1", "--from", file("f.parquet", branch_rows))
    ok(root, "write", "--from", file("g.parquet", later.slice(5, 5)))
    dropped = next(
        row["object_id"]
        for row in lance.dataset(str(root.local_path / "__manifest")).to_table().to_pylist()
        if row["object_type"] == "table"
        and row["object_id"].startswith("v1$")
        and row["partition_field_country"] == "FR"
    )
    ok(root, "drop", dropped.replace("$", "."), "--yes")


def test_every_pair_of_manifest_versions_matches_time_travel_reads(tmp_path):
    root = Root(str(tmp_path / "ns"), {}, tmp_path / "ns")
    root.local_path.mkdir()
    build_history(root, tmp_path)
    oracle = Oracle(root)
    versions = oracle.versions()
    assert len(versions) >= 12
    states = {v: oracle.state(v) for v in versions}
    before = tree_snapshot(root.local_path)
    seen = {"added": 0, "removed": 0, "changed": 0, "ops": set(), "schema": set()}
    for i, a in enumerate(versions):
        for b in versions[i + 1 :]:
            got = ok(root, "diff", "--from-version", str(a), "--to-version", str(b), "--json")
            got = got.json()
            assert (got["from_version"], got["to_version"]) == (a, b)
            check_pair(oracle, got, expected_diff(oracle, states[a], states[b]), states[b])
            for change in ("added", "removed", "changed"):
                seen[change] += len(got[change])
                for entry in got[change]:
                    seen["ops"] |= {op["operation"] for op in entry["operations"]}
            seen["schema"] |= {c["change"] for c in got["schema_changes"]}
    # the history exercised what a diff can say
    assert all(seen[k] for k in ("added", "removed", "changed"))
    assert {"overwrite", "append", "project", "rewrite", "clone"} <= seen["ops"], seen["ops"]
    assert {"added", "renamed", "type_changed"} <= seen["schema"]

    first, last = versions[0], versions[-1]
    latest = ok(root, "diff", "--from-version", str(first), "--json").json()
    explicit = ok(root, "diff", "--from-version", str(first), "--to-version", str(last), "--json")
    assert latest == explicit.json()
    same = ok(root, "diff", "--from-version", str(last), "--to-version", str(last), "--json")
    assert same.json()["untouched"] == len(states[last]["parts"])
    assert not any(same.json()[k] for k in ("added", "removed", "changed"))

    # a timestamp names the newest version committed at or before it
    stamps = {
        v["version"]: v["timestamp"].astimezone(UTC)
        for v in lance.dataset(str(root.local_path / "__manifest")).versions()
    }
    a = next(v for v in versions[2:] if stamps[v] < stamps[v + 1])
    b = next(v for v in reversed(versions[:-1]) if stamps[v] < stamps[v + 1])
    by_time = ok(
        root,
        "diff",
        "--from-timestamp",
        stamps[a].isoformat(),
        "--to-timestamp",
        stamps[b].isoformat().replace("+00:00", ""),
        "--json",
    )
    by_version = ok(root, "diff", "--from-version", str(a), "--to-version", str(b), "--json")
    assert by_time.json() == by_version.json()

    # piped: one line per partition listed, first the change; then the catalog's own changes
    # (spec versions, schema fields) in the same columns
    lines = ok(root, "diff", "--from-version", str(first)).stdout.splitlines()
    piped = [line for line in lines if not line.startswith(("spec ", "schema "))]
    listed = [e for k in ("added", "removed", "changed") for e in latest[k]]
    assert len(piped) == len(listed) and len(piped) > 1
    assert [line.split("\t")[0] for line in piped] == [
        k for k in ("added", "removed", "changed") for _ in latest[k]
    ]
    for line in piped:  # a spec version reads `v2`; a table version as `versions` prints it
        cells = line.split("\t")
        assert re.fullmatch(r"v\d+", cells[2]), line
        assert all(re.fullmatch(r"-|\d+|tag \S+ \(\d+\)|\S+@\d+", c) for c in cells[3:5]), line
        assert all(re.match(r"\S*@\d+ ", op) for op in cells[7].split("; ") if op), line
    catalog = lines[len(piped) :]
    assert len(catalog) == len(latest["spec_versions_added"]) + len(latest["schema_changes"])
    assert {len(line.split("\t")) for line in lines} == {len(lines[0].split("\t"))}

    # a partition table's own versions, by ID and by --partition
    us = next(e for e in latest["added"] if e["partition"] == {"country": "US"})
    by_id = ok(root, "diff", us["table"], "--from-version", "1", "--json").json()
    by_values = ok(root, "diff", "--partition", "country=US", "--from-version", "1", "--json")
    assert by_values.json() == by_id
    assert by_id["partition"] == {"country": "US"} and by_id["spec_version"] == 2
    uri = oracle.uri(us["location"])
    table_versions = sorted(v["version"] for v in lance.dataset(uri).versions())
    assert [v["version"] for v in by_id["versions"]] == table_versions[1:]
    assert [v["lance_operation"] for v in by_id["versions"]] == [
        type(lance.dataset(uri).read_transaction(v).operation).__name__ for v in table_versions[1:]
    ]
    assert by_id["to_rows"] == lance.dataset(uri).count_rows()
    assert tree_snapshot(root.local_path) == before


def test_table_diff_names_each_operation_with_its_rows(local_root):
    uri = str(local_root.local_path / "t.lance")
    lance.write_dataset(numbered(100), uri, max_rows_per_file=20)  # 1
    lance.write_dataset(numbered(10), uri, mode="append")  # 2
    lance.dataset(uri).delete("x < 5")  # 3: 10 rows match
    lance.dataset(uri).update({"s": "'z'"}, where="x = 50")  # 4
    lance.dataset(uri).create_scalar_index("x", "BTREE")  # 5
    lance.write_dataset(numbered(30), uri, mode="overwrite")  # 6
    for _ in range(3):
        lance.write_dataset(numbered(7), uri, mode="append")  # 7, 8, 9
    lance.dataset(uri).optimize.compact_files()
    lance.dataset(uri, version=2).restore()
    before = tree_snapshot(local_root.local_path)

    result = ok(local_root, "diff", "t", "--from-version", "1", "--json").json()
    assert (result["table"], result["location"], result["from_version"]) == ("t", "t.lance", 1)
    assert (result["from_rows"], result["to_rows"]) == (100, 110)
    done = [(v["version"], v["operation"], v["rows_delta"]) for v in result["versions"]]
    assert done[:8] == [
        (2, "append", 10),
        (3, "delete", -10),
        (4, "update", 0),
        (5, "create index", 0),
        (6, "overwrite", -70),
        (7, "append", 7),
        (8, "append", 7),
        (9, "append", 7),
    ]
    # the compaction: a Rewrite, after what Lance may commit first without a pylance name
    compaction = done[8:-1]
    assert compaction and compaction[-1][1] == "rewrite"
    assert all(op in ("rewrite", "other") and delta == 0 for _, op, delta in compaction)
    assert done[-1][1:] == ("restore", 110 - 51)
    assert result["versions"][-1]["detail"] == "to version 2"
    assert result["versions"][1]["detail"] == "where x < 5"
    assert "x_idx" in result["versions"][3]["detail"]
    assert [v["rows"] for v in result["versions"]] == [
        lance.dataset(uri, version=v["version"]).count_rows() for v in result["versions"]
    ]
    assert [v["bytes"] for v in result["versions"]] == [
        int(info["metadata"]["total_files_size"])
        for info in lance.dataset(uri).versions()
        if info["version"] > 1
    ]

    window = ok(local_root, "diff", "t", "--from-version", "2", "--to-version", "6", "--json")
    assert [v["version"] for v in window.json()["versions"]] == [3, 4, 5, 6]
    assert (window.json()["from_rows"], window.json()["to_rows"]) == (110, 30)

    piped = ok(local_root, "diff", "t", "--from-version", "5").stdout.splitlines()
    assert len(piped) == len(result["versions"]) - 4  # versions 6 on
    cells = piped[0].split("\t")
    assert (cells[0], cells[2], cells[3], cells[4]) == ("6", "overwrite", "30", "-70")
    assert tree_snapshot(local_root.local_path) == before

    # versions Lance cleaned up are not there to diff: exit 3, naming the readable ones
    lance.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    gone = cli(local_root, "diff", "t", "--from-version", "1")
    assert gone.exit_code == 3 and "readable versions are" in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1


def test_bad_inputs_exit_with_one_line_and_change_nothing(tmp_path, local_root, files):
    part = Root(str(tmp_path / "p"), {}, tmp_path / "p")
    part.local_path.mkdir()
    spec = ["--field", "year(event_date) as event_year", "--field", "country"]
    ok(part, "add-partition-spec", "--schema", files("s.parquet", events(1)), *spec)
    ok(part, "write", "--from", files("a.parquet", events(50, seed=1)))
    ok(part, "write", "--from", files("b.parquet", events(20, seed=2, start=50)))
    lance.write_dataset(numbered(5), str(local_root.local_path / "t.lance"))
    lance.write_dataset(numbered(5), str(local_root.local_path / "t.lance"), mode="append")
    cases = [
        (part, ["diff"], 2, "--from-version"),
        (part, ["diff", "--from-version", "x1"], 2, "whole number"),
        (part, ["diff", "--to-version", "2"], 2, "--from-version"),
        (part, ["diff", "--from-version", "1", "--from-timestamp", "2020-01-01"], 2, "not both"),
        (
            part,
            ["diff", "--from-version", "1", "--to-version", "2", "--to-timestamp", "2020"],
            2,
            "not both",
        ),
        (part, ["diff", "--from-version", "99"], 3, "readable versions are 1 to"),
        (part, ["diff", "--from-version", "0"], 3, "readable versions are"),
        (part, ["diff", "--from-timestamp", "2000-01-01"], 3, "readable versions are"),
        (part, ["diff", "--from-timestamp", "yesterday"], 2, "ISO 8601"),
        (part, ["diff", "--from-version", "3", "--to-version", "2"], 2, "later than --to"),
        (part, ["diff", "v1", "--from-version", "1"], 2, "is a namespace"),
        (part, ["diff", "nope", "--from-version", "1"], 3, "does not exist"),
        (part, ["diff", "--partition", "country=ZZ", "--from-version", "1"], 3, "no partition"),
        (local_root, ["diff", "--from-version", "1"], 2, "name a table"),
        (local_root, ["diff", "t", "--from-version", "7"], 3, "readable versions are 1 to 2"),
        (local_root, ["diff", "t", "--from-version", "2", "--to-version", "1"], 2, "later"),
        (
            local_root,
            ["diff", "t", "--from-timestamp", "1999-12-31T23:00:00+01:00"],
            3,
            "readable versions are 1 to 2",
        ),
    ]
    before = {r.uri: tree_snapshot(r.local_path) for r in (part, local_root)}
    for root, args, code, words in cases:
        result = cli(root, *args)
        assert result.exit_code == code, (args, result.exit_code, result.stderr)
        assert words in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
        assert "Traceback" not in result.stderr and result.stdout == ""
    as_json = cli(part, "diff", "--from-version", "99", "--json")
    assert as_json.exit_code == 3
    assert json.loads(as_json.stderr)["error"]["name"] == "TableVersionNotFound"
    assert {r.uri: tree_snapshot(r.local_path) for r in (part, local_root)} == before
