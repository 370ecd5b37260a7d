"""MySQL/MariaDB race worker: ``mysql_race_worker.py URL ISOLATION ZONE LEDGER HOLDER``.

It prints ``ready <isolation>``, then for every ``go <slot> <task>...`` line
(the start gate) tries to acquire each task's lease for that slot, in random
order; for each it won, it appends to the ledger table ``LEDGER`` and finishes
the run (releasing the lease). It then prints ``done`` and one outcome per
task, in the order given: ``won:<fence>``, ``lost`` or ``error:<type>`` (the
traceback goes to stderr). Errors are never raised, so one process failing
cannot hide what the others did. Any other line (``stop``) ends it.

``ISOLATION`` ``READ COMMITTED`` is cronlease's own engine; any other level is
a user's engine as given to ``LeaseStore(engine)``. Both sessions are in the
time zone ``ZONE``. ``CRONLEASE_TEST_MYSQL_MODE`` forces one of
``MySQLStatements``' modes (``returning``, ``read-back``, ``statements``).
"""

from __future__ import annotations

import logging
import os
import random
import sys
import traceback

from sqlalchemy import create_engine, text

from cronlease._lease.database import create_store_engine, normalize_url
from cronlease._lease.dialects.mysql import MySQLStatements
from cronlease._lease.model import AcquireRequest, Lease
from cronlease._lease.store import LeaseStore


def main() -> None:
    url, isolation, time_zone, ledger, holder = sys.argv[1:6]
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG)
    logging.getLogger("sqlalchemy").setLevel(logging.WARNING)
    init = {"init_command": f"SET time_zone = '{time_zone}'"}
    if isolation == "READ COMMITTED":
        # cronlease's own engine, with a session time zone a user might pass in
        engine = create_store_engine(url, connect_args=init)
    else:
        # a user's engine, as given to LeaseStore(engine)
        engine = create_engine(normalize_url(url), isolation_level=isolation, connect_args=init)
    store = LeaseStore(engine)
    mode = os.environ.get("CRONLEASE_TEST_MYSQL_MODE")
    if mode:
        store.statements = MySQLStatements(mode=mode)
    side_effects = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        level = conn.get_isolation_level()
    store.database_time()  # a pooled connection, ready before the gate opens
    print("ready", level.replace(" ", "_"), flush=True)

    def attempt(name: str, slot: int) -> str:
        try:
            lease = store.acquire(AcquireRequest(name=name, slot=slot, ttl=60.0, holder=holder))
            if not isinstance(lease, Lease):
                return "lost"
            with side_effects.connect() as conn:
                conn.execute(
                    text(f"INSERT INTO {ledger} (task, slot, fence, pid) VALUES (:t, :s, :f, :p)"),
                    {"t": name, "s": slot, "f": lease.fence, "p": os.getpid()},
                )
            store.finish(lease, "succeeded")
            return f"won:{lease.fence}"
        except Exception as exc:
            traceback.print_exc()
            return f"error:{type(exc).__name__}"

    for line in sys.stdin:
        command = line.split()
        if command[0] != "go":
            break
        slot, names = int(command[1]), command[2:]
        outcomes = {}
        for name in random.sample(names, len(names)):
            outcomes[name] = attempt(name, slot)
        print("done", *(outcomes[name] for name in names), flush=True)
    store.dispose()


if __name__ == "__main__":
    main()
