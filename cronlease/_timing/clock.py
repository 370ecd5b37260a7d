"""Clock-skew detection: this host's clock against the database's.

Lease timing uses only the database clock, so skew cannot break exactly-once.
It still matters: slots come from this host's clock, and a host running
ahead by more than half an interval (at most 60 s) has its ticks refused as "from the
future" (the gate that protects the rest of the fleet, which runs them on time).
The detector says so, and why.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ClockCheck", "DatabaseClock", "SkewDetector", "measure_skew"]

logger = logging.getLogger("cronlease")
#: why a fast host's ticks are refused, for its skew warning
AHEAD = (
    " (a tick whose slot lies more than its tolerance, half its gap and at most 60 s, "
    "ahead of the database clock is refused here as 'future'; the rest of the fleet "
    "runs it on time)"
)


class DatabaseClock(Protocol):
    """What the detector reads: the lease store's clock (timing sits below the lease layer)."""

    def database_time(self) -> float:
        """The database's clock, in epoch seconds; raises StoreError."""
        ...


@dataclass(frozen=True)
class ClockCheck:
    """One measurement: ``skew`` > 0 means this host's clock is behind the database's."""

    skew: float
    round_trip: float
    #: the database clock as read (epoch seconds), so a reader needs no second query
    database_time: float

    @property
    def error_bound(self) -> float:
        return self.round_trip / 2


def measure_skew(store: DatabaseClock, samples: int = 3) -> ClockCheck:
    """Ask the database for its time, allowing for the round trip; raises StoreError.

    The sample with the shortest round trip is kept (as NTP does): the error bound is
    half the round trip, and one query that waited behind a busy database (three
    replicas creating their schema at once on two cores) widened it past the skew it
    was meant to show, so a fast host went unwarned.
    """
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples!r}")
    best: ClockCheck | None = None
    for _ in range(samples):
        before = time.time()
        started = time.monotonic()
        database = store.database_time()
        round_trip = time.monotonic() - started
        check = ClockCheck(
            skew=database - (before + round_trip / 2),
            round_trip=round_trip,
            database_time=database,
        )
        if best is None or check.round_trip < best.round_trip:
            best = check
    assert best is not None
    return best


class SkewDetector:
    """Warns once when the skew grows past ``warn_fraction`` of the smallest interval."""

    def __init__(self, store: DatabaseClock, smallest_interval: float, warn_fraction: float = 0.25):
        self._store = store
        self.threshold = max(0.05, smallest_interval * warn_fraction)
        self.last: ClockCheck | None = None
        self._warned = False

    def check(self) -> ClockCheck:
        measured = measure_skew(self._store)
        self.last = measured
        beyond = abs(measured.skew) - measured.error_bound > self.threshold
        if beyond and not self._warned:
            logger.warning(
                "this host's clock is %+.3f s off the database clock (±%.3f s); beyond %.3f s "
                "some ticks of the shortest task may be refused or skipped%s: fix NTP here",
                -measured.skew,
                measured.error_bound,
                self.threshold,
                AHEAD if measured.skew < 0 else "",
            )
        elif not beyond and self._warned:
            logger.info("clock skew back within bounds: %+.3f s", -measured.skew)
        self._warned = beyond
        return measured
