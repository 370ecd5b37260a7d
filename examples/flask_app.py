"""Flask under gunicorn: one scheduler per worker process.

    pip install cronlease flask gunicorn
    cd examples && gunicorn -c gunicorn.conf.py flask_app:app              # 3 workers
    cd examples && gunicorn -c gunicorn.conf.py --preload flask_app:app    # the same, preloaded
    python examples/flask_app.py                                           # Flask's dev server

The module only *declares* the scheduler; ``gunicorn.conf.py`` starts it in
each worker after fork (``post_worker_init``) and stops it when the worker
exits, so a ``--preload`` master never runs tasks itself and never shares a
connection with its workers. (A scheduler started before the fork anyway runs
only in the master, unless made with ``restart_after_fork=True``: then cronlease
restarts it in each child, and it keeps running in the master too.)

``CRONLEASE_DATABASE_URL`` points every worker of every replica at one database.
``/cronlease/`` is the read-only status page, ``/healthz`` the health probe.
"""

from __future__ import annotations

import logging
import os

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from cronlease import RunContext, Scheduler
from cronlease.web import wsgi_app

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s: %(message)s")
logging.getLogger("apscheduler").setLevel(logging.WARNING)
log = logging.getLogger("flask_app")

scheduler = Scheduler(os.environ.get("CRONLEASE_DATABASE_URL"))


@scheduler.task(every="30s")
def refresh_cache(ctx: RunContext) -> None:
    log.info("refresh_cache for %s on pid %s", ctx.scheduled_for.isoformat(), os.getpid())


def create_app() -> Flask:
    app = Flask(__name__)
    app.extensions["cronlease"] = scheduler
    # The status page is a plain WSGI app: mount it beside Flask (add your auth in front).
    app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, {"/cronlease": wsgi_app(scheduler)}
    )

    @app.get("/")
    def index() -> ResponseReturnValue:
        return jsonify(hello="world", status_page="/cronlease/")

    @app.get("/healthz")
    def healthz() -> ResponseReturnValue:
        health = scheduler.health()
        body = jsonify(ok=health.ok, problems=list(health.problems), pid=os.getpid())
        return body, 200 if health.ok else 503

    return app


app = create_app()

if __name__ == "__main__":
    scheduler.start()  # the dev server has no workers: start it here
    try:
        app.run(host="127.0.0.1", port=8000, use_reloader=False)
    finally:
        scheduler.shutdown()
