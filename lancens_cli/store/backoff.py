"""Retries with backoff when an object store asks us to slow down.

S3 answers a request rate it will not take with `503 SlowDown` (and a bulk delete with a
`SlowDown` per key it skipped); GCS with `429`; both sometimes with `500`/`503` while they
scale a prefix. The request did nothing and the right answer is to wait and send it again,
waiting longer each time ("full jitter": a random wait up to a doubling bound, so that many
clients throttled together do not return together). botocore's own retry (standard mode) makes
one quick attempt more; this is the patient layer above it, for throttling alone: a bucket that
does not answer, or denies access, still fails at once. Lance retries its own requests
(object_store: 503 and 429 with backoff; `client_max_retries`, which we raise to 10:
store/storage_options.py).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

ATTEMPTS = 8  # a request is sent at most this often; the waits add up to about 13 s at worst
FIRST_WAIT = 0.1  # seconds: the bound of the first wait, doubled for each retry
LONGEST_WAIT = 10.0

THROTTLING_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "TooManyRequests",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
    }
)
THROTTLING_STATUS = frozenset({429, 500, 502, 503, 504})

T = TypeVar("T")


def is_throttling(exc: BaseException) -> bool:
    """Whether a failure is the store asking us to slow down (or a transient server error),
    as botocore reports it (s3fs keeps botocore's error as the cause) or gcsfs does."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            code = (response.get("Error") or {}).get("Code")
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if code in THROTTLING_CODES or status in THROTTLING_STATUS:
                return True
        if getattr(current, "code", None) in THROTTLING_STATUS:  # gcsfs HttpError
            return True
        current = current.__cause__  # what the error was made from, not what it met
    return False


def waits(attempts: int = ATTEMPTS, rng: random.Random | None = None) -> Iterator[float]:
    """The waits between `attempts` tries: uniform up to FIRST_WAIT * 2**i, at most
    LONGEST_WAIT."""
    draw = (rng or random).uniform
    for retry in range(attempts - 1):
        yield draw(0, min(LONGEST_WAIT, FIRST_WAIT * 2**retry))


def with_backoff(
    call: Callable[..., T],
    *args: Any,
    sleep: Callable[[float], None] = time.sleep,
    **kwargs: Any,
) -> T:
    """`call(*args, **kwargs)`, sent again after a wait while the store throttles it."""
    for wait in waits():
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if not is_throttling(exc):
                raise
        sleep(wait)
    return call(*args, **kwargs)
