"""Namespace time travel: every `__manifest` version is a snapshot of the whole partitioned
namespace, readable with `--version-as-of` / `--timestamp-as-of` (and the data source's
`versionAsOf` / `timestampAsOf`), across writes, an overwrite and a spec evolution, and after a
prune that kept them.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data import partitioned_root
from helpers import Root, invoke, ok

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("country", pa.string()), ("n", pa.int32())]
)


def rows(start: int, count: int, country: str) -> pa.Table:
    return pa.table(
        {
            "id": list(range(start, start + count)),
            "country": [country] * count,
            "n": [i % 7 for i in range(count)],
        },
        schema=SCHEMA,
    )


def manifest_version(root: Root) -> int:
    return lance.dataset(str(root.local_path / "__manifest")).version


@pytest.fixture(scope="module")
def history(tmp_path_factory, spark):
    """(root, [(manifest version, commit time, ids published then)]) over five changes."""
    folder = tmp_path_factory.mktemp("travel")
    root = partitioned_root(folder, SCHEMA, "country")
    seen: list[tuple[int, dt.datetime, list[int]]] = []
    published: set[int] = set()

    def remember(ids: list[int] | None = None) -> None:
        time.sleep(0.05)  # commits apart in time, for --timestamp-as-of
        ids = sorted(published) if ids is None else ids
        seen.append((manifest_version(root), dt.datetime.now(dt.UTC), ids))
        time.sleep(0.05)

    for step, (start, country) in enumerate([(0, "US"), (100, "DE"), (200, "US")]):
        path = folder / f"w{step}.parquet"
        pq.write_table(rows(start, 20, country), path)
        ok(root, "write", "--from", str(path))
        published |= set(range(start, start + 20))
        remember()
    # a spec evolution, then a write under it
    ok(root, "add-partition-spec", "--field", "bucket(2, id)")
    remember()
    pq.write_table(rows(300, 10, "FR"), folder / "w3.parquet")
    ok(root, "write", "--from", str(folder / "w3.parquet"))
    published |= set(range(300, 310))
    remember()
    # an overwrite of the US partitions through the data source (dynamic partition overwrite)
    replacement = spark.createDataFrame(
        rows(900, 5, "US").to_pylist(), "id long, country string, n int"
    )
    replacement.write.format("lancens").option("root", root.uri).mode("overwrite").save()
    after = read_ids(spark, root)  # what readers saw right then, kept for later
    assert set(range(900, 905)) <= set(after) and len(after) < len(published) + 5
    remember(after)
    return root, seen


def read_ids(spark, root: Root, **options: str) -> list[int]:
    reader = spark.read.format("lancens").option("root", root.uri)
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(r.id for r in reader.load().select("id").collect())


def test_every_past_version_reads_as_it_was(history, spark):
    root, seen = history
    for version, _, ids in seen:
        assert read_ids(spark, root, versionAsOf=str(version)) == ids, version
    scanned = ok(
        root, "scan", "--version-as-of", str(seen[0][0]), "--columns", "id", "--json"
    ).json()
    assert sorted(r[0] for r in scanned["rows"]) == seen[0][2]


def test_a_timestamp_reads_the_newest_version_committed_before_it(history, spark):
    root, seen = history
    for _, moment, ids in seen:
        assert read_ids(spark, root, timestampAsOf=moment.isoformat()) == ids


def test_partitions_as_of_a_version(history):
    root, seen = history
    first = ok(root, "partitions", "--version-as-of", str(seen[0][0]), "--json").json()
    assert first["partitions_matched"] == 1  # only US existed
    now = ok(root, "partitions", "--json").json()
    assert now["partitions_matched"] > first["partitions_matched"]


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--version-as-of", "9999"], 3, "readable versions are 1 to"),
        (["--timestamp-as-of", "2001-01-01T00:00:00Z"], 3, "no __manifest version"),
        (["--timestamp-as-of", "yesterday"], 2, "not ISO 8601"),
        (["--version-as-of", "1", "--timestamp-as-of", "2001-01-01"], 2, "not both"),
    ],
)
def test_a_version_that_cannot_be_read_is_one_line(history, args, code, words):
    root, _ = history
    result = invoke(*root.args, "partitions", *args)
    assert result.exit_code == code and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_past_versions_read_the_same_after_a_prune_that_kept_them(history, spark):
    root, seen = history
    ok(root, "prune", "--yes")  # the default policy keeps what recent versions publish
    for version, _, ids in seen:
        assert read_ids(spark, root, versionAsOf=str(version)) == ids, version


def test_join_and_join_plan_read_each_root_as_of_a_version(history):
    """A self-join on the unique id counts the ids published at that version; a timestamp
    reads both roots as of one moment."""
    root, seen = history
    for version, moment, ids in (seen[0], seen[3]):
        for travel in (
            ["--version-as-of", str(version)],
            ["--timestamp-as-of", moment.isoformat()],
        ):
            result = invoke(
                "--json", "join", root.uri, root.uri, "--on", "l.id = r.id", "--count", *travel
            )
            assert result.exit_code == 0, result.stderr
            assert json.loads(result.stdout)["count"] == len(ids), (travel, version)
    first = invoke(
        "--json",
        "join-plan",
        root.uri,
        root.uri,
        "--on",
        "l.id = r.id",
        "--version-as-of",
        str(seen[0][0]),
    )
    latest = invoke("--json", "join-plan", root.uri, root.uri, "--on", "l.id = r.id")
    assert first.exit_code == latest.exit_code == 0, first.stderr + latest.stderr
    assert len(first.stdout) < len(latest.stdout)  # fewer partitions back then
