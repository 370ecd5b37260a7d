"""SIGINT/SIGTERM for a foreground replica: the first asks it to stop, the next hurries it.

Orchestrators send SIGTERM and, after their grace, SIGKILL; a person at a
terminal presses Ctrl-C twice. So the first signal starts a clean shutdown and
any later one ends every wait of it at once (:class:`~cronlease._run.stopping.Deadline`).
Handlers are installed only in the main thread (Python delivers signals
there) and restored on exit.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["stop_signals"]

logger = logging.getLogger("cronlease")


@contextmanager
def stop_signals(on_stop: Callable[[], None], on_again: Callable[[], None]) -> Iterator[None]:
    """While inside: SIGINT/SIGTERM call ``on_stop`` the first time, ``on_again`` after.

    ``on_again`` runs in a signal handler: it must only set plain flags.
    """
    received = 0

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        name = signal.Signals(signum).name
        if received == 1:
            logger.info("received %s, shutting down (send it again to stop waiting)", name)
            on_stop()
        else:
            logger.warning("received %s again: not waiting any longer", name)
            on_again()

    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
