"""A small standalone server for the status page (stdlib ``wsgiref``, threaded)."""

from __future__ import annotations

import logging
import signal
import socketserver
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer
from wsgiref.simple_server import make_server as _make_server

from cronlease.store import LeaseStore
from cronlease.web.app import PageOptions, wsgi_app

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from cronlease._scheduler import Scheduler

logger = logging.getLogger("cronlease")


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("status page: %s - %s", self.address_string(), format % args)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def make_server(
    source: Scheduler | LeaseStore,
    host: str = "127.0.0.1",
    port: int = 8080,
    **options: Unpack[PageOptions],
) -> WSGIServer:
    """A threaded stdlib server for the page (not started); ``port=0`` picks a free port.

    ``options`` are those of :func:`wsgi_app`. Call ``serve_forever()`` and
    ``shutdown()`` on it, or use :func:`serve`.
    """
    return _make_server(
        host,
        port,
        wsgi_app(source, **options),
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )


def serve(
    source: Scheduler | LeaseStore,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    ready: Callable[[str], object] | None = None,
    **options: Unpack[PageOptions],
) -> None:
    """Serve the page until SIGINT or SIGTERM (or KeyboardInterrupt off the main thread).

    Binds ``host`` (default loopback only) and ``port``; ``ready`` is called
    with the page's URL once it accepts connections (useful with ``port=0``).
    """
    server = make_server(source, host, port, **options)
    url = f"http://{host}:{server.server_port}/"
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda _signum, _frame: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="cronlease-web", daemon=True)
    thread.start()
    logger.info("cronlease status page on %s", url)
    try:
        if ready is not None:
            ready(url)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
