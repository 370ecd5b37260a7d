"""The status page's HTTP side: :class:`StatusPage` answers requests, as an ASGI or WSGI app.

Routes (relative to the mount point): ``/`` the overview (HTML from
:mod:`cronlease.web.render`), ``/status.json`` its data (from
:mod:`cronlease.web.collect`), ``/task?name=...`` one task's page
(:mod:`cronlease.web.render_task`) and, only when the application enabled
actions, ``POST /action`` (:mod:`cronlease.web.actions`) and the schedules kept
in the database: ``/schedules`` (the list, ``POST``: a write),
``/schedule?name=...`` (:mod:`cronlease.web.schedules`). Reading pages answer
GET and HEAD; anything else gets ``405``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import parse_qs, quote

from cronlease._schedules.model import Schedules, StoredSchedule
from cronlease._service import reader_store
from cronlease._status import DeclaredTask, Scrubber, in_namespace
from cronlease._timing.schedule import Schedule
from cronlease.errors import StoreError, UnknownScheduleError
from cronlease.store import LeaseStore
from cronlease.web import adapters
from cronlease.web.actions import (
    SCHEDULE_ACTIONS,
    ActionRequest,
    Authorize,
    Refused,
    check,
    check_form,
    csrf_cookie,
    new_token,
    origin_of,
    perform,
    resolver,
    set_cookie,
)
from cronlease.web.adapters import ASGIReceive, ASGIScope, ASGISend, StartResponse, WSGIEnviron
from cronlease.web.collect import collect_status, collect_task
from cronlease.web.notice import Notice, clear_notice, has_notice, notice_of, set_notice
from cronlease.web.render import DEFAULT_REFRESH, render_html
from cronlease.web.render_schedules import render_schedule, render_schedules, schedule_url
from cronlease.web.render_task import render_task
from cronlease.web.responses import REASONS, Response, content, plain, security
from cronlease.web.schedules import SchedulesForm, write

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from cronlease._scheduler import Scheduler

JSON_PATH = "/status.json"
TASK_PATH = "/task"
ACTION_PATH = "/action"
#: the schedules kept in the database (actions enabled only): the list, and one
SCHEDULES_PATH = "/schedules"
SCHEDULE_PATH = "/schedule"
DEFAULT_RUNS = 5
#: runs a task's page lists
DEFAULT_HISTORY = 50
#: seconds one snapshot serves every request (one build, however many browsers)
DEFAULT_CACHE = 2.0

# Lease stores used by status pages: a forked child must open its own connections.
_STORES: weakref.WeakSet[LeaseStore] = weakref.WeakSet()


def _dispose_after_fork() -> None:
    for store in list(_STORES):
        store.engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_dispose_after_fork)


class PageOptions(TypedDict, total=False):
    """The keyword arguments of :class:`StatusPage`, :func:`asgi_app` and :func:`wsgi_app`."""

    tasks: Mapping[str, Schedule] | Iterable[DeclaredTask] | None
    namespace: str | None
    runs: int
    history: int
    refresh: int | None
    title: str
    cache: float
    actions: bool
    authorize: Authorize | None
    trusted_origins: Iterable[str]


class StatusPage:
    """What the page shows and where it reads it from.

    ``source`` is a running (or not) :class:`~cronlease.Scheduler`, whose
    declared tasks, namespace and replica state are shown, or a
    :class:`~cronlease.LeaseStore`; with a store, ``tasks`` maps the declared
    tasks' full names (namespace included) to their schedules (or lists them as
    :class:`~cronlease.status.DeclaredTask`, with their ``enabled``, ``grace``
    and ``alert_after``: ``cronlease web -c FILE`` does), and
    ``namespace`` says which lease rows belong to them. Without ``tasks``,
    every lease row in the database is shown as a task.

    The page reads through a pool of its own, one connection made as the
    source's store connects (never one the replica's tick path waits for), and
    one snapshot serves every request for ``cache`` seconds: concurrent requests
    wait for the build in progress instead of starting their own (0: no cache).

    Read-only unless ``actions=True``: then each declared task has run-now and
    pause/resume buttons, each a POST refused unless ``authorize`` (required,
    called with an :class:`~cronlease.web.actions.ActionRequest`) returns True.
    Actions need a scheduler source: they call its ``run_now``/``pause``/``resume``.
    With actions, ``/schedules`` lists, adds, edits, enables/disables and removes the
    schedules kept in the database through :class:`cronlease.Schedules`
    (:mod:`cronlease.web.schedules`); ``authorize`` may answer a user's name instead of
    True, recorded as the change's ``changed_by``.
    ``trusted_origins`` (``"https://ops.example.com"``) are origins accepted besides
    the request's own, for a proxy that rewrites ``Host``.
    """

    def __init__(
        self,
        source: Scheduler | LeaseStore,
        *,
        tasks: Mapping[str, Schedule] | Iterable[DeclaredTask] | None = None,
        namespace: str | None = None,
        runs: int = DEFAULT_RUNS,
        history: int = DEFAULT_HISTORY,
        refresh: int | None = DEFAULT_REFRESH,
        title: str = "cronlease",
        cache: float = DEFAULT_CACHE,
        actions: bool = False,
        authorize: Authorize | None = None,
        trusted_origins: Iterable[str] = (),
    ) -> None:
        if not cache >= 0:
            raise ValueError("cache must be a number of seconds, 0 or more")
        if runs < 0 or history < 1:
            raise ValueError("runs must not be negative, history must be at least 1")
        if refresh is not None and refresh < 1:
            raise ValueError("refresh must be at least 1 second (or None for no refresh)")
        if actions and authorize is None:
            raise ValueError(
                "actions=True needs authorize=, a callable(request) -> bool: the page "
                "cannot tell who may pause a task (authorize=lambda request: True allows "
                "whoever reaches the page)"
            )
        if authorize is not None and not actions:
            raise ValueError("authorize= guards the actions: pass actions=True too")
        if isinstance(trusted_origins, str):
            raise ValueError("trusted_origins is a list of origins, not one string")
        trusted = {}
        for origin in trusted_origins:
            parsed = origin_of(origin)
            if parsed is None or origin.rstrip("/").count("/") != 2:
                raise ValueError(
                    f"trusted_origins: {origin!r} is not an origin (scheme://host[:port])"
                )
            trusted[origin] = parsed
        self.trusted_origins = frozenset(trusted.values())
        self.scheduler: Scheduler | None
        if isinstance(source, LeaseStore):
            if actions:
                raise ValueError("actions need a Scheduler source (they call its methods)")
            self.scheduler = None
            self._store = source
            self._tasks = _declared(tasks, namespace)
            self.namespace = namespace
        else:
            if tasks is not None or namespace is not None:
                raise ValueError("tasks= and namespace= are taken from the scheduler")
            self.scheduler = source
            self._store = source.store
            self._tasks = None
            self.namespace = source.namespace
        self.reader = reader_store(self._store)
        _STORES.add(self.reader)
        self.cache = float(cache)
        self._building = threading.Lock()
        self._cached: tuple[float, dict[str, Any]] | None = None
        self._task_cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self.runs = runs
        self.history = history
        self.refresh = refresh
        self.title = title
        self.authorize = authorize
        self._headers = security(actions)
        self._schedules: Schedules | None = None

    @property
    def actions(self) -> bool:
        return self.authorize is not None

    @property
    def store(self) -> LeaseStore:
        return self.scheduler.store if self.scheduler is not None else self._store

    @property
    def schedules(self) -> Schedules:
        """The schedules model the page reads and writes through (actions only): the
        scheduler's namespace, jobs and code tasks, on the page's own pool."""
        assert self.scheduler is not None
        if self._schedules is None:
            scheduler = self.scheduler
            self._schedules = Schedules(
                store=self.reader,
                namespace=scheduler.namespace,
                jobs=scheduler.jobs,
                code_tasks=lambda: list(scheduler.tasks),
            )
        return self._schedules

    def declared(self) -> dict[str, Schedule] | None:
        """Full task name -> schedule, or None when only lease rows are known."""
        tasks = self.declared_tasks()
        return None if tasks is None else {task.name: task.schedule for task in tasks}

    def declared_tasks(self) -> list[DeclaredTask] | None:
        """The tasks whose status the page shows, or None: every lease row is one."""
        if self.scheduler is not None:
            return [DeclaredTask.of(task) for task in self.scheduler.tasks.values()]
        return None if self._tasks is None else list(self._tasks)

    def collect(self) -> dict[str, Any]:
        """The page's data: the cached snapshot's if it is younger than ``cache``."""
        with self._building:  # one build at a time; who waited finds it fresh
            cached = self._cached
            if cached is not None and time.monotonic() - cached[0] < self.cache:
                return cached[1]
            data = collect_status(self)
            self._cached = (time.monotonic(), data)
            return data

    def collect_task(self, name: str) -> dict[str, Any] | None:
        """A declared task's page data (full ``name``) with its last ``history`` runs,
        cached as :meth:`collect` is; None when no such task is declared."""
        with self._building:
            cached = self._task_cache.get(name)
            if cached is not None and time.monotonic() - cached[0] < self.cache:
                return cached[1]
            data = collect_task(self, name, self.history)
            if data is not None:  # (only declared names are keys: the cache stays small)
                self._task_cache[name] = (time.monotonic(), data)
            return data

    def forget_snapshots(self) -> None:
        """After an action: the next request reads again, and shows its effect."""
        with self._building:
            self._cached = None
            self._task_cache.clear()

    def respond(
        self,
        method: str,
        path: str,
        query: str,
        base: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = b"",
        client: str | None = None,
        secure: bool = False,
        raw: Mapping[str, Any] | None = None,
    ) -> Response:
        """Status, headers and body for one request (``path`` relative to the mount point,
        ``base`` the mount point as decoded, ``headers`` with lower-case names, ``body``
        None when the request gave no length)."""
        headers = headers or {}
        # encoded once, for every URL and the cookie's Path= made from it
        base = quote(base, safe="/")
        if path == ACTION_PATH and self.actions:
            if method != "POST":
                return plain(405, "Method Not Allowed: an action is a POST", allow="POST")
            if body is None:
                return plain(411, "Length Required: an action's form has a length", actions=True)

            def asked(action: str, task: str) -> ActionRequest:
                return ActionRequest(action, task, method, path, headers, client, raw or {})

            return self._act(body, headers, secure, asked, base)
        if path in (SCHEDULES_PATH, SCHEDULE_PATH) and self.actions:
            return self._schedules_page(
                method, path, query, base, headers, body, client, secure, raw or {}
            )
        if path not in ("", "/", JSON_PATH, TASK_PATH):
            return plain(404, "Not Found", actions=self.actions)
        if method not in ("GET", "HEAD"):
            allow = "GET, HEAD"
            return plain(405, "Method Not Allowed: this page is read-only", allow=allow)
        params = parse_qs(query)
        if path == JSON_PATH or (path != TASK_PATH and params.get("format") == ["json"]):
            data = self.collect()
            text = json.dumps(data, indent=2, sort_keys=True).encode()
            code = 503 if data["database_error"] else 200
            return content(method, code, text, "application/json", self._headers)
        extra: list[tuple[str, str]] = []
        token = None
        if self.actions:  # the forms carry the cookie's value (double submit: actions.py)
            token = csrf_cookie(headers, secure)
            if token is None:
                token = new_token()
                extra.append(set_cookie(token, base, secure))
        notice = None
        if has_notice(headers, secure) and method == "GET":  # shown once: a HEAD shows nothing
            notice = notice_of(headers, secure)
            extra.append(clear_notice(base, secure))
        json_url, refresh = f"{base}{JSON_PATH}", self.refresh
        if path == TASK_PATH:
            name = params.get("name", [""])[0]
            data, task = self._task_data(name)
            if task is None:  # the notice ends here too: it must not show on a later page
                code, answer, text = plain(
                    404, f"Not Found: no task {name!r}", actions=self.actions
                )
                return code, [*answer, *extra], text
            page = render_task(
                data,
                task,
                home=f"{base}/",
                json_url=json_url,
                refresh=refresh,
                base=base,
                csrf=token,
                notice=notice,
            )
        else:
            data = self.collect()
            page = render_html(
                data,
                schedules_url=f"{base}{SCHEDULES_PATH}" if self.actions else None,
                json_url=json_url,
                refresh=refresh,
                title=self.title,
                base=base,
                csrf=token,
                notice=notice,
            )
        code = 503 if data["database_error"] else 200
        html = page.encode()
        return content(method, code, html, "text/html; charset=utf-8", [*self._headers, *extra])

    def _task_data(self, name: str) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
        """A declared task is read with its longer history; an orphaned row (or any row,
        without declared tasks) is found in the overview's snapshot."""
        data = self.collect_task(name)
        if data is not None and data["tasks"]:
            return data, data["tasks"][0]
        overview = self.collect()
        rows = [*overview["tasks"], *overview["orphaned"]]
        return overview, next((task for task in rows if task["name"] == name), None)

    def _act(
        self,
        body: bytes,
        headers: Mapping[str, str],
        secure: bool,
        asked: Callable[[str, str], ActionRequest],
        base: str,
    ) -> Response:
        assert self.scheduler is not None and self.authorize is not None  # (__init__ checks)
        try:
            action = check(
                form=body,
                content_type=headers.get("content-type", ""),
                headers=headers,
                secure=secure,
                trusted=self.trusted_origins,
                resolve=resolver(self.scheduler),
                request=asked,
                authorize=self.authorize,
            )
            result = perform(self.scheduler, action)
        except Refused as refused:  # nothing changed: the snapshots stay
            if refused.notice is None:  # not the page's own form: said in plain text
                return plain(refused.code, str(refused), actions=True)
            notice = refused.notice
        else:
            self.forget_snapshots()
            notice = Notice(action.action, result, action.task)
        # Post/Redirect/Get: reloading the page it lands on does not post the action
        # again; the notice says on that page what was done (or refused)
        location = f"{base}{TASK_PATH}?name={quote(notice.task, safe='')}"
        code, answer, text = plain(303, f"{notice.task}: {notice.words()}", actions=True)
        return code, [*answer, ("Location", location), set_notice(notice, base, secure)], text

    def _schedules_page(
        self,
        method: str,
        path: str,
        query: str,
        base: str,
        headers: Mapping[str, str],
        body: bytes | None,
        client: str | None,
        secure: bool,
        raw: Mapping[str, Any],
    ) -> Response:
        """The schedules' pages and their writes (:mod:`cronlease.web.schedules`)."""
        assert self.authorize is not None
        if method == "POST" and path == SCHEDULES_PATH:
            if body is None:
                return plain(411, "Length Required: a form has a length", actions=True)
            try:
                fields = check_form(
                    form=body,
                    content_type=headers.get("content-type", ""),
                    headers=headers,
                    secure=secure,
                    trusted=self.trusted_origins,
                    actions=SCHEDULE_ACTIONS,
                )
            except Refused as refused:  # not the page's own form: said in plain text
                return plain(refused.code, str(refused), actions=True)

            def asked(action: str, name: str) -> ActionRequest:
                return ActionRequest(action, name, method, path, headers, client, raw)

            outcome = write(
                self.schedules, fields, authorize=self.authorize, request=asked, client=client
            )
            if outcome.notice is not None:  # done: Post/Redirect/Get, the notice said there
                self.forget_snapshots()
                where = outcome.page
                location = schedule_url(base, where) if where else f"{base}{SCHEDULES_PATH}"
                said = f"{outcome.notice.task}: {outcome.notice.words()}"
                code, answer, text = plain(303, said, actions=True)
                flash = set_notice(outcome.notice, base, secure)
                return code, [*answer, ("Location", location), flash], text
            token = csrf_cookie(headers, secure)
            assert token is not None  # (check_form checked it)
            stale = bool(outcome.extra.get("stale"))
            shown, html = self._schedules_html(
                outcome.page, base, token, None, outcome.error, outcome.form, stale
            )
            if shown == 404:  # no such schedule, nor its history: the list says so
                _, html = self._schedules_html(None, base, token, None, outcome.error, None, False)
            return content("GET", outcome.code, html, "text/html; charset=utf-8", self._headers)
        if method not in ("GET", "HEAD"):
            allow = "GET, HEAD, POST" if path == SCHEDULES_PATH else "GET, HEAD"
            return plain(405, "Method Not Allowed", allow=allow, actions=True)
        extra: list[tuple[str, str]] = []
        token = csrf_cookie(headers, secure)
        if token is None:
            token = new_token()
            extra.append(set_cookie(token, base, secure))
        notice = None
        if has_notice(headers, secure) and method == "GET":
            notice = notice_of(headers, secure)
            extra.append(clear_notice(base, secure))
        name = parse_qs(query).get("name", [""])[0] if path == SCHEDULE_PATH else None
        if name == "":
            return plain(404, "Not Found: /schedule?name=NAME", actions=True)
        code, html = self._schedules_html(name, base, token, notice, "", None, False)
        if code == 404:
            code, answer, text = plain(404, f"Not Found: no schedule {name!r}", actions=True)
            return code, [*answer, *extra], text
        html_type = "text/html; charset=utf-8"
        return content(method, code, html, html_type, [*self._headers, *extra])

    def _schedules_html(
        self,
        name: str | None,
        base: str,
        token: str,
        notice: Notice | None,
        error: str,
        form: SchedulesForm | None,
        stale: bool,
    ) -> tuple[int, bytes]:
        """The list (``name`` None) or one schedule's page, read now through the model;
        ``form`` (a refused POST's) fills the form, unless ``stale``: then the schedule
        as it now is does."""
        schedules = self.schedules
        common: dict[str, Any] = {
            "title": self.title,
            "base": base,
            "csrf": token,
            "database": self.store.url,
            "namespace": self.namespace,
            "notice": notice,
        }
        code = 200
        try:
            jobs = schedules.jobs()
        except StoreError as exc:
            jobs, code = {}, 503
            error = error or f"database unavailable: {Scrubber.of(self.store)(str(exc))}"
        if name is None:
            listed: list[StoredSchedule] | None = None
            if code == 200:
                try:
                    listed = schedules.list()
                except StoreError as exc:
                    code = 503
                    error = error or f"database unavailable: {Scrubber.of(self.store)(str(exc))}"
            blank = SchedulesForm.of({"enabled": "yes"})
            page = render_schedules(listed, jobs, form or blank, error=error, **common)
            return code, page.encode()
        schedule: StoredSchedule | None = None
        history: list[Any] = []
        if code == 200:
            try:
                try:
                    schedule = schedules.get(name)
                except UnknownScheduleError:
                    schedule = None
                history = schedules.history(name)
            except StoreError as exc:
                code = 503
                error = error or f"database unavailable: {Scrubber.of(self.store)(str(exc))}"
            if code == 200 and schedule is None and not history:
                return 404, b""
        if schedule is not None and (form is None or stale):
            form = SchedulesForm.shown(schedule)
        page = render_schedule(
            schedule,
            history,
            jobs,
            form or SchedulesForm.of({"name": name}),
            name=name,
            error=error,
            **common,
        )
        return code, page.encode()

    def wsgi(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        """The page as a WSGI application."""
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        code, response_headers, body = self.respond(
            method,
            str(environ.get("PATH_INFO", "")),
            str(environ.get("QUERY_STRING", "")),
            adapters.wsgi_text(str(environ.get("SCRIPT_NAME", ""))).rstrip("/"),
            headers=adapters.wsgi_headers(environ),
            body=adapters.wsgi_body(environ) if method == "POST" and self.actions else b"",
            client=environ.get("REMOTE_ADDR"),
            secure=environ.get("wsgi.url_scheme") == "https",
            raw=environ,
        )
        start_response(f"{code} {REASONS[code]}", response_headers)
        return [body]

    async def asgi(self, scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
        """The page as an ASGI application."""
        if scope["type"] == "lifespan":  # served on its own, e.g. by uvicorn
            await adapters.asgi_lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"the cronlease status page serves HTTP only, not {scope['type']}")
        path, root = adapters.asgi_path(scope)
        method = str(scope.get("method", "GET")).upper()
        client = scope.get("client")
        post = method == "POST" and self.actions
        respond = functools.partial(
            self.respond,
            method,
            path,
            bytes(scope.get("query_string", b"")).decode("latin-1"),
            root,
            headers=adapters.asgi_headers(scope),
            body=await adapters.receive_body(receive) if post else b"",
            client=str(client[0]) if client else None,
            secure=scope.get("scheme") == "https",
            raw=scope,
        )
        # Database reads run in a worker thread: they never block the application's loop.
        code, response_headers, body = await asyncio.to_thread(respond)
        encoded = [(k.lower().encode(), v.encode("latin-1")) for k, v in response_headers]
        await send({"type": "http.response.start", "status": code, "headers": encoded})
        await send({"type": "http.response.body", "body": body})


def asgi_app(
    source: Scheduler | LeaseStore, **options: Unpack[PageOptions]
) -> Callable[[ASGIScope, ASGIReceive, ASGISend], Awaitable[None]]:
    """The status page as an ASGI app (mount it, e.g. ``app.mount("/cronlease", ...)``);
    ``options`` are :class:`StatusPage`'s."""
    return StatusPage(source, **options).asgi


def wsgi_app(
    source: Scheduler | LeaseStore, **options: Unpack[PageOptions]
) -> Callable[[WSGIEnviron, StartResponse], Iterable[bytes]]:
    """The status page as a WSGI app (mount it with e.g. Werkzeug's DispatcherMiddleware);
    ``options`` are :class:`StatusPage`'s."""
    return StatusPage(source, **options).wsgi


def _declared(
    tasks: Mapping[str, Schedule] | Iterable[DeclaredTask] | None, namespace: str | None
) -> list[DeclaredTask] | None:
    """A store's page's tasks: given whole, or built from a map of full names to schedules."""
    if tasks is None:
        return None
    if not isinstance(tasks, Mapping):
        declared = list(tasks)
        for task in declared:
            if not isinstance(task, DeclaredTask):
                raise ValueError(f"tasks= lists DeclaredTask values, not {task!r}")
        return declared
    prefix = len(namespace) + 1 if namespace else 0
    return [
        DeclaredTask(
            name=name,
            schedule=schedule,
            task=name[prefix:] if in_namespace(name, namespace) else name,
        )
        for name, schedule in tasks.items()
    ]
