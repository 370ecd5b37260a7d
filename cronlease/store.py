"""The lease store, for code that reads or writes cronlease's tables without a scheduler.

:class:`LeaseStore` is what the status page reads when it is given a database
instead of a scheduler (``wsgi_app(LeaseStore.from_url(url), tasks=...)``), and
what a test or a script opens to look at the rows: ``leases()``, ``history()``,
``pause()``, ``resume()``, ``forget()``, ``create_tables()``. The other names
here are the values its methods take and return: the rows
(:class:`LeaseInfo`, :class:`RunRecord`), a held lease (:class:`Lease`) or why
one was refused (:class:`Refusal`), and the requests a scheduler makes
(:class:`AcquireRequest`, :class:`AttemptRequest`, :class:`AttemptCandidate`,
:class:`FinishRequest`). A replica never needs them: a :class:`~cronlease.Scheduler`
opens its own store (``scheduler.store``).
"""

from __future__ import annotations

from cronlease._lease.model import (
    AcquireRequest,
    AttemptCandidate,
    AttemptRequest,
    FinishRequest,
    Lease,
    LeaseInfo,
    LeaseState,
    Outcome,
    Refusal,
    RunRecord,
)
from cronlease._lease.store import LeaseStore

__all__ = [
    "AcquireRequest",
    "AttemptCandidate",
    "AttemptRequest",
    "FinishRequest",
    "Lease",
    "LeaseInfo",
    "LeaseState",
    "LeaseStore",
    "Outcome",
    "Refusal",
    "RunRecord",
]
