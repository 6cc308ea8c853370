"""Lance commits of partition tables (spec 004): version 1, appends on a base, branches.

Every commit here is compare-and-swap on the version the write planned on (store/commit.py);
which version that is, and what `__manifest` publishes, is the service layer's business
(service/partitioned/write.py, service/partitioned/branch.py). `touch` is a PartitionTouch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lance

from lancens_cli.errors import InvalidTableStateError, lance_message
from lancens_cli.partition.schema import field_id_padding, renumbered_fragments
from lancens_cli.store.commit import TABLE_COMMIT_ATTEMPTS, retry_on_conflict
from lancens_cli.store.known_rows import KnownRows
from lancens_cli.store.lance_input import canonical_maps, write_fragments
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import VERSIONS_DIR


def branch_uri(storage: Storage, location: str, branch: str) -> str:
    """Where a branch keeps its own data files (`tree/<branch>/`, as Lance lays branches out)."""
    return storage.uri(f"{location}/tree/{branch}")


def open_partition_table(storage: Storage, location: str) -> Any:
    return lance.dataset(storage.uri(location), storage_options=storage.lance_options)


def head(storage: Storage, touch: Any) -> Any:
    """The latest version of the line the write commits on (created from the base if new)."""
    dataset = open_partition_table(storage, touch.location)
    if touch.branch is None:
        return dataset
    for _ in range(3):
        if touch.branch in (dataset.branches.list() or {}):
            return dataset.checkout_version((touch.branch, None))
        base = touch.base_version if touch.base_version is not None else dataset.version
        try:
            return dataset.create_branch(touch.branch, (touch.base_branch, base))
        except (OSError, RuntimeError, ValueError) as exc:
            error = exc  # a concurrent writer created it first: look again
    raise InvalidTableStateError(
        f"cannot create branch {touch.branch!r} of {touch.location!r}: {lance_message(error)}"
    )


def fragments_uri(storage: Storage, touch: Any) -> str:
    """Where the touch's data files go: the table's `data/`, or its branch's."""
    if touch.branch is None:
        return storage.uri(touch.location)
    return branch_uri(storage, touch.location, touch.branch)


def start_on_branch(storage: Storage, touch: Any) -> int:
    """A new partition table (its empty version 1 on `main` written) gets its rows on the
    write's branch; the branch version they are in."""
    dataset = open_partition_table(storage, touch.location)
    if touch.branch not in (dataset.branches.list() or {}):
        dataset.create_branch(touch.branch, (None, dataset.version))
    line = dataset.checkout_version((touch.branch, None))
    if touch.fragments is None:
        touch.fragments = write_fragments(
            touch.rows,
            fragments_uri(storage, touch),
            schema=touch.rows.schema,
            storage_options=storage.lance_options,
        )
    done = lance.LanceDataset.commit(
        line,
        lance.LanceOperation.Append(touch.fragments),
        read_version=line.version,
        max_retries=0,
        storage_options=storage.lance_options,
    )
    return int(done.version)


def empty_like(rows: Any) -> Any:
    """No rows, the same schema: `main`'s version 1 of a partition created on a branch."""
    return rows.slice(0, 0)


def commit_on_base(storage: Storage, touch: Any, confirm_base: Callable[[Any], None]) -> int:
    """Append the touch's fragments on top of its base version; returns the new version.

    With `touch.overwrite` the commit is an Overwrite instead: the partition then holds only
    the touch's rows (a dynamic partition overwrite).

    Versions after the base were never published: they are set aside with a Restore of the
    base first, but only once `confirm_base` (a fresh look at `__manifest`, raising when the
    base is no longer published) lets it. Each commit is compare-and-swap (the expected
    version, no rebase), so the version we record holds exactly the base plus our rows.
    """
    options = storage.lance_options
    base = touch.base_version

    def attempt() -> int | None:
        nonlocal base
        line = head(storage, touch)  # main, or the write's branch
        latest = line.version
        if base is None:  # a table added without one since the write pinned them
            base = latest
        if latest != base:
            confirm_base(touch)
            restored = lance.LanceDataset.commit(
                line,
                lance.LanceOperation.Restore(base),
                read_version=latest,
                max_retries=0,
                storage_options=options,
            )
            if restored.version != latest + 1:
                return None
            line, latest = restored, restored.version
        operation = _operation(storage, line, touch, base)
        if operation is None:  # a delete that matches nothing: the base (or its restore) stands
            return latest
        done = lance.LanceDataset.commit(
            line,
            operation,
            read_version=latest,
            max_retries=0,
            storage_options=options,
        )
        return done.version if done.version == latest + 1 else None

    return retry_on_conflict(
        attempt,
        failed=lambda exc: InvalidTableStateError(
            f"cannot write partition table {touch.location!r}: {_why(exc)}"
        ),
        gave_up=f"partition table {touch.location!r} kept changing; gave up after "
        f"{TABLE_COMMIT_ATTEMPTS}",
    )


def _operation(storage: Storage, line: Any, touch: Any, holds: int | None = None) -> Any:
    """What the touch commits on `line`: its rows appended, or replacing the partition's
    (`overwrite`), or its `delete_filter`'s rows deleted (None: none match), or both at once
    (an update: the rows deleted and the touch's rows added in one Lance commit). `holds`:
    the version of main whose fragments `line` holds, when known (its rows' addresses are
    then those the change read there: store/known_rows.py)."""
    known = _known_here(touch, holds)
    if touch.only_deletes:
        operation, touch.rows_deleted = deletion(line, touch.delete_filter, known)
        return operation
    if touch.fragments is None:
        touch.fragments = write_fragments(
            touch.rows,
            fragments_uri(storage, touch),
            schema=touch.rows.schema,
            storage_options=storage.lance_options,
        )
    if touch.delete_filter is not None:  # an update: its rows replace the ones deleted
        operation, touch.rows_deleted = replacement(
            line, touch.delete_filter, touch.fragments, known
        )
        return operation
    if touch.overwrite:
        return lance.LanceOperation.Overwrite(touch.schema or touch.rows.schema, touch.fragments)
    return lance.LanceOperation.Append(touch.fragments)


def _known_here(touch: Any, holds: int | None) -> KnownRows | None:
    """The touch's known row addresses, when they were read from the version of main that
    the line holds (else its filter deletes)."""
    known = touch.known_rows
    if known is None or holds is None or touch.branch is not None:
        return None
    if known.location != touch.location or known.version != holds:
        return None  # another table (a row published anew meanwhile), or another version
    return known


def deletion(line: Any, predicate: str, known: KnownRows | None = None) -> tuple[Any, int]:
    """The Delete of `predicate`'s rows from `line` as it stands (`known`: their addresses
    there), and how many rows go; (None, 0) when no row matches: nothing is to be committed."""
    updated, dropped, deleted = _deletions(line, predicate, known)
    if not deleted:
        return None, 0
    return lance.LanceOperation.Delete(updated, dropped, predicate), deleted


def replacement(
    line: Any, predicate: str, fragments: list[Any], known: KnownRows | None = None
) -> tuple[Any, int]:
    """The Update that deletes `predicate`'s rows from `line` (`known`: their addresses
    there) and adds `fragments` (written already) in one Lance commit, and how many rows it
    deletes."""
    updated, dropped, deleted = _deletions(line, predicate, known)
    operation = lance.LanceOperation.Update(
        removed_fragment_ids=dropped, updated_fragments=updated, new_fragments=fragments
    )
    return operation, deleted


def _deletions(
    line: Any, predicate: str, known: KnownRows | None = None
) -> tuple[list[Any], list[int], int]:
    """A deletion file written for each fragment of `line` that holds rows `predicate` matches
    (the fragments' new metadata), the fragments that would hold none (dropped), and the rows
    that go. With `known` (those rows' addresses in `line`), only the fragments holding them
    are touched, by offset, and the predicate is not evaluated again."""
    updated, dropped, deleted = [], [], 0
    by_fragment = known.offsets_by_fragment() if known is not None else None
    for fragment in line.get_fragments():
        before = fragment.metadata
        if by_fragment is None or not hasattr(fragment, "delete_rows"):
            after = fragment.delete(predicate)
        elif fragment.fragment_id in by_fragment:
            after = fragment.delete_rows(by_fragment[fragment.fragment_id])
        else:
            continue
        if after is None:
            dropped.append(fragment.fragment_id)
            deleted += before.physical_rows - before.num_deletions
        elif after.num_deletions != before.num_deletions:
            updated.append(after)
            deleted += after.num_deletions - before.num_deletions
    return updated, dropped, deleted


def commit_new_table(
    storage: Storage, location: str, fragments: list[Any], schema: Any, highest: int = -1
) -> Any:
    """Version 1 of a table whose data files are written already (put-if-not-exists), with
    the namespace schema's field ids: placeholders fill the gaps and are dropped at once
    (partition/schema.py `field_id_padding`)."""
    schema = canonical_maps(schema)
    padded, gaps = field_id_padding(schema, highest)
    renumbered = renumbered_fragments(fragments, schema, padded) if gaps else None
    if renumbered is None:
        padded, gaps, renumbered = schema, [], fragments
    try:
        dataset = lance.LanceDataset.commit(
            storage.uri(location),
            lance.LanceOperation.Overwrite(padded, renumbered),
            read_version=None,
            max_retries=0,
            storage_options=storage.lance_options,
            enable_v2_manifest_paths=True,
        )
        if gaps:
            dataset.drop_columns(gaps)
        return dataset
    except (ValueError, OSError, RuntimeError) as exc:
        raise InvalidTableStateError(
            f"cannot commit table at {location!r}: {lance_message(exc)}"
        ) from None


def read_back(storage: Storage, touch: Any) -> Any:
    """The rows of a touch that only has pre-written fragments, to write them elsewhere.

    Needed when our new partition table lost to one a concurrent writer published first:
    the rows then go to the winner's table (rare; the partition's rows are held meanwhile).
    """
    uri = storage.uri(touch.location)
    if not storage.exists(f"{touch.location}/{VERSIONS_DIR}"):
        first = touch.fragments if touch.branch is None else []
        commit_new_table(storage, touch.location, first, touch.schema, touch.highest_field_id)
        if touch.branch is not None:
            start_on_branch(storage, touch)
    dataset = lance.dataset(uri, storage_options=storage.lance_options)
    if touch.branch is not None:
        return dataset.checkout_version((touch.branch, None)).to_table()
    return dataset.checkout_version(1).to_table(columns=touch.schema.names)


def _why(exc: BaseException) -> str:
    """Lance's reason, with what to run when the table is of an earlier schema generation."""
    why = lance_message(exc)
    if "different schema" in why:
        why += (
            "; the table is at an earlier schema generation (an evolve-schema did not "
            "finish): run `lancens evolve-schema` with no options, then write again"
        )
    return why
