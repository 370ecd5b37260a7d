"""This replica's membership row, and its view of the fleet (docs/design.md §4.4).

One thread, one role: the member thread upserts this replica's row in
``cronlease_members`` on the store's pool and reads every live row back in
the same round trip. From that read it builds an immutable
:class:`FleetView` that the acquirer reads without a lock. A clean shutdown
deletes the row (:meth:`Membership.stop`); a replica that dies stops
renewing and its row expires.

Each row is a promise: "I renew again by ``expires_at`` - :data:`PAST_PROMISE`"
(database clock). A replica with ticks coming renews at its cohort's *pace*
(:func:`renew_pace`): every :data:`RENEW_SECONDS`, and in a cohort of more
than 16 members every R / :data:`RENEWALS_PER_SECOND` seconds, so that the
cohort renews at most 8 times a second whatever its size (its row lives the
pace and :data:`PAST_PROMISE`); an idle one — nothing of its own due within
:data:`APPROACH_SECONDS` — promises its next renewal :data:`APPROACH_SECONDS`
before its next due instant (:func:`renewal_wait`), sleeps until then, renews,
renews again :data:`LAST_READ_SECONDS` before the instant, and at the pace
from there on. Its cohort declares the same schedules, so every member of it
comes back at the same instants, and a member that died while idle has missed
its promise by the time the survivors read the fleet just before the instant:
its ticks are not left to a dead replica.

The view is an optimisation of who tries a tick first (:mod:`._run.acquisition.rendezvous`);
who runs it is decided by the lease row alone. So every doubt makes the
replica try more, never less:

- no view yet, or none read for :data:`EXPIRE_SECONDS` (the table cannot be
  written, the database is away, the replica is idle between instants):
  :meth:`Membership.view` is None and every tick is tried at once, as every
  replica did before membership existed;
- the view is *unsettled* — its cohort changed within the last pace and
  :data:`PAST_PROMISE` (every member has read the change by then), or a
  member missed the renewal it promised by :data:`RENEW_SECONDS` (at the
  normal pace: not renewed for :data:`OVERDUE_SECONDS`; it may have died) —
  and then every replica checks every tick after a short delay, not only the
  tick's backup.

A replica's *cohort* is the live members whose ``task_set`` (a digest of the
declared tasks' names and schedules, and the cohort's active window:
``digest/8``) equals its own: replicas rank ticks only among members that
declare the same tasks and the same window, so a task declared by some
replicas only (a rolling deploy, a heterogeneous fleet) is never left to a
member that does not run it, and members that would pick different windows
for an instant rank apart (each cohort tries every tick). A row naming no
window (an earlier build's) counts as :data:`LEGACY_WINDOW`, the window that
build used. Within the cohort, a task with roles is ranked
among the members that have one of them (:meth:`FleetView.ranking_for`): the
member row carries the replica's roles.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cronlease._lease.membership import MemberBeat, Members
from cronlease._lease.store import LeaseStore
from cronlease._roles import can_run, encode
from cronlease._run.acquisition.rendezvous import LEGACY_WINDOW, Ranking, active_window
from cronlease._run.replica_log.outage import OutageLog
from cronlease._task import Task
from cronlease.errors import StoreError

__all__ = [
    "APPROACH_SECONDS",
    "EXPIRE_SECONDS",
    "LAST_READ_SECONDS",
    "MAX_IDLE_SECONDS",
    "OVERDUE_SECONDS",
    "PAST_PROMISE",
    "RENEWALS_PER_SECOND",
    "RENEW_SECONDS",
    "FleetView",
    "Membership",
    "cohort_text",
    "digest_text",
    "renew_pace",
    "renewal_wait",
    "task_key",
    "task_set_digest",
]

logger = logging.getLogger("cronlease")

#: how often a replica with ticks coming renews its member row (and reads the others')
#: in a cohort of up to 16 members; in a larger one, see RENEWALS_PER_SECOND
RENEW_SECONDS = 2.0
#: a cohort's members renew at most this many times a second between them: a member of
#: a cohort of R renews every max(RENEW_SECONDS, R / RENEWALS_PER_SECOND) seconds, so the
#: fleet's membership statements stop growing with its size (docs/design.md §4.4)
RENEWALS_PER_SECOND = 8.0
#: how long a member row lives after a renewal at that pace: three renewals, so one
#: slow or failed renewal does not make a live replica look gone
EXPIRE_SECONDS = 3 * RENEW_SECONDS
#: a member whose row was not renewed for this long at that pace (it missed a renewal
#: by a whole period) may have died: until its row expires (or it renews again), every
#: replica checks every tick. Not less: on a loaded host a renewal a second late made
#: 64 replicas check every tick most of the time.
OVERDUE_SECONDS = 2 * RENEW_SECONDS
#: a row lives this long past the renewal it promises (``expires_at`` minus the
#: promised instant): two periods, as at the normal pace; overdue after one of them
PAST_PROMISE = EXPIRE_SECONDS - RENEW_SECONDS
#: an idle replica comes back this long before its next due instant, then renews at
#: the normal pace: a cohort member that died while idle missed the promise of its
#: last row by the survivors' read before the instant by two seconds and more
#: (design §4.4)
APPROACH_SECONDS = EXPIRE_SECONDS
#: an idle replica's last read before an instant, this long before it: a member that
#: died while idle, overdue since APPROACH_SECONDS - RENEW_SECONDS before the instant,
#: is seen by then whatever the pace
LAST_READ_SECONDS = 2.0
#: the longest an idle replica goes without renewing (nothing due for longer)
MAX_IDLE_SECONDS = 60.0


def renew_pace(members: int) -> float:
    """Seconds between the renewals of a member of a cohort of ``members`` with ticks
    coming: :data:`RENEW_SECONDS`, or longer in a cohort so large that the cohort would
    renew more than :data:`RENEWALS_PER_SECOND` times a second."""
    return max(RENEW_SECONDS, members / RENEWALS_PER_SECOND)


def idle_until(now: float, due: float | None) -> bool:
    """Whether a renewal at ``now`` is before the approach of ``due``: the replica is idle."""
    return due is not None and math.isfinite(due) and due - APPROACH_SECONDS - now > 0


def renewal_wait(
    now: float, due: float | None, pace: float = RENEW_SECONDS, *, after_idle: bool = False
) -> float:
    """Seconds until the next renewal, planned at ``now`` (epoch seconds), from ``due``
    (this replica's schedules' earliest next fire time; None if unknown): until the
    approach, :data:`APPROACH_SECONDS` before ``due`` (at most
    :data:`MAX_IDLE_SECONDS`), and one ``pace`` within it — but the first renewal of
    the approach after an idle stretch (``after_idle``) promises the next
    :data:`LAST_READ_SECONDS` before ``due`` if the pace is longer. A renewal before
    the approach never promises a later one than its start, even if that is sooner
    than a pace: a member that dies before the approach is seen overdue before ``due``."""
    if due is None or not math.isfinite(due):
        return pace
    until_approach = due - APPROACH_SECONDS - now
    if until_approach > 0:
        return min(MAX_IDLE_SECONDS, until_approach)
    until_last = due - LAST_READ_SECONDS - now
    if after_idle and until_last > 0.5:
        return min(pace, until_last)
    return pace


def cohort_text(digest: str, window: int) -> str:
    """A member row's ``task_set``: its task-set digest and its cohort's active window."""
    return f"{digest}/{window}"


def _cohort_of(task_set: str) -> str:
    """A member row's ``task_set`` with its window named (none: :data:`LEGACY_WINDOW`)."""
    return task_set if "/" in task_set else cohort_text(task_set, LEGACY_WINDOW)


def task_key(task: Task) -> int:
    """A declared task's part of its replica's task-set digest (name, schedule, roles).

    Roles count: replicas that disagree on who may run a task (mid-deploy) must not rank
    together, or each may leave a tick to one that never fires it. A task without roles
    hashes as before roles existed, so older replicas still share a digest with newer."""
    text = f"{task.full_name}\0{task.schedule.fingerprint}"
    if task.roles:
        text += "\0" + ",".join(task.roles)
    data = text.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def task_set_digest(tasks: Iterable[Task]) -> str:
    """16 hex digits naming a set of declared tasks (full names and schedules), in any
    order: replicas that declare the same tasks have the same digest."""
    combined = 0
    for task in tasks:
        combined ^= task_key(task)
    return digest_text(combined)


def digest_text(combined: int) -> str:
    """The stored form of a task-set digest (the XOR of its tasks' :func:`task_key`)."""
    return f"{combined:016x}"


@dataclass(frozen=True)
class FleetView:
    """One read of the fleet, from this replica's point of view."""

    #: the rendezvous order of the cohort (this replica included)
    ranking: Ranking
    #: False while the cohort changed recently or a member is overdue: every
    #: replica then checks every tick (after a delay), not only its backup
    settled: bool
    #: the cohort's holder ids, sorted
    cohort: tuple[str, ...]
    #: when it was read (monotonic)
    read_at: float
    #: the roles of the cohort's members, by holder id
    roles: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: the renewal pace of the cohort (seconds): the view is fresh for this and
    #: PAST_PROMISE
    pace: float = RENEW_SECONDS
    #: an unsettled view whose only doubt is a recent change settles then (monotonic)
    settles_at: float = math.inf
    # task roles -> the ranking of the members that can run such a task (built lazily:
    # the acquirer thread alone reads a view, so a plain dict)
    _by_roles: dict[tuple[str, ...], Ranking] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def size(self) -> int:
        return self.ranking.size

    def settled_at(self, now: float) -> bool:
        """Whether the view is settled at ``now`` (monotonic): read settled, or its
        recent change is old enough by now (every member has read it)."""
        return self.settled or now >= self.settles_at

    def ranking_for(self, task_roles: tuple[str, ...]) -> Ranking:
        """The rendezvous order among the cohort's members that can run a task with
        ``task_roles``: a tick is never left to a replica that would not run it."""
        if not task_roles:
            return self.ranking
        ranking = self._by_roles.get(task_roles)
        if ranking is None:
            able = [h for h in self.cohort if can_run(task_roles, self.roles.get(h, ()))]
            ranking = self._by_roles[task_roles] = Ranking(
                self.ranking.me, able, self.ranking.window
            )
        return ranking


class Membership:
    """Owns the member thread and the latest :class:`FleetView`."""

    def __init__(
        self,
        store: LeaseStore,
        holder: str,
        outage: OutageLog,
        roles: tuple[str, ...] = (),
        max_workers: int = 16,
    ) -> None:
        self._store = store
        self._max_workers = max_workers
        # how many tasks the replica declares (its window), and the pace of its cohort
        self._tasks: Callable[[], int] = lambda: 0
        self._pace = RENEW_SECONDS
        # whether the last renewal promised the next one at an approach (idle before it)
        self._idle = False
        # a renewal left unanswered starts an outage; one answered ends it (§4.4)
        self._outage = outage
        self._holder = holder
        self._roles = roles
        self._view: FleetView | None = None
        self._previous: tuple[str, ...] | None = None
        self._changed_at = 0.0
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._task_set: Callable[[], str] = lambda: ""
        self._namespace = ""
        self._failing = False
        # this replica's schedules' earliest next fire time (epoch seconds), from the
        # firing layer after each of its passes (None: not known yet)
        self._due: float | None = None
        # when the next renewal is planned (monotonic), and what wakes the thread
        # early: a stop, or a due instant that moved the plan earlier
        self._next_at = 0.0
        self._wake = threading.Event()

    def view(self) -> FleetView | None:
        """The latest view, or None when there is none that is recent (race every tick)."""
        view = self._view
        if view is None or time.monotonic() - view.read_at > view.pace + PAST_PROMISE:
            return None
        return view

    def start(
        self,
        task_set: Callable[[], str],
        namespace: str | None,
        *,
        renew_now: bool = True,
        tasks: Callable[[], int] = lambda: 0,
    ) -> None:
        """Start renewing. With ``renew_now`` the first renewal is made here, on the
        calling thread (``Scheduler.start``): the replica is a member, and knows the
        fleet, when start returns; without (the database did not answer at start),
        the member thread makes it at once. ``task_set`` is the declared tasks' digest
        and ``tasks`` their number (the cohort's active window)."""
        self._task_set = task_set
        self._tasks = tasks
        self._namespace = namespace or ""
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._next_at = time.monotonic()
        if renew_now:
            try:
                self.renew()
            except StoreError as exc:
                logger.debug("fleet membership not renewed at start: %s", exc)
                self._next_at = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="cronlease-member", daemon=True)
        self._thread.start()

    def stop(self) -> threading.Thread | None:
        """Stop renewing and delete this replica's row (on the member thread, which ends
        then); returns the thread, for the shutdown to join within its deadline."""
        self._stopping.set()
        self._wake.set()
        self._view = None
        return self._thread

    def due(self, at: float | None) -> None:
        """This replica's schedules' earliest next fire time is ``at`` (epoch seconds;
        None: no schedule). A renewal is brought forward if the plan it gives is
        earlier than the one made (a task added, a clock step); never put back: the
        row promised it."""
        self._due = at
        if at is None:
            return
        sooner = time.monotonic() + renewal_wait(time.time(), at, self._pace, after_idle=self._idle)
        if sooner < self._next_at - 0.1:
            self._next_at = sooner
            self._wake.set()

    def renew_soon(self) -> None:
        """Renew at once: the tasks this replica fires changed (its row's task set). Sooner
        than the row promised is always allowed."""
        self._next_at = time.monotonic()
        self._wake.set()

    def renew(self) -> FleetView | None:
        """One renewal and read, now (the member thread's step; tests call it too)."""
        # planned before the statement: the row promises the next renewal then
        due = self._due
        now = time.time()
        wait = renewal_wait(now, due, self._pace, after_idle=self._idle)
        window = active_window(self._tasks(), self._max_workers)
        beat = MemberBeat(
            holder=self._holder,
            task_set=cohort_text(self._task_set() or "-", window),
            ttl=wait + PAST_PROMISE,
            namespace=self._namespace,
            roles=encode(self._roles),
        )
        planned = time.monotonic() + wait
        with self._outage.waiting("renewing this replica's fleet membership"):
            members = self._store.fleet.renew([beat])
        self._outage.answered()
        self._next_at = planned
        self._idle = idle_until(now, due)
        if self._due != due:  # it moved during the statement: maybe sooner
            self.due(self._due)
        self._view = self._read(members, beat.task_set)
        return self._view

    def _read(self, members: Members, task_set: str) -> FleetView:
        now = time.monotonic()
        mine = _cohort_of(task_set)
        cohort = [m for m in members.members if _cohort_of(m.task_set) == mine]
        holders = tuple(sorted({m.holder for m in cohort} | {self._holder}))
        if holders != self._previous:
            self._previous, self._changed_at = holders, now
        # the next renewal's pace: this cohort's members renew RENEWALS_PER_SECOND a second
        pace = self._pace = renew_pace(len(holders))
        named = mine.rsplit("/", 1)[1]
        window = int(named) if named.isdigit() else 0  # this replica's own: always digits
        # judged against each member's own promise (its row's expiry less PAST_PROMISE):
        # a member idle until its next due instant is not overdue for renewing rarely;
        # one that missed its promised renewal by a whole period may have died. At the
        # normal pace this is "not renewed for OVERDUE_SECONDS".
        overdue = any(
            m.expires_at - PAST_PROMISE + RENEW_SECONDS < members.db_now
            for m in cohort
            if m.holder != self._holder
        )
        # every member reads the change within one pace: until then (and the lifetime of
        # a row past its promise, for a late renewal) the others' views may differ
        settles_at = self._changed_at + pace + PAST_PROMISE
        settled = not overdue and now >= settles_at
        roles = {m.holder: m.roles for m in cohort}
        roles[self._holder] = frozenset(self._roles)
        return FleetView(
            Ranking(self._holder, holders, window),
            settled,
            holders,
            now,
            roles,
            pace=pace,
            settles_at=math.inf if overdue else settles_at,
        )

    def _loop(self) -> None:
        stopping, wake = self._stopping, self._wake
        while not stopping.is_set():
            wait = self._next_at - time.monotonic()
            if wait > 0:
                wake.wait(wait)
                wake.clear()
                continue  # the plan may have moved (due()), or a stop came
            # a failed renewal is tried again a period later, as before
            self._next_at = time.monotonic() + RENEW_SECONDS
            try:
                self.renew()
            except StoreError as exc:
                # The tick path reports the database's trouble (once per outage, §5.19);
                # here only what it means for the fleet, without repeating the error.
                logger.debug("fleet membership not renewed: %s", exc)
                if not self._failing:
                    logger.info(
                        "cannot renew this replica's fleet membership: until it works, "
                        "it tries every tick at once"
                    )
                    self._failing = True
                continue
            except Exception:  # the thread must live on
                if not self._failing:
                    logger.exception("renewing fleet membership failed unexpectedly")
                    self._failing = True
                continue
            if self._failing:
                logger.info("renewing this replica's fleet membership works again")
                self._failing = False
        try:
            self._store.fleet.leave([self._holder])
        except StoreError as exc:
            logger.debug("could not delete this replica's member row: %s", exc)
        except Exception:
            logger.exception("deleting this replica's member row failed unexpectedly")
