"""The naive way: the scheduler is started when the module is imported.

Under ``gunicorn --preload`` (without examples/gunicorn.conf.py) that happens
in the master, before the fork: with ``restart_after_fork`` (the opt-in)
cronlease starts it again in each worker; without it the workers run nothing.
"""

from __future__ import annotations

from flask_app import app, scheduler  # examples/ is on PYTHONPATH

from tests.support.recipes import attach

attach(scheduler)
scheduler.restart_after_fork = True  # each forked worker is a replica too
scheduler.start()

__all__ = ["app"]
