"""Namespace configuration: the spec's properties, resolved from flags, environment and profiles.

Precedence, highest first: flags > environment > a profile in the config file > defaults.
Unknown keys and malformed booleans are errors that name the key, unlike the reference
implementation (pylance's `DirectoryNamespace`), which ignores the first and reads the second as
true.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lancens_cli.errors import ConfigError
from lancens_cli.words import noun

ENV_PREFIX = "LANCENS_"
ENV_STORAGE_PREFIX = "LANCENS_STORAGE__"
DEFAULT_COMMIT_RETRIES = 20

_BOOL_KEYS = ("manifest_enabled", "dir_listing_enabled", "inline_optimization_enabled")
_INT_KEYS = ("commit_retries",)
KNOWN_KEYS = frozenset(("root", *_BOOL_KEYS, *_INT_KEYS))
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
# Variables the test suite reads (tests/); exporting them must not make every CLI run warn.
_TEST_SUITE_ENV = frozenset(
    ENV_PREFIX + name
    for name in (
        "CRASH_KILLS",
        "CRASH_SEED",
        "CRASH_TMPDIR",
        "PRUNE_KILLS",
        "PRUNE_KILL_SEED",
        "RACE_ROUNDS",
        "SIGINT_TRIALS",
    )
)
# Every `LANCENS_*` variable read anywhere (besides `LANCENS_STORAGE__<option>`).
KNOWN_ENV = frozenset(
    {
        *(ENV_PREFIX + key.upper() for key in KNOWN_KEYS),
        "LANCENS_PROFILE",
        "LANCENS_CONFIG",
        "LANCENS_SPARK_MASTER",  # pipeline/spark_session.py
        "LANCENS_SPARK_CONNECT_TIMEOUT",  # pipeline/connect_probe.py
        "LANCENS_PRUNE_LEASE_SECONDS",  # service/prune/lease.py
        "LANCENS_STATE_DIR",  # pipeline/server_record.py
        *_TEST_SUITE_ENV,
    }
)
SUPPORTED_SCHEMES = ("file", "s3", "gs", "gcs")
SPARK_TABLE = "spark"  # [profiles.<name>.spark]: master and conf for the Spark commands
# Storage option keys whose values must never be shown.
_SECRET_KEY = re.compile(
    r"(secret|token|password|credential|session|service_account|private|key_id|access_key|sas|"
    r"account_key|api_key)",
    re.IGNORECASE,
)


def parse_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{key}: {value!r} is not a boolean (use true or false)")


def parse_int(key: str, value: object) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{key}: {value!r} is not an integer") from None
    if number < 0:
        raise ConfigError(f"{key}: {number} must not be negative")
    return number


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(key: str, value: object) -> int:
    """A size in bytes from `64MiB`, `64M` or `512KiB` (binary units), `1GB` (decimal) or a
    plain number of bytes."""
    found = _SIZE.match(str(value))
    if found is None:
        raise ConfigError(f"{key}: {value!r} is not a size (e.g. 64MiB, 1GB, 1000000)")
    number, prefix, suffix = found.groups()
    base = 1000 if suffix.lower() == "b" and prefix else 1024
    return int(float(number) * base ** _SIZE_POWER[prefix.lower()])


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact(options: Mapping[str, str]) -> dict[str, str]:
    """A copy of storage options safe to print."""
    return {k: ("****" if is_secret_key(k) else v) for k, v in options.items()}


def normalize_root(root: str, cwd: str | None = None) -> str:
    """Turn a root as users write it into a URI: `file:///abs`, `s3://b/p`, `gs://b/p`."""
    root = root.strip()
    if not root:
        raise ConfigError("root: it is empty")
    if "://" in root:
        scheme, rest = root.split("://", 1)
        scheme = scheme.lower()
        if scheme == "memory":
            raise ConfigError(
                "root: memory:// is not supported: Lance's in-memory store does not outlive one "
                "dataset handle, so a namespace kept there could not be read back"
            )
        if scheme not in SUPPORTED_SCHEMES:
            raise ConfigError(f"root: unsupported scheme {scheme!r} (use file, s3 or gs)")
        if scheme == "file":
            if not rest.startswith("/"):
                raise ConfigError(f"root: {root!r} is not an absolute file URI")
            return "file://" + _clean_local(rest)
        if scheme == "gcs":
            scheme = "gs"
        bucket_and_path = rest.strip("/")
        if not bucket_and_path or bucket_and_path.startswith("/"):
            raise ConfigError(f"root: {root!r} names no bucket")
        if any(p in ("..", ".") for p in bucket_and_path.split("/")):
            raise ConfigError(f"root: {root!r} contains '.' or '..'")
        return f"{scheme}://{bucket_and_path}"
    path = root if os.path.isabs(root) else os.path.join(cwd or os.getcwd(), root)
    return "file://" + _clean_local(path)


def _clean_local(path: str) -> str:
    cleaned = os.path.normpath(path)
    return cleaned if cleaned != "//" else "/"


@dataclass
class NamespaceConfig:
    """The directory namespace properties of spec 000 (plus the reference's extras we honour)."""

    root: str
    manifest_enabled: bool = True
    dir_listing_enabled: bool = True
    inline_optimization_enabled: bool = False
    commit_retries: int = DEFAULT_COMMIT_RETRIES
    storage_options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, properties: Mapping[str, object], cwd: str | None = None):
        """Build from spec-style properties (`root`, `manifest_enabled`, `storage.region`...)."""
        values: dict[str, object] = {}
        storage: dict[str, str] = {}
        for key, value in properties.items():
            if key.startswith("storage."):
                name = key[len("storage.") :]
                if not name:
                    raise ConfigError(f"{key}: empty storage option name")
                storage[name] = str(value)
            elif key in KNOWN_KEYS:
                values[key] = value
            else:
                raise ConfigError(f"unknown configuration key {key!r}")
        if "root" not in values or values["root"] in (None, ""):
            raise ConfigError("no root given: use --root, LANCENS_ROOT or a profile")
        if not isinstance(values["root"], str):
            raise ConfigError(
                f"root: expected a string (a path or URI), got {type(values['root']).__name__} "
                f"{values['root']!r}"
            )
        config = cls(root=normalize_root(str(values["root"]), cwd), storage_options=storage)
        for key in _BOOL_KEYS:
            if key in values:
                setattr(config, key, parse_bool(key, values[key]))
        for key in _INT_KEYS:
            if key in values:
                setattr(config, key, parse_int(key, values[key]))
        if not config.manifest_enabled and not config.dir_listing_enabled:
            raise ConfigError("manifest_enabled and dir_listing_enabled cannot both be false")
        if config.scheme == "gs":
            for name, value in storage.items():
                if name.lower() == "use_opendal" and parse_bool(f"storage.{name}", value):
                    raise ConfigError(
                        f"storage.{name}: not supported for gs:// roots: pylance's OpenDAL GCS "
                        "store writes a dataset at gs://b/p again below p (gs://b/p/p/...), where "
                        "lancens' listing cannot see it; leave it unset"
                    )
        return config

    @property
    def scheme(self) -> str:
        return self.root.split("://", 1)[0]

    @property
    def mode(self) -> str:
        if self.manifest_enabled and self.dir_listing_enabled:
            return "compatibility (V1 + V2)"
        return "V2 (manifest only)" if self.manifest_enabled else "V1 (directory listing only)"

    def to_properties(self, redacted: bool = True) -> dict[str, str]:
        """The configuration as spec properties; secrets redacted unless asked otherwise."""
        options = redact(self.storage_options) if redacted else dict(self.storage_options)
        props = {
            "root": self.root,
            "manifest_enabled": str(self.manifest_enabled).lower(),
            "dir_listing_enabled": str(self.dir_listing_enabled).lower(),
            "inline_optimization_enabled": str(self.inline_optimization_enabled).lower(),
            "commit_retries": str(self.commit_retries),
        }
        props.update({f"storage.{k}": v for k, v in sorted(options.items())})
        return props


def default_config_file() -> Path:
    explicit = os.environ.get("LANCENS_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "lancens" / "config.toml"


def read_config_file(path: Path) -> dict[str, dict[str, object]] | None:
    """The config file's `[profiles.*]` tables, or None when there is no file.

    Checked whole whenever it is there, even if no profile is selected: a typo in it (a key
    outside `[profiles.<name>]`, broken TOML) would otherwise stay silent until the day a
    profile is used.
    """
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except (FileNotFoundError, IsADirectoryError):
        return None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    outside = sorted(set(document) - {"profiles"})
    if outside:
        raise ConfigError(
            f"config file {path}: {noun(len(outside), 'key')} "
            f"{', '.join(map(repr, outside))} outside [profiles.<name>] (settings belong in a "
            "profile)"
        )
    profiles = document.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"config file {path}: 'profiles' must be a table of [profiles.<name>]")
    for name, profile in profiles.items():
        if not isinstance(profile, dict):
            raise ConfigError(f"config file {path}: profile {name!r} is not a table")
    return profiles


def _profile_table(name: str, path: Path) -> dict[str, object]:
    """The `[profiles.<name>]` table of the config file."""
    profiles = read_config_file(path)
    if profiles is None:
        raise ConfigError(f"profile {name!r}: config file {path} does not exist")
    if name not in profiles:
        raise ConfigError(f"profile {name!r} is not defined in {path}")
    return profiles[name]


def load_spark_profile(name: str | None, path: Path | None = None) -> dict[str, object]:
    """A profile's `[profiles.<name>.spark]` table: `master` or `remote` (a Spark Connect URL),
    and a `conf` table of Spark keys."""
    if not name:
        return {}
    spark = _profile_table(name, path or default_config_file()).get(SPARK_TABLE, {})
    if not isinstance(spark, dict):
        raise ConfigError(f"profile {name!r}: {SPARK_TABLE!r} must be a table")
    unknown = sorted(set(spark) - {"master", "remote", "conf"})
    if unknown:
        raise ConfigError(
            f"profile {name!r}: unknown Spark {noun(len(unknown), 'setting')} {', '.join(unknown)}"
        )
    for key in ("master", "remote"):
        if not isinstance(spark.get(key, ""), str):
            raise ConfigError(f"profile {name!r}: spark.{key} must be a string")
    if spark.get("master") and spark.get("remote"):
        raise ConfigError(f"profile {name!r}: spark.master and spark.remote: give one")
    if not isinstance(spark.get("conf", {}), dict):
        raise ConfigError(f"profile {name!r}: spark.conf must be a table of key = value")
    return spark


def load_profile(name: str, path: Path | None = None) -> dict[str, object]:
    """Read `[profiles.<name>]` from the config file as spec properties.

    A profile may hold a `storage` table (`[profiles.x.storage]`) or dotted keys
    (`"storage.region" = "..."`); both end up as `storage.<key>` properties.
    """
    profile = _profile_table(name, path or default_config_file())
    properties: dict[str, object] = {}
    for key, value in profile.items():
        if key == SPARK_TABLE:
            continue  # read by load_spark_profile, for the Spark commands only
        if key == "storage" and isinstance(value, dict):
            properties.update({f"storage.{k}": str(v) for k, v in value.items()})
        elif isinstance(value, (dict, list)):
            raise ConfigError(f"profile {name!r}: {key!r} must be a plain value")
        else:
            properties[key] = value
    return properties


def unknown_env_vars(environ: Mapping[str, str]) -> list[str]:
    """`LANCENS_*` variables lancens does not read: most likely a misspelt setting."""
    return sorted(
        key
        for key in environ
        if key.startswith(ENV_PREFIX)
        and key not in KNOWN_ENV
        and not (key.startswith(ENV_STORAGE_PREFIX) and len(key) > len(ENV_STORAGE_PREFIX))
    )


def unknown_env_warning(environ: Mapping[str, str]) -> str | None:
    """One line naming the unknown `LANCENS_*` variables (and the likely meant one), or None."""
    unknown = unknown_env_vars(environ)
    if not unknown:
        return None
    guesses = []
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(KNOWN_ENV - _TEST_SUITE_ENV), n=1)
        guesses.append(f"{key} (did you mean {close[0]}?)" if close else key)
    return (
        f"lancens: warning: ignoring unknown environment "
        f"{noun(len(unknown), 'variable')} {', '.join(guesses)}"
    )


def properties_from_env(environ: Mapping[str, str]) -> dict[str, object]:
    """`LANCENS_ROOT`, `LANCENS_MANIFEST_ENABLED`, ..., `LANCENS_STORAGE__REGION`."""
    properties: dict[str, object] = {}
    for key in KNOWN_KEYS:
        env_key = ENV_PREFIX + key.upper()
        if env_key in environ:
            properties[key] = environ[env_key]
    for env_key, value in environ.items():
        if env_key.startswith(ENV_STORAGE_PREFIX) and len(env_key) > len(ENV_STORAGE_PREFIX):
            properties["storage." + env_key[len(ENV_STORAGE_PREFIX) :].lower()] = value
    return properties


def parse_key_values(pairs: list[str] | None, what: str) -> dict[str, str]:
    """Parse repeated `key=value` options; the key must be non-empty."""
    result: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{what} {pair!r} is not of the form key=value")
        try:
            pair.encode("utf-8")
        except UnicodeEncodeError:  # bytes that were not UTF-8 on the command line
            raise ConfigError(f"{what} {key!r}: the value is not valid UTF-8") from None
        result[key] = value
    return result


def resolve_config(
    flags: Mapping[str, object],
    storage_flags: Mapping[str, str],
    profile: str | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> NamespaceConfig:
    """Merge flags > environment > profile > defaults into one validated config."""
    environ = os.environ if environ is None else environ
    profile = profile or environ.get("LANCENS_PROFILE")
    read_config_file(default_config_file())  # a broken file is an error even unused
    merged: dict[str, object] = {}
    if profile:
        merged.update(load_profile(profile))
    merged.update(properties_from_env(environ))
    merged.update({k: v for k, v in flags.items() if v is not None})
    merged.update({f"storage.{k}": v for k, v in storage_flags.items()})
    return NamespaceConfig.from_properties(merged, cwd)
