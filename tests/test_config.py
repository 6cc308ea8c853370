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
