"""`lancens check`: every kind of damage built on purpose and found, through the CLI.

Each test damages a healthy namespace in one way and asserts the finding code
(`check --json` -> `findings[].code`) and exit 1; a healthy namespace exits 0 with no findings.
`--fix` repairs only what is safe (registering orphan table directories, deleting staged
`__manifest` files past the grace period) and never touches table data; `--fix --dry-run`
changes nothing; `check ID` looks at one table or namespace only.
"""

from __future__ import annotations

import json
import os

import lance
import lance_namespace as ln
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from data import numbered
from helpers import (
    Root,
    copy_object,
    delete_object,
    invoke,
    object_tags,
    run_cli,
    tree_snapshot,
    uri,
)
from lance.namespace import DirectoryNamespace

WRITER_FLAGS_KEY = "lance.namespace.manifest.writer_feature_flags"
READER_FLAGS_KEY = "lance.namespace.manifest.reader_feature_flags"

# --- helpers -----------------------------------------------------------------------------------


def ours(root: Root, *args: str, code: int = 0):
    result = invoke(*root.args, *args)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result


def check(root: Root, *args: str, code: int) -> dict:
    """`lancens check --json ...`; assert the exit code; the report."""
    return ours(root, "check", *args, "--json", code=code).json()


def codes(report: dict) -> list[str]:
    return sorted(f["code"] for f in report["findings"])


@pytest.fixture
def parquet(tmp_path) -> str:
    path = tmp_path / "src.parquet"
    pq.write_table(numbered(), path)
    return str(path)


def delete(root: Root, location: str) -> None:
    """Delete one file below the root."""
    if root.local_path is not None:
        (root.local_path / location).unlink()
    else:
        delete_object(root, location)


def delete_uri(root: Root, address: str) -> None:
    """Delete one file by its full address (a base path may lie outside the root)."""
    if "://" not in address:
        os.remove(address)
        return
    scheme, _, rest = address.partition("://")
    bucket, _, key = rest.partition("/")
    delete_object(Root(f"{scheme}://{bucket}", root.storage_options, None), key)


def copy(root: Root, src: str, dst: str) -> None:
    if root.local_path is not None:
        (root.local_path / dst).parent.mkdir(parents=True, exist_ok=True)
        (root.local_path / dst).write_bytes((root.local_path / src).read_bytes())
    else:
        copy_object(root, src, dst)


def files(root: Root, under: str = "") -> dict[str, object]:
    """Every file below the root (or `under`), relative to the root, with content / tag."""
    if root.local_path is not None:
        base = root.local_path / under if under else root.local_path
        prefix = f"{under}/" if under else ""
        return {prefix + k: v for k, v in tree_snapshot(base).items() if not k.endswith("/")}
    return object_tags(root, under)


def manifest_ds(root: Root, **kwargs):
    return lance.dataset(uri(root, "__manifest"), storage_options=root.storage_options, **kwargs)


def rows(root: Root) -> dict[str, dict]:
    return {r["object_id"]: r for r in manifest_ds(root).to_table().to_pylist()}


def location_of(root: Root, object_id: str) -> str:
    return rows(root)[object_id]["location"]


def table_ds(root: Root, location: str):
    return lance.dataset(uri(root, location), storage_options=root.storage_options)


def data_file(root: Root, location: str) -> str:
    """Path (relative to the root) of the first data file of a table."""
    first = table_ds(root, location).get_fragments()[0].metadata.files[0].path
    return f"{location}/data/{first}"


def namespace(root: Root):
    """Our own namespace object, to damage `__manifest` through the tool's internals."""
    from lancens_cli.service.namespace import Namespace

    return Namespace.from_properties(root.properties)


def add_rows(root: Root, *new_rows: dict) -> None:
    """Add manifest rows bypassing every validation of the CLI (the exact schema is kept)."""

    def plan(snapshot, edit):
        for row in new_rows:
            edit.add(row)

    namespace(root).manifest.mutate(plan)


def healthy_namespace(root: Root, parquet: str) -> None:
    """Root table `r`, namespace `ns1` with tables `t` and `u`."""
    ours(root, "create", "table", "r", "--from", parquet)
    ours(root, "create", "namespace", "ns1")
    ours(root, "create", "table", "ns1.t", "--from", parquet)
    ours(root, "create", "table", "ns1.u", "--from", parquet)


def reference(root: Root) -> DirectoryNamespace:
    return DirectoryNamespace(**{**root.properties, "dir_listing_enabled": "false"})


# --- healthy -----------------------------------------------------------------------------------


def test_healthy_namespace(any_root, parquet):
    healthy_namespace(any_root, parquet)
    ours(any_root, "create", "table", "declared", "--declare")
    lance.write_dataset(
        numbered(), uri(any_root, "v1only.lance"), storage_options=any_root.storage_options
    )
    ds = table_ds(any_root, location_of(any_root, "r"))
    ds.delete("x < 3")  # a deletion file that is present is fine
    assert manifest_ds(any_root).version >= 5  # older versions' data files are not "staged"

    result = run_cli(*any_root.args, "check", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    report = result.json()
    assert report["healthy"] and report["findings"] == []
    assert report["tables_checked"] == 5  # r, ns1.t, ns1.u, declared, and the V1-only table
    assert report["namespaces_checked"] == 1
    plain = run_cli(*any_root.args, "check")
    assert plain.exit_code == 0 and plain.stdout == "" and "healthy" in plain.stderr


def test_v1_only_namespace(local_root):
    """No __manifest at all: the V1 tables known from their directories are checked."""
    for name in ("a", "b"):
        lance.write_dataset(numbered(), uri(local_root, f"{name}.lance"))
    report = check(local_root, code=0)
    assert report["tables_checked"] == 2 and report["findings"] == []
    delete(local_root, data_file(local_root, "b.lance"))
    (local_root.local_path / "junk.lance").mkdir()
    (local_root.local_path / "junk.lance" / "notes.txt").write_text("not a table")
    report = check(local_root, code=1)
    found = {(f["code"], f["object"]) for f in report["findings"]}
    assert found == {("missing_data_file", "b"), ("table_unloadable", "junk")}
    assert not (local_root.local_path / "__manifest").exists()


# --- table damage ------------------------------------------------------------------------------


def test_missing_data_file(any_root, parquet):
    healthy_namespace(any_root, parquet)
    location = location_of(any_root, "ns1$t")
    delete(any_root, data_file(any_root, location))
    result = run_cli(*any_root.args, "check", "--json")
    assert result.exit_code == 1
    [finding] = result.json()["findings"]
    assert (finding["code"], finding["object"], finding["location"]) == (
        "missing_data_file",
        "ns1.t",
        location,
    )
    assert not finding["fixable"]
    # Without --json: one line per finding on stdout, the summary on stderr.
    plain = run_cli(*any_root.args, "check")
    assert plain.exit_code == 1
    assert plain.stdout.splitlines()[0].split("\t")[:3] == ["problem", "missing_data_file", "ns1.t"]
    assert "1 problem" in plain.stderr


def test_missing_deletion_file(local_root, parquet):
    healthy_namespace(local_root, parquet)
    location = location_of(local_root, "r")
    ds = table_ds(local_root, location)
    ds.delete("x < 3")
    meta = table_ds(local_root, location).get_fragments()[0].metadata
    assert meta.deletion_file is not None
    delete(local_root, f"{location}/{meta.deletion_file.path(meta.id)}")
    report = check(local_root, code=1)
    assert codes(report) == ["missing_deletion_file"]
    assert report["findings"][0]["object"] == "r"


def test_table_missing(local_root, parquet):
    import shutil

    healthy_namespace(local_root, parquet)
    shutil.rmtree(local_root.local_path / location_of(local_root, "ns1$t"))
    shutil.rmtree(local_root.local_path / "r.lance")  # a root table with a row
    report = check(local_root, code=1)
    assert {(f["code"], f["object"]) for f in report["findings"]} == {
        ("table_missing", "ns1.t"),
        ("table_missing", "r"),
    }


def test_mixed_manifest_naming(any_root, parquet):
    healthy_namespace(any_root, parquet)
    location = location_of(any_root, "ns1$u")
    versions = [k for k in files(any_root, f"{location}/_versions") if k.endswith(".manifest")]
    assert len(versions) == 1 and len(versions[0].rsplit("/", 1)[1]) == len("9" * 20 + ".manifest")
    copy(any_root, versions[0], f"{location}/_versions/1.manifest")  # the same version, V1-named
    report = check(any_root, code=1)
    assert "mixed_manifest_naming" in codes(report)
    assert {f["object"] for f in report["findings"]} == {"ns1.u"}


def test_base_path_missing_data_file(any_root, parquet, tmp_path):
    """The storage layout spec base paths: a data file written to another base is resolved there."""
    from lance import DatasetBasePath

    healthy_namespace(any_root, parquet)
    location = location_of(any_root, "r")
    if any_root.local_path is not None:
        cold = str(tmp_path / "cold")
    else:
        scheme, _, rest = any_root.uri.partition("://")
        cold = f"{scheme}://{rest.split('/')[0]}/cold-tier"
    table_ds(any_root, location).add_bases(
        [DatasetBasePath(cold, name="cold", is_dataset_root=True)]
    )
    ds = lance.write_dataset(
        numbered(4),
        uri(any_root, location),
        mode="append",
        target_bases=["cold"],
        storage_options=any_root.storage_options,
    )
    external = [
        (f.path, f.base_id) for frag in ds.get_fragments() for f in frag.metadata.files if f.base_id
    ]
    assert len(external) == 1
    assert ds.count_rows() == 14
    check(any_root, code=0)  # resolved in the other base: healthy

    delete_uri(any_root, f"{cold}/data/{external[0][0]}")
    report = check(any_root, code=1)
    [finding] = report["findings"]
    assert (finding["code"], finding["object"]) == ("missing_data_file", "r")
    assert "base path" in finding["message"] and cold in finding["message"]


# --- manifest damage ---------------------------------------------------------------------------


def test_duplicate_object_id(local_root, parquet):
    healthy_namespace(local_root, parquet)
    ns = namespace(local_root)
    snapshot = ns.manifest.read()
    duplicate = snapshot.table.filter(pc.equal(snapshot.table["object_id"], "ns1$t"))
    assert ns.manifest._try_commit(snapshot, pa.concat_tables([snapshot.table, duplicate]))
    schema = manifest_ds(local_root).schema
    assert schema.field("object_id").metadata == {
        b"lance-schema:unenforced-primary-key:position": b"0"
    }
    report = check(local_root, code=1)
    assert codes(report) == ["duplicate_object_id"]
    assert report["findings"][0]["object"] == "ns1$t"
    listed = invoke(*local_root.args, "ls", "--recursive", "--json")
    assert listed.exit_code == 0, listed.stderr
    ids = [e["id"] for e in json.loads(listed.stdout)["entries"]]
    assert ids.count("ns1.t") == 1, ids  # one entry for the id held by two rows


def test_missing_parent(local_root, parquet):
    import shutil

    healthy_namespace(local_root, parquet)
    # A real table directory whose row names a namespace that does not exist.
    shutil.copytree(local_root.local_path / "r.lance", local_root.local_path / "cafe0001_ghost$t")
    from lancens_cli.service.catalog.create import table_row

    add_rows(local_root, table_row("ghost$t", "cafe0001_ghost$t", None))
    report = check(local_root, code=1)
    assert [(f["code"], f["object"]) for f in report["findings"]] == [("missing_parent", "ghost.t")]


def test_bad_location(local_root, parquet):
    from lancens_cli.service.catalog.create import table_row

    healthy_namespace(local_root, parquet)
    add_rows(
        local_root,
        table_row("absolute", str(local_root.local_path / "r.lance"), None),
        table_row("climbing", "../outside.lance", None),
        table_row("remote", "s3://elsewhere/t.lance", None),
    )
    report = check(local_root, code=1)
    assert sorted((f["code"], f["object"]) for f in report["findings"]) == [
        ("bad_location", "absolute"),
        ("bad_location", "climbing"),
        ("bad_location", "remote"),
    ]


def test_manifest_unreadable(local_root, parquet):
    healthy_namespace(local_root, parquet)
    versions = local_root.local_path / "__manifest" / "_versions"
    latest = sorted(p for p in versions.iterdir() if p.suffix == ".manifest")[0]  # V2: lowest
    latest.write_bytes(b"this is not a lance manifest" * 10)
    result = run_cli(*local_root.args, "check", "--json")
    assert result.exit_code == 1, result.stderr
    report = result.json()
    assert codes(report) == ["manifest_unreadable"]
    assert report["findings"][0]["location"] == "__manifest"


def test_manifest_feature_flags(local_root, parquet):
    healthy_namespace(local_root, parquet)
    manifest_ds(local_root).update_metadata({WRITER_FLAGS_KEY: "2"})  # a bit nobody knows
    report = check(local_root, code=1)
    assert codes(report) == ["manifest_feature_flags"]
    # An unknown reader flag means the manifest must not be read at all.
    manifest_ds(local_root).update_metadata({WRITER_FLAGS_KEY: "0", READER_FLAGS_KEY: "4"})
    report = check(local_root, code=1)
    assert codes(report) == ["manifest_unreadable"]
    assert "reader" in report["findings"][0]["message"]


# --- orphan table directories ------------------------------------------------------------------


def test_fix_registers_an_orphan_v2_directory_and_moves_no_data(any_root, parquet):
    healthy_namespace(any_root, parquet)
    orphan = "1234abcd_ns1$orphan"
    lance.write_dataset(
        numbered(3), uri(any_root, orphan), storage_options=any_root.storage_options
    )
    report = check(any_root, code=1)
    [finding] = report["findings"]
    assert (finding["code"], finding["object"], finding["location"]) == (
        "orphan_table_directory",
        "ns1.orphan",
        orphan,
    )
    assert finding["fixable"] and not finding["fixed"]

    before = files(any_root)
    report = check(any_root, "--fix", "--dry-run", code=1)
    assert report["dry_run"] and not report["findings"][0]["fixed"]
    assert files(any_root) == before

    version = manifest_ds(any_root).version
    report = check(any_root, "--fix", code=0)
    assert report["findings"][0]["fixed"]
    assert manifest_ds(any_root).version == version + 1
    assert rows(any_root)["ns1$orphan"]["location"] == orphan
    assert {k: v for k, v in files(any_root).items() if "__manifest" not in k} == {
        k: v for k, v in before.items() if "__manifest" not in k
    }
    assert check(any_root, code=0)["findings"] == []
    described = reference(any_root).describe_table(ln.DescribeTableRequest(id=["ns1", "orphan"]))
    assert described.location.rstrip("/").endswith(orphan)


def test_orphan_without_namespace_is_not_fixable(local_root, parquet):
    healthy_namespace(local_root, parquet)
    lance.write_dataset(numbered(), uri(local_root, "abcdef01_nowhere$t"))
    report = check(local_root, code=1)
    [finding] = report["findings"]
    assert finding["code"] == "orphan_table_directory" and not finding["fixable"]
    before = files(local_root)
    report = check(local_root, "--fix", code=1)
    assert not report["findings"][0]["fixed"]
    assert files(local_root) == before


def test_fix_does_not_resurrect_a_deregistered_table(local_root, parquet, monkeypatch):
    """`drop --keep-data` marks `<name>.lance` with `.lance-deregistered`; with dir listing off,
    `check --fix` must not register it again (README: the marker is honoured by both tools)."""
    healthy_namespace(local_root, parquet)
    ours(local_root, "create", "table", "gone", "--from", parquet)
    ours(local_root, "drop", "gone", "--keep-data", "--yes")
    assert (local_root.local_path / "gone.lance" / ".lance-deregistered").exists()
    monkeypatch.setenv("LANCENS_DIR_LISTING_ENABLED", "false")
    result = invoke(*local_root.args, "check", "--fix", "--json")
    assert result.exit_code in (0, 1), result.stderr
    assert "gone" not in rows(local_root), result.stdout
    assert not any(f["object"] == "gone" and f["fixable"] for f in result.json()["findings"])


# --- staged __manifest files -------------------------------------------------------------------


def test_staged_manifest_file(any_root, parquet):
    healthy_namespace(any_root, parquet)
    table = manifest_ds(any_root).to_table()
    # A commit that wrote its data file and died before committing.
    lance.fragment.write_fragments(
        table, uri(any_root, "__manifest"), storage_options=any_root.storage_options
    )
    tracked = set(manifest_ds(any_root).tracked_files().read_all().column("path").to_pylist())
    staged = [
        k for k in files(any_root, "__manifest/data") if k[len("__manifest/") :] not in tracked
    ]
    assert len(staged) == 1
    # Unreferenced files inside a table's directory are table data: never touched.
    location = location_of(any_root, "ns1$t")
    copy(any_root, data_file(any_root, location), f"{location}/data/leftover.lance")

    report = check(any_root, code=1)  # young: reported, not fixable yet
    [finding] = report["findings"]
    assert (finding["code"], finding["location"]) == ("staged_manifest_file", staged[0])
    assert not finding["fixable"]
    before = files(any_root)
    check(any_root, "--fix", code=1)  # still within the grace period: kept
    assert files(any_root) == before
    check(any_root, "--grace-minutes", "0", "--fix", "--dry-run", code=1)
    assert files(any_root) == before

    report = check(any_root, "--grace-minutes", "0", "--fix", code=0)
    assert [(f["code"], f["fixed"]) for f in report["findings"]] == [("staged_manifest_file", True)]
    after = files(any_root)
    assert set(before) - set(after) == {staged[0]}
    assert {k: before[k] for k in after} == after  # nothing else changed
    assert f"{location}/data/leftover.lance" in after
    assert check(any_root, code=0)["findings"] == []
    # Every __manifest version is still readable (their data files are not "staged").
    for version in range(1, manifest_ds(any_root).version + 1):
        manifest_ds(any_root, version=version).to_table()


# --- scope -------------------------------------------------------------------------------------


def test_check_one_table_or_namespace(local_root, parquet):
    healthy_namespace(local_root, parquet)
    delete(local_root, data_file(local_root, location_of(local_root, "ns1$t")))
    delete(local_root, data_file(local_root, location_of(local_root, "r")))
    lance.write_dataset(numbered(), uri(local_root, "0000beef_ns1$stray"))  # an orphan at the root

    everything = check(local_root, code=1)
    assert sorted((f["code"], f["object"]) for f in everything["findings"]) == [
        ("missing_data_file", "ns1.t"),
        ("missing_data_file", "r"),
        ("orphan_table_directory", "ns1.stray"),
    ]
    report = check(local_root, "ns1", code=1)
    assert report["scope"] == "ns1"
    assert [(f["code"], f["object"]) for f in report["findings"]] == [
        ("missing_data_file", "ns1.t")
    ]
    assert report["tables_checked"] == 2 and report["namespaces_checked"] == 1
    report = check(local_root, "ns1.t", code=1)
    assert [(f["code"], f["object"]) for f in report["findings"]] == [
        ("missing_data_file", "ns1.t")
    ]
    assert report["tables_checked"] == 1
    report = check(local_root, "r", code=1)
    assert [f["object"] for f in report["findings"]] == ["r"]
    report = check(local_root, "ns1.u", code=0)
    assert report["findings"] == [] and report["tables_checked"] == 1
    assert invoke(*local_root.args, "check", "nope").exit_code == 3
    assert invoke(*local_root.args, "check", "ns1.nope").exit_code == 3


def test_rename_properties_are_read_however_another_writer_spells_them(local_root, parquet):
    from lancens_cli.service.catalog.create import table_row

    """A row's rename properties as any JSON writer may leave them: a key written with
    `\\u` escapes still names the directory a rename left (never an orphan), and a rename
    intent that is not a JSON object is no intent (a finding at most, never a crash)."""
    import shutil

    healthy_namespace(local_root, parquet)
    top = local_root.local_path
    for name in ("cafe0002_old", "cafe0003_moved", "cafe0004_odd"):
        shutil.copytree(top / "r.lance", top / name)
    before = check(local_root, code=1)
    assert ("orphan_table_directory", "cafe0002_old") in [
        (f["code"], f["location"]) for f in before["findings"]
    ]
    escaped = "".join(f"\\u{ord(c):04x}" for c in "lancens.renamed_from")
    add_rows(
        local_root,
        {
            **table_row("moved", "cafe0003_moved", None),
            "metadata": f'{{"{escaped}": "cafe0002_old"}}',
        },
        {**table_row("odd", "cafe0004_odd", None), "metadata": '{"lancens.rename_to": "3"}'},
    )
    result = invoke(*local_root.args, "check", "--json")
    assert result.exit_code in (0, 1), result.stderr
    found = [(f["code"], f["location"]) for f in result.json()["findings"]]
    assert [f for f in found if f[0] == "orphan_table_directory"] == []
