"""RQ job functions for the process tests of ``cronlease.contrib.rq``
(tests/processes/test_rq_beat.py), run by real ``rq worker`` processes.

From the environment the test sets: ``CRONLEASE_TEST_QUEUE`` (the test's queue),
``CRONLEASE_TEST_LEDGER`` (the side-effect ledger's database, tests/support/ledger.py)
and ``CRONLEASE_DATABASE_URL`` (the guard's database). Every body appends one ledger row
``<queue>|<job>|<cronlease key or ->|<job id>`` with the slot of the key (0 without one)
and the work horse's pid: a body run twice is two rows.
"""

from __future__ import annotations

import logging
import os
import sys

from rq import get_current_job

from cronlease.contrib.rq import once
from tests.support import ledger

QUEUE = os.environ.get("CRONLEASE_TEST_QUEUE", "cronlease-test")
LEDGER = os.environ.get("CRONLEASE_TEST_LEDGER", "")

# RQ configures its own logger only: the guard's INFO line goes to stderr, for the tests
_log = logging.getLogger("cronlease")
if not _log.handlers:
    _log.addHandler(logging.StreamHandler(sys.stderr))
    _log.setLevel(logging.INFO)


def _record(what: str) -> None:
    job = get_current_job()
    assert job is not None
    key = str(job.meta.get("cronlease_key") or "-")
    slot = int(key.rsplit("@", 1)[1]) if "@" in key else 0
    ledger.append(LEDGER, f"{QUEUE}|{what}|{key}|{job.id}", slot)


@once
def tick(n: int) -> None:
    _record(f"tick-{n}")


def plain(n: int) -> None:
    """Unguarded: the negative control of the guard's test."""
    _record(f"tick-{n}")


@once
def flaky(queue: str) -> None:
    """Guarded; fails its first run (a ledger row each run, ``flaky|<queue>``), so RQ's
    ``Retry`` retries it under the same job id."""
    url = os.environ["CRONLEASE_TEST_FLAKY_LEDGER"]
    ledger.append(url, f"flaky|{queue}", 0)
    if len(ledger.rows_like(url, f"flaky|{queue}")) == 1:
        raise RuntimeError("the first run fails")
