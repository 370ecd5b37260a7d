"""The page's actions (run now, pause, resume): refused unless every check passes.

An action is a POST to ``<mount>/action`` with the form fields ``task``, ``do``
(``run``, ``pause`` or ``resume``) and ``csrf``. It is performed only when the
mounting application enabled actions, the request is same-origin, its CSRF token
is right and the application's ``authorize`` hook says yes; then it goes through
the scheduler's public methods (``run_now``, ``pause``, ``resume``), never SQL.

CSRF: a double-submit cookie. The page sets a random cookie (``HttpOnly``,
``SameSite=Strict``) and writes the same value in each action form; a POST must
carry both, equal. Chosen over an HMAC of a per-process secret because an
application running cronlease has several replicas behind a load balancer: the
form one replica served is posted to another, and a cookie needs no secret shared
between them. Over HTTPS the cookie is ``__Host-cronlease_csrf`` (``Secure``,
``Path=/``, no ``Domain``): the browser then refuses it from a sibling subdomain
or from plain HTTP, so no one else can plant a value of their own. The price is
scope: it is the host's, not the mount point's (two pages mounted on one host share
it, harmlessly). Over plain HTTP it is ``cronlease_csrf`` with ``Path=`` the mount
point, and only as strong as the network: whoever can answer an HTTP request for
the host can set it.

Same-origin: a browser's ``Sec-Fetch-Site`` must say ``same-origin``; without it,
the ``Origin`` (or, without that, the ``Referer``) must be this request's own
scheme, host and port, or one of ``trusted_origins`` (a proxy that rewrites
``Host``). ``Origin: null`` (an opaque origin: a sandboxed frame, a page with
``Referrer-Policy: no-referrer``) is refused; the page itself sends
``Referrer-Policy: same-origin``, so its own forms carry their origin.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from cronlease._events import RunStarted
from cronlease._status import Scrubber
from cronlease.errors import StoreError, UnknownTaskError
from cronlease.web.notice import Notice

if TYPE_CHECKING:
    from cronlease._scheduler import Scheduler

__all__ = [
    "ACTIONS",
    "CSRF_COOKIE",
    "HOST_CSRF_COOKIE",
    "SCHEDULE_ACTIONS",
    "ActionRequest",
    "Authorize",
    "Refused",
    "origin_of",
    "perform",
]

logger = logging.getLogger("cronlease")

ACTIONS = ("run", "pause", "resume")
#: the schedules page's writes (cronlease/web/schedules.py), through ``cronlease.Schedules``
SCHEDULE_ACTIONS = (
    "schedule-add",
    "schedule-set",
    "schedule-enable",
    "schedule-disable",
    "schedule-remove",
)
CSRF_COOKIE = "cronlease_csrf"
HOST_CSRF_COOKIE = "__Host-cronlease_csrf"  # over HTTPS: see the module's docstring
MAX_FORM = 16384  # bytes: a schedule's form (its JSON arguments) included
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ActionRequest:
    """What the ``authorize`` hook is asked about: an action on a task, and the request.

    ``task`` is the task's stored name (namespace included, NFC), as resolved
    from the form: the task the action is done on; for a schedule action
    (``schedule-add``, ``-set``, ``-enable``, ``-disable``, ``-remove``) the
    schedule's stored name. ``headers`` have lower-case names; ``raw`` is the WSGI
    environ or the ASGI scope as the server gave it (the application's own session
    or user lives there).
    """

    action: str
    task: str
    method: str
    path: str
    headers: Mapping[str, str]
    client: str | None
    raw: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.action not in (*ACTIONS, *SCHEDULE_ACTIONS):
            raise ValueError(
                f"action must be one of {(*ACTIONS, *SCHEDULE_ACTIONS)}, got {self.action!r}"
            )


#: True, or who asked (a non-empty string: the schedules' audit records it), allows
Authorize = Callable[[ActionRequest], "bool | str"]


class Refused(Exception):
    """An action refused: ``code`` is the HTTP status, the message says why.

    With a ``notice`` (a refusal of a request from the page itself, past the
    same-origin and CSRF checks), the page answers with it as it does for an
    action done: a redirect back, the refusal said there.
    """

    def __init__(self, code: int, message: str, notice: Notice | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.notice = notice


def cookie_name(secure: bool) -> str:
    return HOST_CSRF_COOKIE if secure else CSRF_COOKIE


def csrf_cookie(headers: Mapping[str, str], secure: bool) -> str | None:
    """The request's CSRF cookie, if it has a well-formed one.

    Parsed by hand, not with ``SimpleCookie``: that drops every cookie when one
    other cookie of the host does not parse, and lets the last duplicate win. Here
    the first one named so wins (the browser sends the most specific path first).
    """
    name = cookie_name(secure)
    for pair in headers.get("cookie", "").split(";"):
        key, sep, value = pair.strip().partition("=")
        if sep and key.strip() == name:
            value = value.strip()
            return value if _TOKEN.fullmatch(value) else None
    return None


def new_token() -> str:
    return secrets.token_urlsafe(32)


def set_cookie(token: str, base: str, secure: bool) -> tuple[str, str]:
    """``base`` percent-encoded: a ``;`` in it must not end the cookie's attributes."""
    if secure:  # __Host-: Secure, Path=/ and no Domain, or the browser drops it
        return (
            "Set-Cookie",
            f"{HOST_CSRF_COOKIE}={token}; Path=/; Secure; HttpOnly; SameSite=Strict",
        )
    return ("Set-Cookie", f"{CSRF_COOKIE}={token}; Path={base}/; HttpOnly; SameSite=Strict")


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int] | None:
    """Scheme, host and port of a URL (the default port filled in), None if it has none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def _same_origin(
    headers: Mapping[str, str], secure: bool, trusted: frozenset[tuple[str, str, int]]
) -> bool:
    site = headers.get("sec-fetch-site")
    if site is not None:  # set by the browser, never by a page: it decides
        return site.strip().lower() == "same-origin"
    claimed = headers.get("origin")
    if claimed is None:
        claimed = headers.get("referer")
    if claimed is None:
        return False  # a browser sends one of the three on a form's POST
    origin = origin_of(claimed)  # "null" has none: refused
    if origin is None:
        return False
    own = origin_of(f"{'https' if secure else 'http'}://{headers.get('host', '')}")
    return origin == own or origin in trusted


def check_form(
    *,
    form: bytes,
    content_type: str,
    headers: Mapping[str, str],
    secure: bool,
    trusted: frozenset[tuple[str, str, int]],
    actions: tuple[str, ...] = ACTIONS,
) -> dict[str, str]:
    """The fields of a POSTed form (each one's first value) once the page's own gates
    passed: its size, type, a known ``do``, same-origin, the CSRF token; raises
    :class:`Refused` (plain text: no page of ours asked for it)."""
    if len(form) > MAX_FORM:
        raise Refused(413, "the form is too large")
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise Refused(415, "an action is posted as a form (application/x-www-form-urlencoded)")
    fields = {
        key: values[0]
        for key, values in parse_qs(form.decode("utf-8", "replace"), keep_blank_values=True).items()
    }
    action = fields.get("do", "")
    if action not in actions:
        raise Refused(400, f"unknown action {action!r}: {', '.join(actions[:-1])} or {actions[-1]}")
    if not _same_origin(headers, secure, trusted):
        raise Refused(403, "refused: a cross-site request")
    token = fields.get("csrf", "")
    cookie = csrf_cookie(headers, secure)
    # (the shape first: compare_digest raises TypeError on a non-ASCII str)
    if cookie is None or not _TOKEN.fullmatch(token):
        raise Refused(403, "refused: missing or wrong CSRF token (reload the page)")
    if not hmac.compare_digest(token.encode(), cookie.encode()):
        raise Refused(403, "refused: missing or wrong CSRF token (reload the page)")
    return fields


def ask(authorize: Authorize, asked: ActionRequest) -> str | None:
    """The hook's answer: None refuses; else who asked (the string the hook returned, or
    ``""`` for True). Anything but True or a non-empty string refuses, and so does an
    exception in the hook: it never lets an action through."""
    try:
        answer = authorize(asked)
    except Exception:
        logger.exception("status page: the authorize hook raised; the action is refused")
        return None
    if answer is True:
        return ""
    if isinstance(answer, str) and answer.strip():
        return answer.strip()
    return None


def check(
    *,
    form: bytes,
    content_type: str,
    headers: Mapping[str, str],
    secure: bool,
    trusted: frozenset[tuple[str, str, int]],
    resolve: Callable[[str], str],
    request: Callable[[str, str], ActionRequest],
    authorize: Authorize,
) -> ActionRequest:
    """The action a POST asks for, once every check passed; raises :class:`Refused`.

    ``resolve`` turns the posted task name into the stored one (404 if none);
    the hook is asked about that one, never about the posted text.
    """
    fields = check_form(
        form=form, content_type=content_type, headers=headers, secure=secure, trusted=trusted
    )
    action = fields["do"]
    asked = request(action, resolve(fields.get("task", "")))
    if ask(authorize, asked) is None:
        raise Refused(403, "refused: not authorized", Notice(action, "forbidden", asked.task))
    return asked


def resolver(scheduler: Scheduler) -> Callable[[str], str]:
    """The stored name of the task a form names (as declared, any Unicode form)."""

    def resolve(posted: str) -> str:
        try:
            return scheduler.get_task(posted).full_name
        except UnknownTaskError:
            raise Refused(404, f"no task named {posted!r}") from None

    return resolve


#: seconds a run-now POST waits for the run to start (or end) before it answers
RUN_WAIT = 5.0


def perform(scheduler: Scheduler, action: ActionRequest, *, wait: float = RUN_WAIT) -> str:
    """Do ``action``; the result its notice shows (:mod:`cronlease.web.notice`).

    Pause or resume now. A manual run goes in a thread of its own (it may last
    hours), and the answer waits up to ``wait`` seconds for it to start: the page
    the browser is sent to then shows it running (its row is written as it
    starts), or says it was not run (paused, or already running somewhere).
    """
    task = next((t for t in scheduler.tasks.values() if t.full_name == action.task), None)
    if task is None:  # (resolved by check(): only if the hook's request was made by hand)
        raise Refused(404, f"no task named {action.task!r}")
    try:
        if action.action == "pause":
            scheduler.pause(task.name)
            result = "paused"
        elif action.action == "resume":
            scheduler.resume(task.name)
            result = "resumed"
        else:
            result = _start_run(scheduler, task.name, wait)
    except StoreError:  # (its text may name the database: the page's JSON shows it scrubbed)
        refused = Notice(action.action, "unavailable", action.task)
        raise Refused(503, "database unavailable: the action was not done", refused) from None
    logger.info(
        "status page: %s %s (asked by %s): %s", action.action, task.name, action.client, result
    )
    return result


def _start_run(scheduler: Scheduler, name: str, wait: float) -> str:
    """``started``, ``pending`` (not started within ``wait``), or how it ended."""
    started = threading.Event()
    ended: list[str] = []

    def on_start(event: RunStarted) -> None:
        # (emitted on the thread that runs it: this one's run, not another manual run)
        if threading.current_thread() is thread:
            started.set()

    def run() -> None:
        try:
            ended.append(_run_now(scheduler, name))
        finally:
            started.set()

    thread = threading.Thread(target=run, name="cronlease-run-now", daemon=True)
    unsubscribe = scheduler.listen(on_start, RunStarted)
    try:
        thread.start()
        started.wait(wait)
    finally:
        unsubscribe()
    if ended:
        return ended[0]
    return "started" if started.is_set() else "pending"


def _run_now(scheduler: Scheduler, name: str) -> str:
    try:
        outcome = scheduler.run_now(name)
    except StoreError as exc:
        scrub = Scrubber.of(scheduler.store)
        logger.warning("status page: run now %s: database unavailable: %s", name, scrub(str(exc)))
        return "unavailable"
    except Exception:  # (a thread of its own: nobody else would hear of it)
        logger.exception("status page: run now %s failed", name)
        return "error"
    if outcome is None:
        logger.info("status page: run now %s: not run (running elsewhere or paused)", name)
        return "not-run"
    return f"ended-{outcome}"
