"""Task functions for examples/cronlease.toml (``call = "jobs:..."``).

cronlease puts the config file's directory on ``sys.path``, so ``jobs`` is
importable when you run ``cronlease run`` from this directory.
"""

from __future__ import annotations

import logging

from cronlease import RunContext

logger = logging.getLogger("jobs")


def say_hello(ctx: RunContext, greeting: str = "hello") -> None:
    """Runs on one replica per tick; the context says which tick and with what fence."""
    logger.info("%s from slot %s (fence %s)", greeting, ctx.scheduled_for.isoformat(), ctx.fence)
