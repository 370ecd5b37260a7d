"""The naive way: the scheduler is started when the module is imported.

Under ``gunicorn --preload`` (without examples/gunicorn.conf.py) that happens
in the master, before the fork: cronlease must restart it in each worker.
"""

from __future__ import annotations

from flask_app import app, scheduler  # examples/ is on PYTHONPATH

from tests.support.recipes import attach

attach(scheduler)
scheduler.start()

__all__ = ["app"]
