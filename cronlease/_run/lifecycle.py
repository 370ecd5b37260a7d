"""Stopping a replica in order, within one deadline (docs/design.md §4.10).

1. Stop accepting: ticks still queued are skipped as ``shutdown``, catch-up
   stops between rounds, no lease is taken from here on.
2. Stop APScheduler; join the acquirer, the catch-up thread and the attempt
   poll, so every run they won is registered (and on the worker pool) before
   anyone counts them.
3. Wait for runs in progress (``wait``), each recorded and released as usual.
4. Runs still executing then are *not* interrupted: the process may live on,
   so each keeps renewing its lease until its task really returns, and is
   recorded with its real outcome then. (A process that exits first kills
   them: :func:`interrupt_at_exit` records them ``interrupted`` and leaves
   their leases to expire.) Unless the process exits as soon as the replica
   stopped (:class:`~cronlease._run.stopping.ExitAfterStop`, ``cronlease run``):
   then the stop records them ``interrupted`` itself, terminates their
   commands and waits a little for those to end, so the log tells one story
   in the order it happens and ends with "replica stopped".
5. The finisher writes what is queued; the side thread stops; the heartbeat
   thread stops once the last run has ended.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from cronlease._run.housekeeping.attempt_poll import AttemptPoll
from cronlease._run.replica_log.run_lines import log_interrupted
from cronlease._run.runner import TickRunner
from cronlease._run.startup import CatchUp
from cronlease._run.stopping import Deadline, ExitAfterStop
from cronlease._run.timer.fire import Firing
from cronlease._run.workers.active import ActiveRun
from cronlease._shell_task import CommandTask, terminate_running

__all__ = ["interrupt_at_exit", "stop_replica"]

logger = logging.getLogger("cronlease")


def stop_replica(
    runner: TickRunner,
    firing: Firing,
    catch_ups: Sequence[CatchUp],
    deadline: Deadline,
    *,
    wait: bool,
    attempts: AttemptPoll | None = None,
) -> list[str]:
    """Steps 1-5 above; returns the full names of the tasks still running after it."""
    runner.stop_accepting()
    firing.shutdown(deadline)
    for catch_up in catch_ups:
        deadline.join(catch_up.thread, "the catch-up's last round")
    if attempts is not None:
        deadline.join(attempts.stop(), "the attempt poll's last pass")
    firing.close_pool()  # after everything that dispatches to it
    if wait:
        deadline.wait(runner.wait_idle, lambda: _runs_to_end(runner.running))
    still = runner.running
    plan = runner.exit_after_stop
    if still and plan is not None:
        deadline = _end_for_exit(runner, plan)
    elif still:
        logger.warning(
            "%s still running after shutdown: %s; each keeps renewing its lease until "
            "it returns and is recorded then (if the process exits first, the run is recorded "
            "interrupted and its lease expires within its TTL)",
            _runs(len(still)),
            ", ".join(still),
        )
    runner.close(deadline)
    return still


def _runs(count: int) -> str:
    return f"{count} run{'' if count == 1 else 's'}"


def _runs_to_end(names: Sequence[str]) -> str:
    return f"{_runs(len(names))} in progress ({', '.join(names)}) to end"


#: the least the end of an exiting stop waits for commands and the last write together
_CLOSE_SECONDS = 0.5
#: how long a command's run takes to end after SIGKILL (its thread reaps it at once)
_KILLED_SECONDS = 1.0
#: why a command is terminated at the end of the stop (the task's own log line says it)
_EXIT_REASON = "the replica stops past its grace period"


def _end_for_exit(runner: TickRunner, plan: ExitAfterStop) -> Deadline:
    """The process exits next and what still runs dies with it: record those runs
    interrupted (their leases left to expire), terminate their commands and wait up to
    ``plan.command_seconds`` for them to end (SIGKILL then; at once when hurried). A run
    whose task returns is said by the recorder; one still going, here. Returns the
    deadline the rest of the stop waits within."""
    runs = runner.interrupt_running()
    commands = {run.task.full_name for run in runs if isinstance(run.task.func, CommandTask)}
    # the last write (the finisher's) needs a moment too, even when no command runs
    deadline = Deadline(max(plan.command_seconds, _CLOSE_SECONDS), hurried=plan.hurried)
    if commands:
        killed = deadline.hurried  # asked again: SIGKILL at once, no wait for SIGTERM's end
        terminate_running(_EXIT_REASON, kill=killed)
        names = sorted(commands)
        what = f"{len(names)} command{'' if len(names) == 1 else 's'} ({', '.join(names)})"
        if not killed and not deadline.wait(
            lambda wait: runner.wait_ended(commands, wait), f"{what} to exit on SIGTERM"
        ):
            terminate_running(_EXIT_REASON, kill=True)
            logger.warning("shutdown: sent SIGKILL to %s", what)
            killed = True
        if killed:  # the runs end as soon as their threads reap the commands: said ended
            runner.wait_ended(commands, _KILLED_SECONDS)
    _say_left_behind(runs)
    return deadline


def _say_left_behind(runs: Sequence[ActiveRun]) -> None:
    """The runs of ``runs`` whose task has not returned: the process exits without them."""
    now = time.monotonic()
    for run in runs:
        if not run.returned:
            log_interrupted(run.task, run.lease, now - run.started, ended=False)


def interrupt_at_exit(runner: TickRunner) -> None:
    """The process is exiting with runs still going: their threads die with it, so record
    them ``interrupted`` now and leave their leases to expire (never released while the
    task executes)."""
    if runner.running:
        _say_left_behind(runner.interrupt_running())
