"""The status page's HTTP side: :class:`StatusPage` answers GET and HEAD, as an ASGI or WSGI app.

A request gets the page (HTML from :mod:`cronlease.web.render`) or its data
as JSON (from :mod:`cronlease.web.collect`), with headers that forbid any
script, frame or form; any other method gets ``405``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from cronlease._lease.side_engines import reader_engine
from cronlease._lease.store import LeaseStore
from cronlease._status import DeclaredTask, in_namespace
from cronlease._timing.schedule import Schedule
from cronlease.web.collect import collect_status
from cronlease.web.render import DEFAULT_REFRESH, render_html

if TYPE_CHECKING:
    from cronlease._scheduler import Scheduler

JSON_PATH = "/status.json"
DEFAULT_RUNS = 5
#: seconds one snapshot serves every request (one build, however many browsers)
DEFAULT_CACHE = 2.0

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


class StatusPage:
    """What the page shows and where it reads it from.

    ``source`` is a running (or not) :class:`~cronlease.Scheduler`, whose
    declared tasks, namespace and replica state are shown, or a
    :class:`~cronlease.LeaseStore`; with a store, ``tasks`` maps the declared
    tasks' full names (namespace included) to their schedules, and
    ``namespace`` says which lease rows belong to them. Without ``tasks``,
    every lease row in the database is shown as a task.

    The page reads through a pool of its own, one connection made as the
    source's store connects (never one the replica's tick path waits for), and
    one snapshot serves every request for ``cache`` seconds: concurrent requests
    wait for the build in progress instead of starting their own (0: no cache).
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
        cache: float = DEFAULT_CACHE,
    ) -> None:
        if not cache >= 0:
            raise ValueError("cache must be a number of seconds, 0 or more")
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
        self.reader = LeaseStore(reader_engine(self._store.engine))
        _STORES.add(self.reader)
        self.cache = float(cache)
        self._building = threading.Lock()
        self._cached: tuple[float, dict[str, Any]] | None = None
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

    def declared_tasks(self) -> list[DeclaredTask] | None:
        """The tasks whose status the page shows, or None: every lease row is one."""
        if self.scheduler is not None:
            return [DeclaredTask.of(task) for task in self.scheduler.tasks.values()]
        if self._tasks is None:
            return None
        prefix = len(self.namespace) + 1 if self.namespace else 0
        return [
            DeclaredTask(
                name=name,
                schedule=schedule,
                task=name[prefix:] if in_namespace(name, self.namespace) else name,
            )
            for name, schedule in self._tasks.items()
        ]

    def collect(self) -> dict[str, Any]:
        """The page's data: the cached snapshot's if it is younger than ``cache``."""
        with self._building:  # one build at a time; who waited finds it fresh
            cached = self._cached
            if cached is not None and time.monotonic() - cached[0] < self.cache:
                return cached[1]
            data = collect_status(self)
            self._cached = (time.monotonic(), data)
            return data

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


def asgi_app(
    source: Scheduler | LeaseStore,
    *,
    tasks: Mapping[str, Schedule] | None = None,
    namespace: str | None = None,
    runs: int = DEFAULT_RUNS,
    refresh: int | None = DEFAULT_REFRESH,
    title: str = "cronlease",
    cache: float = DEFAULT_CACHE,
) -> Callable[[ASGIScope, ASGIReceive, ASGISend], Awaitable[None]]:
    """The status page as an ASGI app (mount it, e.g. ``app.mount("/cronlease", ...)``)."""
    page = StatusPage(
        source,
        tasks=tasks,
        namespace=namespace,
        runs=runs,
        refresh=refresh,
        title=title,
        cache=cache,
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
    cache: float = DEFAULT_CACHE,
) -> Callable[[WSGIEnviron, StartResponse], Iterable[bytes]]:
    """The status page as a WSGI app (mount it with e.g. Werkzeug's DispatcherMiddleware)."""
    page = StatusPage(
        source,
        tasks=tasks,
        namespace=namespace,
        runs=runs,
        refresh=refresh,
        title=title,
        cache=cache,
    )
    return page.wsgi
