"""A replica process racing for further attempts: ``reacquire_worker.py URL TASK``.

For each round it prints ``ready``, waits for ``go <slot> <after-fence> <start-at>``
on stdin, sleeps until the wall-clock instant ``start-at`` (the start gate: both
processes leave it together), asks its own LeaseStore for attempt 2 of that slot
and, if it won, appends the slot to the ledger; then prints ``done won`` or
``done <refusal reason>``.
"""

from __future__ import annotations

import sys
import time

from cronlease._lease.model import AttemptRequest, Lease
from cronlease._lease.store import LeaseStore
from tests.support import ledger


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    store = LeaseStore.from_url(url)
    store.database_time()  # connected before the first gate
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] != "go":
            break
        slot, after_fence, start_at = int(command[1]), int(command[2]), float(command[3])
        request = AttemptRequest(
            name=name,
            slot=slot,
            after_fence=after_fence,
            attempt=2,
            ttl=30.0,
            holder=f"racer-{sys.argv[3] if len(sys.argv) > 3 else 'x'}",
            recovering=False,
        )
        time.sleep(max(0.0, start_at - time.time()))
        (result,) = store.reacquire_many([request])
        if isinstance(result, Lease):
            ledger.append(url, name, slot)
            store.finish(result, "succeeded")
            print("done won", flush=True)
        else:
            print("done", result.reason, flush=True)
        print("ready", flush=True)
    store.dispose()


if __name__ == "__main__":
    main()
