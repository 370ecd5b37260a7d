"""The lease store under contract, through its single forms or its batch forms.

``LeaseStore.acquire`` and ``finish`` are the batch of one; the contract suite
runs every test once through them and once through ``acquire_many`` and
``finish_many`` with a decoy beside each real request, so that a batch
statement is proven to give each request exactly its own answer: the decoy is
a task that never ran asking for a slot an hour ahead of the database clock,
which every backend refuses as ``future`` without writing a row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from cronlease._lease.model import AcquireRequest, FinishRequest, Lease, Outcome, Refusal
from cronlease._lease.store import LeaseStore

FORMS = ["single", "batch"]


class ContractStore:
    """A LeaseStore whose acquire/finish go through the single or the batch form."""

    def __init__(self, store: LeaseStore, form: str) -> None:
        self.store = store
        self.form = form

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def acquire(self, request: AcquireRequest) -> Lease | Refusal:
        if self.form == "single":
            return self.store.acquire(request)
        decoy = AcquireRequest(
            name=f"decoy-{uuid.uuid4().hex[:12]}",
            slot=int(self.store.database_time() * 1000) + 3_600_000,
            ttl=1.0,
            holder=request.holder,
        )
        results = self.store.acquire_many([decoy, request])
        assert results[0] == Refusal("future"), results[0]
        return results[1]

    def acquire_many(self, requests: Sequence[AcquireRequest]) -> list[Lease | Refusal]:
        return self.store.acquire_many(requests)

    def finish(
        self, lease: Lease, outcome: Outcome, error: str | None = None, *, release: bool = True
    ) -> None:
        if self.form == "single":
            self.store.finish(lease, outcome, error, release=release)
            return
        # a fenced finish of a run that does not exist: it must change nothing
        decoy = FinishRequest(
            name=f"decoy-{uuid.uuid4().hex[:12]}",
            slot=lease.slot,
            manual=False,
            fence=1,
            outcome="succeeded",
            error=None,
            holder="decoy#0000000000000000",
        )
        self.store.finish_many([decoy, FinishRequest.of(lease, outcome, error, release=release)])
