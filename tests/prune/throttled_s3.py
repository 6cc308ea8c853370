"""A moto S3 server on 127.0.0.1 that throttles as S3 does under load, and logs deletes.

`throttle(burst)` makes half the requests (by a hash of method, path and query) fail `burst`
times with `503 SlowDown` (S3's answer to a request rate it will not take) before they reach
moto: such a request is answered only on its `burst + 1`-th try, so a client must retry
patiently, and one that gives up early (botocore's standard mode tries twice) fails. With
`partial_deletes`, a `DeleteObjects` of several keys deletes only the first half and answers
`SlowDown` for each of the others, inside a `200 OK`, as S3 does. Every deleted object is
logged with its time (`deleted`), which is what `--delete-rate-limit` is judged by, and every
listing with its prefix (`listed`). With `unordered`, listings of that prefix come in reverse
name order (as S3 directory buckets may answer; Lance itself needs ordered `_versions/`).
"""

from __future__ import annotations

import io
import logging
import re
import threading
import time
import zlib
from dataclasses import dataclass, field
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

from helpers import free_port
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

_CONTENTS = re.compile(rb"<Contents>.*?</Contents>", re.S)


def _reversed_listing(inner, environ, start_response):
    """A `ListObjectsV2` answer with its objects in reverse name order."""
    status_headers: list = []
    answer = b"".join(inner(environ, lambda s, h, *_: status_headers.extend([s, h])))
    blocks = _CONTENTS.findall(answer)
    if len(blocks) > 1:
        first = answer.index(blocks[0])
        last = answer.rindex(blocks[-1]) + len(blocks[-1])
        answer = answer[:first] + b"".join(reversed(blocks)) + answer[last:]
    headers = [(k, v) for k, v in status_headers[1] if k.lower() != "content-length"]
    start_response(status_headers[0], [*headers, ("Content-Length", str(len(answer)))])
    return [answer]


SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
_KEY = re.compile(rb"<Object>\s*<Key>(.*?)</Key>.*?</Object>", re.S)


@dataclass
class Traffic:
    burst: int = 0
    partial_deletes: bool = False
    unordered: str | None = None  # listings of this prefix answered in reverse name order
    requests: int = 0
    throttled: int = 0  # requests answered 503
    refused_keys: int = 0  # keys a DeleteObjects answered with SlowDown
    deleted: list[tuple[float, int]] = field(default_factory=list)  # (time, objects)
    listed: list[str] = field(default_factory=list)  # the prefix of every ListObjectsV2
    asked: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every request
    tries: dict[tuple, int] = field(default_factory=dict)  # request -> times throttled


class ThrottledS3(ThreadedMotoServer):
    def __init__(self) -> None:
        super().__init__(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self.traffic = Traffic()
        self._lock = threading.Lock()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def options(self) -> dict[str, str]:
        """Storage options (Lance spelling) for this server."""
        return {
            "endpoint": self.endpoint,
            "region": "us-east-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
            "allow_http": "true",
        }

    def throttle(
        self, burst: int, partial_deletes: bool = False, unordered: str | None = None
    ) -> None:
        with self._lock:
            self.traffic = Traffic(burst, partial_deletes, unordered)

    def calm(self) -> Traffic:
        """Stop throttling; what happened since `throttle` (or the last `calm`)."""
        with self._lock:
            seen, self.traffic = self.traffic, Traffic()
        return seen

    def _server_entry(self) -> None:
        inner = DomainDispatcherApplication(create_backend_app)

        def app(environ, start_response):
            with self._lock:  # one request at a time: moto's listing races its deletes
                return self._answer(inner, environ, start_response)

        self._server = make_server(self._ip_address, self._port, app, True)
        self._server_ready_event.set()
        self._server.serve_forever()

    def _answer(self, inner, environ, start_response):
        traffic = self.traffic
        traffic.requests += 1
        method, query = environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
        request = (method, environ["PATH_INFO"], query)
        traffic.asked.append((method, environ["PATH_INFO"]))
        if method == "GET" and "list-type=2" in query:
            prefix = parse_qs(query).get("prefix", [""])[0]
            traffic.listed.append(prefix)
            if traffic.unordered is not None and prefix == traffic.unordered:
                return _reversed_listing(inner, environ, start_response)
        chosen = zlib.crc32(repr(request).encode()) % 2 == 0
        if chosen and traffic.tries.get(request, 0) < traffic.burst:
            traffic.tries[request] = traffic.tries.get(request, 0) + 1
            traffic.throttled += 1
            start_response("503 Slow Down", [("Content-Type", "application/xml")])
            return [SLOW_DOWN]
        if method == "DELETE" and "uploadId" not in query:
            traffic.deleted.append((time.monotonic(), 1))
            return inner(environ, start_response)
        if method != "POST" or "delete" not in query.split("&"):
            return inner(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        keys = _KEY.findall(body)
        refused = keys[len(keys) // 2 :] if traffic.partial_deletes and len(keys) > 1 else []
        if refused:
            kept = b"".join(b"<Object><Key>%s</Key></Object>" % k for k in keys[: len(keys) // 2])
            body = re.sub(rb"<Object>.*</Object>", lambda _m: kept, body, flags=re.S)
            traffic.refused_keys += len(refused)
        traffic.deleted.append((time.monotonic(), len(keys) - len(refused)))
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_CONTENT_MD5", None)
        for name in [k for k in environ if k.startswith("HTTP_X_AMZ_CHECKSUM")]:
            environ.pop(name)
        if not refused:
            return inner(environ, start_response)
        status_headers: list = []
        answer = b"".join(inner(environ, lambda s, h, *_: status_headers.extend([s, h])))
        errors = b"".join(
            b"<Error><Key>%s</Key><Code>SlowDown</Code><Message>%s</Message></Error>"
            % (key, escape("Please reduce your request rate.").encode())
            for key in refused
        )
        answer = answer.replace(b"</DeleteResult>", errors + b"</DeleteResult>")
        headers = [(k, v) for k, v in status_headers[1] if k.lower() != "content-length"]
        start_response(status_headers[0], [*headers, ("Content-Length", str(len(answer)))])
        return [answer]
