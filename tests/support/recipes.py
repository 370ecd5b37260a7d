"""What the recipe tests add to the examples' schedulers, inside the real server processes.

Environment: ``CRONLEASE_DATABASE_URL`` (the examples read it too) and
``CRONLEASE_TEST_TASK``. :func:`attach` declares an ``every="1s"`` task that
appends its slot to the ledger, and marks each process whose scheduler
handles ticks: the first time a tick reaches a decision in a process (it ran
there, or was skipped because another process took it), that process appends
its pid to the ledger under ``<task>:alive``. A test can thus wait until every
worker's scheduler really works before counting ticks.
"""

from __future__ import annotations

import asyncio
import os
import threading

from cronlease import RunContext, RunStarted, Scheduler, TickSkipped
from tests.support import ledger

_marked: set[int] = set()
_lock = threading.Lock()


def attach(scheduler: Scheduler, *, use_async: bool = False) -> None:
    url = os.environ["CRONLEASE_DATABASE_URL"]
    name = os.environ["CRONLEASE_TEST_TASK"]

    if use_async:

        async def write_ledger_async(ctx: RunContext) -> None:
            # On the application's event loop; the blocking insert goes to a thread.
            await asyncio.to_thread(ledger.append, url, name, ctx.slot)

        scheduler.add_task(write_ledger_async, every="1s", name=name)
    else:

        def write_ledger(ctx: RunContext) -> None:
            ledger.append(url, name, ctx.slot)

        scheduler.add_task(write_ledger, every="1s", name=name)

    def mark_alive(event: RunStarted | TickSkipped) -> None:
        if event.task != name:
            return
        pid = os.getpid()  # per process: a forked child inherits the parent's set
        with _lock:
            if pid in _marked:
                return
            _marked.add(pid)
        ledger.append(url, f"{name}:alive", pid)

    scheduler.listen(mark_alive, RunStarted, TickSkipped)
