"""What an action did, said on the page it redirects to: a one-time notice (a "flash").

The POST answers a 303 with a short-lived cookie naming the action, its result
and the task; the next HTML page read shows it once and clears it, so a reload
or the page's own refresh does not say it again. A cookie rather than a query
parameter: a link cannot make a page claim "paused", and a bookmark or the
refresh does not repeat it. It is client-side, so the page a replica behind a
load balancer serves next shows the notice another replica set. The cookie holds
codes, never text: the words are the page's, the task name is escaped as any value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from cronlease._status import FINAL_OUTCOMES

__all__ = [
    "HOST_NOTICE_COOKIE",
    "NOTICE_COOKIE",
    "Notice",
    "clear_notice",
    "has_notice",
    "notice_of",
    "set_notice",
]

NOTICE_COOKIE = "cronlease_notice"
#: over HTTPS, pinned as the CSRF cookie is (actions.py): ``Secure``, ``Path=/``, no
#: ``Domain``, so neither a sibling subdomain nor a plain-HTTP answer can plant one
HOST_NOTICE_COOKIE = "__Host-cronlease_notice"
#: seconds the notice waits for the page read after the redirect
NOTICE_AGE = 60
_CODE = re.compile(
    r"(run|pause|resume|schedule-(?:add|set|enable|disable|remove))\.([a-z_-]{1,24})"
)

_VERBS = {
    "run": "run now",
    "pause": "pause",
    "resume": "resume",
    "schedule-add": "add",
    "schedule-set": "change",
    "schedule-enable": "enable",
    "schedule-disable": "disable",
    "schedule-remove": "remove",
}
#: result -> (good?, words); an action's own results first, then refusals
_WORDS: dict[str, tuple[bool, str]] = {
    "paused": (True, "paused"),
    "resumed": (True, "resumed"),
    "started": (True, "run started"),
    "pending": (True, "run asked for: not started yet"),
    "added": (True, "schedule added"),
    "changed": (True, "schedule changed"),
    "enabled": (True, "schedule enabled"),
    "disabled": (True, "schedule disabled"),
    "removed": (True, "schedule removed"),
    "not-run": (False, "not run: it is paused, or a run of it is already in progress"),
    "forbidden": (False, "{verb} refused: not authorized"),
    "unavailable": (False, "{verb} not done: database unavailable"),
    "error": (False, "{verb} failed: see this replica's log"),
}
_ENDED = "ended-"  # "ended-failed": a run that finished before the page was answered


@dataclass(frozen=True)
class Notice:
    """One action's notice: ``good`` is False for a refusal or a failure."""

    action: str
    result: str
    task: str

    @property
    def good(self) -> bool:
        if self.result.startswith(_ENDED):
            return self.result == f"{_ENDED}succeeded"
        return _WORDS[self.result][0]

    def words(self) -> str:
        """What happened, without the task's name (the page escapes and prefixes it)."""
        if self.result.startswith(_ENDED):
            return f"run finished: {self.result[len(_ENDED) :].replace('_', ' ')}"
        return _WORDS[self.result][1].format(verb=_VERBS[self.action])


def _known(action: str, result: str) -> bool:
    if not _CODE.fullmatch(f"{action}.{result}"):
        return False
    if result.startswith(_ENDED):  # an outcome a run can end with, no other word
        return action == "run" and result[len(_ENDED) :] in FINAL_OUTCOMES
    return result in _WORDS


def _name(secure: bool) -> str:
    return HOST_NOTICE_COOKIE if secure else NOTICE_COOKIE


def _attributes(base: str, secure: bool) -> str:
    if secure:  # __Host-: Secure, Path=/ and no Domain, or the browser drops it
        return "Path=/; Secure; HttpOnly; SameSite=Strict"
    return f"Path={base}/; HttpOnly; SameSite=Strict"


def set_notice(notice: Notice, base: str, secure: bool) -> tuple[str, str]:
    """The 303's header carrying ``notice`` (``base`` percent-encoded)."""
    if not _known(notice.action, notice.result):
        raise ValueError(f"no such notice: {notice.action}.{notice.result}")
    value = f"{notice.action}.{notice.result}.{quote(notice.task, safe='')}"
    attributes = _attributes(base, secure)
    return ("Set-Cookie", f"{_name(secure)}={value}; Max-Age={NOTICE_AGE}; {attributes}")


def clear_notice(base: str, secure: bool) -> tuple[str, str]:
    """The header that ends the notice once a page showed it."""
    return ("Set-Cookie", f"{_name(secure)}=; Max-Age=0; {_attributes(base, secure)}")


def has_notice(headers: Mapping[str, str], secure: bool) -> bool:
    """Whether the request carries a notice cookie (shown or not, it is cleared)."""
    return _cookie(headers, secure) is not None


def notice_of(headers: Mapping[str, str], secure: bool) -> Notice | None:
    """The request's notice, None when it has none (or one this page did not write)."""
    value = _cookie(headers, secure)
    if not value:
        return None
    action, _, rest = value.partition(".")
    result, _, task = rest.partition(".")
    if not _known(action, result) or not task:
        return None
    return Notice(action, result, unquote(task, errors="replace"))


def _cookie(headers: Mapping[str, str], secure: bool) -> str | None:
    name = _name(secure)
    for pair in headers.get("cookie", "").split(";"):
        key, sep, value = pair.strip().partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None
