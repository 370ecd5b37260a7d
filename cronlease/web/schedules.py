"""The schedules page: the schedules kept in the database, read and written through
:class:`cronlease.Schedules` (docs/design.md §5.30, §5.37).

Only with actions enabled (``StatusPage(actions=True, authorize=...)``):
``GET /schedules`` lists them with a form to add one, ``GET /schedule?name=``
shows one with its edit form, its enable/disable and remove buttons and its
history, and ``POST /schedules`` writes (``do``: ``schedule-add``, ``-set``,
``-enable``, ``-disable``, ``-remove``). A POST passes the gates of the
task actions (:func:`cronlease.web.actions.check_form`: size, type,
same-origin, CSRF token), then the ``authorize`` hook, asked about the
schedule's stored name; what the hook returns, when it is a string, is the
``changed_by`` of the change (True records ``status page (client address)``).

The page formats what the model returns and decides nothing: every write is
the model's, and so is every refusal, shown in the form with the input kept:
a form that cannot be read (JSON that does not parse, no version) is 400, a
change the model refuses (unknown job, arguments that do not fit, a bad cron,
a name a code task uses) 422, a stale version 409 with the model's words (the
newer version, who made it), an unknown schedule 404, the database down 503.
A write done answers 303 to the schedule's page (the list, after a removal)
with a one-time notice (:mod:`cronlease.web.notice`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cronlease._schedules.model import Schedules, StoredSchedule
from cronlease._service import check_task_name
from cronlease._status import Scrubber
from cronlease.errors import (
    ConfigError,
    StaleScheduleError,
    StoreError,
    UnknownScheduleError,
)
from cronlease.web.actions import SCHEDULE_ACTIONS, ActionRequest, Authorize, ask
from cronlease.web.notice import Notice

__all__ = ["FORM_FIELDS", "Outcome", "SchedulesForm", "changer", "write"]

logger = logging.getLogger("cronlease")

#: the fields of the add and edit forms, in order
FORM_FIELDS = ("name", "job", "every", "cron", "timezone", "args", "kwargs", "options")
#: what a successful write's notice says (notice.py's result codes)
_DONE = {
    "schedule-add": "added",
    "schedule-set": "changed",
    "schedule-enable": "enabled",
    "schedule-disable": "disabled",
    "schedule-remove": "removed",
}
#: keyword arguments of ``Schedules.add``/``update`` that are not options
_FIELDS = {"name", "job", "every", "cron", "timezone", "args", "kwargs", "enabled"}
_RESERVED = _FIELDS | {"changed_by", "expected_version"}


class FormError(ValueError):
    """A field of the form cannot be read: 400."""


@dataclass
class SchedulesForm:
    """A posted schedule form, as text (what the page shows back when it is refused)."""

    action: str
    values: dict[str, str]
    enabled: bool
    version: str

    @classmethod
    def of(cls, fields: Mapping[str, str]) -> SchedulesForm:
        return cls(
            action=fields.get("do", ""),
            values={key: fields.get(key, "").strip() for key in FORM_FIELDS},
            enabled=fields.get("enabled", "") != "",
            version=fields.get("version", "").strip(),
        )

    @property
    def name(self) -> str:
        return self.values["name"]

    def expected_version(self) -> int:
        try:
            version = int(self.version)
        except ValueError:
            raise FormError("version: the form carries the version it was read at") from None
        if version < 1:
            raise FormError("version: must be 1 or more")
        return version

    def _json(self, key: str, kind: type, empty: Any) -> Any:
        text = self.values[key]
        if not text:
            return empty
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise FormError(f"{key}: not JSON ({exc})") from None
        if not isinstance(value, kind):
            what = 'array, e.g. [1, "a"]' if kind is list else 'object, e.g. {"k": 1}'
            raise FormError(f"{key}: must be a JSON {what}")
        return value

    def fields(self) -> dict[str, Any]:
        """What the add and edit forms give the model: the schedule's fields, the
        options as keywords; FormError (400) for what cannot be read."""
        options = self._json("options", dict, {})
        clash = sorted(set(options) & _RESERVED)
        if clash:
            raise FormError(f"options: {', '.join(clash)} is a field of its own, not an option")
        return {
            "job": self.values["job"],
            "every": self.values["every"] or None,
            "cron": self.values["cron"] or None,
            "timezone": self.values["timezone"] or None,
            "args": self._json("args", list, []),
            "kwargs": self._json("kwargs", dict, {}),
            "enabled": self.enabled,
            **options,
        }

    @classmethod
    def shown(cls, schedule: StoredSchedule) -> SchedulesForm:
        """The edit form of a stored schedule."""
        values = {
            "name": schedule.name,
            "job": schedule.job,
            "every": schedule.every or "",
            "cron": schedule.cron or "",
            "timezone": schedule.timezone or "",
            "args": json.dumps(list(schedule.args)),
            "kwargs": json.dumps(dict(schedule.kwargs), sort_keys=True),
            "options": json.dumps(dict(schedule.options), sort_keys=True)
            if schedule.options
            else "",
        }
        return cls("schedule-set", values, schedule.enabled, str(schedule.version))


@dataclass
class Outcome:
    """What a POST did: a ``notice`` and where to go (303), or a refusal (``code``,
    ``error``) to show with the ``form`` posted (or the schedule as it now is)."""

    form: SchedulesForm
    code: int = 303
    error: str = ""
    notice: Notice | None = None
    #: the schedule whose page shows the outcome (None: the list)
    page: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def changer(who: str, client: str | None) -> str:
    """``changed_by`` for a write the hook allowed: the identity it returned, else the
    page and the client's address."""
    return who or (f"status page ({client})" if client else "status page")


def stored_name(schedules: Schedules, name: str) -> str:
    """The name the hook is asked about: as stored (NFC, the namespace added)."""
    full = f"{schedules.namespace}:{name}" if schedules.namespace else name
    return check_task_name(full)


def write(
    schedules: Schedules,
    fields: Mapping[str, str],
    *,
    authorize: Authorize,
    request: Callable[[str, str], ActionRequest],
    client: str | None,
) -> Outcome:
    """Do what a form that passed the page's gates asks, if the hook allows it."""
    form = SchedulesForm.of(fields)
    action = form.action
    assert action in SCHEDULE_ACTIONS  # (check_form checked it)
    try:
        full = stored_name(schedules, form.name)
    except ConfigError as exc:
        return Outcome(form, 422, f"name: {exc}")
    who = ask(authorize, request(action, full))
    if who is None:
        return Outcome(form, 403, f"{action.removeprefix('schedule-')} refused: not authorized")
    changed_by = changer(who, client)
    page = None if action in ("schedule-add", "schedule-remove") else form.name
    try:
        if action == "schedule-add":
            given = form.fields()
            schedules.add(form.name, changed_by=changed_by, **given)
            page = form.name
        elif action == "schedule-set":
            version, given = form.expected_version(), form.fields()
            current = schedules.get(form.name)
            # what the form no longer lists goes back to its default
            reset = {key: None for key in current.options if key not in given}
            schedules.update(
                form.name, expected_version=version, changed_by=changed_by, **given, **reset
            )
        elif action == "schedule-remove":
            schedules.remove(
                form.name, expected_version=form.expected_version(), changed_by=changed_by
            )
        else:
            schedules.update(
                form.name,
                expected_version=form.expected_version(),
                changed_by=changed_by,
                enabled=action == "schedule-enable",
            )
    except FormError as exc:
        return Outcome(form, 400, str(exc), page=page or form.name or None)
    except StaleScheduleError as exc:
        return Outcome(form, 409, str(exc), page=form.name, extra={"stale": True})
    except UnknownScheduleError as exc:
        return Outcome(form, 404, str(exc))
    except ConfigError as exc:  # ScheduleError, UnknownJobError, a changed_by refused
        return Outcome(form, 422, str(exc), page=None if action == "schedule-add" else form.name)
    except StoreError as exc:
        scrub = Scrubber.of(schedules.store)
        return Outcome(form, 503, f"database unavailable, nothing written: {scrub(str(exc))}")
    logger.info("status page: %s %s (by %s, from %s)", action, form.name, changed_by, client or "-")
    return Outcome(form, notice=Notice(action, _DONE[action], form.name), page=page)
