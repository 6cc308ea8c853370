"""What every test folder shares besides fixtures: running `lancens`, roots, snapshots, and a
partitioned namespace's published rows.

Importable from any test module as `helpers` (pytest's `pythonpath = ["tests"]`); the fixtures
built on these live in the conftest.py files.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

S3_KEY = "testing-access-key-AKIAEXAMPLE"
S3_SECRET = "testing-secret-key-wJalrXUtnFEMI"

# The partition spec most partitioned tests add over `data.events` rows.
SPEC1 = ["--field", "year(event_date) as event_year", "--field", "country"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def s3_client(endpoint: str):
    """A boto3 S3 client of the moto server at `endpoint`."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=S3_KEY,
        aws_secret_access_key=S3_SECRET,
    )


@dataclass
class Root:
    """A namespace root plus the CLI arguments that reach it."""

    uri: str
    storage_options: dict[str, str]
    local_path: Path | None

    @property
    def args(self) -> list[str]:
        args = ["--root", self.uri]
        for key, value in self.storage_options.items():
            args += ["-s", f"{key}={value}"]
        return args

    @property
    def properties(self) -> dict[str, str]:
        """DirectoryNamespace / NamespaceConfig properties for this root."""
        props = {"root": self.uri}
        props.update({f"storage.{k}": v for k, v in self.storage_options.items()})
        return props


def uri(root: Root, location: str) -> str:
    """The full address of `location` (relative to the root)."""
    return f"{root.uri.rstrip('/')}/{location}"


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def run_cli(*args: str, input: str | None = None, env: dict | None = None, cwd=None) -> Result:
    """Run `lancens` as a user does: a real subprocess."""
    full_env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1", **(env or {})}
    full_env.pop("LANCENS_ROOT", None) if env is None or "LANCENS_ROOT" not in env else None
    proc = subprocess.run(
        [sys.executable, "-m", "lancens_cli", *args],
        capture_output=True,
        text=True,
        input=input if input is not None else "",
        env=full_env,
        cwd=cwd,
        timeout=300,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def invoke(
    *args: str, input: str | None = None, env: dict[str, str | None] | None = None
) -> Result:
    """Run `lancens` in-process through the executable's entry point (fast; same code path).

    `_run_app` is what `lancens`' `main()` runs: the same handling of usage errors, failures and
    exit codes as a user's process. Each invocation builds its own session, so nothing leaks
    from one to the next. `env` changes the environment for this run only (None: unset).
    """
    from typer.testing import CliRunner

    from lancens_cli.cli.app import _run_app

    with CliRunner().isolation(input=input or "", env=env) as (out, err, _):
        try:
            code = _run_app(list(args), prog_name="lancens")
        except SystemExit as exc:  # as the process would exit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return Result(
            code,
            out.getvalue().decode("utf-8", "backslashreplace"),
            err.getvalue().decode("utf-8", "backslashreplace"),
        )


def ls_json(root: Root, *args: str, env: dict[str, str | None] | None = None) -> dict:
    """`ls --json ARGS` in-process, which must exit 0, as a document."""
    result = invoke(*root.args, "ls", "--json", *args, env=env)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def ls_pages(root: Root, limit: int, *extra: str) -> list[dict]:
    """Every page of `ls --json --limit LIMIT`, following the tokens."""
    pages, token = [], None
    while True:
        doc = ls_json(
            root, *extra, "--limit", str(limit), *(["--page-token", token] if token else [])
        )
        pages.append(doc)
        token = doc["next_page_token"]
        if token is None:
            return pages


def small_and_quick_listings(monkeypatch, tmp_path: Path) -> None:
    """A root of a few tables counts as big, times settle in a tenth of a second, and the
    listing cache is this test's own (the tests of the kept listing and its index)."""
    from lancens_cli.store import link_record, listing_cache

    monkeypatch.setattr(listing_cache, "CACHED_FROM", 4)
    monkeypatch.setattr(link_record, "SETTLED_NS", 100_000_000)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


class CatalogReads:
    """Counts the whole reads of `__manifest` (what a page from the listing index never does)."""

    def __init__(self, monkeypatch) -> None:
        from lancens_cli.store.manifest import ManifestStore

        self.count = 0
        read = ManifestStore.read

        def counted(store, *args, **kwargs):
            self.count += 1
            return read(store, *args, **kwargs)

        monkeypatch.setattr(ManifestStore, "read", counted)


def cli(root: Root, *args: str, extra: tuple[str, ...] = ()) -> Result:
    """`lancens <root's arguments> EXTRA ARGS`, in-process (`invoke`)."""
    return invoke(*root.args, *extra, *args)


def ok(root: Root, *args: str, extra: tuple[str, ...] = ()) -> Result:
    """`cli`, which must exit 0."""
    result = cli(root, *args, extra=extra)
    assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
    return result


def root_s3_client(root: Root):
    """A boto3 S3 client of the moto server an S3 root's storage options name."""
    return s3_client(root.storage_options["endpoint"])


def root_fs(root: Root):
    """An fsspec filesystem reaching a remote root (moto S3 or the GCS emulator), built from the
    test's own options without lancens_cli, and the root's path in it."""
    options = root.storage_options
    scheme, _, path = root.uri.partition("://")
    if scheme == "s3":
        import s3fs

        fs = s3fs.S3FileSystem(
            key=options["access_key_id"],
            secret=options["secret_access_key"],
            client_kwargs={"endpoint_url": options["endpoint"], "region_name": options["region"]},
            skip_instance_cache=True,
        )
    elif scheme in ("gs", "gcs"):
        import gcsfs.core

        fs = gcsfs.core.GCSFileSystem(
            endpoint_url=options["endpoint"], token="anon", project="test", skip_instance_cache=True
        )
    else:
        raise ValueError(f"not a remote root: {root.uri}")
    return fs, path.rstrip("/")


def put_object(root: Root, rel: str, data: bytes) -> None:
    """One object below a remote root (a "directory" there is a prefix with an object in it)."""
    fs, base = root_fs(root)
    fs.pipe_file(f"{base}/{rel}", data)


def delete_object(root: Root, rel: str) -> None:
    """Delete one object below a remote root."""
    fs, base = root_fs(root)
    fs.rm_file(f"{base}/{rel}")


def copy_object(root: Root, src: str, dst: str) -> None:
    """A server-side copy of one object below a remote root."""
    fs, base = root_fs(root)
    fs.copy(f"{base}/{src}", f"{base}/{dst}")


def object_tags(root: Root, under: str = "") -> dict[str, tuple[object, int]]:
    """Every object below a remote root (or `under`), relative to the root, with what changes
    when it is rewritten (S3's ETag, GCS's generation) and its size."""
    fs, base = root_fs(root)
    start = f"{base}/{under}".rstrip("/")
    found = fs.find(start, detail=True) if fs.exists(start) else {}
    return {
        name[len(base) + 1 :]: (info.get("ETag") or info.get("generation"), info["size"])
        for name, info in found.items()
    }


def child_names(root: Root, rel: str = "") -> set[str]:
    """Names directly below `rel` of a remote root (objects and prefixes)."""
    fs, base = root_fs(root)
    start = f"{base}/{rel}".rstrip("/")
    try:
        return {name.rstrip("/").rsplit("/", 1)[-1] for name in fs.ls(start, detail=False)}
    except FileNotFoundError:
        return set()


def tree_snapshot(path: Path) -> dict[str, bytes]:
    """Every file below `path` with its bytes, to prove that nothing changed."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), path) + "/"] = b""
        for name in filenames:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as handle:
                found[os.path.relpath(full, path)] = handle.read()
    return found


# --- a local partitioned namespace, read as a spec-following reader reads it -------------------


def manifest(root: Root):
    """`__manifest` of a local root, as a pylance dataset."""
    import lance

    return lance.dataset(str(root.local_path / "__manifest"))


def partition_tables(root: Root) -> list[dict]:
    rows = manifest(root).to_table(filter="object_type = 'table'").to_pylist()
    return sorted(rows, key=lambda r: r["object_id"])


def published_rows(root: Root):
    """Every row a reader sees: each partition table at its recorded read_version."""
    import lance
    import pyarrow as pa

    parts = []
    for row in partition_tables(root):
        ds = lance.dataset(str(root.local_path / row["location"]), version=row["read_version"])
        parts.append(ds.to_table())
    return pa.concat_tables(parts) if parts else pa.table({})


def region_root(root: str, schema_file) -> None:
    """An empty partitioned namespace at `root`, by region and bucket(4, id), its schema from
    `schema_file` (the cluster and Connect tests' rows: id, region, amount)."""
    assert run_cli("--root", root, "init").exit_code == 0
    spec = run_cli(
        "--root", root, "add-partition-spec", "--schema", str(schema_file),
        "--field", "region", "--field", "bucket(4, id) as b",
    )  # fmt: skip
    assert spec.exit_code == 0, spec.stderr


def written_partitions(result: dict) -> list[tuple]:
    """The tables an `update` or `merge` result says it writes, as a dry run can know them:
    each one's partition values, the name of a table that exists (a new one is named only
    when created), its rows out and in. A dry run's list equals its real run's."""
    for entry in result["partitions"]:
        if result["dry_run"] and entry["created"]:
            assert entry["table"] is None and entry["location"] is None, entry
    return sorted(
        (
            json.dumps(p["values"], sort_keys=True),
            None if p["created"] else p["table"],
            p["rows_deleted"],
            p["rows_written"],
        )
        for p in result["partitions"]
    )


def restored_history_root(folder: Path, *, write_after: bool = False) -> Root:
    """A root partitioned by SPEC1 written three times and restored to `__manifest` version 3
    (a fourth write after it with `write_after`), with a plain table `t`: a history for the
    tests that read what history commands print."""
    import pyarrow.parquet as pq
    from data import events

    made = Root(str(folder / "ns"), {}, folder / "ns")
    made.local_path.mkdir()

    def parquet(name: str, table) -> str:
        pq.write_table(table, folder / name)
        return str(folder / name)

    ok(made, "add-partition-spec", "--schema", parquet("s.parquet", events(1)), *SPEC1)
    for n in range(3):
        ok(made, "write", "--from", parquet(f"w{n}.parquet", events(20, seed=n, start=100 * n)))
    ok(made, "restore", "--to-version", "3", "--yes")
    if write_after:
        ok(made, "write", "--from", parquet("w9.parquet", events(10, seed=9, start=900)))
    ok(made, "create", "table", "t", "--from", parquet("t.parquet", events(30)))
    return made


def index_definition_state(root: Root) -> dict:
    """What `describe` says of a partitioned root's one index definition."""
    shown = ok(root, "describe", "--json").json()["manifest"]["partitioning"]["indexes"]
    assert len(shown) == 1, shown
    return shown[0]


def exact_neighbours(ds, query, k: int) -> list[int]:
    """The oracle of a vector search: the ids of the `k` rows nearest to `query` by squared L2
    distance over the rows of `ds` read back (columns `id` and `emb`), ties in row order."""
    import numpy as np

    table = ds.to_table(columns=["id", "emb"])
    vectors = np.stack(table.column("emb").to_numpy(zero_copy_only=False))
    distances = ((vectors - query) ** 2).sum(axis=1)
    ids = table.column("id").to_numpy()
    return [int(i) for i in ids[np.argsort(distances, kind="stable")[:k]]]


def copied_root(root: Root, target: Path) -> Root:
    """A copy of a local root at `target` (links kept as links), to change without touching
    the original: a module's namespace serves every case of a row-change test."""
    import shutil

    shutil.copytree(root.local_path, target, symlinks=True)
    return Root(str(target), {}, target)


def json_cli_process(root: Root, *args: str) -> subprocess.Popen:
    """`lancens --json ARGS` on `root` started as a process of its own (a racing writer, a
    process to kill), its output piped."""
    env = {**os.environ, "LANCE_LOG": "error", "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *root.args, "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def modules_loaded_by(args: list[str], watched: set[str], before: str = "") -> tuple[str, list]:
    """Run `lancens ARGS` in a fresh Python (after the code `before`) as a user does, and
    return its stdout and which of the `watched` top-level packages it imported; it must exit
    0. Startup costs are asserted with it: a command pays for what it uses."""
    probe = (
        "import json, sys\n"
        f"{before}\n"
        f"sys.argv = ['lancens', *{args!r}]\n"
        "from lancens_cli.cli.app import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "sys.stdout.flush()\n"
        "print('\\n@@' + json.dumps(sorted({m.split('.')[0] for m in sys.modules}"
        f" & set({sorted(watched)!r}))))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANCENS_")}
    env.update({"NO_COLOR": "1", "LANCE_LOG": "error"})
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    report, loaded = proc.stdout.rsplit("@@", 1)
    return report, json.loads(loaded)
