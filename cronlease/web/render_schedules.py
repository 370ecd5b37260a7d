"""The schedules pages' HTML: the list with its add form, and one schedule with its edit
form, buttons and history. Formats what :class:`cronlease.Schedules` returns
(``StoredSchedule``, ``ScheduleChange``, ``jobs()``); every value escaped, no
JavaScript, the overview's look (:mod:`cronlease.web.markup`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from cronlease._schedules.model import ScheduleChange, StoredSchedule
from cronlease.web.markup import document, e, relative
from cronlease.web.notice import Notice

__all__ = ["SCHEDULE_COLUMNS", "render_schedule", "render_schedules", "schedule_url"]

#: the list's columns, in order
SCHEDULE_COLUMNS: tuple[str, ...] = ("schedule", "job", "when", "arguments", "enabled")
SCHEDULE_COLUMNS += ("version", "changed by", "changed", "state")

_HINTS = {
    "name": "letters, digits, - _ . : /",
    "every": "e.g. 30s, 5m, 1h (or a cron line below)",
    "cron": "e.g. 0 3 * * *",
    "timezone": "e.g. Europe/Berlin (cron only)",
    "args": 'JSON array, e.g. ["acme"]',
    "kwargs": 'JSON object, e.g. {"customer": "acme"}',
    "options": 'JSON object: grace, timeout, retries, ... e.g. {"retries": 2}',
}


def schedule_url(base: str, name: str) -> str:
    return f"{base}/schedule?name={quote(name, safe='')}"


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def when_text(schedule: StoredSchedule) -> str:
    if schedule.cron is not None:
        zone = f" ({schedule.timezone})" if schedule.timezone else ""
        return f"cron {schedule.cron!r}{zone}"
    return f"every {schedule.every}" if schedule.every else "-"


def arguments_text(schedule: StoredSchedule) -> str:
    parts = [json.dumps(list(schedule.args))] if schedule.args else []
    parts += [f"{k}={json.dumps(v)}" for k, v in sorted(schedule.kwargs.items())]
    return ", ".join(parts)


def state_cell(schedule: StoredSchedule) -> str:
    """The model's word on whether replicas run it: ``invalid`` (why), no live replica
    offering its job (none runs it), or ok and by how many."""
    if schedule.invalid:
        why = e(schedule.invalid)
        return f'<span class="s-failing">invalid</span> <span class="sub">{why}</span>'
    if not schedule.offered_by:
        why = e(f"no live replica offers job {schedule.job!r}: none runs it")
        return f'<span class="s-paused">not offered</span> <span class="sub">{why}</span>'
    count = len(schedule.offered_by)
    holders = e(", ".join(schedule.offered_by))
    replicas = f"{count} live replica{'s' if count != 1 else ''}"
    offered = f'<span class="sub" title="{holders}">offered by {replicas}</span>'
    return f'<span class="s-idle">ok</span> {offered}'


def _row(schedule: StoredSchedule, base: str, now: datetime) -> str:
    cells = [
        f'<td><a href="{e(schedule_url(base, schedule.name))}">{e(schedule.name)}</a></td>',
        f"<td>{e(schedule.job)}</td>",
        f"<td>{e(when_text(schedule))}</td>",
        f"<td><code>{e(arguments_text(schedule))}</code></td>",
        f"<td>{'yes' if schedule.enabled else 'disabled'}</td>",
        f"<td>{schedule.version:d}</td>",
        f"<td>{e(schedule.changed_by)}</td>",
        f"<td>{relative(_iso(schedule.changed_at), now)}</td>",
        f"<td>{state_cell(schedule)}</td>",
    ]
    return f'<tr id="schedule-{e(schedule.name)}">{"".join(cells)}</tr>'


def _jobs_line(jobs: Mapping[str, Sequence[str]]) -> str:
    if not jobs:
        return '<p class="meta" id="jobs">No job is known: no live replica offers one.</p>'

    def offered(holders: Sequence[str]) -> str:
        if not holders:
            return " (no live replica offers it)"
        return f" (offered by {len(holders)} live replica{'s' if len(holders) != 1 else ''})"

    listed = ", ".join(
        f"<code>{e(name)}</code>{offered(holders)}" for name, holders in jobs.items()
    )
    return f'<p class="meta" id="jobs">jobs: {listed}</p>'


def _input(key: str, value: str, *, area: bool = False) -> str:
    label = f'<label for="f-{key}">{key}</label>'
    hint = f' <span class="sub">{e(_HINTS[key])}</span>' if key in _HINTS else ""
    shown = e(value) if value else ""  # (e() shows nothing as a dash)
    if area:
        box = f'<textarea id="f-{key}" name="{key}" rows="2" cols="48">{shown}</textarea>'
    else:
        box = f'<input id="f-{key}" name="{key}" value="{shown}" size="40">'
    return f"<dt>{label}</dt><dd>{box}{hint}</dd>"


def _job_select(chosen: str, jobs: Mapping[str, Sequence[str]]) -> str:
    names = list(jobs)
    if chosen and chosen not in jobs:  # what was posted, shown back as it was
        names.insert(0, chosen)
    options = "".join(
        f'<option value="{e(name)}"{" selected" if name == chosen else ""}>{e(name)}</option>'
        for name in names
    )
    select = f'<select id="f-job" name="job">{options}</select>'
    return f'<dt><label for="f-job">job</label></dt><dd>{select}</dd>'


def schedule_form(
    form: Any, jobs: Mapping[str, Sequence[str]], base: str, csrf: str, *, adding: bool
) -> str:
    """The add form (``adding``) or a schedule's edit form, filled with ``form``'s values
    (a :class:`cronlease.web.schedules.SchedulesForm`)."""
    values = form.values
    rows = [
        _input("name", values["name"])
        if adding
        else f'<input type="hidden" name="name" value="{e(values["name"])}">'
        f'<input type="hidden" name="version" value="{e(form.version)}">',
        _job_select(values["job"], jobs),
        _input("every", values["every"]),
        _input("cron", values["cron"]),
        _input("timezone", values["timezone"]),
        _input("args", values["args"], area=True),
        _input("kwargs", values["kwargs"], area=True),
        _input("options", values["options"], area=True),
        '<dt><label for="f-enabled">enabled</label></dt><dd><input type="checkbox" '
        f'id="f-enabled" name="enabled" value="yes"{" checked" if form.enabled else ""}></dd>',
    ]
    do = "schedule-add" if adding else "schedule-set"
    label = "add schedule" if adding else f"save (version {e(form.version)})"
    return (
        f'<form method="post" action="{e(base + "/schedules")}" id="{do}-form">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">'
        f'<input type="hidden" name="do" value="{do}">'
        f'<dl class="facts form">{"".join(rows)}</dl>'
        f'<button type="submit" id="{do}">{label}</button></form>'
    )


def _button(base: str, csrf: str, schedule: StoredSchedule, do: str, label: str) -> str:
    return (
        f'<form class="act" method="post" action="{e(base + "/schedules")}">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">'
        f'<input type="hidden" name="do" value="{do}">'
        f'<input type="hidden" name="name" value="{e(schedule.name)}">'
        f'<input type="hidden" name="version" value="{schedule.version:d}">'
        f'<button type="submit" id="{do}">{label}</button></form>'
    )


def _header(title: str, base: str, heading: str, notice: Notice | None, error: str) -> list[str]:
    parts = [
        f'<h1><a href="{e(base + "/")}">{e(title)}</a></h1><p class="meta">'
        f'<a href="{e(base + "/schedules")}">schedules kept in the database</a></p>',
        f"<h2>{e(heading)}</h2>",
    ]
    if notice is not None:
        kind = "ok" if notice.good else "bad"
        parts.append(
            f'<div class="notice {kind}" id="notice" role="status"><b>{e(notice.task)}</b>: '
            f"{e(notice.words())}</div>"
        )
    if error:
        parts.append(f'<div class="problem" id="form-error" role="alert">{e(error)}</div>')
    return parts


def _footer(database: str, namespace: str | None) -> str:
    space = f" · namespace <code>{e(namespace)}</code>" if namespace else ""
    return f'<p class="meta" id="source">database <code>{e(database)}</code>{space}</p>'


def render_schedules(
    listed: Sequence[StoredSchedule] | None,
    jobs: Mapping[str, Sequence[str]],
    form: Any,
    *,
    title: str,
    base: str,
    csrf: str,
    database: str,
    namespace: str | None,
    notice: Notice | None = None,
    error: str = "",
) -> str:
    """Every schedule (None: they could not be read, ``error`` says why), and the add
    form filled with ``form``."""
    now = datetime.now(timezone.utc)
    body = _header(title, base, "schedules", notice, error)
    if listed:
        body.append('<div class="scroll"><table class="tasks" id="schedules"><thead><tr>')
        body.append("".join(f"<th>{name}</th>" for name in SCHEDULE_COLUMNS))
        body.append("</tr></thead><tbody>")
        body.extend(_row(schedule, base, now) for schedule in listed)
        body.append("</tbody></table></div>")
    elif listed is not None:
        body.append('<p class="meta">No schedules in the database.</p>')
    body.append('<h2 id="add">add a schedule</h2>')
    body.append(_jobs_line(jobs))
    body.append(schedule_form(form, jobs, base, csrf, adding=True))
    body.append(_footer(database, namespace))
    return document(f"schedules · {title}", None, body)


def _history(history: Sequence[ScheduleChange], now: datetime) -> list[str]:
    if not history:
        return ['<p class="meta">No changes recorded.</p>']
    rows = [
        f"<tr><td>{change.version:d}</td><td>{e(change.action)}</td>"
        f"<td>{relative(_iso(change.changed_at), now)}</td><td>{e(change.changed_by)}</td>"
        f"<td><code>{e(change.text())}</code></td></tr>"
        for change in reversed(history)  # the latest first, as runs are
    ]
    return [
        '<table class="runs" id="changes"><thead><tr><th>version</th><th>action</th>'
        "<th>when</th><th>who</th><th>what changed</th></tr></thead><tbody>",
        *rows,
        "</tbody></table>",
    ]


def render_schedule(
    schedule: StoredSchedule | None,
    history: Sequence[ScheduleChange],
    jobs: Mapping[str, Sequence[str]],
    form: Any,
    *,
    name: str,
    title: str,
    base: str,
    csrf: str,
    database: str,
    namespace: str | None,
    notice: Notice | None = None,
    error: str = "",
) -> str:
    """One schedule (None: removed, only its history is left): its facts, its edit form
    filled with ``form``, its buttons, and its history, the latest change first."""
    now = datetime.now(timezone.utc)
    body = _header(title, base, name, notice, error)
    if schedule is None:
        body.append('<p class="meta">Not in the database (removed): its history is kept.</p>')
    else:
        facts = [
            ("job", e(schedule.job)),
            ("when", e(when_text(schedule))),
            ("arguments", f"<code>{e(arguments_text(schedule))}</code>"),
            ("enabled", "yes" if schedule.enabled else "disabled"),
            ("version", f"{schedule.version:d}"),
            ("changed", f"{relative(_iso(schedule.changed_at), now)} by {e(schedule.changed_by)}"),
            ("state", state_cell(schedule)),
        ]
        body.append(
            '<dl class="facts" id="facts">'
            + "".join(f"<dt>{key}</dt><dd>{value}</dd>" for key, value in facts)
            + "</dl>"
        )
        toggle = (
            ("schedule-disable", "disable") if schedule.enabled else ("schedule-enable", "enable")
        )
        body.append(
            f'<p id="actions">{_button(base, csrf, schedule, *toggle)} '
            f"{_button(base, csrf, schedule, 'schedule-remove', 'remove')}</p>"
        )
        body.append('<h2 id="edit">edit</h2>')
        body.append(_jobs_line(jobs))
        body.append(schedule_form(form, jobs, base, csrf, adding=False))
    body.append('<h2 id="history">history</h2>')
    body.extend(_history(history, now))
    body.append(_footer(database, namespace))
    return document(f"{name} · schedules · {title}", None, body)
