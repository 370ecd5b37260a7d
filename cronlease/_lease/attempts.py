"""A further attempt's outcome, from the lease row read back in its transaction.

The store's half of :meth:`cronlease.LeaseStore.reacquire_many`: the
statements (:mod:`cronlease._lease.dialects.attempts`) say what the row shows;
this says what that means — won by this call's nonce, or refused and why —
and keeps the store's memory of fences up to date (:mod:`cronlease._lease.lost_writes`).
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Sequence
from typing import Any

from cronlease._lease.dialects.attempts import AttemptStatements
from cronlease._lease.lost_writes import Call, LostWrites
from cronlease._lease.model import AttemptCandidate, AttemptRequest, Lease, Refusal
from cronlease._lease.watermark import Seen

__all__ = ["Attempts", "outcomes", "refusal"]

# as the store's: a false "won" needs a fresh nonce equal to the one in the row
NONCE_BYTES = 8
# names per candidates statement: far below every backend's bound-parameter limit
CHUNK = 500


class Attempts:
    """The store's further-attempt and watcher methods (LeaseStore delegates here)."""

    def __init__(self, statements: AttemptStatements, call: Call, lost_writes: LostWrites) -> None:
        self._statements = statements
        self._call = call
        self._lost_writes = lost_writes

    def reacquire(self, requests: Sequence[AttemptRequest]) -> list[Lease | Refusal]:
        if not requests:
            return []
        names = [request.name for request in requests]
        if len(set(names)) != len(names):
            raise ValueError("a reacquisition names each task at most once")
        known = self._lost_writes.attempt_refusals(requests)
        sent = [r for r, refusal in zip(requests, known, strict=True) if refusal is None]
        results = iter(self._sent(sent) if sent else [])
        return [next(results) if refusal is None else refusal for refusal in known]

    def _sent(self, requests: Sequence[AttemptRequest]) -> list[Lease | Refusal]:
        floors = self._lost_writes.before([request.name for request in requests])
        nonces = [f"{request.holder}#{secrets.token_hex(NONCE_BYTES)}" for request in requests]
        sent_at = time.monotonic()
        what = (
            f"reacquiring the lease of {requests[0].name!r}"
            if len(requests) == 1
            else f"reacquiring the leases of {len(requests)} tasks"
        )
        rows = self._call(what, lambda conn: self._statements.reacquire(conn, requests, nonces))
        return outcomes(requests, nonces, rows, floors, self._lost_writes, sent_at)

    def candidates(self, names: Sequence[str]) -> list[AttemptCandidate]:
        unique = sorted(set(names))
        floors = self._lost_writes.before(unique)
        found: list[AttemptCandidate] = []
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start : start + CHUNK]
            found += self._call(
                "reading attempt candidates",
                functools.partial(self._statements.candidates, names=chunk),
            )
        # a row that went back (lost writes) is repaired, and no attempt follows it
        went_back = self._lost_writes.went_back
        return [c for c in found if not went_back(c.name, c.slot, c.fence, floors)]

    def abandon_expired(self, limit: int) -> list[tuple[str, int, int]]:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        return list(
            self._call(
                "marking stuck runs abandoned",
                lambda conn: self._statements.abandon_expired(conn, limit),
            )
        )

    def abandoned_counts(self, names: Sequence[str] | None) -> dict[str, int]:
        if names is not None and not names:
            return {}
        chosen = None if names is None else sorted(set(names))
        return dict(
            self._call(
                "counting abandoned runs",
                lambda conn: self._statements.abandoned_counts(conn, chosen),
            )
        )


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
        elif lost_writes.went_back(
            request.name, int(row.slot), int(row.fence), floors, request.ttl
        ):
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
