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
   their leases to expire.)
5. The finisher writes what is queued; the side thread stops; the heartbeat
   thread stops once the last run has ended.
"""

from __future__ import annotations

import logging

from cronlease._run.housekeeping.attempt_poll import AttemptPoll
from cronlease._run.runner import TickRunner
from cronlease._run.startup import CatchUp
from cronlease._run.stopping import Deadline
from cronlease._run.timer.fire import Firing

__all__ = ["interrupt_at_exit", "stop_replica"]

logger = logging.getLogger("cronlease")


def stop_replica(
    runner: TickRunner,
    firing: Firing,
    catch_up: CatchUp | None,
    deadline: Deadline,
    *,
    wait: bool,
    attempts: AttemptPoll | None = None,
) -> list[str]:
    """Steps 1-5 above; returns the full names of the tasks still running after it."""
    runner.stop_accepting()
    firing.shutdown(deadline)
    if catch_up is not None:
        deadline.join(catch_up.thread, "the catch-up's last round")
    if attempts is not None:
        deadline.join(attempts.stop(), "the attempt poll's last pass")
    firing.close_pool()  # after everything that dispatches to it
    if wait:
        running = runner.running
        deadline.wait(runner.wait_idle, f"{len(running)} running task(s): {', '.join(running)}")
    still = runner.running
    if still:
        logger.warning(
            "%d task(s) still running after shutdown: %s; each keeps renewing its lease until "
            "it returns and is recorded then (if the process exits first, the run is recorded "
            "interrupted and its lease expires within its TTL)",
            len(still),
            ", ".join(still),
        )
    runner.close(deadline)
    return still


def interrupt_at_exit(runner: TickRunner) -> None:
    """The process is exiting with runs still going: their threads die with it, so record
    them ``interrupted`` now and leave their leases to expire (never released while the
    task executes)."""
    if runner.running:
        runner.interrupt_running()
