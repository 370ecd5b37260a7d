"""SIGINT/SIGTERM for a foreground replica: the first asks it to stop, the next hurries it.

Orchestrators send SIGTERM and, after their grace, SIGKILL; a person at a
terminal presses Ctrl-C twice. So the first signal starts a clean shutdown and
any later one ends every wait of it at once (:class:`~cronlease._run.stopping.Deadline`).
Handlers are installed only in the main thread (Python delivers signals
there) and restored on exit.

A Python signal handler runs on the main thread between two of its bytecodes,
wherever that thread is: inside ``Event.wait`` it holds the event's lock, so a
handler that set that event waited for its own thread, for ever (a replica
that hung on SIGTERM until SIGKILL); logging takes locks too. So the handler
does nothing: the interpreter's C-level handler writes the signal's number to
a wakeup socket (``signal.set_wakeup_fd``, async-signal-safe), and a thread of
its own, ``cronlease-signals``, reads it and does the work in ordinary code.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["stop_signals"]

logger = logging.getLogger("cronlease")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _nothing(_signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler: the wakeup socket carries the signal (module docstring)."""


@contextmanager
def stop_signals(on_stop: Callable[[], None], on_again: Callable[[], None]) -> Iterator[None]:
    """While inside: SIGINT/SIGTERM call ``on_stop`` the first time, ``on_again`` after,
    both on the ``cronlease-signals`` thread (not in a signal handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only: nothing to install
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)  # the C handler must never block
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    previous = {signum: signal.signal(signum, _nothing) for signum in STOP_SIGNALS}
    watcher = threading.Thread(
        target=_watch, args=(reader, on_stop, on_again), name="cronlease-signals", daemon=True
    )
    watcher.start()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(previous_fd)
        writer.close()  # the watcher reads the end of the stream and returns
        watcher.join(5.0)
        reader.close()


def _watch(
    reader: socket.socket, on_stop: Callable[[], None], on_again: Callable[[], None]
) -> None:
    received = 0
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return
        for signum in data:  # one byte a signal; the wakeup fd carries every handled one
            if signum not in STOP_SIGNALS:
                continue
            received += 1
            name = signal.Signals(signum).name
            if received == 1:
                logger.info("received %s, shutting down (send it again to stop waiting)", name)
                on_stop()
            else:
                logger.warning("received %s again: not waiting any longer", name)
                on_again()
