"""Run history with attempts and abandoned runs, written through the store's own statements.

For the surfaces' tests: what ``cronlease history``, ``status``, the page and
the metrics show must be what the store recorded, so the rows are made the
way the runtime makes them (acquire, reacquire_many, finish), not inserted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from cronlease._lease.model import AcquireRequest, AttemptRequest, Lease, Outcome
from cronlease._lease.store import LeaseStore
from tests.support.leases import set_lease_end, won


def past_slot(seconds_ago: float) -> int:
    """A scheduled slot (ms since the epoch) ``seconds_ago`` before now."""
    return int((time.time() - seconds_ago) * 1000)


def record_attempts(
    store: LeaseStore, name: str, slot: int, outcomes: Sequence[Outcome], *, ttl: float = 30
) -> list[Lease]:
    """Attempts 1, 2, ... of ``slot``, one after another, each finished with its outcome:
    the first acquired as a tick is, the others through ``reacquire_many``."""
    first = won(store.acquire(AcquireRequest(name=name, slot=slot, ttl=ttl, holder="replica-a")))
    assert first is not None, "the first attempt was refused"
    attempts = [first]
    store.finish(first, outcomes[0], None if outcomes[0] == "succeeded" else "attempt 1 failed")
    for number, outcome in enumerate(outcomes[1:], start=2):
        request = AttemptRequest(
            name=name,
            slot=slot,
            after_fence=attempts[-1].fence,
            attempt=number,
            ttl=ttl,
            holder=f"replica-{'abc'[number % 3]}",
            recovering=False,
        )
        (result,) = store.reacquire_many([request])
        lease = won(result)
        assert lease is not None, f"attempt {number} was refused: {result}"
        error = None if outcome == "succeeded" else f"attempt {number} failed"
        store.finish(lease, outcome, error)
        attempts.append(lease)
    return attempts


def abandon_runs(store: LeaseStore, name: str, count: int, *, first_slot: int) -> None:
    """``count`` runs of ``name`` left ``running`` by a holder that died, each marked
    ``abandoned`` by the next acquisition's sweep; the last acquisition's run succeeds."""
    for index in range(count + 1):
        request = AcquireRequest(name=name, slot=first_slot + index, ttl=30, holder=f"dead-{index}")
        lease = won(store.acquire(request))
        assert lease is not None, f"acquisition {index} was refused"
        if index < count:
            # its holder stopped renewing: the lease ended a minute ago
            set_lease_end(store, name, time.time() - 60)
        else:
            store.finish(lease, "succeeded")
