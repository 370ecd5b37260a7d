"""A further attempt's outcome, from the lease row read back in its transaction.

The store's half of :meth:`cronlease.LeaseStore.reacquire_many`: the
statements (:mod:`cronlease._lease.dialects.attempts`) say what the row shows;
this says what that means — won by this call's nonce, or refused and why —
and keeps the store's memory of fences up to date (:mod:`cronlease._lease.lost_writes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cronlease._lease.lost_writes import LostWrites
from cronlease._lease.model import AttemptRequest, Lease, Refusal
from cronlease._lease.watermark import Seen

__all__ = ["outcomes", "refusal"]


def outcomes(
    requests: Sequence[AttemptRequest],
    nonces: Sequence[str],
    rows: Sequence[Any],
    floors: dict[str, Seen],
    lost_writes: LostWrites,
    sent_at: float,
) -> list[Lease | Refusal]:
    """Per request: the Lease its nonce won (a retried call after a broken connection
    included), else the Refusal the row explains."""
    out: list[Lease | Refusal] = []
    for request, nonce, row in zip(requests, nonces, rows, strict=True):
        if row is None:
            out.append(Refusal("taken"))  # no lease row: nothing to follow
        elif row.holder == nonce:
            lease = Lease(
                name=request.name,
                slot=request.slot,
                fence=int(row.fence),
                holder=nonce,
                ttl=request.ttl,
                sent_at=sent_at,
                attempt=request.attempt,
            )
            # a granted attempt raises the fence this replica remembers
            out.append(lost_writes.reacquired(lease, floors.get(request.name)))
        elif lost_writes.went_back(request.name, int(row.slot), int(row.fence), floors):
            out.append(Refusal("taken"))  # the row lost writes; repaired, not trusted
        else:
            out.append(refusal(request, row))
    return out


def refusal(request: AttemptRequest, row: Any) -> Refusal:
    """Why a further attempt was refused, from the lease row read back after it."""
    if row.paused:
        return Refusal("paused")
    if int(row.fence) != request.after_fence or int(row.slot) != request.slot:
        return Refusal("taken")  # a newer tick or another attempt won
    # Free now but not at the compare-and-swap (the row was locked, or the database
    # serialized, in between): held then, 0 s left, so that a retry is tried at once.
    return Refusal("held", expires_in=max(0.0, float(row.expires_at) - float(row.db_now)))
