"""Whether a slot's latest attempt gets another one: the policy, pure (docs/design.md §4.11).

The database answers the candidates — per task, the run of the lease row's
current fence and holder when it failed, timed out, or is still ``running``
(or ``abandoned``) with its lease expired — and grants exclusivity; this
module decides, from a candidate and its task alone, whether and when the
next attempt should start:

- **retry** a ``failed`` or ``timed_out`` attempt ``k`` when ``k <= retries``,
  once ``retry_delay * 2**(k-1)`` has passed since it finished, stretched by a
  jitter of up to :data:`JITTER` (stable per slot and attempt, so every
  replica waits alike and one poll's answer is the next one's);
- **recover** a ``running`` or ``abandoned`` attempt whose lease expired (its
  holder died) when ``recover=True``, at once, at most :data:`MAX_RECOVERIES`
  times beyond the retries;
- **never** a manual run (run now), a ``lost`` attempt (it may still be
  running somewhere), or an attempt that could not start before the slot's
  next fire time: a retry must not delay or suppress the next tick.

Times are the database clock's (``db_now``, ``finished_at``, ``expires_at``),
except the next fire time, which is the schedule's instant.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from cronlease._lease.model import AttemptCandidate
from cronlease._lease.outcomes import RECOVERABLE_OUTCOMES, RETRYABLE_OUTCOMES
from cronlease._task import Task
from cronlease._timing.schedule import time_of_slot

__all__ = ["JITTER", "MAX_RECOVERIES", "Plan", "backoff", "jitter_of", "plan"]

#: the largest stretch of a retry's delay: a fleet of tasks failing together
#: (their database went away) does not retry in one burst
JITTER = 0.1
#: recoveries of one slot beyond its retries: a task that takes its replica down
#: every time (out of memory, say) is not run until the next fire time
MAX_RECOVERIES = 3

Why = Literal["retry", "recover"]


@dataclass(frozen=True)
class Plan:
    """The next attempt of a slot: start it at ``due`` (database clock) or later, before
    ``until`` (epoch seconds: the slot's next fire time, None: no next fire time)."""

    why: Why
    attempt: int
    due: float
    until: float | None

    @property
    def recovering(self) -> bool:
        return self.why == "recover"

    def ready(self, db_now: float) -> bool:
        return db_now >= self.due


def backoff(retry_delay: float, attempt: int) -> float:
    """The delay after attempt ``attempt`` failed: ``retry_delay * 2**(attempt-1)``."""
    return float(retry_delay * 2 ** (attempt - 1))


def jitter_of(name: str, slot: int, attempt: int) -> float:
    """A fraction in [0, JITTER), the same for one (task, slot, attempt) everywhere."""
    return random.Random(f"{name}\x00{slot}\x00{attempt}").random() * JITTER


def plan(candidate: AttemptCandidate, task: Task) -> Plan | None:
    """The attempt that should follow ``candidate``, or None if none should."""
    if candidate.manual or candidate.slot < 0:
        return None
    outcome = candidate.outcome
    attempt = candidate.attempt
    if outcome in RETRYABLE_OUTCOMES:
        if attempt > task.retries or candidate.finished_at is None:
            return None
        delay = backoff(task.retry_delay, attempt)
        delay *= 1 + jitter_of(candidate.name, candidate.slot, attempt)
        why: Why = "retry"
        due = candidate.finished_at + delay
    elif outcome in RECOVERABLE_OUTCOMES:
        if not task.recover or attempt > task.retries + MAX_RECOVERIES:
            return None
        if candidate.expires_at >= candidate.db_now:  # its holder may still be alive
            return None
        why, due = "recover", candidate.db_now
    else:  # lost: it may still be running somewhere; succeeded, interrupted, missed: done
        return None
    following = task.schedule.next_fire_time(time_of_slot(candidate.slot))
    until = None if following is None else following.timestamp()
    if until is not None and max(due, candidate.db_now) >= until:
        return None
    return Plan(why, attempt + 1, due, until)
