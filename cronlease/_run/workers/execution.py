"""Running the task of a won lease (on a worker thread, or the caller's for an inline
run) and naming its outcome.

The task knows nothing of leases beyond its :class:`RunContext`. The outcome
is ``succeeded``, ``failed`` (an exception; its traceback is the error),
``timed_out`` (a shell task's limit), ``interrupted`` (a BaseException such as
KeyboardInterrupt, which propagates after the run is recorded), or ``lost``
when the run could not be sure of its lease by the time it ended, whatever
the task did: its writes may have overlapped a newer run.

A task's ``timeout``: an ``async def`` task is cancelled at it (``timed_out``).
A plain function cannot be stopped — Python has no safe way to kill a
thread — so at the timeout the watchdog (:mod:`cronlease._run.workers.watchdog`)
calls ``on_timeout``, which records the run ``timed_out``, stops renewing
its lease and warns once; the lease then expires within its TTL and another
replica may start the task (ShedLock's ``lockAtMostFor``). The lease is
never released while the call runs, the worker thread stays taken, and this
replica does not start the task again until the call returns; then the
lease is released (fenced, harmless if another replica took it since).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from cronlease._events import EventBus, RunStarted
from cronlease._lease.model import Outcome
from cronlease._run.replica_log.run_lines import log_started, scheduled_text
from cronlease._run.workers.active import SHUTDOWN_ERROR, ActiveRun, ActiveRuns
from cronlease._run.workers.watchdog import Watchdog
from cronlease._shell_task import STDERR_TAIL_HEADER, CommandTask
from cronlease._task import RunContext, Task
from cronlease._timing.schedule import time_of_slot
from cronlease.errors import CommandError, SendError, TaskTimeout

__all__ = ["Ended", "Execution"]

logger = logging.getLogger("cronlease")


@dataclass(eq=False)
class Ended:
    """A run whose task returned, with the outcome to record."""

    run: ActiveRun
    outcome: Outcome
    error: str | None
    duration: float


class Execution:
    """Calls tasks: sync ones in the worker thread, async ones on the app's loop if running."""

    def __init__(
        self,
        active: ActiveRuns,
        events: EventBus,
        loop_getter: Callable[[], asyncio.AbstractEventLoop | None],
        on_timeout: Callable[[ActiveRun], None] = lambda run: None,
    ) -> None:
        self._active = active
        self._events = events
        self._loop_getter = loop_getter
        self._on_timeout = on_timeout
        self._watchdog = Watchdog()

    def execute(self, run: ActiveRun, ended: Callable[[Ended], None]) -> Outcome:
        """Run the task of ``run``; hand the result to ``ended`` (also when interrupted)."""
        task, lease = run.task, run.lease
        run.started = time.monotonic()
        context = RunContext(
            name=task.name,
            slot=lease.slot,
            fence=lease.fence,
            scheduled_for=time_of_slot(lease.slot),
            manual=lease.manual,
            liveness=run.liveness,
            attempt=lease.attempt,
            recovering=run.recovering,
            full_name=task.full_name,
            holder=lease.holder,
        )
        error: str | None = None
        outcome: Outcome = "succeeded"
        if self._events.wants(RunStarted):
            self._events.emit(
                RunStarted(
                    task=task.full_name,
                    slot=lease.slot,
                    fence=lease.fence,
                    manual=lease.manual,
                    attempt=lease.attempt,
                    recovering=run.recovering,
                )
            )
        log_started(task, lease)
        scheduled = scheduled_text(task, lease)
        armed = None
        if task.timeout is not None and not task.is_async:
            armed = self._watchdog.arm(task.timeout, functools.partial(self._on_timeout, run))
        try:
            self._call(task, context)
        except TaskTimeout as exc:
            outcome, error = "timed_out", str(exc)
            logger.warning("%s: tick %s timed out: %s", task.full_name, scheduled, exc)
        except Exception as exc:
            outcome = "failed"
            if run.recorded_as == "interrupted":
                # the shutdown recorded the run and then stopped its command: this end is
                # that stop, said once with the interruption (run_lines.log_interrupted)
                error = str(exc)
            elif isinstance(exc, CommandError) and isinstance(task.func, CommandTask):
                # its message is the whole story (status, stderr tail): cronlease's own
                # frames would only hide "exited with status 3" in history and logs
                error = str(exc)
                said, header, _ = error.partition(STDERR_TAIL_HEADER)
                tail = " (its stderr is logged above)" if header else ""
                logger.error("%s: tick %s failed: %s%s", task.full_name, scheduled, said, tail)
            elif isinstance(exc, SendError):
                # a tick's message the broker did not confirm: the broker's error is the
                # whole story, and the sender says it once per outage, not once per tick
                error = str(exc)
                logger.debug("%s: tick %s failed: %s", task.full_name, scheduled, error)
            else:  # a Python task's own CommandError keeps its traceback
                error = "".join(traceback.format_exception(exc)).strip()
                logger.exception("%s: tick %s failed", task.full_name, scheduled)
        except BaseException:
            outcome, error = "interrupted", "the replica was interrupted during the run"
            raise
        finally:
            if armed is not None:
                self._watchdog.disarm(armed)
            recorded = self._active.returned(run)
            self._active.stop_renewing(run)
            if recorded == "timed_out":
                took = time.monotonic() - run.started
                summary = f"the task {outcome}" + (f": {error}" if error else "")
                outcome = "timed_out"
                error = f"returned after {took:.3f} s, past its timeout of {task.timeout} s; "
                error += summary
            elif recorded == "interrupted":
                outcome, error = "interrupted", SHUTDOWN_ERROR
            elif run.liveness.lost:
                summary = f"the task {outcome}" + (f": {error}" if error else "")
                outcome, error = "lost", f"lease lost during the run; {summary}"
            ended(Ended(run, outcome, error, time.monotonic() - run.started))
        return outcome

    def _call(self, task: Task, context: RunContext) -> None:
        args, kwargs = task.call_arguments(context)
        if not task.is_async:
            task.func(*args, **kwargs)
            return
        coroutine = _bounded(task.func(*args, **kwargs), task.timeout)
        loop = self._loop_getter()
        if loop is not None and loop.is_running():
            # On the application's loop; this worker thread just waits for it.
            asyncio.run_coroutine_threadsafe(coroutine, loop).result()
        else:
            asyncio.run(coroutine)


async def _bounded(coroutine: Coroutine[Any, Any, Any], timeout: float | None) -> None:
    """Await ``coroutine``, cancelled at ``timeout`` (TaskTimeout)."""
    if timeout is None:
        await coroutine
        return
    try:
        await asyncio.wait_for(coroutine, timeout)
    except asyncio.TimeoutError:
        raise TaskTimeout(f"cancelled after its timeout of {timeout:g} s") from None
