"""Whether a Spark Connect server answers, found in bounded time before a command waits on it.

PySpark's Connect client retries a server it cannot reach for at least ten minutes (its
`DefaultPolicy`) and gives each call to a server that accepts and never answers a ten-minute
deadline (`RpcDeadlines`): from cron, a mistyped `--remote` or a server that died is a hang,
not an error. So before the session's first call, one TCP connect and one gRPC handshake
(HTTP/2, and TLS when the URL asks for it) must succeed within `LANCENS_SPARK_CONNECT_TIMEOUT`
seconds (default 20). Once the server has answered, PySpark's own retries stay as they are:
they are what carries a long job over a brief network fault. grpc and PySpark's channel
builder are imported inside `await_server`: they come with `pyspark[connect]`, which a command
without `--remote` never loads.
"""

from __future__ import annotations

import math
import os
import socket
import time
import urllib.parse
from collections.abc import Mapping

from lancens_cli.errors import InvalidInputError, LancensError

TIMEOUT_ENV = "LANCENS_SPARK_CONNECT_TIMEOUT"
DEFAULT_TIMEOUT = 20.0
_LONGEST = 86400.0  # a day: the socket's own limit is far beyond any wait worth having
_DEFAULT_PORT = 15002  # Spark Connect's, as PySpark's channel builder has it


def connect_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a server has to answer: the environment's, else 20. A bad value is exit 2."""
    environ = os.environ if environ is None else environ
    given = environ.get(TIMEOUT_ENV, "").strip()
    if not given:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= _LONGEST):
        raise InvalidInputError(
            f"{TIMEOUT_ENV}={given!r}: give a number of seconds above 0, at most {_LONGEST:g}"
        )
    return seconds


def endpoint(url: str) -> tuple[str, int]:
    """The host and port of an `sc://HOST[:PORT][/;params]` URL."""
    parsed = urllib.parse.urlparse("http" + url[2:])
    try:
        port = parsed.port
    except ValueError:
        raise InvalidInputError(f"--remote: {url!r} has no valid port") from None
    return parsed.hostname or "", port if port is not None else _DEFAULT_PORT


def await_server(url: str, timeout: float) -> None:
    """Return once the server at `url` has accepted a connection and completed the gRPC
    handshake; raise `LancensError` (exit 1), in one line, when it has not within `timeout`."""
    host, port = endpoint(url)
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except TimeoutError:
        raise _silent(url, timeout, "no TCP connection") from None
    except OSError as exc:  # refused, no such host, no route
        reason = exc.strerror or str(exc)
        raise LancensError(f"Spark Connect server {url} did not answer: {reason}") from None
    import grpc
    from pyspark.sql.connect.client import DefaultChannelBuilder

    channel = DefaultChannelBuilder(url).toChannel()
    try:
        left = max(timeout - (time.monotonic() - started), 0.1)
        grpc.channel_ready_future(channel).result(timeout=left)
    except grpc.FutureTimeoutError:
        raise _silent(url, timeout, "it accepted a connection but no gRPC handshake") from None
    finally:
        channel.close()


def _silent(url: str, timeout: float, what: str) -> LancensError:
    return LancensError(
        f"Spark Connect server {url} did not answer within {timeout:g} s ({what}); "
        f"{TIMEOUT_ENV} sets how long to wait"
    )
