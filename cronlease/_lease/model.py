"""Values passed between the scheduler and the lease store, checked where they are made."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

from cronlease._lease.names import invisible_character, normal_form, quoted
from cronlease._lease.outcomes import FINAL_OUTCOMES, Outcome
from cronlease._lease.schema import (
    MAX_ERROR_LENGTH,
    MAX_FINGERPRINT_LENGTH,
    MAX_HOLDER_LENGTH,
    MAX_NAME_LENGTH,
)
from cronlease.errors import ConfigError

__all__ = [
    "FINAL_OUTCOMES",
    "AcquireRequest",
    "AttemptCandidate",
    "AttemptRequest",
    "FinishRequest",
    "Lease",
    "LeaseInfo",
    "LeaseState",
    "Outcome",
    "Refusal",
    "RunRecord",
    "check_task_name",
    "storable_error",
]

MAX_TTL_SECONDS = 86400.0
# room in the holder column for '#' and the per-attempt nonce (16 hex digits)
MAX_HOLDER_ID_LENGTH = MAX_HOLDER_LENGTH - 17


def check_task_name(name: object) -> str:
    """``name`` as stored (NFC, :mod:`cronlease._lease.names`); ConfigError if it cannot be
    a task name. Callers keep the returned form: it is the one compared and stored."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a task name must be a non-empty string, got {name!r}")
    name = normal_form(name)
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(
            f"task name {name[:40]!r}... is {len(name)} characters long; "
            f"at most {MAX_NAME_LENGTH} fit (namespace included)"
        )
    if name != name.strip():
        # MySQL ignores trailing spaces when comparing: 'a' and 'a ' would share a lease.
        raise ConfigError(f"task name {name!r} must not start or end with white space")
    invisible = invisible_character(name)
    if invisible is not None:
        # names that look alike, or one that shows as another, would be two tasks
        raise ConfigError(
            f"task name {quoted(name)} must not contain control characters or other invisible "
            f"ones ({invisible})"
        )
    return name


def storable_error(text: str | None) -> str | None:
    """An error text every backend stores as it is: NUL characters (PostgreSQL text
    cannot hold them) and lone surrogates (not UTF-8) escaped, bounded to what the
    history table keeps, keeping its end (where a traceback names the error)."""
    if text is None:
        return None
    if "\x00" in text or not text.isascii():
        text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= MAX_ERROR_LENGTH:
        return text
    return "..." + text[-(MAX_ERROR_LENGTH - 3) :]


@dataclass(frozen=True)
class AcquireRequest:
    """One attempt to take a task's lease for one slot.

    ``holder`` is the replica's holder id; the store appends a fresh nonce per
    attempt. ``tolerance`` is how far (seconds) the slot may lie ahead of the
    database clock. A ``manual`` request (run now) ignores and keeps the slot
    cursor; its ``slot`` only identifies the run in history.
    """

    name: str
    slot: int
    ttl: float
    holder: str
    tolerance: float = 0.0
    fingerprint: str | None = None
    manual: bool = False

    def __post_init__(self) -> None:
        check_task_name(self.name)
        if isinstance(self.slot, bool) or not isinstance(self.slot, int) or self.slot < 0:
            raise ConfigError(f"slot must be a non-negative integer, got {self.slot!r}")
        if not (0 < self.ttl <= MAX_TTL_SECONDS) or math.isnan(self.ttl):
            raise ConfigError(
                f"lease ttl must be in (0, {MAX_TTL_SECONDS:g}] seconds, got {self.ttl!r}"
            )
        if not self.tolerance >= 0:
            raise ConfigError(f"tolerance must not be negative, got {self.tolerance!r}")
        if self.fingerprint is not None and len(self.fingerprint) > MAX_FINGERPRINT_LENGTH:
            raise ConfigError(
                f"schedule fingerprint must have at most {MAX_FINGERPRINT_LENGTH} characters, "
                f"got {len(self.fingerprint)}"
            )
        if not self.holder or len(self.holder) > MAX_HOLDER_ID_LENGTH:
            raise ConfigError(
                f"holder id must have 1 to {MAX_HOLDER_ID_LENGTH} characters, got {self.holder!r}"
            )


@dataclass(frozen=True)
class AttemptRequest:
    """One more attempt at a scheduled slot (a retry or a recovery), after the attempt
    whose fence was ``after_fence``.

    Granted iff the lease row still carries ``after_fence`` and ``slot``, is not
    paused and its lease is free: a compare-and-swap on the fence, so a newer
    tick or another replica's attempt that won meanwhile refuses it (``taken``).
    With ``recovering``, the previous attempt's run row, if still ``running``,
    is marked ``abandoned`` in the same transaction. Whether an attempt should
    follow at all is the caller's decision.
    """

    name: str
    slot: int
    after_fence: int
    attempt: int
    ttl: float
    holder: str
    recovering: bool = False

    def __post_init__(self) -> None:
        check_task_name(self.name)
        if isinstance(self.slot, bool) or not isinstance(self.slot, int) or self.slot < 0:
            raise ConfigError(f"slot must be a non-negative integer, got {self.slot!r}")
        if (
            isinstance(self.after_fence, bool)
            or not isinstance(self.after_fence, int)
            or self.after_fence < 1
        ):
            raise ConfigError(
                f"after_fence must be the fence of an earlier attempt (>= 1), "
                f"got {self.after_fence!r}"
            )
        if isinstance(self.attempt, bool) or not isinstance(self.attempt, int) or self.attempt < 2:
            raise ConfigError(
                f"a further attempt is numbered 2 or more (1 is the tick's own), "
                f"got {self.attempt!r}"
            )
        if not (0 < self.ttl <= MAX_TTL_SECONDS) or math.isnan(self.ttl):
            raise ConfigError(
                f"lease ttl must be in (0, {MAX_TTL_SECONDS:g}] seconds, got {self.ttl!r}"
            )
        if not self.holder or len(self.holder) > MAX_HOLDER_ID_LENGTH:
            raise ConfigError(
                f"holder id must have 1 to {MAX_HOLDER_ID_LENGTH} characters, got {self.holder!r}"
            )


@dataclass(frozen=True)
class Lease:
    """A lease this replica holds: proof that it owns ``slot`` with ``fence``."""

    name: str
    slot: int
    fence: int
    holder: str  # the holder id with this attempt's nonce
    ttl: float
    manual: bool = False
    # monotonic time just before the acquire was sent: the lease is ours at most ttl after it
    sent_at: float = field(default_factory=time.monotonic)
    #: 1 for the tick's own run, 2, 3, ... for the attempts that followed it
    attempt: int = field(default=1, kw_only=True)


@dataclass(frozen=True)
class FinishRequest:
    """One run's outcome to record (and, with ``release``, its lease to free)."""

    name: str
    slot: int
    manual: bool
    fence: int
    outcome: Outcome
    error: str | None
    release: bool = True
    #: the attempt's holder with its nonce: a fence alone can be issued twice when
    #: the database loses writes, a nonce cannot (docs/design.md §3.8)
    holder: str = field(kw_only=True)

    def __post_init__(self) -> None:
        if self.outcome not in FINAL_OUTCOMES:
            raise ValueError(f"a finished run's outcome is one of {sorted(FINAL_OUTCOMES)}")
        if not self.holder:
            raise ValueError("a finish names the holder of the attempt it finishes")

    @classmethod
    def of(
        cls, lease: Lease, outcome: Outcome, error: str | None, *, release: bool = True
    ) -> FinishRequest:
        """The finish of ``lease``'s run, its error text cut to the column's bound."""
        return cls(
            name=lease.name,
            slot=lease.slot,
            manual=lease.manual,
            fence=lease.fence,
            outcome=outcome,
            error=storable_error(error),
            release=release,
            holder=lease.holder,
        )


@dataclass(frozen=True)
class LeaseInfo:
    """A lease row as the database has it (database-clock epoch seconds)."""

    name: str
    holder: str
    fence: int
    slot: int
    acquired_at: float
    expires_at: float
    paused: bool
    fingerprint: str | None

    def held(self, db_now: float) -> bool:
        """Whether a run holds the lease at ``db_now`` (a row made by pause never did)."""
        return self.fence > 0 and self.expires_at > db_now

    def state(self, db_now: float | None) -> str:
        """``paused``, ``running`` (held at ``db_now``) or ``idle``."""
        if self.paused:
            return "paused"
        return "running" if db_now is not None and self.held(db_now) else "idle"


@dataclass(frozen=True)
class RunRecord:
    """One row of run history (database-clock epoch seconds)."""

    name: str
    slot: int
    manual: bool
    fence: int
    holder: str
    scheduled_for: float
    started_at: float
    finished_at: float | None
    outcome: Outcome
    error: str | None
    #: 1 for the tick's own run, 2, 3, ... for its retries and recoveries
    attempt: int = 1

    @property
    def duration(self) -> float | None:
        if self.finished_at is None:
            return None
        return max(0.0, self.finished_at - self.started_at)


@dataclass(frozen=True)
class AttemptCandidate:
    """The latest attempt of a task, as the database has it: the run row of the lease
    row's current fence and holder (database-clock epoch seconds).

    ``failed`` / ``timed_out``: a retry may follow; ``running`` / ``abandoned``
    (only ever listed once the lease expired): its holder died, a recovery may follow.
    """

    name: str
    slot: int
    manual: bool
    fence: int
    attempt: int
    outcome: Outcome
    finished_at: float | None
    #: the lease row's expiry
    expires_at: float
    db_now: float


@dataclass(frozen=True)
class LeaseState:
    """The lease row as a refused acquisition saw it, with the database clock then."""

    slot: int
    expires_at: float
    paused: bool
    db_now: float
    #: the row's fence (what a replica remembers to notice a database that went back)
    fence: int = 0


RefusalReason = Literal["paused", "taken", "held", "future", "contended"]


@dataclass(frozen=True)
class Refusal:
    """Why an acquisition did not take the lease. Not an error: a normal outcome.

    - ``taken``: this slot (or a later one) was already acquired — ran or runs elsewhere
    - ``held``: an older slot's lease is still unexpired; ``expires_in`` says for how long
    - ``paused``: the task is paused fleet-wide
    - ``future``: the slot lies ahead of the database clock by more than the tolerance
    - ``contended``: another replica won between the statement's read and its write
    """

    reason: RefusalReason
    expires_in: float | None = None

    def __bool__(self) -> bool:
        # ``if store.acquire(request):`` must not read a refusal as a win
        return False

    @classmethod
    def explain(cls, request: AcquireRequest, state: LeaseState | None) -> Refusal:
        if state is None:
            # No row, so no database time: judge the future gate by this host's clock.
            if not request.manual and request.slot / 1000.0 > time.time() + request.tolerance:
                return cls("future")
            return cls("contended")
        if state.paused:
            return cls("paused")
        if not request.manual and state.slot >= request.slot:
            return cls("taken")
        if state.expires_at >= state.db_now:
            return cls("held", expires_in=state.expires_at - state.db_now)
        if not request.manual and request.slot / 1000.0 > state.db_now + request.tolerance:
            return cls("future")
        return cls("contended")
