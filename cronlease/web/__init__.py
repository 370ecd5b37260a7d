"""The status page: an ASGI app, a WSGI app and a small standalone server.

Mount it in the web application you already deploy, behind that
application's own authentication::

    from cronlease.web import asgi_app, wsgi_app

    app.mount("/cronlease", asgi_app(scheduler))                # FastAPI / Starlette
    DispatcherMiddleware(flask_app.wsgi_app, {"/cronlease": wsgi_app(scheduler)})  # Flask

or serve it alone on 127.0.0.1 (``cronlease web --port 8080`` does this)::

    serve(LeaseStore.from_url(url), port=8080)

The page is server-rendered HTML (no JavaScript at all) that refreshes itself
with a ``<meta http-equiv="refresh">``. The overview is one row per task:
schedule in words and as declared, the state shown (failing, overdue, paused,
running, idle), last run, the last 20 outcomes, last success and next fire
relative ("3 min ago", "in 12 s", the ISO time on hover), skipped ticks and
holder, failing and overdue tasks first and counted at the top; orphaned lease
rows are listed folded below. ``/task?name=...`` is one task's run history;
``/status.json`` (or ``?format=json``) the overview's data as JSON.

Read-only by default: no forms, any method but GET and HEAD gets ``405``. With
``actions=True`` and an ``authorize`` hook (:class:`ActionRequest` in, bool out)
each task has run-now and pause/resume buttons, each a POST with a CSRF token
(``actions``); the page it redirects to says once what was done or refused
("backup: run started", "backup: pause refused: not authorized": ``notice``), and
shows a run that run-now started. With actions, ``/schedules`` edits the schedules
kept in the database (``cronlease.Schedules``) behind the same gates. Narrower
than a laptop screen, each task is a card instead of a table row, its buttons on
its first line. The status pages never create tables (the schedules' model does
on first use, as any writer of schedules) nor show the database password (the
URL is redacted and the password is scrubbed from error text), and every value
shown is escaped. The apps use the standard library only.
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
