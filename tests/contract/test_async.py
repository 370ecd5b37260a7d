"""async def tasks run on the application's event loop; lease I/O stays off it."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cronlease import RunContext, RunStarted, Scheduler
from tests.support.procs import wait_for

pytestmark = pytest.mark.slow  # each waits for real ticks


def test_async_tasks_run_on_the_loop_that_started_the_scheduler(
    db_url: str, task_name: str
) -> None:
    seen: list[tuple[asyncio.AbstractEventLoop, int]] = []
    lease_threads: set[int] = set()
    loop_thread = threading.get_ident()

    async def app() -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        scheduler = Scheduler(db_url)
        # RunStarted is emitted where the lease was just taken
        scheduler.listen(lambda _event: lease_threads.add(threading.get_ident()), RunStarted)

        @scheduler.task(every="1s", name=task_name)
        async def on_the_loop(ctx: RunContext) -> None:
            seen.append((asyncio.get_running_loop(), ctx.slot))
            await asyncio.sleep(0)

        scheduler.start()  # as a FastAPI lifespan would, from inside the loop
        try:
            deadline = time.monotonic() + 20
            while len(seen) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        finally:
            await asyncio.to_thread(scheduler.shutdown)
        return loop

    loop = asyncio.run(app())
    assert len(seen) >= 3
    assert all(run_loop is loop for run_loop, _ in seen)
    assert len({slot for _, slot in seen}) == len(seen)
    # Leases were taken on worker threads, never on the loop's thread.
    assert lease_threads and loop_thread not in lease_threads


def test_async_task_without_a_running_loop_gets_its_own(db_url: str, task_name: str) -> None:
    threads: list[str] = []
    scheduler = Scheduler(db_url)

    @scheduler.task(every="1s", name=task_name)
    async def anywhere() -> None:
        threads.append(threading.current_thread().name)

    with scheduler:
        wait_for(lambda: len(threads) >= 2, 20, "two runs")
    assert len(threads) >= 2 and all(name.startswith("cronlease-worker") for name in threads)
