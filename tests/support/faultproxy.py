"""A fault-injecting HTTP proxy of the tests' own: it sits between a writer and an emulator (Azurite blob,
moto S3) on loopback and makes chosen requests fail *after* they took effect, as object stores do in life.

The writer reaches the emulator through the proxy by its storage options alone (no patching):

* Azure: ``azure_storage_endpoint = http://127.0.0.1:<proxy port>/devstoreaccount1`` (SharedKey signs the
  path, not the host, so the request is forwarded unchanged);
* S3: ``AWS_ENDPOINT_URL = http://127.0.0.1:<proxy port>`` (path-style; moto does not check signatures);
* plus a short client ``timeout`` (an object_store client option) for the delay fault.

A :class:`Rule` matches requests by method and a regex on the URL path (query string excluded) and
applies its fault to the first ``times`` matching requests (later ones pass through):

``"503"``
    forward the request, read the emulator's answer, throw it away and answer ``503 Service Unavailable``
    (``Connection: close``). The write landed; the client sees a server error and retries.
``"drop"``
    forward the request, read the answer, then close the client's connection without a byte of answer.
    The write landed; the client sees a connection reset / incomplete message.
``"timeout"``
    forward the request, read the answer, then hold the connection silently for ``delay`` seconds (longer
    than the client's ``timeout``) and close it. The write landed before the client gave up. (Holding the
    request *before* forwarding would let the client's retry land first and the late original fail its
    precondition or rewrite the same bytes: a harmless order, so the proxy does not offer it.)
``"slow"``
    forward the request, read the answer, hold it for ``delay`` seconds, then send it: a store that is
    slow to answer but answers (the connection stays open).

Every request is recorded (method, path, what happened, when it arrived and when it was answered) and
each rule counts the faults it fired, so a
test asserts that its fault really fired. Bounded: at most ``max_connections`` client connections at once
(further ones are refused by closing them), every upstream call has a timeout, :meth:`FaultProxy.stop`
closes every socket and joins every thread. Loopback only.

Example:
    >>> proxy = FaultProxy(upstream_port=1)  # nothing listens there; no request is made here
    >>> rule = proxy.add(Rule("PUT", r"_delta_log/\\d{20}\\.json$", "503"))
    >>> rule.matches("PUT", "/b/t/_delta_log/00000000000000000003.json"), rule.matches("GET", "/x")
    (True, False)
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import BinaryIO

HOST = "127.0.0.1"
ACTIONS = ("503", "drop", "timeout", "slow")
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
}
MAX_HEADER_BYTES = 64 * 1024
UPSTREAM_TIMEOUT = 30.0


@dataclass
class Rule:
    """Apply ``action`` to the first ``times`` requests with ``method`` whose path matches ``path``."""

    method: str
    path: str
    action: str
    times: int = 1
    delay: float = 0.0
    fired: int = 0
    matched: int = 0
    fired_paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, not {self.action!r}")
        self._regex = re.compile(self.path)

    def matches(self, method: str, path: str) -> bool:
        """Whether a request (method, URL path without query) is one of this rule's."""
        return method.upper() == self.method.upper() and self._regex.search(path) is not None


@dataclass(frozen=True)
class Seen:
    """One request that passed through: ``outcome`` is the emulator's status, or the fault applied."""

    method: str
    path: str
    outcome: str
    started: float = 0.0  # time.monotonic() when the request arrived
    ended: float = 0.0  # ... when its answer was sent or withheld


def most_at_once(seen: list[Seen]) -> int:
    """The most of ``seen`` in flight at one moment (arrived and not yet answered).

    Example:
        >>> most_at_once([Seen("POST", "/", "202", a, b) for a, b in ((0, 2), (1, 3), (3, 4))])
        2
    """
    events = sorted([(s.started, 1) for s in seen] + [(s.ended, -1) for s in seen])  # an end before a start
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


class FaultProxy:
    """A threaded HTTP/1.1 reverse proxy to ``127.0.0.1:upstream_port`` with fault rules."""

    def __init__(self, upstream_port: int, *, max_connections: int = 32) -> None:
        self.upstream_port = upstream_port
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FaultProxy:
        """Listen on a free loopback port (:attr:`port`) and serve in a background thread."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        sock.listen(64)
        sock.settimeout(0.2)
        self._listener = sock
        self.port = int(sock.getsockname()[1])
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        """Close the listener and every client connection, wake held requests, join all threads."""
        self._stopping.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        with self._lock:
            clients = list(self._clients)
        for c in clients:
            _close(c)
        for t in list(self._threads):
            t.join(timeout=UPSTREAM_TIMEOUT + 5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ rules and records
    def add(self, rule: Rule) -> Rule:
        """Add a rule (checked in order; the first rule with faults left wins)."""
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Drop every rule (requests pass through untouched from now on)."""
        with self._lock:
            self.rules = []

    def requests(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        """The requests seen so far, optionally filtered by method and a path regex."""
        regex = re.compile(path) if path else None
        with self._lock:
            seen = list(self.seen)
        return [
            s
            for s in seen
            if (method is None or s.method == method.upper()) and (regex is None or regex.search(s.path))
        ]

    def _pick(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.matches(method, path):
                    rule.matched += 1
                    if rule.fired < rule.times:
                        rule.fired += 1
                        rule.fired_paths.append(path)
                        return rule
        return None

    def _record(self, method: str, path: str, outcome: str, started: float) -> None:
        with self._lock:
            self.seen.append(Seen(method, path, outcome, started, time.monotonic()))

    # ------------------------------------------------------------------ serving
    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                _close(conn)
                continue
            conn.settimeout(None)
            with self._lock:
                self._clients.add(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            reader = conn.makefile("rb")
            while not self._stopping.is_set():
                request = _read_request(reader, conn)
                if request is None:
                    return
                if not self._handle(conn, *request):
                    return
        except (OSError, ValueError, http.client.HTTPException):
            return
        finally:
            with self._lock:
                self._clients.discard(conn)
            _close(conn)
            self._slots.release()

    def _handle(
        self, conn: socket.socket, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> bool:
        """Serve one request; False when the client connection must end."""
        path = target.split("?", 1)[0]
        started = time.monotonic()
        rule = self._pick(method, path)
        status, reason, resp_headers, data = self._forward(method, target, headers, body)
        if rule is not None and rule.action == "slow":
            self._stopping.wait(rule.delay)
        if rule is None or rule.action == "slow":
            # recorded before the answer goes out: a client that has its answer finds its request recorded
            self._record(method, path, str(status) if rule is None else f"slow (upstream {status})", started)
            conn.sendall(_response(method, status, reason, resp_headers, data))
            return True
        self._record(method, path, f"{rule.action} (upstream {status})", started)
        if rule.action == "503":
            text = b"<?xml version='1.0'?><Error><Code>ServerBusy</Code><Message>injected</Message></Error>"
            head = (
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n"
            )
            conn.sendall(head.encode() + text)
            return False
        if rule.action == "timeout":
            self._stopping.wait(rule.delay)
        return False  # drop, or timeout after the hold: close without an answer

    def _forward(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        up = http.client.HTTPConnection(HOST, self.upstream_port, timeout=UPSTREAM_TIMEOUT)
        try:
            up.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            has_length = False
            for name, value in headers:
                low = name.lower()
                if low in _HOP_BY_HOP:
                    continue
                if low == "content-length":
                    has_length = True
                    continue
                up.putheader(name, value)
            if body or has_length:
                up.putheader("Content-Length", str(len(body)))
            up.putheader("Connection", "close")
            up.endheaders(body if body else None)
            resp = up.getresponse()
            data = resp.read() if method.upper() != "HEAD" else b""
            return resp.status, resp.reason, resp.getheaders(), data
        finally:
            up.close()


def through(backend: str, options: dict[str, str], proxy: FaultProxy, **client: str) -> dict[str, str]:
    """The same storage options, sent through ``proxy`` to Azurite (``backend`` "azurite") or moto S3,
    plus the given client options (``timeout``, ``max_retries``, ...)."""
    out = dict(options)
    if backend == "azurite":
        out["azure_storage_endpoint"] = f"http://{HOST}:{proxy.port}/devstoreaccount1"
    else:
        out["AWS_ENDPOINT_URL"] = f"http://{HOST}:{proxy.port}"
    out.update(client)
    return out


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def _read_request(reader: BinaryIO, conn: socket.socket) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    """One request from the client: (method, target, headers, body); None at a clean end of stream."""
    line = reader.readline(MAX_HEADER_BYTES)
    while line in (b"\r\n", b"\n"):
        line = reader.readline(MAX_HEADER_BYTES)
    if not line:
        return None
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: list[tuple[str, str]] = []
    total = 0
    while True:
        raw = reader.readline(MAX_HEADER_BYTES)
        total += len(raw)
        if total > MAX_HEADER_BYTES:
            raise ValueError("request head too large")
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    lowered = {n.lower(): v for n, v in headers}
    if lowered.get("expect", "").lower() == "100-continue":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in lowered.get("transfer-encoding", "").lower():
        body = _read_chunked(reader)
    else:
        length = int(lowered.get("content-length", "0") or 0)
        body = reader.read(length) if length else b""
        if len(body) != length:
            return None
    return method, target, headers, body


def _read_chunked(reader: BinaryIO) -> bytes:
    parts = []
    while True:
        size_line = reader.readline(MAX_HEADER_BYTES)
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while reader.readline(MAX_HEADER_BYTES) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        parts.append(reader.read(size))
        reader.readline(MAX_HEADER_BYTES)


def _response(method: str, status: int, reason: str, headers: list[tuple[str, str]], data: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    for name, value in headers:
        low = name.lower()
        if low in _HOP_BY_HOP:
            continue
        if low == "content-length" and method.upper() != "HEAD":
            continue
        lines.append(f"{name}: {value}")
    if method.upper() != "HEAD" and status not in (204, 304) and not 100 <= status < 200:
        lines.append(f"Content-Length: {len(data)}")
    lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data
