"""A task for ``cronlease run`` tests: ``call = "tests.support.role_task:record"`` with
``kwargs = {url = ..., name = ...}`` appends its slot to the ledger (with this pid)."""

from __future__ import annotations

from cronlease import RunContext
from tests.support import ledger


def record(ctx: RunContext, url: str, name: str) -> None:
    ledger.append(url, name, ctx.slot)
