"""A reverse proxy that lets Lance write to fake-gcs-server: it fills the emulator's XML PUT gap.

Lance's object_store GCS client uploads an object with the XML API, `PUT /bucket/object`, and
makes a commit conditional with `x-goog-if-generation-match: 0` on every `_versions/*.manifest`.
fake-gcs-server 1.54 (the binary the PyPI wrapper ships) has no XML upload: it answers such a PUT
with 400 "invalid uploadType". Of its JSON uploads only the multipart form honours
`ifGenerationMatch` (simple and resumable uploads ignore it), so this proxy turns each plain XML
PUT into

    POST /upload/storage/v1/b/<bucket>/o?uploadType=multipart&name=<object>[&ifGenerationMatch=N]

and answers the PUT as GCS would: 200 with `ETag` and `x-goog-generation`, or 412 Precondition
Failed when the emulator refuses the precondition (another writer won that version). An XML copy
(`x-goog-copy-source`, which lancedb sends with the same precondition to reserve a table) is
served the same way: the source is read and uploaded under the new name, because the emulator's
own copy ignores preconditions.

The emulator has no XML multipart upload either (`POST ?uploads`, `PUT ?partNumber&uploadId`,
`POST ?uploadId`, `DELETE ?uploadId`), which Lance uses for every file above
LANCE_INITIAL_UPLOAD_SIZE (5 MiB). The proxy holds the parts itself and, on completion, stores
their concatenation with one upload: Lance's multipart requests are exercised, the parts'
storage is the proxy's, not GCS's (see docs/gcs.md).

Every other request (GET, HEAD, DELETE, listings, JSON-API POSTs) goes to the emulator
unchanged. Lance is pointed at the proxy; gcsfs may talk to the emulator directly.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import urllib.parse
import uuid
from dataclasses import dataclass
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from xml.etree import ElementTree

# Headers that belong to one hop, never forwarded (RFC 9110 7.6.1), plus the ones we recompute.
HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


class _Handler(BaseHTTPRequestHandler):
    """One request: an XML object PUT is translated, anything else is forwarded as it is."""

    protocol_version = "HTTP/1.1"  # keep-alive for reqwest; every answer has a Content-Length
    server: _ProxyServer

    def parse_request(self) -> bool:
        """Note the Authorization each request carries, by API: "json" (`/storage/v1/...`,
        `/upload/...`: gcsfs) or "xml" (`/bucket/object`: Lance's object_store)."""
        parsed = super().parse_request()
        if parsed and self.headers.get("Authorization"):
            json_api = self.path.startswith(("/storage/v1/", "/upload/storage/v1/"))
            with self.server.lock:
                self.server.authorizations.add(
                    ("json" if json_api else "xml", self.headers["Authorization"])
                )
        return parsed

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Silent: the emulator keeps its own log; a test run needs no access log on stderr."""

    def _body(self) -> bytes:
        """The request body, sized by Content-Length or sent chunked (reqwest may stream)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _upstream(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """One request to the emulator; its status, headers and whole body."""
        conn = http.client.HTTPConnection(self.server.upstream_host, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = b"" if method == "HEAD" else response.read()
            return response.status, response.getheaders(), data
        finally:
            conn.close()

    def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """Answer the client with a fixed-length body (HEAD: the upstream length, no body)."""
        self.send_response(status)
        length = str(len(body))
        for name, value in headers:
            if name.lower() == "content-length" and self.command == "HEAD":
                length = value
            elif name.lower() not in HOP_HEADERS:
                self.send_header(name, value)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _forward(self) -> None:
        """Pass the request through unchanged (except hop-by-hop headers)."""
        body = self._body() if self.command in ("PUT", "POST", "PATCH", "DELETE") else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        status, out_headers, data = self._upstream(self.command, self.path, body, headers)
        self._reply(status, out_headers, data)

    def _object_of_put(self) -> tuple[str, str] | None:
        """The (bucket, object) a plain XML object PUT or copy writes, or None for other PUTs
        (parts of a multipart upload carry a query); the path may be %2F-encoded."""
        split = urllib.parse.urlsplit(self.path)
        bucket, _, name = split.path.lstrip("/").partition("/")
        if split.query or not (bucket and name):
            return None
        return urllib.parse.unquote(bucket), urllib.parse.unquote(name)

    def _copy_source(self) -> bytes | None:
        """The bytes an XML copy (`x-goog-copy-source: bucket/object`) copies, read from the
        emulator; None when the source does not exist."""
        source = urllib.parse.unquote(self.headers["x-goog-copy-source"]).lstrip("/")
        status, _headers, data = self._upstream("GET", "/" + urllib.parse.quote(source), None, {})
        return data if status == 200 else None

    def _upload(
        self, bucket: str, name: str, data: bytes, content_type: str, precondition: str | None
    ) -> tuple[int, list[tuple[str, str]]]:
        """Store `data` with a JSON-API multipart upload, the form that honours
        ifGenerationMatch; the status and the headers an XML PUT answers with."""
        query = {"uploadType": "multipart", "name": name}
        if precondition is not None:
            query["ifGenerationMatch"] = precondition
        boundary = f"lancens-proxy-{uuid.uuid4().hex}"
        metadata = json.dumps({"name": name, "contentType": content_type}).encode()
        body = b"".join(
            [
                f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
                metadata,
                f"\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\r\n".encode(),
                data,
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        path = (
            f"/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?"
            + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        )
        headers = {"Content-Type": f"multipart/related; boundary={boundary}"}
        status, _headers, answer = self._upstream("POST", path, body, headers)
        if status != 200:
            return status, []
        created = json.loads(answer)
        etag = created.get("etag") or created.get("md5Hash") or created["generation"]
        return 200, [("ETag", f'"{etag}"'), ("x-goog-generation", str(created["generation"]))]

    def _put_as_multipart(self, bucket: str, name: str, data: bytes) -> None:
        """Answer an XML PUT (or copy) of `data` as GCS does: 200, or 412 when the
        `x-goog-if-generation-match` precondition fails (another writer won that version)."""
        content_type = self.headers.get("Content-Type") or "application/octet-stream"
        precondition = self.headers.get("x-goog-if-generation-match")
        status, headers = self._upload(bucket, name, data, content_type, precondition)
        if status == 200:
            self._reply(200, headers, b"")
        elif status == 412:
            with self.server.lock:
                self.server.refused += 1
            self._reply(412, [("Content-Type", "application/xml")], _precondition_failed())
        else:
            self._reply(status, [("Content-Type", "application/xml")], b"")

    def do_PUT(self) -> None:  # noqa: N802
        """Translate uploads, copies and the parts of a multipart upload.

        A copy (lancedb's copy-if-not-exists sends one with `x-goog-if-generation-match: 0`)
        becomes a read of the source and a conditional upload: the emulator's own copy
        (`copyTo`) ignores the precondition."""
        upload_id = self._query().get("uploadId")
        if upload_id is not None:
            self._store_part(upload_id, int(self._query()["partNumber"]), self._body())
            return
        target = self._object_of_put()
        if target is None:
            self._forward()
            return
        if "x-goog-copy-source" not in self.headers:
            self._put_as_multipart(*target, self._body())
            return
        self._body()  # a copy's body is empty; read it to keep the connection usable
        data = self._copy_source()
        if data is None:
            self._reply(404, [("Content-Type", "application/xml")], b"")
        else:
            self._put_as_multipart(*target, data)

    def do_POST(self) -> None:  # noqa: N802
        """Start (`?uploads`) or complete (`?uploadId=`) an XML multipart upload; any other
        POST (the JSON API gcsfs uses) passes through."""
        query = self._query()
        target = self._object_of_path()
        if target is not None and "uploads" in query:
            self._body()
            self._start_multipart(*target)
        elif target is not None and "uploadId" in query:
            self._complete_multipart(query["uploadId"], self._body())
        else:
            self._forward()

    def do_DELETE(self) -> None:  # noqa: N802
        """Abort an XML multipart upload (`?uploadId=`); other deletes pass through."""
        upload_id = self._query().get("uploadId")
        if upload_id is None:
            self._forward()
            return
        with self.server.lock:
            self.server.uploads.pop(upload_id, None)
        self._reply(204, [], b"")

    do_GET = do_HEAD = do_PATCH = _forward  # noqa: N815

    # --- XML multipart uploads, which the emulator lacks: parts are held here --------------

    def _query(self) -> dict[str, str]:
        query = urllib.parse.urlsplit(self.path).query
        return dict(urllib.parse.parse_qsl(query, keep_blank_values=True))

    def _object_of_path(self) -> tuple[str, str] | None:
        bucket, _, name = urllib.parse.urlsplit(self.path).path.lstrip("/").partition("/")
        if not (bucket and name):
            return None
        return urllib.parse.unquote(bucket), urllib.parse.unquote(name)

    def _start_multipart(self, bucket: str, name: str) -> None:
        upload_id = uuid.uuid4().hex
        content_type = self.headers.get("Content-Type") or "application/octet-stream"
        with self.server.lock:
            self.server.uploads[upload_id] = _Upload(bucket, name, content_type, {})
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
            f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(name)}</Key>"
            f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>"
        ).encode()
        self._reply(200, [("Content-Type", "application/xml")], body)

    def _store_part(self, upload_id: str, number: int, data: bytes) -> None:
        with self.server.lock:
            upload = self.server.uploads.get(upload_id)
            if upload is not None:
                upload.parts[number] = data
        if upload is None:
            self._reply(404, [("Content-Type", "application/xml")], b"")
        else:
            self._reply(200, [("ETag", f'"{hashlib.md5(data).hexdigest()}"')], b"")

    def _complete_multipart(self, upload_id: str, manifest: bytes) -> None:
        """Join the parts the completion names, in its order, and upload them as one object."""
        with self.server.lock:
            upload = self.server.uploads.pop(upload_id, None)
        if upload is None:
            self._reply(404, [("Content-Type", "application/xml")], b"")
            return
        numbers = [int(n.text or 0) for n in ElementTree.fromstring(manifest).iter("PartNumber")]
        if any(n not in upload.parts for n in numbers):
            self._reply(400, [("Content-Type", "application/xml")], b"<Error>InvalidPart</Error>")
            return
        data = b"".join(upload.parts[n] for n in numbers)
        status, headers = self._upload(upload.bucket, upload.name, data, upload.content_type, None)
        if status != 200:
            self._reply(status, [], b"")
            return
        with self.server.lock:
            self.server.multipart_objects += 1
        etag = dict(headers)["ETag"]
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
            f"<Bucket>{escape(upload.bucket)}</Bucket><Key>{escape(upload.name)}</Key>"
            f"<ETag>{escape(etag)}</ETag></CompleteMultipartUploadResult>"
        ).encode()
        self._reply(200, [("Content-Type", "application/xml"), *headers], body)


def _precondition_failed() -> bytes:
    """The XML error body GCS sends with a 412 (object_store reads only the status)."""
    return (
        b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>PreconditionFailed</Code>"
        b"<Message>At least one of the pre-conditions you specified did not hold.</Message>"
        b"</Error>"
    )


@dataclass
class _Upload:
    """An XML multipart upload in progress: where it goes and the parts received so far."""

    bucket: str
    name: str
    content_type: str
    parts: dict[int, bytes]


class _ProxyServer(ThreadingHTTPServer):
    """The threaded server, knowing the emulator's host:port."""

    daemon_threads = True

    def __init__(self, upstream_host: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream_host = upstream_host
        self.refused = 0  # conditional PUTs answered 412: commits another writer won
        self.uploads: dict[str, _Upload] = {}  # XML multipart uploads by upload id
        self.multipart_objects = 0  # objects stored by a completed XML multipart upload
        self.authorizations: set[tuple[str, str]] = set()  # (API, Authorization) seen
        self.lock = threading.Lock()


class GcsWriteProxy:
    """The proxy on 127.0.0.1 on a free port, in front of the emulator at `upstream` (a URL).

    Use as a context manager, or call start() and stop(); `url` is what Lance's
    `gcs_base_url` should name.
    """

    def __init__(self, upstream: str) -> None:
        self._server = _ProxyServer(urllib.parse.urlsplit(upstream).netloc)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="gcs-write-proxy", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def refused(self) -> int:
        """How many conditional uploads were refused (412) so far: lost commit races."""
        return self._server.refused

    @property
    def multipart_objects(self) -> int:
        """How many objects were stored by a completed XML multipart upload so far."""
        return self._server.multipart_objects

    @property
    def authorizations(self) -> set[tuple[str, str]]:
        """Every (API, Authorization header) a request carried so far; API "json" or "xml"."""
        with self._server.lock:
            return set(self._server.authorizations)

    def start(self) -> GcsWriteProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> GcsWriteProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
