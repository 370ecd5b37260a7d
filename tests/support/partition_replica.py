"""A replica for network partition tests: ``partition_replica.py URL PREFIX``.

``PREFIX-long`` (every 1 s, lease TTL 2 s) runs until its lease is lost
(``ctx.lost``), or 20 s; ``PREFIX-0`` .. ``PREFIX-7`` (every 1 s) return at
once. Every run appends its slot to the ledger as it starts and prints
``start NAME SLOT T``; the long run prints ``lost NAME SLOT T`` the moment it
sees ``ctx.lost`` (T: this host's clock, shared by every process of the test).
INFO lines on stderr; prints ``started``; exits on SIGTERM.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from cronlease import RunContext, Scheduler
from tests.support import ledger

_said = threading.Lock()


def say(line: str) -> None:
    # one write per line, under a lock: print() from two workers can interleave
    with _said:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> None:
    url, prefix = sys.argv[1], sys.argv[2]
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(created).3f %(levelname)s %(message)s"
    )
    scheduler = Scheduler(url, shutdown_grace=2)

    def begin(ctx: RunContext) -> None:
        ledger.append(url, ctx.name, ctx.slot)
        say(f"start {ctx.name} {ctx.slot} {time.time():.3f}")

    @scheduler.task(every="1s", lease_ttl="2s", name=f"{prefix}-long")
    def long(ctx: RunContext) -> None:
        begin(ctx)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if ctx.lost:
                say(f"lost {ctx.name} {ctx.slot} {time.time():.3f}")
                return
            time.sleep(0.02)

    for index in range(8):
        scheduler.add_task(begin, every="1s", name=f"{prefix}-{index}")

    start = scheduler.start

    def start_and_say() -> None:
        start()
        say("started")

    scheduler.start = start_and_say  # type: ignore[method-assign]
    scheduler.run_forever()


if __name__ == "__main__":
    main()
