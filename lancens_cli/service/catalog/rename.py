"""`rename`: tables (also into another namespace) and namespaces.

Renaming a table tracked by a V2 location is one manifest commit. A root table in a V1
`<name>.lance` directory moves to a V2 `<hash>_<object_id>` directory (spec 000), which takes
several steps; each is journaled in the manifest so that a rerun after a crash completes it:

1. the old row records the intent `{to, location}` (the old row is created if the table was only
   known from its directory);
2. the directory is copied (hard links on local disk; manifests last, so a partial copy is not
   a table yet), and the copy's base paths that name the old directory (every version of every
   branch) are rewritten to name the new one;
3. one commit swaps the old row for the new one; the new row remembers the old directory
   (`lancens.renamed_from`) so that directory listing does not resurrect it;
4. the old directory is deleted and the reminder cleared.

At every point exactly one name resolves to the data. A move that would break another table
reading this one through a base path (a shallow clone) is refused unless `force`.

A drop (or another rename) may run at the same time. So every commit's plan re-checks that the
old name still resolves to the same directory and that the directory's `_versions/` lost
nothing since the rename began (a drop deletes `_versions/` first); a move also refuses a
version added meanwhile, which its copy would miss. The loser exits 3 or 4 and removes the
copy it made: a dropped table never comes back under the new name.
"""

from __future__ import annotations

import json
from typing import NoReturn

from lancens_cli.errors import (
    ConcurrentModificationError,
    InvalidInputError,
    TableNotFoundError,
)
from lancens_cli.models import KIND_NAMESPACE, KIND_TABLE, Change, ChangeSet, Identifier
from lancens_cli.service.catalog.dependents import attach, outside_dependents, refuse
from lancens_cli.service.catalog.manifest_rows import (
    DROPPING_KEY,
    RENAME_INTENT_KEY,
    RENAMED_FROM_KEY,
    refuse_taken,
    rename_intent,
    table_row,
)
from lancens_cli.service.namespace import Namespace, TableRef
from lancens_cli.service.partitioned.refusals import refuse_moving_spec_objects, refuse_spec_names
from lancens_cli.store.base_paths import relocate_table, spellings
from lancens_cli.store.manifest import (
    ManifestEdit,
    ManifestSnapshot,
    decode_properties,
    encode_properties,
)
from lancens_cli.store.tables import (
    VERSIONS_DIR,
    table_state,
    v1_location,
    v2_location,
    v2_location_pattern,
)


def rename(
    ns: Namespace,
    old: Identifier,
    new: Identifier,
    *,
    keep_location: bool = False,
    dry_run: bool = False,
    delimiter: str = ".",
    force: bool = False,
) -> ChangeSet:
    if old.is_root or new.is_root:
        raise InvalidInputError("the root namespace cannot be renamed")
    if old == new:
        raise InvalidInputError("the old and new names are the same")
    if old.is_ancestor_of(new):
        raise InvalidInputError("a namespace cannot be moved into itself")
    ns.require_manifest("rename")
    ns.require_root()
    snapshot = ns.snapshot()
    ns.require_writable(snapshot)
    finished = _finish_interrupted(ns, old, new, snapshot, dry_run, delimiter)
    if finished is not None:
        return finished
    refuse_moving_spec_objects(snapshot, old)
    refuse_spec_names(snapshot, new)
    if len(old.parts) > 1:
        ns.require_namespace(old.parent, snapshot)
    ns.require_namespace(new.parent, snapshot)
    row = snapshot.get(old.object_id)
    if row is not None and row["object_type"] == KIND_NAMESPACE:
        return _rename_namespace(ns, old, new, dry_run, delimiter)
    ref = ns.require_table(old, snapshot)
    intent = rename_intent(ref.row)
    if intent is None or intent.get("to") != new.object_id:
        refuse_taken(ns, new, snapshot)
    moves = len(old.parts) == 1 and ref.location == v1_location(old.name) and not keep_location
    versions = _versions(ns, ref.location)
    if not moves:
        change = Change("rename", KIND_TABLE, old.display(delimiter), ref.location, dry_run)
        change.detail = f"-> {new.display(delimiter)}"

        def swap(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
            _require_same(ns, snapshot, old, ref.location, versions, exact=False)
            _swap_rows(ns, snapshot, edit, old, new, ref.location, None)

        if not dry_run:
            ns.manifest.mutate(swap)
        return ChangeSet([change], dry_run)

    target = intent["location"] if intent and intent.get("to") == new.object_id else None
    if versions is None and (target is None or table_state(ns.storage, target) != "ok"):
        raise TableNotFoundError(
            f"the directory of table {old.display(delimiter)} ({ref.location}) is gone (dropped "
            f"meanwhile?); `lancens drop {old.display(delimiter)} --yes` removes what is left"
        )
    change = Change(
        "rename", KIND_TABLE, old.display(delimiter), target or v2_location_pattern(new.object_id)
    )
    change.detail = f"-> {new.display(delimiter)} (moves from {ref.location})"
    change.dry_run = dry_run
    result = ChangeSet([change], dry_run)
    dependents = outside_dependents(ns, snapshot, [ref.location], delimiter)
    attach(result, dependents, moved=ref.location)
    _check_movable(ns, old, ref.location, versions)
    if dry_run:
        return result
    if result.dependents and not force:
        refuse(
            f"moving the directory of {old.display(delimiter)}",
            result.dependents,
            "use --keep-location to rename it without moving its directory",
        )
    change.location = _move_table(ns, old, new, ref, target, versions)
    return result


def _check_movable(
    ns: Namespace, old: Identifier, location: str, versions: frozenset[str] | None
) -> None:
    """Every manifest of the table parsed before anything changes: one we cannot rewrite stops
    the move here. A file a drop deleted meanwhile makes the drop the winner (exit 4), not a
    storage failure."""
    if not ns.storage.exists(location):
        return
    try:
        relocate_table(ns.storage, location, spellings(ns.storage, location), "", dry_run=True)
    except OSError:
        if _versions(ns, location) == versions:
            raise  # not a drop: a storage failure, reported as such
        raise _changed_meanwhile(old) from None


def _versions(ns: Namespace, location: str) -> frozenset[str] | None:
    """The files of `<location>/_versions/`, or None when the directory itself is gone."""
    if not ns.storage.exists(location):
        return None
    return frozenset(path for path, _ in ns.storage.walk_files(f"{location}/{VERSIONS_DIR}"))


def _require_same(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    old: Identifier,
    location: str,
    versions: frozenset[str] | None,
    *,
    exact: bool,
) -> None:
    """Inside a commit's plan: `old` is still the table at `location` the rename began with.

    A drop deletes the data first (`_versions/` before anything else) and the row second, so a
    table being dropped shows here as a row whose versions went missing. `exact` (a move) also
    refuses versions added meanwhile: the copy made before would not hold them.
    """
    ref = ns.find_table(old, snapshot)
    if ref is None:
        raise TableNotFoundError(
            f"table {old.display()} no longer exists: another process dropped or renamed it "
            "meanwhile; nothing was renamed"
        )
    if ref.row is not None and DROPPING_KEY in decode_properties(ref.row.get("metadata")):
        raise ConcurrentModificationError(
            f"table {old.display()} is being dropped by another process (or a drop was "
            f"interrupted: rerun `lancens drop {old.display()} --yes`); nothing was renamed"
        )
    now = _versions(ns, location)
    if ref.location != location:
        changed = True
    elif exact:
        changed = now != versions
    else:
        changed = versions is not None and (now is None or not versions <= now)
    if changed:
        raise _changed_meanwhile(old)


def _changed_meanwhile(old: Identifier) -> ConcurrentModificationError:
    return ConcurrentModificationError(
        f"table {old.display()} was changed by another process while it was being renamed "
        "(dropped, rewritten or written to); nothing was renamed"
    )


def _without(properties: dict[str, str], *keys: str) -> dict[str, str]:
    return {k: v for k, v in properties.items() if k not in keys}


def _swap_rows(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    edit: ManifestEdit,
    old: Identifier,
    new: Identifier,
    location: str,
    renamed_from: str | None,
) -> None:
    """One commit: the old name goes, the new one points at `location`."""
    ns.require_namespace(new.parent, snapshot)
    row = snapshot.get(old.object_id)
    if row is None:
        if ns.find_table(old, snapshot) is None:
            raise TableNotFoundError(f"table {old.display()} no longer exists")
        row = table_row(old.object_id, location, None)
    if ns.kind_of(new, snapshot) is not None:
        refuse_taken(ns, new, snapshot)
    properties = _without(decode_properties(row["metadata"]), RENAME_INTENT_KEY, RENAMED_FROM_KEY)
    if renamed_from:
        properties[RENAMED_FROM_KEY] = renamed_from
    edit.remove(old.object_id)
    edit.add(
        {
            **row,
            "object_id": new.object_id,
            "location": location,
            "metadata": encode_properties(properties),
        }
    )


def _move_table(
    ns: Namespace,
    old: Identifier,
    new: Identifier,
    ref: TableRef,
    target: str | None,
    versions: frozenset[str] | None,
) -> str:
    source = ref.location
    planned = target or v2_location(new.object_id)

    def record_intent(snapshot: ManifestSnapshot, edit: ManifestEdit) -> str:
        _require_same(ns, snapshot, old, source, versions, exact=True)
        row = snapshot.get(old.object_id)
        current = rename_intent(row)
        if current and current.get("to") == new.object_id:
            return current["location"]
        if current and current.get("location") and current["location"] != source:
            ns.storage.delete_tree(current["location"])  # a partial copy of an abandoned rename
        if ns.kind_of(new, snapshot) is not None:
            refuse_taken(ns, new, snapshot)
        base = row or table_row(old.object_id, source, None)
        properties = decode_properties(base["metadata"])
        properties[RENAME_INTENT_KEY] = json.dumps(
            {"to": new.object_id, "location": planned}, separators=(",", ":")
        )
        if row is not None:
            edit.replace(old.object_id, metadata=encode_properties(properties))
        else:
            edit.add({**base, "metadata": encode_properties(properties)})
        return planned

    target = ns.manifest.mutate(record_intent)
    try:
        if versions is not None:
            ns.storage.copy_tree(source, target)
            # Branches reach the main table through its absolute location (spec 002): the
            # copy's manifests must name the new directory before any name points at it.
            relocate_table(
                ns.storage, target, spellings(ns.storage, source), ns.storage.uri(target)
            )
        elif table_state(ns.storage, target) != "ok":  # checked before the intent: gone since
            raise TableNotFoundError(f"neither {source!r} nor {target!r} holds the table")
    except (OSError, TableNotFoundError):
        if versions is not None and _versions(ns, source) == versions:
            raise  # not a drop: a storage failure, reported as such; a rerun resumes the copy
        _withdraw(ns, old, new, source, target)  # the source lost files: a drop is running
    leftover = source if versions is not None else None

    def swap(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        current = rename_intent(snapshot.get(old.object_id))
        if not current or current.get("to") != new.object_id:
            raise ConcurrentModificationError(
                f"the rename of {old.display()} was changed by another process"
            )
        _require_same(ns, snapshot, old, source, versions, exact=True)
        _swap_rows(ns, snapshot, edit, old, new, target, leftover)

    try:
        ns.manifest.mutate(swap)
    except (TableNotFoundError, ConcurrentModificationError):
        if versions is None:
            raise  # the copy may be the only one left: a rerun uses it
        _withdraw(ns, old, new, source, target)
    if leftover:
        _delete_leftover(ns, new, leftover)
    return target


def _withdraw(
    ns: Namespace, old: Identifier, new: Identifier, source: str, target: str
) -> NoReturn:
    """Undo a move that lost to a drop (or a writer): remove its copy and its journal, and fail.

    Left behind, the complete copy in `<hash>_<new id>` would be an orphan that `check --fix`
    registers under the new name. The journal was committed after checking the source, and a
    drop may have deleted the source between that check and the commit (it then found no row
    to remove): left in the row, it would list a table that is gone and advise a rename that
    cannot complete. So a journaling row whose directory is gone goes (the drop removes it
    too, or meant to), and otherwise only the journal goes. A rerun of the rename starts afresh.
    """
    ns.storage.delete_tree(target)

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        row = snapshot.get(old.object_id)
        intent = rename_intent(row)
        if row is None or not intent:
            return
        if intent.get("to") != new.object_id or intent.get("location") != target:
            return
        if not ns.storage.exists(source):
            edit.remove(old.object_id)
        else:
            properties = _without(decode_properties(row["metadata"]), RENAME_INTENT_KEY)
            edit.replace(old.object_id, metadata=encode_properties(properties))

    ns.manifest.mutate(plan)
    if not ns.storage.exists(source):
        raise TableNotFoundError(
            f"table {old.display()} no longer exists: another process dropped it while it was "
            "being renamed; nothing was renamed"
        )
    raise ConcurrentModificationError(
        f"table {old.display()} was changed by another process while it was being renamed "
        "(dropped, rewritten or written to); nothing was renamed"
    )


def _delete_leftover(ns: Namespace, new: Identifier, leftover: str) -> None:
    ns.storage.delete_tree(leftover)

    def clear(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        row = snapshot.get(new.object_id)
        if row is None:
            return
        properties = decode_properties(row["metadata"])
        if RENAMED_FROM_KEY in properties:
            cleaned = _without(properties, RENAMED_FROM_KEY)
            edit.replace(new.object_id, metadata=encode_properties(cleaned))

    ns.manifest.mutate(clear)


def _finish_interrupted(ns, old, new, snapshot, dry_run, delimiter) -> ChangeSet | None:
    """A rerun after step 3: the new row exists and still names the old directory."""
    row = snapshot.get(new.object_id)
    if row is None or snapshot.get(old.object_id) is not None or len(old.parts) != 1:
        return None
    leftover = decode_properties(row["metadata"]).get(RENAMED_FROM_KEY)
    if leftover != v1_location(old.name):
        return None
    change = Change("rename", KIND_TABLE, old.display(delimiter), row["location"], dry_run)
    change.detail = f"-> {new.display(delimiter)} (completing an interrupted rename)"
    if not dry_run:
        _delete_leftover(ns, new, leftover)
    return ChangeSet([change], dry_run)


def _rename_namespace(ns, old, new, dry_run, delimiter) -> ChangeSet:
    """Every row below the namespace gets the new prefix; no data moves."""
    change = Change("rename", KIND_NAMESPACE, old.display(delimiter), None, dry_run)
    change.detail = f"-> {new.display(delimiter)}"

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        ns.require_namespace(new.parent, snapshot)
        namespace_row = snapshot.get(old.object_id)
        if namespace_row is None:
            raise InvalidInputError(f"namespace {old.display()} no longer exists")
        refuse_taken(ns, new, snapshot)
        rows = [namespace_row, *snapshot.children(old.object_id, recursive=True)]
        for row in rows:
            suffix = row["object_id"][len(old.object_id) :]
            edit.remove(row["object_id"])
            edit.add({**row, "object_id": new.object_id + suffix})

    if not dry_run:
        ns.manifest.mutate(plan)
    return ChangeSet([change], dry_run)
