"""A counting HTTP proxy for the query benchmark: sits between a reader and an emulator (Azurite, moto S3)
on a free loopback port, forwards every request unchanged and records requests and response bytes.

Readers are pointed at the proxy's endpoint instead of the emulator's; signatures stay valid because
the ``Host`` header and the path are forwarded as received (S3 SigV4 signs the host, Azure SharedKey
does not). Each request is classified by its path: ``log`` (``_delta_log/``), ``data`` (``.parquet``
outside the log, with the byte range fetched) or ``other`` (listings, properties).

The proxy runs in its **own process** (``python _proxy.py UPSTREAM_PORT``): readers such as
deltalake's ``QueryBuilder`` hold the GIL while they wait for I/O, so a proxy thread in the reader's
process would starve until the reader's request timed out. The bench talks to it through two
control paths on the same port, ``/__proxy__/reset`` and ``/__proxy__/counts`` (JSON).

Example:
    >>> Counts.from_dict(Counts(requests=2, fetches=[Fetch("k", 0, 8)]).to_dict()).fetches[0].length
    8
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
_CONTROL = "/__proxy__/"


@dataclass
class Fetch:
    """One data-file read: the object key (as in the URL path, decoded), first byte, bytes returned."""

    key: str
    start: int
    length: int


@dataclass
class Counts:
    """What went through the proxy since the last reset."""

    requests: int = 0
    bytes: int = 0
    log_requests: int = 0
    log_bytes: int = 0
    data_requests: int = 0
    data_bytes: int = 0
    aborted: int = 0  # responses the reader hung up on before taking them whole
    fetches: list[Fetch] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Counts:
        return cls(**{**d, "fetches": [Fetch(**f) for f in d["fetches"]]})


# ------------------------------------------------------------------------------------ serving side
class _State:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.lock = threading.Lock()
        self.counts = Counts()

    def record(self, path: str, nbytes: int, range_start: int | None) -> None:
        key = unquote(urlsplit(path).path)
        with self.lock:
            c = self.counts
            c.requests += 1
            c.bytes += nbytes
            if "/_delta_log/" in key:
                c.log_requests += 1
                c.log_bytes += nbytes
            elif key.endswith(".parquet"):
                c.data_requests += 1
                c.data_bytes += nbytes
                c.fetches.append(Fetch(key, range_start or 0, nbytes))


def _handler_for(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        _conn: http.client.HTTPConnection | None = None

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _control(self) -> None:
            if self.path.endswith("/reset"):
                with state.lock:
                    state.counts = Counts()
                body = b"{}"
            else:
                with state.lock:
                    body = json.dumps(state.counts.to_dict()).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _upstream(self) -> http.client.HTTPConnection:
            if self._conn is None:
                self._conn = http.client.HTTPConnection(*state.upstream, timeout=120)
            return self._conn

        def _relay(self) -> None:
            if self.path.startswith(_CONTROL):
                self._control()
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            for attempt in range(2):  # a kept-alive upstream connection may have been closed by the emulator
                conn = self._upstream()
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    payload = resp.read()
                    break
                except (TimeoutError, http.client.HTTPException, ConnectionError):
                    conn.close()
                    self._conn = None
                    if attempt:
                        raise
            m = _RANGE.match(self.headers.get("Range") or self.headers.get("x-ms-range") or "")
            state.record(self.path, len(payload), int(m.group(1)) if m else None)
            self.send_response_only(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            if self.command == "HEAD":
                self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
            else:
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD" and payload:
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    with state.lock:
                        state.counts.aborted += 1
                    self.close_connection = True

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _relay

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # readers open dozens of connections at once


def serve(upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
    """Run the proxy in this process until stdin closes; prints the port it listens on first."""
    server = _Server(("127.0.0.1", 0), _handler_for(_State((upstream_host, upstream_port))))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # the parent closes our stdin (or dies): stop
    server.shutdown()


# ------------------------------------------------------------------------------------ bench side
class CountingProxy:
    """Starts the proxy process in front of ``upstream_host:upstream_port`` and reads its counts."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> int:
        """Start the proxy process; returns its loopback port."""
        self._proc = subprocess.Popen(
            [sys.executable, __file__, str(self.upstream[1]), self.upstream[0]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.port = int(self._proc.stdout.readline())
        return self.port

    def _get(self, what: str) -> bytes:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", _CONTROL + what)
            return conn.getresponse().read()
        finally:
            conn.close()

    def reset(self) -> None:
        """Start counting afresh."""
        self._get("reset")

    def snapshot(self) -> Counts:
        """The counts since the last reset."""
        return Counts.from_dict(json.loads(self._get("counts")))

    def stop(self) -> None:
        """Stop the proxy process (closing its stdin; killed if it lingers)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1")
