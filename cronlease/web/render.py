"""The overview: one row per task, failing and overdue ones first and counted in a banner.

It formats what :func:`~cronlease.web.collect.collect_status` returns (the
status model as JSON) and derives nothing: the state shown, the outcomes and
the skipped counts are the model's. Server-rendered, no JavaScript, every value escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from cronlease._status import lease_text, no_job_words, no_replica_words
from cronlease.web.markup import (
    TASK_COLUMNS,
    document,
    e,
    outcome_class,
    outcome_strip,
    parse_time,
    relative,
)
from cronlease.web.notice import Notice

DEFAULT_REFRESH = 10
#: shown states that put a task at the top of the overview, in this order
FLAGGED = ("invalid", "failing", "overdue")


def shown_state(task: Mapping[str, Any]) -> str:
    return str(task["shown_state"])


def task_url(base: str, task: Mapping[str, Any]) -> str:
    return f"{base}/task?name={quote(task['name'], safe='')}"


def action_forms(
    base: str, task: Mapping[str, Any], token: str | None, *, labels: bool = False
) -> str:
    """The run-now and pause/resume buttons of a declared task (none without a token)."""
    if token is None or not task["declared"]:
        return ""
    pause = ("resume", "resume") if task["paused"] else ("pause", "pause")
    forms = []
    for do, label in (("run", "run now"), pause):
        forms.append(
            f'<form class="act" method="post" action="{e(base + "/action")}">'
            f'<input type="hidden" name="task" value="{e(task["task"])}">'
            f'<input type="hidden" name="do" value="{do}">'
            f'<input type="hidden" name="csrf" value="{e(token)}">'
            f'<button type="submit" name="go" value="{do}" '
            f'id="{do}-{e(task["task"])}">{label}</button></form>'
        )
    return " ".join(forms)


def skipped_text(skipped: Mapping[str, int] | None) -> str:
    if not skipped:
        return "-"
    return ", ".join(f"{count:d} {e(reason)}" for reason, count in sorted(skipped.items()))


def schedule_cell(task: Mapping[str, Any]) -> str:
    words = task.get("schedule_words")
    form = task["schedule"]
    if words is None:
        return e(form)
    # the exact form after the words: "every 5 minutes · cron '*/5 * * * *' (UTC)"
    return f'{e(words)} <span class="sub">· {e(form)}</span>'


def state_badge(task: Mapping[str, Any]) -> str:
    badge = _badge(task)
    if task.get("invalid") is not None:
        return f'{badge} <span class="sub">· {e(task["invalid"])}</span>'
    if task.get("unoffered"):
        return f'{badge} <span class="sub">· {e(no_job_words(str(task["job"])))}</span>'
    if not task.get("no_live_replica"):
        return badge
    return f'{badge} <span class="sub">· {e(no_replica_words(tuple(task["roles"])))}</span>'


def _badge(task: Mapping[str, Any]) -> str:
    state = shown_state(task)
    failures = task["consecutive_failures"]
    if state != "failing":
        return f'<span class="s-{e(state)}">{e(state)}</span>'
    more = "+" if task["consecutive_failures_at_least"] else ""
    hover = f"{failures:d}{more} failed runs in a row (failing from {task['alert_after']:d})"
    return f'<span class="s-failing" title="{e(hover)}">failing ({failures:d}{more})</span>'


def last_run_cell(task: Mapping[str, Any], now: Any) -> str:
    last = task["last_run"]
    if last is None:
        return "-"
    outcome = last["outcome"] + (" (manual)" if last["manual"] else "")
    when = relative(last["finished_at"] or last["started_at"], now)
    return f'<span class="{outcome_class(last["outcome"])}">{e(outcome)}</span> {when}'


def _row(task: Mapping[str, Any], base: str, token: str | None, now: Any) -> str:
    state = shown_state(task)
    flagged = f' class="flag-{e(state)}"' if state in FLAGGED else ""
    cells = [
        # (the name's title: it is cut short past a width, as the holder is)
        f'<td><a href="{e(task_url(base, task))}" title="{e(task["task"])}">'
        f"{e(task['task'])}</a></td>",
        f"<td>{schedule_cell(task)}</td>",
        f"<td>{state_badge(task)}</td>",
        f"<td>{last_run_cell(task, now)}</td>",
        f"<td>{outcome_strip(task['recent_outcomes'])}</td>",
        f"<td>{relative(task['last_success_at'], now)}</td>",
        # (a disabled task has no next fire: said so, as `cronlease status` does)
        "<td>disabled</td>"
        if task["enabled"] is False
        else f"<td>{relative(task['next_fire_time'], now)}</td>",
        f"<td>{skipped_text(task['skipped'])}</td>",
        f"<td>{holder_text(task['holder'])}</td>",
    ]
    if token is not None:
        cells.append(f"<td>{action_forms(base, task, token)}</td>")
    return f'<tr id="task-{e(task["name"])}"{flagged}>{"".join(cells)}</tr>'


def holder_text(holder: str | None) -> str:
    """Cut short past a width: the whole of it on hover (a holder can be a long pod name)."""
    if not holder:
        return "-"
    return f'<span class="holder" title="{e(holder)}">{e(holder)}</span>'


def ordered(tasks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Failing, then overdue, then the rest; by name within each (the model's order)."""
    rank = {state: index for index, state in enumerate(FLAGGED)}
    return sorted(tasks, key=lambda task: rank.get(shown_state(task), len(FLAGGED)))


def banner(tasks: Sequence[Mapping[str, Any]], base: str) -> str:
    groups = {state: [t for t in tasks if shown_state(t) == state] for state in FLAGGED}
    if not any(groups.values()):
        return f'<div class="banner" id="banner">all {len(tasks)} tasks ok</div>'
    parts = []
    for state, flagged in groups.items():
        if flagged:
            links = ", ".join(
                f'<a href="{e(task_url(base, t))}">{e(t["task"])}</a>' for t in flagged
            )
            parts.append(f"<b>{len(flagged)} {state}</b>: {links}")
    return f'<div class="banner bad" id="banner">{" · ".join(parts)}</div>'


def _clock(skew: Mapping[str, float] | None) -> str:
    if not skew:
        return ""
    # the same words as ``cronlease status``: skew > 0 means this host is behind
    return (
        f" · this host {-skew['skew']:+.3f} s off the database clock "
        f"(±{skew['round_trip'] / 2:.3f} s)"
    )


def notice_line(notice: Notice | None, status: Mapping[str, Any]) -> list[str]:
    """What the action just posted did, named by the task's name as the rows show it."""
    if notice is None:
        return []
    rows = [*status["tasks"], *status.get("orphaned", ())]
    shown = next((t.get("task") or t["name"] for t in rows if t["name"] == notice.task), None)
    kind = "ok" if notice.good else "bad"
    return [
        f'<div class="notice {kind}" id="notice" role="status"><b>{e(shown or notice.task)}</b>: '
        f"{e(notice.words())}</div>"
    ]


def header(
    status: Mapping[str, Any],
    title: str,
    json_url: str,
    home: str | None,
    schedules_url: str | None = None,
) -> list[str]:
    """The title, this replica, and what is wrong with it or the database (one line each:
    the top of the page is for the tasks). A task's page (``home``) shows no health: its
    data is that task's alone. ``schedules_url``: a link to the schedules kept in the
    database (actions enabled)."""
    link = f'<a href="{e(home)}">{e(title)}</a>' if home else e(title)
    meta = [f"generated {e(status['generated_at'])}", f'<a href="{e(json_url)}">JSON</a>']
    if schedules_url is not None:
        meta.append(f'<a href="{e(schedules_url)}" id="schedules-link">schedules</a>')
    replica = status.get("replica")
    if replica:
        in_progress = ", ".join(replica["runs_in_progress"]) or "none"
        started = "started" if replica["running"] else "not started"
        meta.insert(
            0,
            f"this replica <code>{e(replica['holder'])}</code>: {started}, "
            f"running here: {e(in_progress)}",
        )
    parts = [f'<h1>{link}</h1><p class="meta">{" · ".join(meta)}</p>']
    if status["database_error"]:
        parts.append(
            f'<div class="problem" id="database-error">database unavailable: '
            f"<code>{e(status['database_error'])}</code></div>"
        )
    if replica:
        connection = replica.get("connection")
        if connection:
            parts.append(
                f'<div class="problem" id="connection">this replica: '
                f"<code>{e(connection['text'])}</code></div>"
            )
        health = replica["health"]
        if home is None and health is not None and not health["ok"]:
            problems = "".join(f"<li>{e(p)}</li>" for p in health["problems"])
            count = len(health["problems"])
            parts.append(
                f'<details class="problem" id="health"><summary>health: {count} '
                f"problem{'s' if count > 1 else ''}</summary><ul>{problems}</ul></details>"
            )
    return parts


def footer(status: Mapping[str, Any]) -> str:
    """Where the data comes from, below the tasks."""
    return (
        f'<p class="meta" id="source">database <code>{e(status["database"])}</code>'
        + (f" · namespace <code>{e(status['namespace'])}</code>" if status["namespace"] else "")
        + f" · database time {e(status['database_time'])}"
        + _clock(status.get("clock_skew"))
        + "</p>"
    )


def render_html(
    status: Mapping[str, Any],
    *,
    json_url: str = "status.json",
    refresh: int | None = DEFAULT_REFRESH,
    title: str | None = None,
    base: str = "",
    csrf: str | None = None,
    notice: Notice | None = None,
    schedules_url: str | None = None,
) -> str:
    """The overview for data from :func:`collect_status`; ``csrf`` (actions enabled) adds
    the action buttons, ``notice`` says what the action just posted did,
    ``schedules_url`` links the schedules page. Every value is escaped."""
    title = title or str(status.get("title") or "cronlease")
    now = parse_time(status["generated_at"])
    body = header(status, title, json_url, None, schedules_url) + notice_line(notice, status)
    tasks = status["tasks"]
    if tasks:
        body.append(banner(tasks, base))
        columns = TASK_COLUMNS if csrf is not None else TASK_COLUMNS[:-1]
        body.append('<table class="tasks" id="tasks"><thead><tr>')
        body.append("".join(f"<th>{name}</th>" for name in columns) + "</tr></thead><tbody>")
        body.extend(_row(task, base, csrf, now) for task in ordered(tasks))
        body.append("</tbody></table>")
    else:
        body.append('<p class="meta">No tasks.</p>')
    body.append(footer(status))
    orphaned = status["orphaned"]
    if orphaned:
        body.append(
            f'<h2 id="orphaned">{len(orphaned)} orphaned lease rows</h2>'
            '<details><summary class="meta">Tasks no longer declared. '
            "They are kept, since deleting a row resets its slot cursor; "
            "<code>cronlease</code> removes one only on request.</summary>"
            '<div class="scroll"><table><tr><th>task</th><th>state</th><th>holder</th>'
            "<th>fence</th><th>last slot</th><th>lease</th><th>abandoned runs</th></tr>"
        )
        body.extend(
            f"<tr><td>{e(o['name'])}</td><td>{e(o['state'])}</td><td>{e(o['holder'])}</td>"
            f"<td>{e(o['fence'])}</td><td>{e(o['last_slot_time'])}</td>"
            f"<td>{e(lease_text(o['lease_expires_in']))}</td>{abandoned_cell(o)}</tr>"
            for o in orphaned
        )
        body.append("</table></div></details>")
    return document(title, refresh, body)


def abandoned_text(task: Mapping[str, Any]) -> str:
    count = task.get("abandoned")
    if count is None:  # the data was collected without counting them
        return "-"
    return f'<span class="abandoned">{count:d}</span>' if count else "0"


def abandoned_cell(task: Mapping[str, Any]) -> str:
    count = task.get("abandoned")
    return f'<td class="abandoned">{count:d}</td>' if count else f"<td>{abandoned_text(task)}</td>"
