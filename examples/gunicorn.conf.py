"""gunicorn settings for flask_app.py: start the scheduler in each worker, stop it on exit.

cd examples && gunicorn -c gunicorn.conf.py flask_app:app [--preload]
"""

from __future__ import annotations

import os
from typing import Any

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "3"))
# Give running tasks time to finish on SIGTERM (a cronlease shutdown takes at most 25 s).
graceful_timeout = 30


def post_worker_init(worker: Any) -> None:
    """In each worker, after the app is loaded (with or without --preload): start its replica."""
    from flask_app import scheduler

    scheduler.start()


def worker_exit(server: Any, worker: Any) -> None:
    """The worker is stopping: finish running tasks and release their leases."""
    from flask_app import scheduler

    scheduler.shutdown()
