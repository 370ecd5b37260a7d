"""A local HTTP server that records every request it gets: the ping and Sentry tests' far end.

``status`` is what it answers (200 unless a test makes it fail); ``hold``, while
set, makes each request wait (a slow server) until it is cleared or the server stops.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes


class CaptureServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.status = 200
        self.released = threading.Event()
        self.released.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def seen(self) -> list[Request]:
        with self.lock:
            return list(self.requests)


class _Handler(BaseHTTPRequestHandler):
    server: CaptureServer

    def _record(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        self.server.released.wait(30)
        with self.server.lock:
            self.server.requests.append(Request(self.command, self.path, body))
        self.send_response(self.server.status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    do_GET = do_POST = do_HEAD = _record

    def log_message(self, format: str, *args: object) -> None:
        pass  # the test reads the requests, not stderr


@contextmanager
def capture_server() -> Iterator[CaptureServer]:
    server = CaptureServer()
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="capture-server", daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.released.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
