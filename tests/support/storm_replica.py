"""A replica process for the connection storm: ``storm_replica.py URL LEDGER_FILE COUNT``.

``COUNT`` tasks every second, each run appending a line ``TASK SLOT`` to
LEDGER_FILE (a file, not a table: the ledger must not take one of the few
connections the server has). Prints
``started`` once the scheduler runs; answers each ``health`` line on stdin with
one JSON line: whether it ran a task yet, ``Scheduler.health()`` (threshold 0.5 s)
and why it makes no new connection. Exits 0 on SIGTERM.
"""

from __future__ import annotations

import json
import logging
import sys
import threading

from cronlease import RunContext, Scheduler
from cronlease._lease.database import connect_state


def main() -> None:
    url, ledger, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(process)d %(message)s"
    )
    scheduler = Scheduler(url, history_retention=None)
    ran = [0]
    counting = threading.Lock()  # runs of several tasks at once, on several workers

    def note(ctx: RunContext) -> None:
        with open(ledger, "a") as file:
            file.write(f"{ctx.name} {ctx.slot}\n")
        with counting:
            ran[0] += 1

    for index in range(count):
        scheduler.add_task(note, every="1s", name=f"storm-every-second-{index}")

    def answer() -> None:
        for line in sys.stdin:
            if line.strip() != "health":
                continue
            health = scheduler.health(database_threshold=0.5)
            state = connect_state(scheduler.store.engine)
            print(
                "health "
                + json.dumps(
                    {
                        "ran": ran[0],
                        "ok": health.ok,
                        "problems": list(health.problems),
                        "refused": None if state is None else state.error,
                    }
                ),
                flush=True,
            )

    def announce() -> None:
        while not scheduler.running:
            threading.Event().wait(0.01)
        print("started", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    threading.Thread(target=answer, daemon=True).start()
    scheduler.run_forever()


if __name__ == "__main__":
    main()
