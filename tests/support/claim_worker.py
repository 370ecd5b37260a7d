"""A worker process racing for deliveries: ``claim_worker.py URL``.

For each round it prints ``ready``, waits for ``go <task-id> <start-at>`` on stdin,
sleeps until the wall-clock instant ``start-at`` (the start gate: every process
leaves it together, whichever read its line first), claims the task id with
``LeaseStore.claim_delivery`` and prints ``claimed True`` or ``claimed False``.
``stop`` (or the end of stdin) ends it.
"""

from __future__ import annotations

import sys
import time

from cronlease import LeaseStore


def main() -> None:
    store = LeaseStore.from_url(sys.argv[1])
    try:
        store.claim_delivery("warm-up-" + str(time.time_ns()), "race")  # connect before the race
        print("ready", flush=True)
        for line in sys.stdin:
            command = line.split()
            if not command or command[0] != "go":
                break
            time.sleep(max(0.0, float(command[2]) - time.time()))
            print("claimed", store.claim_delivery(command[1], "race"), flush=True)
            print("ready", flush=True)
    finally:
        store.dispose()


if __name__ == "__main__":
    main()
