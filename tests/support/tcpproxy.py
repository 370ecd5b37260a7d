"""A TCP proxy in front of a database server that a test can take down and bring back.

``down()`` stops accepting and cuts every open connection, as a server
restart or a network fault would; ``up()`` listens again on the same port.

``delay=`` (seconds) makes it a one-way delay, in both directions: every
chunk read from one side is written to the other ``delay`` seconds after it
was read, in order, by a forwarding thread per direction that sleeps until
each chunk's due time — a round trip through the proxy takes ``2 * delay``
more, whatever the throughput (chunks read meanwhile are queued, not held
back behind each other's delays). The end of a stream is delayed as well.
What is not delayed: the TCP handshake with the proxy (the kernel's), so a
new connection costs one round trip less than on a real slow link. The kernel
here has no ``sch_netem``, so ``tc ... netem delay`` cannot do this.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time


class TcpProxy:
    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        host: str = "127.0.0.1",
        *,
        delay: float = 0.0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host  # the address it listens on
        if not delay >= 0:
            raise ValueError("delay must be 0 or more seconds")
        self.delay = float(delay)
        probe = socket.socket()
        probe.bind((host, 0))
        self.port: int = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    return
                self._sockets.update((client, server))
            for source, target in ((client, server), (server, client)):
                if self.delay:
                    self._delayed(source, target)
                else:
                    threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            _close(source, target)

    def _delayed(self, source: socket.socket, target: socket.socket) -> None:
        # (due, chunk) in the order read; b"" is the end of the stream
        chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
        threading.Thread(target=self._read, args=(source, chunks), daemon=True).start()
        threading.Thread(target=self._forward, args=(chunks, source, target), daemon=True).start()

    def _read(self, source: socket.socket, chunks: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        data = b""
        try:
            while data := source.recv(65536):
                chunks.put((time.monotonic() + self.delay, data))
        except OSError:
            pass
        finally:
            chunks.put((time.monotonic() + self.delay, b""))

    def _forward(
        self,
        chunks: queue.SimpleQueue[tuple[float, bytes]],
        source: socket.socket,
        target: socket.socket,
    ) -> None:
        try:
            while True:
                due, data = chunks.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    return
                target.sendall(data)
        except OSError:
            pass
        finally:
            _close(source, target)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
