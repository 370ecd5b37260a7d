"""The values the tick path hands on: a fired tick, its timing, what a batch decided.

A tick's kind decides which per-tick rules apply to it (docs/design.md §4):

============  =====  =======  ===========  ==========
kind          grace  overlap  late pickup  rendezvous
============  =====  =======  ===========  ==========
scheduled     yes    yes      yes          yes
catch_up      no     yes      no           no
retry         no     yes      yes          no
attempt       no     yes      no           no
manual        no     no       no           no
============  =====  =======  ===========  ==========

*Rendezvous* (docs/design.md §4.4): a scheduled tick this replica is not the
preferred replica of is tried a little later, read-only check first; such a
tick is ``checked``.

A ``retry`` is the late pickup of a scheduled tick: tried again when the
lease an older run still held expires, and again if it was renewed meanwhile,
always within the scheduled tick's grace (its deadline: late pickups of a
retry, and the check of a lease won too late, use it; the admission grace
check does not). An ``attempt`` is the second or a later attempt at a slot
(a retry of a failed run, the recovery of a dead one:
:mod:`cronlease._run.recording.attempts`), made by the attempt poll
(:mod:`cronlease._run.housekeeping.attempt_poll`); it carries the attempt it follows
(:class:`Follows`), is acquired by a compare-and-swap on that attempt's
fence, and its deadline is the slot's next fire time. A ``manual`` tick (run
now) is decided by the lease alone, never consumes a scheduled slot and
never delays or overlaps a scheduled tick on this replica as ``overlap``. A
tick dispatched to the worker pool takes a worker slot
(:mod:`cronlease._run.workers.pool`); an inline one does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

from cronlease._lease.model import Outcome
from cronlease._task import Task

__all__ = ["Decision", "Follows", "Tick", "TickKind", "Timing"]

TickKind = Literal["scheduled", "catch_up", "retry", "attempt", "manual"]


class Follows(NamedTuple):
    """What an ``attempt`` tick follows: the fence of the slot's previous attempt, this
    attempt's number, whether its holder died, and the epoch time it must start before
    (the slot's next fire time; None: the schedule has no next one)."""

    after_fence: int
    attempt: int
    recovering: bool
    until: float | None


class Tick(NamedTuple):
    """One fired tick of a task, at the fire time APScheduler computed (a named
    tuple: one is made per task per tick)."""

    task: Task
    fire_time: datetime
    kind: TickKind = "scheduled"
    #: only for an ``attempt`` tick
    follows: Follows | None = None
    #: a scheduled tick tried after the rendezvous delay: its slot cursor is read
    #: first, and a slot already taken costs no acquisition
    checked: bool = False


class Timing(NamedTuple):
    """What a fire time means for every task of one schedule: computed once per batch."""

    slot: int
    lateness: float
    ttl: float
    grace: float
    tolerance: float


@dataclass
class Decision:
    """What one pass down the tick path decided for ticks that fell due together."""

    #: the winners' runs when no dispatcher was given: call each once (on a worker
    #: thread, or the caller's for an inline run); it runs the task, records the
    #: outcome and returns it
    runs: list[Callable[[], Outcome]] = field(default_factory=list)
    #: late pickups: (monotonic time to try at, the retry tick)
    retries: list[tuple[float, Tick]] = field(default_factory=list)
    #: ticks this replica had no free worker for, not sent to the database (so
    #: another replica may take them): (epoch deadline, or None, the tick); only
    #: when the caller asked to wait for capacity, else they were skipped
    starved: list[tuple[float | None, Tick]] = field(default_factory=list)
