"""Cold start: ``coldstart.py URL TASK`` — waits at a start gate, then starts a replica.

Prints ``ready`` after imports, waits for ``go`` on stdin, creates the tables
(as ``Scheduler.start()`` does on first contact) and prints ``up`` or
``failed <error>``, then runs until ``stop``.
"""

from __future__ import annotations

import sys

from cronlease import RunContext, Scheduler
from cronlease.errors import StoreError
from tests.support import ledger


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    scheduler = Scheduler(url)

    @scheduler.task(every="1s", name=name)
    def write_ledger(ctx: RunContext) -> None:
        ledger.append(url, name, ctx.slot)

    print("ready", flush=True)
    sys.stdin.readline()
    try:
        scheduler.runner.ensure_schema()
    except StoreError as exc:
        print("failed", exc, flush=True)
        return
    scheduler.start()
    print("up", flush=True)
    sys.stdin.readline()
    scheduler.shutdown()


if __name__ == "__main__":
    main()
