"""Configuration: root forms, precedence, profiles, and errors that name the bad key."""

from __future__ import annotations

import pytest

from lancens_cli.config import (
    NamespaceConfig,
    normalize_root,
    parse_key_values,
    redact,
    resolve_config,
)
from lancens_cli.errors import ConfigError


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("s3://bucket/prefix/", "s3://bucket/prefix"),
        ("gs://bucket/p", "gs://bucket/p"),
        ("gcs://bucket/p", "gs://bucket/p"),
        ("file:///abs/dir", "file:///abs/dir"),
        ("file:///abs/dir/../x", "file:///abs/x"),
        ("/abs/dir", "file:///abs/dir"),
        ("rel/dir", "file:///work/here/rel/dir"),
        ("./rel", "file:///work/here/rel"),
    ],
)
def test_root_forms(root, expected):
    assert normalize_root(root, cwd="/work/here") == expected


@pytest.mark.parametrize(
    ("root", "fragment"),
    [
        ("", "empty"),
        ("ftp://host/x", "unsupported scheme"),
        ("memory://", "memory://"),
        ("s3://", "names no bucket"),
        ("s3://b/../x", "'..'"),
        ("file://relative", "not an absolute"),
    ],
)
def test_bad_roots(root, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.").replace("/", "/")):
        normalize_root(root, cwd="/x")


def test_unknown_key_and_bad_boolean_are_named():
    with pytest.raises(ConfigError, match="unknown configuration key 'manifest_enable'"):
        NamespaceConfig.from_properties({"root": "/x", "manifest_enable": "true"})
    with pytest.raises(ConfigError, match="dir_listing_enabled: 'ture' is not a boolean"):
        NamespaceConfig.from_properties({"root": "/x", "dir_listing_enabled": "ture"})
    with pytest.raises(ConfigError, match="commit_retries: 'many' is not an integer"):
        NamespaceConfig.from_properties({"root": "/x", "commit_retries": "many"})
    with pytest.raises(ConfigError, match="both be false"):
        NamespaceConfig.from_properties(
            {"root": "/x", "manifest_enabled": "false", "dir_listing_enabled": "0"}
        )


def test_storage_prefix_is_stripped():
    config = NamespaceConfig.from_properties({"root": "s3://b/p", "storage.region": "eu-west-1"})
    assert config.storage_options == {"region": "eu-west-1"}


def test_precedence_flags_env_profile_defaults(tmp_path, monkeypatch):
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        '[profiles.prod]\nroot = "s3://from-profile/p"\ndir_listing_enabled = false\n'
        'commit_retries = 7\n[profiles.prod.storage]\nregion = "profile-region"\n'
        'endpoint = "http://profile"\n'
    )
    monkeypatch.setenv("LANCENS_CONFIG", str(config_file))
    environ = {
        "LANCENS_PROFILE": "prod",
        "LANCENS_ROOT": "s3://from-env/p",
        "LANCENS_STORAGE__REGION": "env-region",
    }
    config = resolve_config({}, {}, environ=environ)
    assert config.root == "s3://from-env/p"  # env beats profile
    assert config.dir_listing_enabled is False  # from the profile
    assert config.commit_retries == 7
    assert config.storage_options == {"region": "env-region", "endpoint": "http://profile"}
    config = resolve_config(
        {"root": "s3://from-flag/p", "dir_listing_enabled": True},
        {"region": "flag"},
        environ=environ,
    )
    assert config.root == "s3://from-flag/p"
    assert config.dir_listing_enabled is True
    assert config.storage_options["region"] == "flag"
    assert config.manifest_enabled is True  # default


def test_profile_errors(tmp_path, monkeypatch):
    config_file = tmp_path / "c.toml"
    config_file.write_text("[profiles.a]\nroot = '/x'\nbogus = 1\n")
    monkeypatch.setenv("LANCENS_CONFIG", str(config_file))
    with pytest.raises(ConfigError, match="unknown configuration key 'bogus'"):
        resolve_config({}, {}, profile="a", environ={})
    with pytest.raises(ConfigError, match="profile 'missing' is not defined"):
        resolve_config({}, {}, profile="missing", environ={})
    config_file.write_text("[profiles.a\nroot=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        resolve_config({}, {}, profile="a", environ={})


def test_no_root_is_an_error():
    with pytest.raises(ConfigError, match="no root given"):
        resolve_config({}, {}, environ={})


def test_key_values():
    assert parse_key_values(["a=1", "b=x=y", "c="], "opt") == {"a": "1", "b": "x=y", "c": ""}
    for bad in ("novalue", "=v"):
        with pytest.raises(ConfigError, match="key=value"):
            parse_key_values([bad], "opt")


def test_secrets_are_redacted():
    options = {
        "access_key_id": "AKIA",
        "secret_access_key": "s3cr3t",
        "session_token": "tok",
        "service_account_key": "{}",
        "region": "eu",
    }
    shown = redact(options)
    assert shown["region"] == "eu"
    assert {k for k, v in shown.items() if v == "****"} == set(options) - {"region"}
    config = NamespaceConfig.from_properties(
        {"root": "s3://b/p", **{f"storage.{k}": v for k, v in options.items()}}
    )
    assert "s3cr3t" not in str(config.to_properties())


# --- the environment and the config file, through the CLI as a user runs it ----------------


def _root_with_namespace(tmp_path):
    from helpers import invoke

    root = tmp_path / "ns"
    root.mkdir()
    assert invoke("init", "--root", str(root)).exit_code == 0
    assert invoke("create", "namespace", "a", "--root", str(root)).exit_code == 0
    return root


def test_unknown_lancens_variable_is_a_warning_not_an_error(tmp_path, monkeypatch):
    from helpers import invoke

    root = _root_with_namespace(tmp_path)
    monkeypatch.setenv("LANCENS_CONFIG", str(tmp_path / "absent.toml"))
    quiet = invoke("ls", "--root", str(root))
    assert quiet.exit_code == 0 and quiet.stderr == ""
    monkeypatch.setenv("LANCENS_MANIFEST_ENABLE", "false")  # misspelt: not read
    monkeypatch.setenv("LANCENS_STORAGE__REGION", "eu-west-1")  # a storage option: read
    warned = invoke("ls", "--root", str(root))
    assert warned.exit_code == 0
    assert warned.stdout == quiet.stdout  # the result is the same
    lines = warned.stderr.splitlines()
    assert lines == [
        "lancens: warning: ignoring unknown environment variable LANCENS_MANIFEST_ENABLE "
        "(did you mean LANCENS_MANIFEST_ENABLED?)"
    ]
    monkeypatch.setenv("LANCENS_OTHER", "1")
    both = invoke("ls", "--root", str(root), "--json")
    assert both.exit_code == 0 and both.json() == invoke("ls", "--root", str(root), "--json").json()
    (line,) = both.stderr.splitlines()
    assert "variables LANCENS_MANIFEST_ENABLE" in line and "LANCENS_OTHER" in line


def test_every_variable_lancens_reads_is_known(monkeypatch):
    from lancens_cli.config import unknown_env_vars

    read = {
        "LANCENS_ROOT": "/x",
        "LANCENS_MANIFEST_ENABLED": "true",
        "LANCENS_DIR_LISTING_ENABLED": "true",
        "LANCENS_INLINE_OPTIMIZATION_ENABLED": "false",
        "LANCENS_COMMIT_RETRIES": "3",
        "LANCENS_PROFILE": "p",
        "LANCENS_CONFIG": "/c.toml",
        "LANCENS_SPARK_MASTER": "local[2]",
        "LANCENS_PRUNE_LEASE_SECONDS": "60",
        "LANCENS_STATE_DIR": "/state",
        "LANCENS_STORAGE__ENDPOINT": "http://x",
        "PATH": "/bin",
    }
    assert unknown_env_vars(read) == []
    assert unknown_env_vars({**read, "LANCENS_STORAGE__": "1", "LANCENS_ROOTS": "/y"}) == [
        "LANCENS_ROOTS",
        "LANCENS_STORAGE__",
    ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('root = "/y"\n[profiles.a]\nroot = "/x"\n', "key 'root' outside [profiles.<name>]"),
        ("[prod]\nroot = '/x'\n", "key 'prod' outside [profiles.<name>]"),
        ("[profiles.a\nroot = '/x'\n", "is not valid TOML"),
        ("profiles = 3\n", "'profiles' must be a table"),
        ("[profiles]\na = 1\n", "profile 'a' is not a table"),
        (b"\xff\xfe[profiles.a]\n", "is not valid TOML"),
    ],
)
def test_bad_config_file_is_an_error_without_a_profile(tmp_path, monkeypatch, text, fragment):
    from helpers import invoke, tree_snapshot

    root = _root_with_namespace(tmp_path)
    config_file = tmp_path / "config.toml"
    if isinstance(text, bytes):
        config_file.write_bytes(text)
    else:
        config_file.write_text(text)
    monkeypatch.setenv("LANCENS_CONFIG", str(config_file))
    monkeypatch.delenv("LANCENS_PROFILE", raising=False)
    before = tree_snapshot(root)
    result = invoke("create", "namespace", "b", "--root", str(root))
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("lancens: error: config file ")
    assert fragment in line and "Traceback" not in result.stderr
    assert tree_snapshot(root) == before  # nothing changed


def test_good_config_file_or_none_is_fine_without_a_profile(tmp_path, monkeypatch):
    from helpers import invoke

    root = _root_with_namespace(tmp_path)
    monkeypatch.delenv("LANCENS_PROFILE", raising=False)
    monkeypatch.setenv("LANCENS_CONFIG", str(tmp_path / "absent.toml"))
    assert invoke("ls", "--root", str(root)).exit_code == 0
    config_file = tmp_path / "config.toml"
    config_file.write_text("[profiles.a]\nroot = '/x'\n[profiles.a.spark]\nmaster = 'local'\n")
    monkeypatch.setenv("LANCENS_CONFIG", str(config_file))
    result = invoke("ls", "--root", str(root))
    assert result.exit_code == 0 and result.stderr == ""
