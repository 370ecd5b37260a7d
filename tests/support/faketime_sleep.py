"""``time.sleep`` that works under libfaketime, for the replicas whose wall clock it fakes.

Under libfaketime 0.9.10 with ``DONT_FAKE_MONOTONIC`` (the clock-skew and
clock-step tests keep the real monotonic clock), ``time.sleep`` fails at once
with EINVAL: CPython sleeps with ``clock_nanosleep`` on the monotonic clock
with an absolute deadline, which the preload's wrapper mangles. A timed wait
(``threading.Event.wait``) goes through another call and works. A real host's
sleep works, so the preload's flaw is kept out of what those tests measure:
otherwise a retry that pauses (the SQLite WAL switch, table creation) raised
in the faked replica, once in a while, and cost it a tick.
"""

from __future__ import annotations

import os
import threading
import time


def _wait(seconds: float) -> None:
    threading.Event().wait(seconds)


def install() -> None:
    """Replace ``time.sleep`` in this process if libfaketime is preloaded into it."""
    if "faketime" in os.environ.get("LD_PRELOAD", ""):
        time.sleep = _wait
