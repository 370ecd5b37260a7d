"""The worker pool's threads across starts: a shutdown closes its own start's threads only."""

from __future__ import annotations

import threading

from cronlease._run.workers.pool import WorkerPool


def names_of_runs(pool: WorkerPool, count: int) -> list[str]:
    names: list[str] = []
    done = threading.Semaphore(0)

    def work() -> None:
        names.append(threading.current_thread().name)
        done.release()

    for _ in range(count):
        pool.submit(work)
    for _ in range(count):
        assert done.acquire(timeout=10), "a submitted run never ran"
    return names


def test_a_shutdown_overlapping_the_next_start_leaves_the_new_threads_open() -> None:
    pool = WorkerPool(2)
    close_first = pool.open()
    assert names_of_runs(pool, 1) == ["cronlease-worker-1"]
    pool.open()  # the next start, before the first one's shutdown closed its threads
    close_first()
    names = names_of_runs(pool, 3)
    assert all(not name.endswith("-late") for name in names), names


def test_work_submitted_after_the_close_still_runs_on_a_thread_of_its_own() -> None:
    pool = WorkerPool(1)
    close = pool.open()
    close()
    assert names_of_runs(pool, 1) == ["cronlease-worker-late"]
