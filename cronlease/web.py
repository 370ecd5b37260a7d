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
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import os
import signal
import socketserver
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer
from wsgiref.simple_server import make_server as _make_server
from zoneinfo import ZoneInfo

from sqlalchemy import inspect as sa_inspect
from sqlalchemy.exc import SQLAlchemyError

from cronlease.errors import StoreError
from cronlease.model import LeaseInfo, RunRecord
from cronlease.schedule import Schedule, time_of_slot
from cronlease.store import LeaseStore

if TYPE_CHECKING:
    from cronlease.scheduler import Scheduler

__all__ = [
    "StatusPage",
    "asgi_app",
    "collect_status",
    "make_server",
    "render_html",
    "serve",
    "wsgi_app",
]

logger = logging.getLogger("cronlease")

JSON_PATH = "/status.json"
DEFAULT_RUNS = 5
DEFAULT_REFRESH = 10
# Never replace a password shorter than this in error text: it would mangle the text.
MIN_SCRUBBED_PASSWORD = 4

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]
ASGIScope = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[MutableMapping[str, Any]]]
ASGISend = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_HEADERS = [
    # No script may run on this page, whatever a value contains; no frames, no forms.
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]

# Lease stores used by status pages: a forked child must open its own connections.
_STORES: weakref.WeakSet[LeaseStore] = weakref.WeakSet()


def _dispose_after_fork() -> None:
    for store in list(_STORES):
        store.engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_dispose_after_fork)


# --- collecting ------------------------------------------------------------------


class StatusPage:
    """What the page shows and where it reads it from.

    ``source`` is a running (or not) :class:`~cronlease.Scheduler`, whose
    declared tasks, namespace and replica state are shown, or a
    :class:`~cronlease.LeaseStore`; with a store, ``tasks`` maps the declared
    tasks' full names (namespace included) to their schedules, and
    ``namespace`` says which lease rows belong to them. Without ``tasks``,
    every lease row in the database is shown as a task.
    """

    def __init__(
        self,
        source: Scheduler | LeaseStore,
        *,
        tasks: Mapping[str, Schedule] | None = None,
        namespace: str | None = None,
        runs: int = DEFAULT_RUNS,
        refresh: int | None = DEFAULT_REFRESH,
        title: str = "cronlease",
    ) -> None:
        if runs < 0:
            raise ValueError("runs must not be negative")
        if refresh is not None and refresh < 1:
            raise ValueError("refresh must be at least 1 second (or None for no refresh)")
        self.scheduler: Scheduler | None
        if isinstance(source, LeaseStore):
            self.scheduler = None
            self._store = source
            self._tasks = dict(tasks) if tasks is not None else None
            self.namespace = namespace
        else:
            if tasks is not None or namespace is not None:
                raise ValueError("tasks= and namespace= are taken from the scheduler")
            self.scheduler = source
            self._store = source.store
            self._tasks = None
            self.namespace = source.namespace
        _STORES.add(self._store)
        self.runs = runs
        self.refresh = refresh
        self.title = title

    @property
    def store(self) -> LeaseStore:
        return self.scheduler.store if self.scheduler is not None else self._store

    def declared(self) -> dict[str, Schedule] | None:
        """Full task name -> schedule, or None when only lease rows are known."""
        if self.scheduler is not None:
            return {task.full_name: task.schedule for task in self.scheduler.tasks.values()}
        return self._tasks

    def collect(self) -> dict[str, Any]:
        return collect_status(self)

    # --- the two apps -----------------------------------------------------------

    def respond(
        self, method: str, path: str, query: str, base: str
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """Status, headers and body for one request (``path`` relative to the mount point)."""
        if path not in ("", "/", JSON_PATH):
            return _plain(404, "Not Found")
        if method not in ("GET", "HEAD"):
            status, headers, body = _plain(405, "Method Not Allowed: this page is read-only")
            return status, [*headers, ("Allow", "GET, HEAD")], body
        wants_json = path == JSON_PATH or parse_qs(query).get("format") == ["json"]
        status_data = self.collect()
        code = 503 if status_data["database_error"] else 200
        if wants_json:
            body = json.dumps(status_data, indent=2, sort_keys=True).encode()
            content_type = "application/json"
        else:
            body = render_html(
                status_data, json_url=f"{base}{JSON_PATH}", refresh=self.refresh, title=self.title
            ).encode()
            content_type = "text/html; charset=utf-8"
        headers = [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            *_HEADERS,
        ]
        return code, headers, b"" if method == "HEAD" else body

    def wsgi(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        code, headers, body = self.respond(
            str(environ.get("REQUEST_METHOD", "GET")).upper(),
            str(environ.get("PATH_INFO", "")),
            str(environ.get("QUERY_STRING", "")),
            str(environ.get("SCRIPT_NAME", "")).rstrip("/"),
        )
        start_response(f"{code} {_REASONS[code]}", headers)
        return [body]

    async def asgi(self, scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
        if scope["type"] == "lifespan":  # served on its own, e.g. by uvicorn
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            raise RuntimeError(f"the cronlease status page serves HTTP only, not {scope['type']}")
        root = str(scope.get("root_path", "")).rstrip("/")
        path = str(scope.get("path", ""))
        if root and path.startswith(root):  # mounted: Starlette keeps the prefix in path
            path = path[len(root) :]
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        method = str(scope.get("method", "GET")).upper()
        # Database reads run in a worker thread: they never block the application's loop.
        code, headers, body = await asyncio.to_thread(self.respond, method, path, query, root)
        await send(
            {
                "type": "http.response.start",
                "status": code,
                "headers": [(k.lower().encode(), v.encode("latin-1")) for k, v in headers],
            }
        )
        await send({"type": "http.response.body", "body": body})


_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def _plain(code: int, text: str) -> tuple[int, list[tuple[str, str]], bytes]:
    body = (text + "\n").encode()
    return (
        code,
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            *_HEADERS,
        ],
        body,
    )


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


def _holder(holder: str) -> str:
    """The holder id without the per-attempt nonce."""
    return holder.rsplit("#", 1)[0]


def _zone(schedule: Schedule) -> tzinfo:
    try:
        return ZoneInfo(schedule.timezone)
    except (KeyError, ValueError):
        return timezone.utc


def _in_namespace(name: str, namespace: str | None) -> bool:
    if namespace:
        return name.startswith(f"{namespace}:")
    return ":" not in name


class _Scrubber:
    """Removes the database password from text that came from a driver or a task."""

    def __init__(self, store: LeaseStore) -> None:
        password = store.engine.url.password
        self.password = (
            str(password) if password and len(str(password)) >= MIN_SCRUBBED_PASSWORD else None
        )

    def __call__(self, text: str | None) -> str | None:
        if text is None or self.password is None:
            return text
        return text.replace(self.password, "***")


def _run_dict(run: RunRecord, scrub: _Scrubber) -> dict[str, Any]:
    duration = run.duration
    return {
        "slot": run.slot,
        "scheduled_for": time_of_slot(run.slot).isoformat(timespec="milliseconds"),
        "manual": run.manual,
        "fence": run.fence,
        "holder": _holder(run.holder),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration": None if duration is None else round(duration, 3),
        "outcome": run.outcome,
        "error": scrub(run.error),
    }


def _task_dict(
    name: str,
    schedule: Schedule | None,
    row: LeaseInfo | None,
    runs: list[RunRecord],
    db_now: float | None,
    now: datetime,
    scrub: _Scrubber,
) -> dict[str, Any]:
    acquired = row is not None and row.fence > 0  # a row made by pause was never acquired
    held = row is not None and acquired and db_now is not None and row.expires_at > db_now
    if row is not None and row.paused:
        state = "paused"
    elif held:
        state = "running"
    else:
        state = "idle"
    upcoming = schedule.upcoming(now, 1) if schedule is not None else []
    cursor = row.slot if row is not None and row.slot >= 0 else None
    last_success = next((run for run in runs if run.outcome == "succeeded"), None)
    return {
        "name": name,
        "declared": schedule is not None,
        "schedule": str(schedule) if schedule is not None else None,
        "state": state,
        "paused": bool(row and row.paused),
        "running": held,
        "holder": _holder(row.holder) if row is not None and acquired else None,
        "fence": row.fence if row is not None and acquired else None,
        "last_slot": cursor,
        "last_slot_time": (
            time_of_slot(cursor).isoformat(timespec="milliseconds") if cursor is not None else None
        ),
        "lease_expires_at": _iso(row.expires_at) if row is not None and acquired else None,
        "lease_expires_in": (
            round(row.expires_at - db_now, 3)
            if row is not None and acquired and db_now is not None
            else None
        ),
        "next_fire_time": (
            upcoming[0].astimezone(_zone(schedule)).isoformat() if schedule and upcoming else None
        ),
        "last_success_at": _iso(last_success.finished_at) if last_success else None,
        "runs": [_run_dict(run, scrub) for run in runs],
    }


def _tables_missing(store: LeaseStore) -> bool:
    try:
        return not sa_inspect(store.engine).has_table("cronlease_leases")
    except SQLAlchemyError:
        return False


def collect_status(page: StatusPage) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data. Reads only; never raises StoreError."""
    store = page.store
    scrub = _Scrubber(store)
    now = datetime.now(timezone.utc)
    declared = page.declared()
    rows: dict[str, LeaseInfo] = {}
    history: dict[str, list[RunRecord]] = {}
    db_now: float | None = None
    database_error: str | None = None
    try:
        rows = {row.name: row for row in store.leases()}
        db_now = store.database_time()
        names = list(declared) if declared is not None else sorted(rows)
        if page.runs:
            history = store.recent_runs(names, page.runs)
    except StoreError as exc:
        if not _tables_missing(store):
            database_error = scrub(str(exc))
        rows, history = {}, {}
    if declared is not None:
        tasks = [
            _task_dict(name, schedule, rows.get(name), history.get(name, []), db_now, now, scrub)
            for name, schedule in sorted(declared.items())
        ]
        orphaned = [
            _task_dict(name, None, row, [], db_now, now, scrub)
            for name, row in rows.items()
            if name not in declared and _in_namespace(name, page.namespace)
        ]
    else:
        tasks = [
            _task_dict(name, None, row, history.get(name, []), db_now, now, scrub)
            for name, row in rows.items()
        ]
        orphaned = []
    result: dict[str, Any] = {
        "title": page.title,
        "generated_at": now.isoformat(timespec="milliseconds"),
        "database": store.url,
        "database_time": _iso(db_now),
        "database_error": database_error,
        "namespace": page.namespace,
        "tasks": tasks,
        "orphaned": orphaned,
        "replica": None,
    }
    scheduler = page.scheduler
    if scheduler is not None:
        replica: dict[str, Any] = {
            "holder": scheduler.holder,
            "running": scheduler.running,
            "runs_in_progress": scheduler.running_tasks,
            "counters": dict(sorted(scheduler.stats.snapshot().items())),
            "health": None,
        }
        if database_error is None:
            health = scheduler.health()
            replica["health"] = {
                "ok": health.ok,
                "problems": [scrub(p) for p in health.problems],
                "overdue": list(health.overdue),
                "database_down_for": health.database_down_for,
            }
        result["replica"] = replica
    return result


# --- rendering ---------------------------------------------------------------------

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.6em 0 .4em}
table{border-collapse:collapse;margin:.4em 0}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.meta{color:#555}.task{margin:1em 0 1.6em}
.state-running{color:#05f}.state-paused{color:#b60}.state-idle{color:#555}
.outcome-succeeded{color:#070}.outcome-failed,.outcome-lost,.outcome-timed_out,
.outcome-abandoned,.outcome-interrupted{color:#c00;font-weight:bold}
.problem{background:#fee;border:1px solid #c00;padding:.5em;margin:.5em 0}
pre{white-space:pre-wrap;margin:.3em 0;max-width:100em}code{font-size:.95em}
""".strip()


def _e(value: object) -> str:
    """Escape any value for HTML text or an attribute; None shows as a dash."""
    if value is None or value == "":
        return "-"
    return html.escape(str(value), quote=True)


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.3g} s"
    minutes, seconds = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {seconds}s" if hours else f"{minutes}m {seconds}s"


def _error_summary(error: str) -> str:
    """The last non-empty line of a traceback: the exception and its message."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else error


def _error_cell(error: str | None) -> str:
    if not error:
        return "-"
    summary = _error_summary(error)
    if summary == error.strip():
        return f'<code class="error">{_e(summary)}</code>'
    return (
        f'<details><summary><code class="error">{_e(summary)}</code></summary>'
        f"<pre>{_e(error)}</pre></details>"
    )


def _lease_text(task: Mapping[str, Any]) -> str:
    remaining = task["lease_expires_in"]
    if remaining is None:
        return "-"
    return f"expires in {_seconds(remaining)}" if remaining > 0 else "free"


def _render_task(task: Mapping[str, Any]) -> str:
    runs = task["runs"]
    parts = [
        f'<section class="task" id="task-{_e(task["name"])}">',
        f"<h2>{_e(task['name'])}</h2>",
        "<table><tr><th>schedule</th><th>state</th><th>paused</th><th>holder</th>"
        "<th>fence</th><th>last slot</th><th>lease</th><th>next fire time</th></tr>",
        f"<tr><td>{_e(task['schedule'])}</td>"
        f'<td class="state-{_e(task["state"])}">{_e(task["state"])}</td>'
        f"<td>{'yes' if task['paused'] else 'no'}</td>"
        f"<td>{_e(task['holder'])}</td><td>{_e(task['fence'])}</td>"
        f"<td>{_e(task['last_slot_time'])}</td><td>{_e(_lease_text(task))}</td>"
        f"<td>{_e(task['next_fire_time'])}</td></tr></table>",
    ]
    if runs:
        parts.append(
            "<table><tr><th>scheduled for</th><th>outcome</th><th>duration</th>"
            "<th>holder</th><th>fence</th><th>error</th></tr>"
        )
        for run in runs:
            outcome = run["outcome"] + (" (manual)" if run["manual"] else "")
            parts.append(
                f"<tr><td>{_e(run['scheduled_for'])}</td>"
                f'<td class="outcome-{_e(run["outcome"])}">{_e(outcome)}</td>'
                f"<td>{_e(_seconds(run['duration']))}</td><td>{_e(run['holder'])}</td>"
                f"<td>{_e(run['fence'])}</td><td>{_error_cell(run['error'])}</td></tr>"
            )
        parts.append("</table>")
    elif task["declared"]:
        parts.append('<p class="meta">No runs recorded yet.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def render_html(
    status: Mapping[str, Any],
    *,
    json_url: str = "status.json",
    refresh: int | None = DEFAULT_REFRESH,
    title: str | None = None,
) -> str:
    """The status page for data from :func:`collect_status`. Every value is escaped."""
    title = title or str(status.get("title") or "cronlease")
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="robots" content="noindex">',
    ]
    if refresh:
        head.append(f'<meta http-equiv="refresh" content="{int(refresh)}">')
    head += [f"<title>{_e(title)}</title>", f"<style>{_CSS}</style>", "</head><body>"]
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">database <code>{_e(status["database"])}</code>'
        + (f" · namespace <code>{_e(status['namespace'])}</code>" if status["namespace"] else "")
        + f" · database time {_e(status['database_time'])}"
        f" · page generated {_e(status['generated_at'])}"
        f' · <a href="{_e(json_url)}">JSON</a></p>',
    ]
    if status["database_error"]:
        body.append(
            f'<div class="problem" id="database-error">database unavailable: '
            f"<code>{_e(status['database_error'])}</code></div>"
        )
    replica = status.get("replica")
    if replica:
        health = replica["health"]
        if health is not None and not health["ok"]:
            problems = "".join(f"<li>{_e(p)}</li>" for p in health["problems"])
            body.append(f'<div class="problem" id="health">health: <ul>{problems}</ul></div>')
        in_progress = ", ".join(replica["runs_in_progress"]) or "none"
        body.append(
            f'<p class="meta">this replica <code>{_e(replica["holder"])}</code>: '
            f"{'started' if replica['running'] else 'not started'}"
            f"; runs in progress here: {_e(in_progress)}</p>"
        )
    tasks = status["tasks"]
    if tasks:
        body.extend(_render_task(task) for task in tasks)
    else:
        body.append('<p class="meta">No tasks.</p>')
    orphaned = status["orphaned"]
    if orphaned:
        body.append(
            '<h2 id="orphaned">Orphaned lease rows</h2><p class="meta">Tasks no longer declared. '
            "They are kept, since deleting a row resets its slot cursor; "
            "<code>cronlease</code> removes one only on request.</p>"
            "<table><tr><th>task</th><th>state</th><th>holder</th><th>fence</th>"
            "<th>last slot</th><th>lease</th></tr>"
        )
        body.extend(
            f"<tr><td>{_e(o['name'])}</td><td>{_e(o['state'])}</td><td>{_e(o['holder'])}</td>"
            f"<td>{_e(o['fence'])}</td><td>{_e(o['last_slot_time'])}</td>"
            f"<td>{_e(_lease_text(o))}</td></tr>"
            for o in orphaned
        )
        body.append("</table>")
    return "\n".join([*head, *body, "</body></html>", ""])


# --- entry points ------------------------------------------------------------------


def asgi_app(
    source: Scheduler | LeaseStore,
    *,
    tasks: Mapping[str, Schedule] | None = None,
    namespace: str | None = None,
    runs: int = DEFAULT_RUNS,
    refresh: int | None = DEFAULT_REFRESH,
    title: str = "cronlease",
) -> Callable[[ASGIScope, ASGIReceive, ASGISend], Awaitable[None]]:
    """The status page as an ASGI app (mount it, e.g. ``app.mount("/cronlease", ...)``)."""
    page = StatusPage(
        source, tasks=tasks, namespace=namespace, runs=runs, refresh=refresh, title=title
    )
    return page.asgi


def wsgi_app(
    source: Scheduler | LeaseStore,
    *,
    tasks: Mapping[str, Schedule] | None = None,
    namespace: str | None = None,
    runs: int = DEFAULT_RUNS,
    refresh: int | None = DEFAULT_REFRESH,
    title: str = "cronlease",
) -> Callable[[WSGIEnviron, StartResponse], Iterable[bytes]]:
    """The status page as a WSGI app (mount it with e.g. Werkzeug's DispatcherMiddleware)."""
    page = StatusPage(
        source, tasks=tasks, namespace=namespace, runs=runs, refresh=refresh, title=title
    )
    return page.wsgi


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("status page: %s - %s", self.address_string(), format % args)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def make_server(
    source: Scheduler | LeaseStore,
    host: str = "127.0.0.1",
    port: int = 8080,
    **options: Any,
) -> WSGIServer:
    """A threaded stdlib server for the page (not started); ``port=0`` picks a free port.

    ``options`` are those of :func:`wsgi_app`. Call ``serve_forever()`` and
    ``shutdown()`` on it, or use :func:`serve`.
    """
    return _make_server(
        host,
        port,
        wsgi_app(source, **options),
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )


def serve(
    source: Scheduler | LeaseStore,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    ready: Callable[[str], object] | None = None,
    **options: Any,
) -> None:
    """Serve the page until SIGINT or SIGTERM (or KeyboardInterrupt off the main thread).

    Binds ``host`` (default loopback only) and ``port``; ``ready`` is called
    with the page's URL once it accepts connections (useful with ``port=0``).
    """
    server = make_server(source, host, port, **options)
    url = f"http://{host}:{server.server_port}/"
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda _signum, _frame: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="cronlease-web", daemon=True)
    thread.start()
    logger.info("cronlease status page on %s", url)
    try:
        if ready is not None:
            ready(url)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
