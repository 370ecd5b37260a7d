"""SIGTERM to a foreground replica (``run_forever``, as ``cronlease run`` and
``manage.py cronlease run`` use it) always ends in a clean exit, wherever it lands.

The signal is sent by the replica to itself at the two moments that went wrong
(tests/support/signalled_replica.py): while its main thread held the lock of
the condition its stop-wait sleeps on (the handler waited for that lock: the
replica hung until SIGKILL), and as ``start()`` began (the stop request was
cleared after it: the replica ran on). Whether a signal is handled does not
depend on the database: these run on SQLite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.procs import Proc

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("where", ["stop-wait", "start"])
def test_a_sigterm_wherever_it_lands_ends_the_replica_cleanly(
    tmp_path: Path, task_name: str, where: str
) -> None:
    url = f"sqlite:///{tmp_path / 'cronlease.db'}"
    replica = Proc("-m", "tests.support.signalled_replica", url, task_name, where)
    try:
        replica.expect("signalled", 60)
        # the shutdown grace is 10 s and nothing runs long: 30 s is a hang
        replica.expect("exited", 30)
        code = replica.popen.wait(timeout=30)
    finally:
        replica.kill()
    assert code == 0, replica.stderr()
    assert "shutting down" in replica.stderr()  # the signal was seen, and said so
