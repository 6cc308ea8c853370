"""Which versions of which table must stay, and why.

A version stays when a reader can be sent to it or when it is too young to judge:

- `published`: a `read_version` (or the version of a `read_tag`) that the current `__manifest`
  or any kept `__manifest` version publishes (spec 004: readers of a partitioned namespace go
  to `read_version`, which is often not the latest);
- `tag <name>`: every tagged version, however old (reported when older than the window);
- `branch <name>`: the version a branch starts from (its manifest reads the parent's files);
- `clone <location>`: a version whose files a shallow clone of the namespace reads through its
  base path (spec 002);
- `latest`, `retain`: the newest version and the newest `--retain` versions;
- `younger than <window>`.

Everything else older than the window is a candidate. Only candidates are ever handed to Lance,
so no protected version's files can go.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import lance

from lancens_cli.service.prune.branches import (
    BranchPlan,
    BranchState,
    plan_branches,
    read_branch_states,
)
from lancens_cli.service.prune.policy import PrunePolicy, show_duration
from lancens_cli.service.prune.record import Seen, digest_of
from lancens_cli.store.base_paths import base_path_strings, own_data_files, split_manifest_file
from lancens_cli.store.catalog_rows import PublishedRef, branch_name
from lancens_cli.store.lance_session import (
    HeldDatasets,
    HeldManifest,
    dataset_cost,
    manifest_cost,
    open_latest,
    serialized_manifest,
)
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import VERSIONS_DIR
from lancens_cli.store.version_files import (
    TableListing,
    VersionInfo,
    list_for_plan,
    list_table,
    version_times,
)


@dataclass
class Pins:
    """What the kept `__manifest` versions publish, by table location."""

    versions: dict[str, dict[int, set[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )  # location -> version -> manifest versions publishing it
    tags: dict[str, dict[str, set[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )
    branches: dict[str, dict[str, set[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )
    # location -> branch -> version of that branch (a `read_version` beside a `read_branch`)
    branch_versions: dict[str, dict[str, set[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )
    current: dict[str, int] = field(default_factory=dict)  # location -> current main read_version
    off_main: set[str] = field(default_factory=set)  # current row reads a tag or a branch

    def add_rows(self, manifest_version: int, rows: list[dict[str, Any]], current: bool) -> None:
        for row in rows:
            location = row.get("location")
            if not location:
                continue
            ref = PublishedRef.of(row)
            if ref.version is not None and ref.branch:
                # spec 004: with `read_branch`, `read_version` is a version of that branch
                self.branch_versions[location][ref.branch].add(ref.version)
            elif ref.version is not None and not ref.tag:  # a tag says which version
                self.versions[location][ref.version].add(manifest_version)
                if current:
                    self.current[location] = ref.version
            if current and (ref.tag or ref.branch):
                self.off_main.add(location)
            if ref.tag:
                self.tags[location][ref.tag].add(manifest_version)
            if ref.branch:
                self.branches[location][ref.branch].add(manifest_version)


def pins_digest(pins: Pins, location: str) -> str:
    """What the kept `__manifest` versions publish of one table (which versions, tags and
    branches; not which `__manifest` versions publish them, which grow with every commit).
    Interned: most tables share one value (nothing published), held once per run."""
    return _shared_digest(
        {
            "versions": sorted(pins.versions.get(location, {})),
            "tags": sorted(pins.tags.get(location, {})),
            "branches": sorted(pins.branches.get(location, {})),
            "branch_versions": {
                b: sorted(v) for b, v in pins.branch_versions.get(location, {}).items()
            },
            "current": pins.current.get(location),
            "off_main": location in pins.off_main,
        }
    )


def dependents_digest(clones: list[str], states: Mapping[str, TableState]) -> str:
    """The shallow clones reading a table (their locations), each as its listing showed it."""
    seen = {c: states[c].seen if c in states else None for c in clones}
    # (a clone listed only to plan has no digest: it never matches a recorded one)
    shown = sorted((c, s.digest if s and s.digest else "unlisted") for c, s in seen.items())
    return _shared_digest(shown)


def _shared_digest(value: Any) -> str:
    return sys.intern(digest_of(value))


def _span(manifest_versions: set[int]) -> str:
    low, high = min(manifest_versions), max(manifest_versions)
    return f"__manifest v{low}" if low == high else f"__manifest v{low}..v{high}"


NO_REFS: Any = MappingProxyType({})  # the tags or branches of a table that has none (shared)


@dataclass(slots=True)
class TableState:
    """One table as read at the start of its prune."""

    location: str
    object_id: str | None
    versions: Sequence[VersionInfo]  # empty once planned (`planned`)
    tags: dict[str, int]
    branches: dict[str, int]  # branch -> the main-lineage version it starts from
    bases: Sequence[str]  # locations inside the root this table reads through base paths
    branch_states: Sequence[BranchState] = ()  # every branch's versions
    data_files: int | None = None  # files in `data/` when listed (None: not known)
    seen: Seen | None = None  # what the record needs of the listing this state was read from
    recorded: Any = None  # the last run's record entry when the listing is unchanged
    partial: bool = False  # known from the record alone (no listing): only enough to skip it
    latest_own_files: int | None = None  # data files of the latest manifest in `data/`
    handle: Any = None  # its dataset or latest manifest, held for its cleanup (HeldDatasets)

    def __post_init__(self) -> None:
        # most tables have no tags, branches or base paths: one shared empty each, not three
        # containers per table (a run holds every table's state until it ends)
        self.tags = self.tags or NO_REFS
        self.branches = self.branches or NO_REFS
        self.bases = tuple(self.bases)
        self.branch_states = self.branch_states or ()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (service/prune/state_spill.py) without the shared empty tags and branches,
        which a read-only mapping cannot be; shared again once read back."""
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        state["tags"], state["branches"] = dict(self.tags), dict(self.branches)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self.__post_init__()

    @property
    def latest(self) -> int:
        return max(v.version for v in self.versions)

    def planned(self) -> TableState:
        """The state once its table is planned: what the record, the clone digests and
        `lancens versions` still read, without the versions (a run over 100,000 tables holds
        every table's state until the end)."""
        return dataclasses.replace(self, versions=(), branch_states=(), handle=None)


def read_table_state(
    storage: Storage,
    location: str,
    object_id: str | None,
    listing: TableListing | None = None,
    unchanged: Callable[[TableListing], Any] | None = None,
    policy: PrunePolicy | None = None,
    since: datetime | None = None,
    held: HeldDatasets | None = None,
    quick: bool = False,
) -> TableState | None:
    """Versions, tags, branches and base paths of one table; None when the directory holds no
    version (declared, empty, gone: nothing to prune).

    One listing (`list_table`) and one file read: the base paths come from the latest
    manifest's protobuf (store/base_paths.py), so the table is opened with Lance only when it
    has tags or branches (`_refs/`) or a manifest we do not parse. The per-table work opens it
    once, to expire. When `unchanged(listing)` gives the last run's record entry (nothing of the
    table changed since), the listing is all that is read: the base paths come from the entry.
    With `policy`, the state keeps what the next record entry needs of the listing (`seen`;
    `since`: the moment the run judges ages by, see `record.Seen.of`). With `held`, a table
    whose listing shows a version to expire keeps the protobuf of the latest manifest read,
    from which its cleanup opens it without Lance reading that manifest again; a table opened
    with Lance anyway (it has `_refs/`, or a manifest we do not parse) keeps its dataset, for
    its branches' expiry and its sweep (store/lance_session.py). With `quick` (a local table
    of the run's scope the record has no entry for), a table with a version to expire is
    listed only as far as planning needs (`_listed_to_plan`); its record entry then waits for
    its listing after its work (service/prune/record_entries.py).
    """
    listed_at = datetime.now(UTC)
    if listing is None and quick and policy is not None and storage.is_local:
        listing = _listed_to_plan(storage, location, policy, since or listed_at)
    listing = listing or list_table(storage, location)
    files = listing.versions
    if not files:
        return None
    versions = _version_infos(files)
    seen = Seen.of(listing, policy, listed_at, since) if policy is not None else None
    entry = unchanged(listing) if unchanged is not None and listing.digest else None
    if entry is not None:
        return TableState(
            location, object_id, versions, {}, {}, entry.bases, (), listing.data_files,
            seen, entry,
        )  # fmt: skip
    tags: dict[str, int] = {}
    branches: dict[str, int] = {}
    has_refs = listing.has_refs
    # the latest manifest's base paths, own data files and message (with refs, Lance reads it)
    newest = f"{location}/{VERSIONS_DIR}/{files[versions[-1].version][0]}"
    latest = None if has_refs else _latest(storage, location, newest)
    bases, own_files, message = latest if latest is not None else (None, None, None)
    branch_states: list[BranchState] = []
    ds = None
    if bases is None:
        ds = open_latest(storage, location)
        bases = _bases_inside(storage, location, ds)
        if ds.version not in files:
            versions.append(VersionInfo(ds.version, datetime.now(UTC)))
            versions.sort(key=lambda v: v.version)
        if has_refs:
            tags, branches = _refs(ds)
            branch_states = read_branch_states(storage, location, ds)
    handle = None
    if held is not None and policy is not None and held.wants(location):
        handle = _to_hold(storage, location, ds, message, versions, policy, since or listed_at)
        handle = handle if handle is not None and held.keep(_cost(handle)) else None
    return TableState(
        location, object_id, versions, tags, branches, bases, branch_states, listing.data_files,
        seen, latest_own_files=own_files, handle=handle,
    )  # fmt: skip


def _listed_to_plan(
    storage: Storage, location: str, policy: PrunePolicy, now: datetime
) -> TableListing | None:
    """The table's listing to plan with (`list_for_plan`) when its listing shows a version to
    expire and no `_refs/`: its record entry then comes from its listing after its work.
    Else None: the whole listing is taken, from which its entry comes."""

    def expires(files: dict[int, tuple[str, datetime]]) -> bool:
        return _expires_some(_version_infos(files), policy, now)

    return list_for_plan(storage.uri(location), expires)


def _version_infos(files: dict[int, tuple[str, datetime]]) -> list[VersionInfo]:
    return [VersionInfo(v, when) for v, (_name, when) in sorted(files.items())]


def _to_hold(
    storage: Storage,
    location: str,
    ds: Any,
    message: bytes | None,
    versions: list[VersionInfo],
    policy: PrunePolicy,
    now: datetime,
) -> Any:
    """What of the reading to hold for the table's cleanup: the dataset when the table was
    opened to be read; else its latest manifest when the listing shows a version to expire
    (else the cleanup may never open it)."""
    if ds is not None:
        return ds
    if message is None or not _expires_some(versions, policy, now):
        return None
    return HeldManifest(storage.uri(location), storage.lance_options, message)


def _cost(handle: Any) -> int:
    """What holding `handle` costs the run's budget."""
    if isinstance(handle, HeldManifest):
        return manifest_cost(handle.message)
    return dataset_cost(len(serialized_manifest(handle)))


def _expires_some(versions: list[VersionInfo], policy: PrunePolicy, now: datetime) -> bool:
    """Whether the listing shows a version `plan_table` may let go: beyond the newest
    `--retain` and older than the window (what keeps it otherwise is known only later)."""
    cutoff = now - policy.older_than
    return any(v.timestamp < cutoff for v in versions[: -policy.retain])


def untouched_state(location: str, object_id: str | None, entry: Any) -> TableState:
    """A table the record shows untouched, known without listing it: its base paths (for the
    clone map) and its listing's digest (for its sources' clone digests). Enough to skip it;
    a table that must be planned after all is read in full first."""
    seen = Seen(entry.digest, None, None, None)
    return TableState(location, object_id, (), {}, {}, entry.bases, (), None, seen, entry, True)


def _refs(ds: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Tags of the main lineage, and the main-lineage version each branch starts from."""
    tags: dict[str, int] = {}
    branches: dict[str, int] = {}
    for name, tag in ds.tags.list().items():
        if branch_name(tag.get("branch")) is None and tag.get("version") is not None:
            tags[name] = int(tag["version"])
    for name, branch in ds.branches.list().items():
        if branch_name(branch.get("parent_branch")) is None and branch.get("parent_version"):
            branches[name] = int(branch["parent_version"])
    return tags, branches


def _latest(storage: Storage, location: str, newest: str) -> tuple[list[str], int, bytes] | None:
    """The base paths into the root that the latest manifest names, how many of its data
    files lie in the table's own `data/`, and its protobuf message they were read from; None
    when the file does not parse (the caller then asks Lance)."""
    try:
        data = storage.read_bytes(newest)
        message = split_manifest_file(data)[1]
        paths, own = base_path_strings(message), own_data_files(message)
    except (OSError, ValueError):
        return None
    return _inside(storage, location, paths), own, message


def fallback_bases(storage: Storage, location: str) -> list[str] | None:
    """Base paths of a table whose latest version does not load, from an older version.

    A shallow clone's base path does not change between its versions, so an older readable
    version tells whether the table reads another one. None when no version loads: then the
    table may be a clone of anything, and the caller must not remove what it might read.
    """
    for version in sorted(version_times(storage, location), reverse=True)[:5]:
        try:
            ds = lance.dataset(
                storage.uri(location), version=version, storage_options=storage.lance_options
            )
            return _bases_inside(storage, location, ds)
        except Exception:  # noqa: BLE001 - any failure: try the next older version
            continue
    return None


def _bases_inside(storage: Storage, location: str, ds: Any) -> list[str]:
    return _inside(storage, location, [str(base.path) for base in ds.base_paths().values()])


# A base path that cannot be placed (relative to whatever directory the reader runs in): the
# table may read any table of the root, so a run that meets one removes no version (decision 17).
UNPLACEABLE_BASE = "<a base path that cannot be placed>"


def _inside(storage: Storage, location: str, paths: list[str]) -> list[str]:
    """The base paths that point into another location of the root, relative to the root;
    `UNPLACEABLE_BASE` for one whose place cannot be told."""
    bases = []
    for path in paths:
        path = path.rstrip("/")
        rel = storage.relative(path)
        if rel is None and storage.canonical(path) is None:
            bases.append(UNPLACEABLE_BASE)
        elif rel is not None and rel.split("/", 1)[0] != location.split("/", 1)[0]:
            bases.append(rel)
    return bases


@dataclass(slots=True)
class TablePlan:
    """What stays of one table and why, and what goes."""

    location: str
    object_id: str | None
    latest: int
    protected: dict[int, list[str]]
    expire: list[int]
    unpublished: list[int]  # a dead write's versions after the published one, newest first
    notes: list[str] = field(default_factory=list)
    branches: list[BranchPlan] = field(default_factory=list)  # each branch's own old versions
    data_files: int | None = None  # files `data/` held when the table was listed
    latest_own_files: int | None = None  # of them, the latest version's (read as listed)
    judged_at: float | None = None  # the moment ages were judged by (epoch s): Lance's too


def plan_table(
    state: TableState,
    pins: Pins,
    policy: PrunePolicy,
    clone_versions: dict[int, str],
    now: datetime,
    has_clones: bool = False,
) -> TablePlan:
    by_version = {v.version: v for v in state.versions}
    protected: dict[int, list[str]] = defaultdict(list)
    notes: list[str] = []
    window = show_duration(policy.older_than)
    # one string per run for the reasons every table repeats (100,000 tables hold them all)
    newest, younger = sys.intern(f"newest {policy.retain}"), sys.intern(f"younger than {window}")
    cutoff = now - policy.older_than
    for version, publishers in pins.versions.get(state.location, {}).items():
        protected[version].append(f"published read_version ({_span(publishers)})")
        if version not in by_version:
            notes.append(f"published version {version} no longer exists")
    for name, publishers in pins.tags.get(state.location, {}).items():
        if name in state.tags:
            protected[state.tags[name]].append(f"published read_tag {name} ({_span(publishers)})")
    for name, version in state.tags.items():
        protected[version].append(f"tag {name}")
        info = by_version.get(version)
        if info is not None and info.timestamp < cutoff:
            notes.append(f"tag {name} keeps version {version}, older than {window}")
    for name, version in state.branches.items():
        protected[version].append(f"branch {name} starts here")
    for name, publishers in pins.branches.get(state.location, {}).items():
        if name in state.branches:
            protected[state.branches[name]].append(
                f"published read_branch {name} ({_span(publishers)})"
            )
    for version, clone in clone_versions.items():
        protected[version].append(f"shallow clone {clone} reads its files")
    unpublished = _dead_tail(state, pins, policy, protected, now)
    remaining = [v for v in sorted(by_version) if v not in unpublished]
    if remaining:
        protected[remaining[-1]].append("latest")
        for version in remaining[-policy.retain :]:
            protected[version].append(newest)
    for version in remaining:
        if by_version[version].timestamp >= cutoff:
            protected[version].append(younger)
    expire = [v for v in remaining if v not in protected]  # why, in words: expiry_reasons
    kept = {v: reasons for v, reasons in sorted(protected.items()) if v in by_version}
    branches, branch_notes = plan_branches(
        state.branch_states,
        pins.branch_versions.get(state.location, {}),
        policy,
        now,
        has_clones,
    )
    return TablePlan(
        state.location,
        state.object_id,
        state.latest,
        kept,
        expire,
        unpublished,
        notes + branch_notes,
        branches,
        state.data_files,
        state.latest_own_files,
        now.timestamp(),
    )


def expiry_reasons(policy: PrunePolicy) -> list[str]:
    """Why `plan_table` lets a version of the main lineage go, in its own rules' words: older
    than the window, not among the newest `--retain` (said only when that keeps more than the
    latest), and no keep reason applies."""
    reasons = [f"older than {show_duration(policy.older_than)}"]
    if policy.retain > 1:
        reasons.append(f"not among the newest {policy.retain}")
    reasons.append("no tag, branch, publication or clone keeps it")
    return reasons


def _dead_tail(
    state: TableState,
    pins: Pins,
    policy: PrunePolicy,
    protected: dict[int, list[str]],
    now: datetime,
) -> list[int]:
    """Versions after a partition table's published `read_version` that no write can publish.

    A partitioned write commits the table first and publishes it in `__manifest` after; a
    version after the published one is either a write on its way (young) or a dead one. Only
    when every such version is older than the grace and none is tagged, branched or cloned is
    the tail removed, newest first, so the table's latest version falls back to the published
    one (what the next write would restore anyway).
    """
    published = pins.current.get(state.location)
    if published is None:
        return []
    tail = sorted((v for v in state.versions if v.version > published), key=lambda v: -v.version)
    if not tail or any(now - v.timestamp < policy.grace for v in tail):
        return []
    if any(v.version in protected for v in tail):
        return []
    if published not in {v.version for v in state.versions}:
        return []
    return [v.version for v in tail]


def manifest_file(storage: Storage, location: str, version: int) -> str | None:
    """The `_versions/` file of one version (V2 naming inverts the number, V1 does not)."""
    names = {e.name.rsplit("/", 1)[-1] for e in storage.list_dir(f"{location}/{VERSIONS_DIR}")}
    for name in (f"{(1 << 64) - 1 - version:020d}.manifest", f"{version}.manifest"):
        if name in names:
            return f"{location}/{VERSIONS_DIR}/{name}"
    return None
