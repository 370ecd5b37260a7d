"""examples/flask_app.py with the ledger task, for gunicorn with examples/gunicorn.conf.py."""

from __future__ import annotations

from flask_app import app, scheduler  # examples/ is on PYTHONPATH

from tests.support.recipes import attach

attach(scheduler)

__all__ = ["app"]
