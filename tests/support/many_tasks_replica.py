"""A replica of many tasks that fall due together: ``many_tasks_replica.py URL PREFIX N``.

``Scheduler.run_forever()`` with N tasks every second, named PREFIX-000 ...,
each doing nothing; INFO lines on stderr; prints ``started`` once it runs,
exits 0 on SIGTERM. A test stops it (SIGSTOP) and lets it go on (SIGCONT), as a
CPU-starved host would, and reads what it logged.
"""

from __future__ import annotations

import logging
import sys

from cronlease import Scheduler
from tests.support.foreground import run_forever_announced


def main() -> None:
    url, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    scheduler = Scheduler(url)
    for index in range(count):
        scheduler.add_task(lambda: None, every="1s", name=f"{prefix}-{index:03d}")

    run_forever_announced(scheduler)  # its tasks print nothing: "started" stands alone


if __name__ == "__main__":
    main()
