"""Healthchecks-style pings of a task's ``ping_url``: ``/start``, the URL itself, ``/fail``.

A listener on the scheduler's event bus (``RunStarted``, ``RunFinished``)
puts each ping on a bounded queue that one daemon sender thread drains: the
HTTP call never runs on the tick path or on the run's worker thread, so a slow
or dead ping server costs a run nothing. When the queue is full (the server
answers slower than runs end, :data:`QUEUE_SIZE` pings behind) the new ping is
dropped, logged once per streak; the pinged service then reports the run late
or missed, which is what a dead-man's switch is for.

Each ping carries ``rid=`` (Healthchecks' run id), a UUID derived from the task,
slot, fence and attempt, so concurrent or overlapping runs pair their start and
end. A failed ping (timeout, refused, an HTTP error) is logged once per streak
per task (:mod:`cronlease._run.replica_log.log_streaks`), never retried, and never touches
the run. The URL's path holds the check's secret, so log lines name its host
only. At exit, pings still queued get up to :data:`PING_TIMEOUT` to go out.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from cronlease._events import Event, RunFinished, RunStarted
from cronlease._lease.runs import summarize_error
from cronlease._run.replica_log.log_streaks import LogStreaks

__all__ = ["PING_TIMEOUT", "QUEUE_SIZE", "Ping", "Pinger", "ping_of"]

logger = logging.getLogger("cronlease")

#: seconds one ping may take: a dead-man's switch needs no patience
PING_TIMEOUT = 5.0
#: pings waiting for the sender; more are dropped
QUEUE_SIZE = 1000
#: the body of a /fail ping is an error summary, not a traceback
MAX_BODY = 10_000


@dataclass(frozen=True)
class Ping:
    task: str
    url: str
    body: bytes = b""


def ping_of(event: Event, url: str) -> Ping | None:
    """The ping an event calls for, at the task's ``url``; None for other events."""
    if not isinstance(event, (RunStarted, RunFinished)):
        return None
    run_id = uuid.uuid5(
        uuid.NAMESPACE_URL, f"cronlease:{event.task}@{event.slot}:{event.fence}:{event.attempt}"
    )
    query = f"rid={run_id}"
    if isinstance(event, RunStarted):
        return Ping(event.task, f"{url}/start?{query}")
    if event.outcome == "succeeded":
        return Ping(event.task, f"{url}?{query}")
    said = f"{event.outcome}: {summarize_error(event.error)}" if event.error else event.outcome
    return Ping(event.task, f"{url}/fail?{query}", said.encode()[:MAX_BODY])


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).hostname or "?"


class Pinger:
    """The pings of one scheduler's tasks; ``url_of(full_name)`` is the task's ping_url."""

    def __init__(self, url_of: Callable[[str], str | None], *, timeout: float = PING_TIMEOUT):
        self._url_of = url_of
        self._timeout = timeout
        self._streaks = LogStreaks(logger)
        self._lock = threading.Lock()
        self._pid = -1
        self._queue: queue.Queue[Ping] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None

    def on_event(self, event: Event) -> None:
        """The listener: queue the event's ping, if its task has a URL (never blocks)."""
        url = self._url_of(getattr(event, "task", ""))
        ping = ping_of(event, url) if url else None
        if ping is None:
            return
        self._sender()
        try:
            self._queue.put_nowait(ping)
            self._streaks.ended(ping.task, "ping-queue")
        except queue.Full:
            self._streaks.warn(
                ping.task,
                "ping-queue",
                "dropped",
                "%s: a ping to %s was dropped: %d pings are waiting for the server",
                ping.task,
                _host(ping.url),
                QUEUE_SIZE,
            )

    def _sender(self) -> None:
        """The sender thread, started on the first ping (again in a forked child)."""
        with self._lock:
            if self._pid == os.getpid() and self._thread is not None:
                return
            if self._pid != -1:  # a forked child: the parent's queue and thread are gone
                self._queue = queue.Queue(QUEUE_SIZE)
            else:
                _PINGERS.add(self)
            self._pid = os.getpid()
            self._thread = threading.Thread(
                target=_drain,
                args=(self._queue, weakref.ref(self)),
                name="cronlease-pings",
                daemon=True,
            )
            self._thread.start()

    def send(self, ping: Ping) -> None:
        """One ping, now; a failure is logged (once per streak), never raised."""
        request = urllib.request.Request(
            ping.url,
            data=ping.body,
            method="POST",
            headers={"Content-Type": "text/plain; charset=utf-8", "User-Agent": "cronlease"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
        except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts are OSErrors
            why = f"HTTP {exc.code}" if isinstance(exc, urllib.error.HTTPError) else str(exc)
            self._streaks.warn(
                ping.task,
                "ping",
                "failed to ping",
                "%s: a ping to %s failed: %s; the run is unaffected",
                ping.task,
                _host(ping.url),
                why,
            )
        except Exception:
            logger.exception("%s: a ping to %s failed", ping.task, _host(ping.url))
        else:
            self._streaks.ended(ping.task, "ping")

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the queued pings to go out; True if they did.

        On the queue's own condition, with a deadline — not a helper thread: at exit
        (atexit) Python 3.12.0 and 3.12.1 refuse to start one."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True


def _drain(pings: queue.Queue[Ping], pinger: weakref.ref[Pinger]) -> None:
    """The sender thread: holds the queue, and its pinger only weakly (so a scheduler
    that is gone takes its thread with it, at its next ping)."""
    while True:
        ping = pings.get()
        try:
            sender = pinger()
            if sender is None:
                return
            sender.send(ping)
            del sender
        finally:
            pings.task_done()


# weak: a scheduler that is gone takes its pinger with it; at exit the living ones flush
_PINGERS: weakref.WeakSet[Pinger] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for pinger in list(_PINGERS):
        pinger.flush(PING_TIMEOUT)
