"""Storage options: the spec's `storage.*` keys as Lance and as fsspec's S3 / GCS want them.

Both sides of the store must see the same bucket with the same credentials and timeouts, so
the translation from Lance (object_store) option names lives in one place.

`s3fs` and `gcsfs` are imported where used: they cost 0.4 s and 0.6 s, and only `s3://` and `gs://`
roots need them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lancens_cli.config import parse_bool
from lancens_cli.errors import ConfigError

# Lance (object_store) option names -> what fsspec's S3 and GCS file systems call them.
_S3_KEYS = {
    "access_key_id": "key",
    "aws_access_key_id": "key",
    "secret_access_key": "secret",
    "aws_secret_access_key": "secret",
    "session_token": "token",
    "aws_session_token": "token",
    "token": "token",
}
_S3_ENDPOINT_KEYS = ("endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url")
_S3_REGION_KEYS = ("region", "aws_region")
DEFAULT_TIMEOUT_SECONDS = 30
# Lance's retries of a failed request (object_store's backoff, 503 SlowDown and 429 included):
# pylance asks for 3, too few for a bucket that throttles a busy prefix; as many as our own
# patient layer makes (store/backoff.py). A user's `storage.client_max_retries` wins.
LANCE_RETRIES = "10"


def lance_options(storage_options: dict[str, str], is_local: bool) -> dict[str, str]:
    """Storage options for Lance: the spec's `storage.*`, prefix removed, plus a timeout and
    patient retries."""
    options = dict(storage_options)
    if not is_local:
        options.setdefault("timeout", f"{DEFAULT_TIMEOUT_SECONDS}s")
        options.setdefault("client_max_retries", LANCE_RETRIES)
    for key in TIMEOUT_KEYS:  # validated, and in a spelling Lance's parser accepts
        if key in options:
            options[key] = f"{round(timeout_seconds(options, key) * 1000)}ms"
    return options


def make_fs(scheme: str, options: dict[str, str]) -> Any:
    """The fsspec file system of an object-store root, configured from the options."""
    if scheme == "s3":
        import s3fs

        kwargs: dict[str, Any] = {}
        client: dict[str, Any] = {}
        for key, value in options.items():
            lowered = key.lower()
            if lowered in _S3_KEYS:
                kwargs[_S3_KEYS[lowered]] = value
            elif lowered in _S3_ENDPOINT_KEYS:
                client["endpoint_url"] = value
            elif lowered in _S3_REGION_KEYS:
                client["region_name"] = value
            elif lowered in ("skip_signature", "anonymous", "aws_skip_signature"):
                kwargs["anon"] = parse_bool(key, value)
        timeout = timeout_seconds(options)
        fs = s3fs.S3FileSystem(
            client_kwargs=client,
            config_kwargs={
                "connect_timeout": timeout_seconds(options, "connect_timeout", timeout),
                "read_timeout": timeout,
                "retries": {"max_attempts": 2, "mode": "standard"},
            },
            skip_instance_cache=True,
            **kwargs,
        )
        fs.retries = 1  # s3fs's own retry loop on top of botocore's: one is enough
        return fs
    if scheme == "gs":
        return _make_gcsfs(options)
    raise ConfigError(f"unsupported scheme {scheme!r}")


_GCS_TOKEN_PATH_KEYS = (
    "service_account",
    "google_service_account",
    "service_account_path",
    "google_service_account_path",
    "application_credentials",
    "google_application_credentials",
)
_GCS_ANONYMOUS_KEYS = ("skip_signature", "google_skip_signature", "anonymous", "allow_anonymous")
# A static OAuth access token (Lance sends it as `Authorization: Bearer ...`) and the base URL
# of the JSON/XML APIs, in the spellings Lance accepts.
_GCS_BEARER_KEYS = ("google_bearer_token", "bearer_token", "google_storage_token")
_GCS_BASE_URL_KEYS = ("google_base_url", "base_url")


def _make_gcsfs(options: dict[str, str]) -> Any:
    """gcsfs for the options Lance reads (object_store's Google keys), independent of order.

    A service-account key with object_store's emulator extension (`gcs_base_url`,
    `disable_oauth`) sets the endpoint and anonymous access, as it does for Lance; so does
    Lance's own `google_base_url` (which wins over the key's), and a `google_bearer_token` is
    sent by both clients; a bearer token beside a service account is refused. With any
    custom endpoint the plain JSON-API client is used: gcsfs' default "extended" client asks a
    gRPC storage-layout API at the same host for every bucket and waits 60 s when that fails.
    """

    import gcsfs
    from gcsfs.core import GCSFileSystem as PlainGCSFileSystem

    kwargs: dict[str, Any] = {}
    endpoint = base_url = key_endpoint = bearer = None
    anonymous = False
    for key, value in options.items():
        lowered = key.lower()
        if lowered in _GCS_TOKEN_PATH_KEYS:
            kwargs["token"] = value
        elif lowered in ("service_account_key", "google_service_account_key"):
            try:
                info = json.loads(value)
            except ValueError:
                raise ConfigError(f"storage.{key}: not valid JSON") from None
            if not isinstance(info, dict):
                raise ConfigError(f"storage.{key}: not a JSON object")
            key_endpoint = info.get("gcs_base_url") or key_endpoint
            if parse_bool(f"storage.{key}.disable_oauth", info.get("disable_oauth", False)):
                anonymous = True
            else:
                kwargs["token"] = info
        elif lowered in _GCS_BEARER_KEYS:
            bearer = value
        elif lowered in _GCS_BASE_URL_KEYS:
            base_url = value
        elif lowered in ("endpoint", "google_endpoint", "endpoint_url"):
            endpoint = value
        elif lowered in ("project", "project_id"):
            kwargs["project"] = value
        elif lowered in _GCS_ANONYMOUS_KEYS:
            anonymous = anonymous or parse_bool(key, value)
    if bearer is not None and "token" in kwargs:
        raise ConfigError(
            "storage: give either a bearer token or a service account for gs://, not both "
            "(which one a client uses would depend on the client)"
        )
    if anonymous:
        kwargs["token"] = "anon"
    elif bearer is not None:
        kwargs["token"] = _bearer_credentials(bearer)
    endpoint = endpoint or base_url or key_endpoint
    if endpoint:
        return PlainGCSFileSystem(endpoint_url=endpoint, skip_instance_cache=True, **kwargs)
    return gcsfs.GCSFileSystem(skip_instance_cache=True, **kwargs)


def _bearer_credentials(token: str) -> Any:
    """gcsfs credentials that send a static access token (it takes no raw token string).

    google-auth comes with gcsfs; imported here, where a gs:// root with a token needs it."""
    from google.oauth2.credentials import Credentials

    return Credentials(token=token)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
TIMEOUT_KEYS = ("timeout", "connect_timeout")


def timeout_seconds(
    options: dict[str, str], key: str = "timeout", default: float = DEFAULT_TIMEOUT_SECONDS
) -> float:
    """A duration option (`30`, `30s`, `500ms`, `2m`) in seconds; it must be above zero."""
    if key not in options:
        return default
    match = _DURATION.match(options[key])
    seconds = float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "s").lower()] if match else 0
    if not seconds > 0:
        raise ConfigError(
            f"storage.{key}: {options[key]!r} is not a duration above zero (e.g. 30s, 500ms, 2m)"
        )
    return seconds
