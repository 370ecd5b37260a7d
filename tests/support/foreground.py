"""The end of every replica script: ``run_forever()``, saying ``started`` once it runs."""

from __future__ import annotations

import threading

from cronlease import Scheduler


def run_forever_announced(scheduler: Scheduler) -> None:
    """``scheduler.run_forever()``, printing ``started`` (the line ``Proc.expect`` waits
    for) from a thread of its own once the scheduler runs."""

    def announce() -> None:
        while not scheduler.running:
            threading.Event().wait(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    scheduler.run_forever()
