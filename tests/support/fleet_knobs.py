"""A replica script's fleet knobs, from its environment (docs/design.md §4.4).

So that a test can make a small fleet behave as a large one: a window of few
members per instant, or a slow renewal pace, with three or four processes.
Read by the replica scripts before their ``Scheduler`` starts.

- ``CRONLEASE_TEST_ACTIVE``: ``rendezvous.ACTIVE_PER_TICK``, the smallest active
  window (members touching one instant);
- ``CRONLEASE_TEST_RENEWALS_PER_SECOND``: ``membership.RENEWALS_PER_SECOND``, the
  cohort's renewals a second (a member renews every max(2 s, R / this) seconds).
"""

from __future__ import annotations

import os

from cronlease._run.acquisition import membership, rendezvous


def apply() -> None:
    """Set the knobs this process's environment names."""
    active = os.environ.get("CRONLEASE_TEST_ACTIVE")
    if active is not None:
        rendezvous.ACTIVE_PER_TICK = int(active)
    rate = os.environ.get("CRONLEASE_TEST_RENEWALS_PER_SECOND")
    if rate is not None:
        membership.RENEWALS_PER_SECOND = float(rate)
