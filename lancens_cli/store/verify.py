"""Verifying one Lance table on storage: does its latest version load, and do the files it
references exist (base paths resolved as spec 002 says), do its branches (`tree/<branch>/`)
resolve the same way, and is its `_versions/` consistent (spec 003: the V1 and V2 manifest
naming schemes must not be mixed)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lancens_cli.errors import LancensError, lance_message
from lancens_cli.models import VERSIONS_DIR
from lancens_cli.store.inspect import manifest_scheme
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import open_table


@dataclass
class Problem:
    code: str
    message: str


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def resolve(base_paths: dict[int, Any], base_id: int | None, subdir: str, path: str) -> str | None:
    """Spec 002: where a file with `base_id` lives; None means relative to the dataset root."""
    if base_id is None:
        return None
    base = base_paths.get(base_id)
    if base is None:
        raise KeyError(base_id)
    if getattr(base, "is_dataset_root", True):
        return _join(base.path, subdir, path)
    return _join(base.path, path)


VERSIONS_PREFIX = f"{VERSIONS_DIR}/"


def table_files(storage: Storage, location: str) -> set[str]:
    """Every file below a table, relative to it: one listing on an object store."""
    return set(storage.file_names(location))


def committed_manifests(present: set[str]) -> list[str]:
    """The `_versions/*.manifest` names among a table's files (`table_files`)."""
    return [
        name[len(VERSIONS_PREFIX) :]
        for name in present
        if name.startswith(VERSIONS_PREFIX)
        and name.endswith(".manifest")
        and "/" not in name[len(VERSIONS_PREFIX) :]
    ]


def verify_table(storage: Storage, location: str, present: set[str] | None = None) -> list[Problem]:
    """Problems of the table at `location` (empty when healthy). `present`: its files
    (`table_files`) when the caller listed them, holding its committed versions: then
    nothing is listed again."""
    return verify_opening(storage, location, present)[0]


def verify_opening(
    storage: Storage, location: str, present: set[str] | None = None
) -> tuple[list[Problem], Any]:
    """`verify_table`, and the latest version it opened (None: it did not open), for a
    caller that asks more of the table without opening it again."""
    problems: list[Problem] = []
    if present is None:
        version_files = [e.name for e in storage.list_dir(f"{location}/{VERSIONS_DIR}")]
        present = table_files(storage, location)
    else:
        version_files = committed_manifests(present)
    if manifest_scheme(version_files) == "mixed":
        problems.append(
            Problem(
                "mixed_manifest_naming",
                "_versions/ mixes the V1 and V2 manifest naming schemes (spec 003 forbids it)",
            )
        )
    try:
        ds = open_table(storage, location)
    except LancensError as exc:
        problems.append(Problem("table_unloadable", exc.message))
        return problems, None
    problems += _file_problems(storage, ds, present, "")
    problems += _branch_problems(storage, ds, present)
    return problems, ds


def version_problems(storage: Storage, location: str, ds: Any, prefix: str) -> list[Problem]:
    """Missing files of one opened version of the table at `location` (`prefix`: its
    directory below the table, `tree/<branch>/` for a branch version)."""
    return _file_problems(storage, ds, table_files(storage, location), prefix)


def _branch_problems(storage: Storage, ds: Any, present: set[str]) -> list[Problem]:
    """Every branch's latest version must load and resolve its files (spec 002 base paths):
    a branch reaches the main table through an absolute base path, which a move can break."""
    problems = []
    if not any(name.startswith(BRANCHES_PREFIX) for name in present):
        return []  # no branch: Lance keeps each as `_refs/branches/<name>.json`
    try:
        branches = sorted(ds.branches.list())
    except (OSError, RuntimeError, ValueError) as exc:
        message = f"the branches cannot be listed: {lance_message(exc)}"
        return [Problem("branch_unresolved", message)]
    for branch in branches:
        try:
            head = ds.checkout_version((branch, None))
        except (OSError, RuntimeError, ValueError) as exc:
            problems.append(
                Problem(
                    "branch_unresolved",
                    f"branch {branch}: its latest version does not load: {lance_message(exc)}",
                )
            )
            continue
        for problem in _file_problems(storage, head, present, f"tree/{branch}/"):
            problems.append(Problem("branch_unresolved", f"branch {branch}: {problem.message}"))
    return problems


BRANCHES_PREFIX = "_refs/branches/"  # where Lance keeps a table's branches


def _file_problems(storage: Storage, ds: Any, present: set[str], prefix: str) -> list[Problem]:
    """Missing data and deletion files of one version; `prefix` is the version's directory
    below the table (`tree/<branch>/` for a branch)."""
    problems = []
    base_paths = dict(ds.base_paths())
    for fragment in ds.get_fragments():
        meta = fragment.metadata
        wanted: list[tuple[str, str, str | None]] = []
        for data_file in meta.files:
            wanted.append(("data file", data_file.path, _external(base_paths, data_file, "data")))
        deletion = meta.deletion_file
        if deletion is not None:
            relative = deletion.path(meta.id)
            name = relative.split("/", 1)[1] if "/" in relative else relative
            external = _external_deletion(base_paths, deletion, name)
            wanted.append(("deletion file", relative, external))
        for kind, path, external in wanted:
            if external is None:
                relative = prefix + (path if kind == "deletion file" else f"data/{path}")
                if relative not in present:
                    problems.append(
                        Problem(
                            f"missing_{kind.replace(' ', '_')}",
                            f"fragment {meta.id}: {kind} {relative} is missing",
                        )
                    )
            elif external.startswith("<"):
                problems.append(Problem("unknown_base_path", f"fragment {meta.id}: {external}"))
            elif not _exists_anywhere(storage, external):
                problems.append(
                    Problem(
                        f"missing_{kind.replace(' ', '_')}",
                        f"fragment {meta.id}: {kind} {external} (base path) is missing",
                    )
                )
    return problems


def _external(base_paths: dict[int, Any], data_file: Any, subdir: str) -> str | None:
    try:
        return resolve(base_paths, data_file.base_id, subdir, data_file.path)
    except KeyError:
        return f"<base path {data_file.base_id} is not declared in the manifest>"


def _external_deletion(base_paths: dict[int, Any], deletion: Any, name: str) -> str | None:
    try:
        return resolve(base_paths, getattr(deletion, "base_id", None), "_deletions", name)
    except KeyError:
        return f"<base path {deletion.base_id} is not declared in the manifest>"


def _exists_anywhere(storage: Storage, uri: str) -> bool:
    """Existence of a file given by an absolute path or URI (base paths may point anywhere)."""
    if "://" not in uri or uri.startswith("file://"):
        return os.path.exists(uri[len("file://") :] if uri.startswith("file://") else uri)
    relative = storage.relative(uri)
    if relative is not None:
        return storage.exists(relative)
    scheme = uri.split("://", 1)[0]
    if scheme in ("s3", "gs") and scheme == storage.scheme:
        return bool(storage.fs.exists(uri.split("://", 1)[1]))
    return True  # another store we hold no credentials for: not ours to judge
