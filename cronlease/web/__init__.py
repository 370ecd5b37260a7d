"""A read-only status page: an ASGI app, a WSGI app and a small standalone server.

Mount it in the web application you already deploy, behind that
application's own authentication::

    from cronlease.web import asgi_app, wsgi_app

    app.mount("/cronlease", asgi_app(scheduler))                # FastAPI / Starlette
    DispatcherMiddleware(flask_app.wsgi_app, {"/cronlease": wsgi_app(scheduler)})  # Flask

or serve it alone on 127.0.0.1 (``cronlease web --port 8080`` does this)::

    serve(LeaseStore.from_url(url), port=8080)

The page is server-rendered HTML (no JavaScript at all), refreshes itself
with a ``<meta http-equiv="refresh">`` and shows, for each task: its
schedule, state (running, idle, paused), lease holder and fence, the last
runs with outcome, duration and error text, and the next fire time; lease
rows of tasks no longer declared are listed as orphaned. ``/status.json``
(or ``?format=json``) returns the same data as JSON.

What it never does: write to the database (any method but GET and HEAD gets
``405``), create tables, or show the database password (the URL is redacted
and the password is scrubbed from error text). Every value shown is escaped,
so a task error containing ``<script>`` is displayed as text. The apps use
the standard library only.

The modules: ``app`` (:class:`StatusPage`, the ASGI and WSGI apps),
``collect`` (the data the page shows), ``render`` (the HTML) and
``server`` (the standalone server).
"""

from __future__ import annotations

from cronlease.web.actions import ActionRequest
from cronlease.web.adapters import ASGIReceive as ASGIReceive
from cronlease.web.adapters import ASGIScope as ASGIScope
from cronlease.web.adapters import ASGISend as ASGISend
from cronlease.web.adapters import StartResponse as StartResponse
from cronlease.web.adapters import WSGIEnviron as WSGIEnviron
from cronlease.web.app import DEFAULT_RUNS as DEFAULT_RUNS
from cronlease.web.app import JSON_PATH as JSON_PATH
from cronlease.web.app import PageOptions, StatusPage, asgi_app, wsgi_app
from cronlease.web.collect import MIN_SCRUBBED_PASSWORD as MIN_SCRUBBED_PASSWORD
from cronlease.web.collect import collect_status
from cronlease.web.render import DEFAULT_REFRESH as DEFAULT_REFRESH
from cronlease.web.render import render_html
from cronlease.web.server import logger as logger
from cronlease.web.server import make_server, serve

__all__ = [
    "ActionRequest",
    "PageOptions",
    "StatusPage",
    "asgi_app",
    "collect_status",
    "make_server",
    "render_html",
    "serve",
    "wsgi_app",
]
