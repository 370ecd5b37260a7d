"""A foreground replica (``Scheduler.run_forever``) that sends itself SIGTERM at a chosen
moment, so the signal lands where a real one lands only by bad luck.

``python -m tests.support.signalled_replica URL TASK WHERE``; WHERE is

- ``stop-wait``: as the main thread, inside ``run_forever`` after ``start()``
  returned, enters ``threading.Condition.wait``: it holds that condition's lock
  there (Python requires it), and the handler runs on the main thread while it
  does — a handler that took the same lock waited for itself, for ever;
- ``start``: as ``run_forever`` calls ``start()``: a stop asked for before
  ``start()`` cleared the last stop request was forgotten.

A ``sys.settrace`` hook on the main thread finds the moment and calls
``os.kill``. Prints ``signalled`` when it sent the signal and ``exited`` when
``run_forever`` returned.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from cronlease import RunContext, Scheduler


def inside(frame: FrameType | None, name: str) -> bool:
    while frame is not None:
        if frame.f_code.co_name == name:
            return True
        frame = frame.f_back
    return False


def main() -> None:
    url, task_name, where = sys.argv[1:4]
    logging.basicConfig(level=logging.INFO)  # "received SIGTERM, shutting down" on stderr
    scheduler = Scheduler(url, shutdown_grace=10)

    @scheduler.task(every="1s", name=task_name)
    def tick(ctx: RunContext) -> None:
        pass  # a replica with work to do; its output is the script's lines only

    started = False
    start = scheduler.start

    def start_then_mark() -> None:
        nonlocal started
        start()
        started = True

    scheduler.start = start_then_mark  # type: ignore[method-assign]
    sent = False

    def moment(frame: FrameType, event: str) -> bool:
        if event != "call":
            return False
        code = frame.f_code
        if where == "start":
            return code.co_name == "start_then_mark"
        return (
            started
            and code.co_name == "wait"
            and code.co_filename == threading.__file__
            and "Condition" in type(frame.f_locals.get("self")).__name__
            and inside(frame, "run_forever")
        )

    def trace(frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal sent
        if not sent and moment(frame, event):
            sent = True
            print("signalled", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)

    sys.settrace(trace)
    scheduler.run_forever()
    sys.settrace(None)
    print("exited", flush=True)


if __name__ == "__main__":
    main()
