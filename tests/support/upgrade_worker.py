"""A replica starting against old tables: ``upgrade_worker.py URL``.

Prints ``ready``, waits for ``go <start-at>``, sleeps until the wall-clock instant
``start-at`` (both processes leave the gate together), runs ``create_tables()``
and prints ``done ok`` or ``done error <message>``.
"""

from __future__ import annotations

import sys
import time

from cronlease._lease.store import LeaseStore
from cronlease.errors import StoreError


def main() -> None:
    store = LeaseStore.from_url(sys.argv[1])
    store.database_time()  # connected before the gate
    print("ready", flush=True)
    command = sys.stdin.readline().split()
    time.sleep(max(0.0, float(command[1]) - time.time()))
    try:
        store.create_tables()
    except StoreError as exc:
        print("done error", " ".join(str(exc).split()), flush=True)
    else:
        print("done ok", flush=True)
    store.dispose()


if __name__ == "__main__":
    main()
