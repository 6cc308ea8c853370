"""The clone cases of `prune` on S3 (a moto server on 127.0.0.1): a shallow clone made through
another spelling of its source's key keeps the source version it reads, its index files stay
after the source rebuilt its indexes, and the sweep of unreferenced files (a killed append's,
judged by the object's own timestamp) never takes a file the clone reads."""

from __future__ import annotations

import json
import time

import lance
import pyarrow as pa
import pytest
from helpers import invoke

pytestmark = pytest.mark.s3

FAST = ["--older-than", "1s", "--grace", "1s", "--force", "--yes", "--json"]


def index_answers(ds) -> tuple:
    return (
        ds.to_table(filter="a = 42", columns=["a"]).to_pylist(),
        sorted(ds.to_table(full_text_query="word3", columns=["a"]).column("a").to_pylist()),
    )


@pytest.mark.parametrize(
    "spelling",
    ["{root}/src.lance", "{root}/src.lance/", "{root}/x/../src.lance", "{root}/./src.lance"],
)
def test_on_s3_a_clone_keeps_its_data_and_index_files(s3_bucket, s3_options, spelling):
    root = f"s3://{s3_bucket}/ns"
    options = {k: str(v) for k, v in s3_options.items()}
    args = ["--root", root, *[f"-s{k}={v}" for k, v in options.items()]]
    source = f"{root}/src.lance"
    rows = pa.table({"a": list(range(200)), "s": [f"word{i % 7} other" for i in range(200)]})
    ds = lance.write_dataset(rows, source, storage_options=options)
    ds.create_scalar_index("a", "BTREE")
    lance.dataset(source, storage_options=options).create_scalar_index("s", "INVERTED")
    ds = lance.dataset(spelling.format(root=root), storage_options=options)
    cloned_version = ds.version
    ds.shallow_clone(f"{root}/copy.lance", cloned_version, storage_options=options)
    clone = lance.dataset(f"{root}/copy.lance", storage_options=options)
    before = (clone.to_table(), index_answers(clone))
    # The source moves on: overwritten (the clone's data files are no longer its latest's),
    # its indexes rebuilt, and a killed append leaves a file no version names.
    more = pa.table({"a": list(range(500, 700)), "s": ["word3 new"] * 200})
    lance.write_dataset(more, source, mode="overwrite", storage_options=options)
    ds = lance.dataset(source, storage_options=options)
    ds.create_scalar_index("a", "BTREE", replace=True)
    lance.dataset(source, storage_options=options).create_scalar_index(
        "s", "INVERTED", replace=True
    )
    lance.fragment.write_fragments(more.slice(0, 1), source, storage_options=options)
    time.sleep(1.2)
    result = invoke(*args, "prune", *FAST)
    assert result.exit_code == 0, result.stderr
    report = {t["location"]: t for t in json.loads(result.stdout)["tables"]}
    kept = {k["version"] for k in report["src.lance"]["protected"]}
    assert cloned_version in kept, report["src.lance"]
    assert report["src.lance"]["versions_removed"]  # prune did remove what nobody reads
    clone = lance.dataset(f"{root}/copy.lance", storage_options=options)
    assert (clone.to_table(), index_answers(clone)) == before
    assert invoke(*args, "check").exit_code == 0
