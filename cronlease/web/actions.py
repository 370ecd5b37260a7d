"""The page's actions (run now, pause, resume): refused unless every check passes.

An action is a POST to ``<mount>/action`` with the form fields ``task``, ``do``
(``run``, ``pause`` or ``resume``) and ``csrf``. It is performed only when the
mounting application enabled actions, the request is same-origin, its CSRF token
is right and the application's ``authorize`` hook says yes; then it goes through
the scheduler's public methods (``run_now``, ``pause``, ``resume``), never SQL.

CSRF: a double-submit cookie. The page sets ``cronlease_csrf`` (random,
``HttpOnly``, ``SameSite=Strict``, scoped to the mount point) and writes the
same value in each action form; a POST must carry both, equal. Chosen over an
HMAC of a per-process secret because an application running cronlease has several
replicas behind a load balancer: the form one replica served is posted to another,
and a cookie needs no secret shared between them. Another site can neither read the
cookie nor (SameSite=Strict) have the browser send it; ``Origin`` and
``Sec-Fetch-Site``, when the browser sends them, must say same-origin too.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from cronlease._status import Scrubber
from cronlease.errors import StoreError, UnknownTaskError

if TYPE_CHECKING:
    from cronlease._scheduler import Scheduler

__all__ = ["ACTIONS", "CSRF_COOKIE", "ActionRequest", "Authorize", "Refused", "perform"]

logger = logging.getLogger("cronlease")

ACTIONS = ("run", "pause", "resume")
CSRF_COOKIE = "cronlease_csrf"
MAX_FORM = 4096  # bytes: the three fields are far shorter
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ActionRequest:
    """What the ``authorize`` hook is asked about: an action on a task, and the request.

    ``headers`` have lower-case names; ``raw`` is the WSGI environ or the ASGI
    scope as the server gave it (the application's own session or user lives there).
    """

    action: str
    task: str
    method: str
    path: str
    headers: Mapping[str, str]
    client: str | None
    raw: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {self.action!r}")


Authorize = Callable[[ActionRequest], bool]


class Refused(Exception):
    """An action refused: ``code`` is the HTTP status, the message says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def csrf_cookie(headers: Mapping[str, str]) -> str | None:
    """The request's CSRF cookie, if it has a well-formed one."""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except CookieError:
        return None
    morsel = jar.get(CSRF_COOKIE)
    return morsel.value if morsel is not None and _TOKEN.fullmatch(morsel.value) else None


def new_token() -> str:
    return secrets.token_urlsafe(32)


def set_cookie(token: str, base: str, secure: bool) -> tuple[str, str]:
    path = base + "/" if base else "/"
    flags = "; Secure" if secure else ""
    return ("Set-Cookie", f"{CSRF_COOKIE}={token}; Path={path}; HttpOnly; SameSite=Strict{flags}")


def _same_origin(headers: Mapping[str, str]) -> bool:
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None or origin == "null":
        # the page's own "Referrer-Policy: no-referrer" has browsers send "null": unknown,
        # so the cookie (SameSite=Strict) and the token decide
        return True
    return urlsplit(origin).netloc == headers.get("host")


def check(
    *,
    form: bytes,
    content_type: str,
    request: Callable[[str, str], ActionRequest],
    authorize: Authorize,
) -> ActionRequest:
    """The action a POST asks for, once every check passed; raises :class:`Refused`."""
    if len(form) > MAX_FORM:
        raise Refused(413, "the form is too large")
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise Refused(415, "an action is posted as a form (application/x-www-form-urlencoded)")
    fields = parse_qs(form.decode("utf-8", "replace"), keep_blank_values=True)
    task, action, token = (fields.get(key, [""])[0] for key in ("task", "do", "csrf"))
    if action not in ACTIONS:
        raise Refused(400, f"unknown action {action!r}: run, pause or resume")
    asked = request(action, task)
    if not _same_origin(asked.headers):
        raise Refused(403, "refused: a cross-site request")
    cookie = csrf_cookie(asked.headers)
    if not token or cookie is None or not hmac.compare_digest(token, cookie):
        raise Refused(403, "refused: missing or wrong CSRF token (reload the page)")
    try:
        allowed = authorize(asked) is True
    except Exception:  # an error in the hook refuses: it never lets an action through
        logger.exception("status page: the authorize hook raised; the action is refused")
        allowed = False
    if not allowed:
        raise Refused(403, "refused: not authorized")
    return asked


def perform(scheduler: Scheduler, action: ActionRequest) -> None:
    """Pause or resume now; start a manual run in a thread of its own (it may last hours)."""
    try:
        task = scheduler.get_task(action.task)
    except UnknownTaskError:
        raise Refused(404, f"no task named {action.task!r}") from None
    try:
        if action.action == "pause":
            scheduler.pause(task.name)
        elif action.action == "resume":
            scheduler.resume(task.name)
        else:
            threading.Thread(
                target=_run_now, args=(scheduler, task.name), name="cronlease-run-now", daemon=True
            ).start()
    except StoreError:  # (its text may name the database: the page's JSON shows it scrubbed)
        raise Refused(503, "database unavailable: the action was not done") from None
    logger.info("status page: %s %s (asked by %s)", action.action, task.name, action.client)


def _run_now(scheduler: Scheduler, name: str) -> None:
    try:
        outcome = scheduler.run_now(name)
    except StoreError as exc:
        scrub = Scrubber.of(scheduler.store)
        logger.warning("status page: run now %s: database unavailable: %s", name, scrub(str(exc)))
        return
    if outcome is None:
        logger.info("status page: run now %s: not run (running elsewhere or paused)", name)
