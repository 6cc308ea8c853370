#!/usr/bin/env python3
"""How many S3 requests namespace-wide commands make, per table: the cost at a million tables.

    python bench/bench_s3_requests.py [--sizes 1000,4000] [--latency-ms 20] [--workdir DIR] [--keep]
    python bench/bench_s3_requests.py --sizes 10000 --commands check,describe,ref-describe

1. moto (`ThreadedMotoServer`) on 127.0.0.1, and in front of it a counting proxy
   (`http.server` + `http.client`, 127.0.0.1): every request is forwarded unchanged (method,
   path and query, headers, body; the answer's status, headers and body) after a sleep of
   --latency-ms, a real bucket's round trip. It counts requests by kind: LIST (a GET of the
   bucket itself: ListObjects), GET, HEAD, PUT (multipart parts too), COPY (a PUT with
   `x-amz-copy-source`), DELETE, POST (multi-object delete, multipart create and complete).
2. For each size, the flat V2 root bench_scale.py measures (`build_root`: `<name>.lance`
   hard-link copies of one small table and their `__manifest` rows in one commit), built in
   --workdir and uploaded to `s3://lancens-bench-N/scale-N/` (a bucket per size) straight to
   moto (16 threads; neither delayed nor counted).
3. Each of bench_scale.py's commands as a whole process against the proxy (`--root
   s3://lancens-bench-N/scale-N -s endpoint=<proxy> ...`, stdout to /dev/null), the counters
   reset before and read after it; beside them the reference `lance.namespace.
   DirectoryNamespace` (`storage.*` properties) listing every page and describing one table.
   A command that exits non-zero is reported with the first line of its stderr.

Prints one table: per command and size the wall seconds, the requests in total and by kind, the
requests per table, and the growth exponent log(r2/r1) / log(n2/n1) between consecutive sizes
(1: linear in tables; 0: flat); on a command's last row the requests at 1,000,000 tables,
extrapolated linearly (r = a + b*N) from the two largest sizes, and the seconds they take at
--latency-ms one after another (an upper bound where a command runs requests in parallel).
The request counts are the result. Wall seconds also hold moto's own time, in this process,
and moto scans every key of the bucket for each LIST: they grow with N faster than on a real
bucket. Always exits 0 unless the setup fails.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPConnection, HTTPException
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ENV,
    lancens_cmd,
    load_average,
    print_table,
    table_name,
    versions,
)
from bench_scale import COMMANDS, Command, build_root, is_built, remove_root  # noqa: E402

BUCKET = "lancens-bench-{n}"  # one per size: moto scans every key of a bucket for a LIST
KEY, SECRET = "bench-access-key-AKIAEXAMPLE", "bench-secret-key-wJalrXUtnFEMI"
KINDS = ("LIST", "GET", "HEAD", "PUT", "COPY", "DELETE", "POST")
MILLION = 1_000_000
UPLOAD_THREADS = 16
# Headers of one hop (RFC 9110 7.6.1), plus the ones the proxy recomputes or answers itself.
HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
}
# Query keys that make a GET of the bucket a listing (no query at all is ListObjects v1, too).
LIST_KEYS = {"list-type", "prefix", "delimiter", "continuation-token", "marker", "start-after"}

REF_LIST = r"""
import json, sys
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
ns = DirectoryNamespace(**json.loads(sys.argv[1]))
count, token = 0, None
while True:
    response = ns.list_tables(ln.ListTablesRequest(id=[], page_token=token))
    count += len(response.tables)
    token = response.page_token
    if not token:
        break
print(count)
if count != int(sys.argv[2]):
    sys.exit(f"listed {count} tables, expected {sys.argv[2]}")
"""

REF_DESCRIBE = r"""
import json, sys
import lance_namespace as ln
from lance.namespace import DirectoryNamespace
ns = DirectoryNamespace(**json.loads(sys.argv[1]))
response = ns.describe_table(ln.DescribeTableRequest(id=[sys.argv[2]]))
print(response.to_json())
"""


def request_kind(method: str, path: str, headers: dict[str, str]) -> str:
    """LIST, GET, HEAD, PUT, COPY, DELETE or POST (else the method) of one path-style request."""
    split = urllib.parse.urlsplit(path)
    if method == "GET":
        bucket_only = "/" not in split.path.strip("/")
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        return "LIST" if bucket_only and (not query or LIST_KEYS & query.keys()) else "GET"
    if method == "PUT":
        return "COPY" if "x-amz-copy-source" in {k.lower() for k in headers} else "PUT"
    return method


class RequestCounter:
    """Requests by kind, thread-safe; reset before a command, read after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class CountingProxy(ThreadingHTTPServer):
    """A thread per client connection; knows the upstream, the delay and the counter."""

    daemon_threads = True
    request_queue_size = 256  # Lance opens many connections at once

    def __init__(self, upstream_port: int, latency: float, counter: RequestCounter) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream_port, self.latency, self.counter = upstream_port, latency, counter

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ProxyHandler(BaseHTTPRequestHandler):
    """Count, sleep, forward: one upstream keep-alive connection per client connection."""

    protocol_version = "HTTP/1.1"  # keep-alive; every answer carries its Content-Length
    server: CountingProxy

    def setup(self) -> None:
        super().setup()
        self._upstream: HTTPConnection | None = None

    def finish(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: one line per request would drown the output."""

    def _body(self) -> bytes | None:
        """The request body: by Content-Length, or de-chunked; None when there is none."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after each chunk
        length = self.headers.get("Content-Length")
        return self.rfile.read(int(length)) if length is not None else None

    def _send_upstream(
        self, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """One round trip to moto; a reused connection moto closed meanwhile is reopened once."""
        for attempt in (1, 2):
            if self._upstream is None:
                self._upstream = HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=300)
            try:
                self._upstream.request(self.command, self.path, body=body, headers=headers)
                response = self._upstream.getresponse()
                data = response.read()
                return response.status, response.reason, response.getheaders(), data
            except (HTTPException, ConnectionError):
                self._upstream.close()
                self._upstream = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _handle(self) -> None:
        body = self._body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        self.server.counter.add(request_kind(self.command, self.path, headers))
        time.sleep(self.server.latency)
        if body is None and self.command in ("PUT", "POST"):
            body = b""
        try:
            status, reason, out_headers, data = self._send_upstream(body, headers)
        except (HTTPException, OSError) as exc:
            message = f"proxy: upstream failed: {exc}".encode()
            status, reason, out_headers, data = 502, "Bad Gateway", [], message
        self.send_response_only(status, reason)
        length = str(len(data))
        for name, value in out_headers:
            lowered = name.lower()
            if lowered == "content-length" and self.command == "HEAD":
                length = value  # a HEAD answers the object's size, without a body
            elif lowered not in HOP_HEADERS:
                self.send_header(name, value)
        if status not in (204, 304):  # no body, by definition: no length either
            self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD" and data:
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = _handle


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto() -> tuple[object, str]:
    """moto on a free loopback port; (server, endpoint)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def s3_client(endpoint: str):
    """A boto3 client of moto, pooled for the upload threads."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        config=Config(max_pool_connections=UPLOAD_THREADS * 2, retries={"max_attempts": 5}),
    )


def storage_options(endpoint: str) -> dict[str, str]:
    """Lance's spelling of the options that reach `endpoint` (the proxy)."""
    return {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": KEY,
        "secret_access_key": SECRET,
        "allow_http": "true",
    }


def upload_tree(local: Path, moto_endpoint: str, bucket: str, prefix: str) -> tuple[int, int]:
    """Every file under `local` to `s3://<bucket>/<prefix>/...`, a new bucket, straight to moto;
    (files, bytes)."""
    client = s3_client(moto_endpoint)
    client.create_bucket(Bucket=bucket)
    files = [p for p in local.rglob("*") if p.is_file()]

    def put(path: Path) -> int:
        data = path.read_bytes()
        key = f"{prefix}/{path.relative_to(local).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=data)
        return len(data)

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        total = sum(pool.map(put, files))
    return len(files), total


def prepare_root(workdir: Path, n: int, moto_endpoint: str) -> tuple[str, bool]:
    """The local root of n tables (built unless a finished build is there), uploaded to moto;
    returns its S3 URI and whether this run built it locally."""
    local = workdir / f"scale-{n}"
    built = not is_built(local, n)
    started = time.perf_counter()
    if built:
        build_root(local, n, workdir)
    local_s = time.perf_counter() - started
    bucket = BUCKET.format(n=n)
    files, size = upload_tree(local, moto_endpoint, bucket, f"scale-{n}")
    upload_s = time.perf_counter() - started - local_s
    how = f"built locally in {local_s:.1f} s" if built else "reused locally"
    print(
        f"# {n:,} tables: {how}, uploaded {files:,} objects ({size / 2**20:.1f} MiB) "
        f"in {upload_s:.1f} s",
        flush=True,
    )
    return f"s3://{bucket}/scale-{n}", built


def command_argv(command: Command, uri: str, options: dict[str, str], n: int) -> list[str]:
    """lancens with the root's `-s` options; the reference with them as `storage.*`."""
    if command.ours:
        tail = [a.replace("{table}", table_name(n // 2)) for a in command.args]
        option_args = [arg for k, v in options.items() for arg in ("-s", f"{k}={v}")]
        return [*lancens_cmd(), "--root", uri, *option_args, *tail]
    properties = {"root": uri, **{f"storage.{k}": v for k, v in options.items()}}
    script = REF_LIST if command.key == "ref-list" else REF_DESCRIBE
    extra = str(n) if command.key == "ref-list" else table_name(n // 2)
    return [sys.executable, "-c", script, json.dumps(properties), extra]


@dataclass
class Run:
    """One command at one size: wall seconds, requests by kind, and why it has no figure."""

    wall: float
    counts: dict[str, int]
    error: str | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def run_command(cmd: list[str], counter: RequestCounter, timeout: float) -> Run:
    """One whole process, the counters reset before and read after it."""
    counter.reset()
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=ENV,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Run(time.perf_counter() - started, counter.snapshot(), f"killed after {timeout} s")
    wall = time.perf_counter() - started
    counts = counter.snapshot()
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines() or ["(no stderr)"]
        return Run(wall, counts, f"exit {proc.returncode}: {lines[0][:300]}")
    if not counts:
        return Run(wall, counts, "no request reached the proxy: not pointed at it; skipped")
    return Run(wall, counts)


def measure_size(
    uri: str,
    n: int,
    commands: list[Command],
    options: dict[str, str],
    counter: RequestCounter,
    timeout: float,
) -> dict[str, Run]:
    """Every command once against the root of n tables, progress on the way."""
    runs = {}
    for command in commands:
        run = run_command(command_argv(command, uri, options, n), counter, timeout)
        runs[command.key] = run
        state = run.error or "ok"
        print(
            f"#   {n:>9,} {command.label}: {run.wall:.2f} s, {run.total:,} requests, {state}",
            flush=True,
        )
    return runs


def at_million(points: list[tuple[int, int]]) -> tuple[float, bool] | None:
    """Requests at 1M tables from (N, requests): the line through the two largest sizes, or
    proportional to one size alone (the flag says which)."""
    if not points:
        return None
    if len(points) == 1:
        n, r = points[0]
        return r / n * MILLION, False
    (n1, r1), (n2, r2) = points[-2:]
    slope = (r2 - r1) / (n2 - n1)
    return r1 + slope * (MILLION - n1), True


def human_seconds(seconds: float) -> str:
    """Seconds, with hours or days beside a big figure."""
    if seconds >= 86_400:
        return f"{seconds:,.0f} ({seconds / 86_400:.1f} d)"
    if seconds >= 3_600:
        return f"{seconds:,.0f} ({seconds / 3_600:.1f} h)"
    return f"{seconds:,.0f}" if seconds >= 10 else f"{seconds:.2f}"


def rows_of(command: Command, sizes: list[int], runs: dict[int, Run], latency: float) -> list:
    """One row per size; the extrapolation on the last."""
    rows: list[list[str]] = []
    previous: tuple[int, Run] | None = None
    points = [(n, runs[n].total) for n in sizes if n in runs and runs[n].error is None]
    for n in sizes:
        run = runs.get(n)
        if run is None:
            rows.append([command.label, f"{n:,}", "skipped", *[""] * (len(KINDS) + 5)])
            continue
        if run.error is not None:
            failed = f"FAILED {run.error}"
            rows.append(
                [command.label, f"{n:,}", f"{run.wall:.2f}", failed, *[""] * (len(KINDS) + 4)]
            )
            previous = None
            continue
        growth = ""
        if previous is not None and previous[1].total and run.total:
            n0, r0 = previous
            growth = f"{math.log(run.total / r0.total) / math.log(n / n0):.2f}"
        kinds = [f"{run.counts.get(k, 0):,}" for k in KINDS]
        other = sum(v for k, v in run.counts.items() if k not in KINDS)
        if other:
            kinds[-1] += f" (+{other} other)"
        rows.append(
            [
                command.label,
                f"{n:,}",
                f"{run.wall:.2f}",
                f"{run.total:,}",
                *kinds,
                f"{run.total / n:.3f}",
                growth,
                "",
                "",
            ]
        )
        previous = (n, run)
    estimate = at_million(points)
    if estimate is not None and rows:
        requests, linear = estimate
        rows[-1][-2] = f"{requests:,.0f}" + ("" if linear else " (prop.)")
        rows[-1][-1] = human_seconds(requests * latency)
    return rows


def report(
    sizes: list[int], commands: list[Command], results: dict[int, dict[str, Run]], latency: float
) -> None:
    """The one table: a row per command and size."""
    headers = ["command", "tables", "wall s", "requests", *KINDS, "req/table", "exp"]
    headers += ["req @1M", f"s @1M seq @{latency * 1000:g} ms"]
    rows = []
    for command in commands:
        runs = {n: results[n][command.key] for n in sizes if command.key in results.get(n, {})}
        rows += rows_of(command, sizes, runs, latency)
    print_table(headers, rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="1000,4000",
        type=lambda s: sorted({int(x) for x in s.split(",") if x.strip()}),
        help="comma-separated table counts (e.g. 1000,4000 or 4000,10000)",
    )
    parser.add_argument(
        "--latency-ms", type=float, default=20, help="the proxy's delay before each request"
    )
    keys = ",".join(c.key for c in COMMANDS)
    parser.add_argument("--commands", default=keys, help=f"a subset of {keys}")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="local roots live here (default: a temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the local roots this run built")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="kill a command after this many seconds"
    )
    args = parser.parse_args(argv)
    wanted = {k.strip() for k in args.commands.split(",") if k.strip()}
    unknown = wanted - {c.key for c in COMMANDS}
    if unknown:
        parser.error(f"unknown --commands {sorted(unknown)}; known: {keys}")
    args.commands = [c for c in COMMANDS if c.key in wanted]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    own_workdir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="lancens-bench-s3-")) if own_workdir else args.workdir
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    had_template = (workdir / "template-ns").exists()
    latency = args.latency_ms / 1000
    print(f"# bench_s3_requests: {versions()}")
    print(f"# moto behind a counting proxy, {args.latency_ms:g} ms before each request")
    moto, moto_endpoint = start_moto()
    counter = RequestCounter()
    proxy = CountingProxy(int(moto_endpoint.rsplit(":", 1)[1]), latency, counter)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    options = storage_options(proxy.url)
    built_here: list[Path] = []
    results: dict[int, dict[str, Run]] = {}
    load_before = load_average()
    try:
        for n in args.sizes:
            uri, built = prepare_root(workdir, n, moto_endpoint)
            if built:
                built_here.append(workdir / f"scale-{n}")
            results[n] = measure_size(uri, n, args.commands, options, counter, args.timeout)
    finally:
        load_after = load_average()
        proxy.shutdown()
        proxy.server_close()
        moto.stop()
        if not args.keep:
            if own_workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                for root in built_here:
                    remove_root(root)
                if not had_template:
                    shutil.rmtree(workdir / "template-ns", ignore_errors=True)
    print()
    report(args.sizes, args.commands, results, latency)
    print()
    print("# req @1M: a + b*N through the two largest sizes ('prop.': r/N*1M from one size)")
    print(
        f"# s @1M seq: req @1M x {args.latency_ms:g} ms, one request after another; an upper "
        "bound for a command that runs requests in parallel"
    )
    print("# exp: log(r2/r1) / log(n2/n1) of requests between consecutive sizes (1 linear, 0 flat)")
    print(f"# before: {load_before}; after: {load_after}")
    kept = "kept in " + str(workdir) if args.keep else "removed (those this run built)"
    print(f"# local roots {kept}; {len(built_here)} built this run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
