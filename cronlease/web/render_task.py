"""A task's page: what the overview row says, spelled out, and its run history.

Each run is a row: scheduled for, attempt, outcome, when it started, how long it
took, who ran it and its error summary (``exited with status 3``, the message of an
exception), the full error text folded in a ``<details>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cronlease._status import format_duration, lease_text
from cronlease.web.markup import (
    RUN_COLUMNS,
    document,
    e,
    outcome_class,
    outcome_strip,
    parse_time,
    relative,
)
from cronlease.web.notice import Notice
from cronlease.web.render import (
    DEFAULT_REFRESH,
    abandoned_text,
    action_forms,
    footer,
    header,
    notice_line,
    schedule_cell,
    skipped_text,
    state_badge,
)


def _error_cell(run: Mapping[str, Any], unfolded: bool) -> str:
    error, summary = run["error"], run["error_summary"]
    if not error:
        return "-"
    if summary == error.strip():  # one line: nothing more to unfold
        return f'<code class="error">{e(summary)}</code>'
    return (
        f'<details{" open" if unfolded else ""}><summary><code class="error">{e(summary)}'
        f"</code></summary><pre>{e(error)}</pre></details>"
    )


def _run_row(run: Mapping[str, Any], now: datetime, latest: bool) -> str:
    outcome = run["outcome"] + (" (manual)" if run["manual"] else "")
    duration = "-" if run["duration"] is None else format_duration(run["duration"])
    return (
        f"<tr><td>{relative(run['scheduled_for'], now)}</td><td>{e(run.get('attempt'))}</td>"
        f'<td class="{outcome_class(run["outcome"])}">{e(outcome)}</td>'
        f"<td>{relative(run['started_at'], now)}</td><td>{e(duration)}</td>"
        f"<td>{e(run['holder'])}</td><td>{e(run['fence'])}</td>"
        f"<td>{_error_cell(run, latest)}</td></tr>"
    )


def render_task(
    status: Mapping[str, Any],
    task: Mapping[str, Any],
    *,
    home: str,
    json_url: str,
    refresh: int | None = DEFAULT_REFRESH,
    base: str = "",
    csrf: str | None = None,
    notice: Notice | None = None,
) -> str:
    """The page of ``task`` (one of ``status``'s tasks or orphaned rows); ``notice``
    says what the action just posted did."""
    title = str(status.get("title") or "cronlease")
    now = parse_time(status["generated_at"])
    body = header(status, title, json_url, home) + notice_line(notice, status)
    footer_line = footer(status)
    body.append(f'<h2 id="task-{e(task["name"])}">{e(task["name"])}</h2>')
    if not task["declared"]:
        body.append('<p class="meta">Not declared here: an orphaned lease row.</p>')
    facts: list[tuple[str, str]] = [
        ("schedule", schedule_cell(task) if task["declared"] else "-"),
        ("state", state_badge(task)),
        ("last 20", outcome_strip(task["recent_outcomes"])),
        ("last success", relative(task["last_success_at"], now)),
        ("next fire", relative(task["next_fire_time"], now)),
        ("last slot", relative(task["last_slot_time"], now)),
        ("skipped ticks", skipped_text(task["skipped"])),
        ("holder", e(task["holder"])),
        ("fence", e(task["fence"])),
        ("lease", e(lease_text(task["lease_expires_in"]))),
        ("abandoned runs", abandoned_text(task)),
    ]
    if task["consecutive_failures"]:
        at_least = "at least " if task["consecutive_failures_at_least"] else ""
        alert = f" (failing from {task['alert_after']:d})" if task["alert_after"] else ""
        facts.insert(2, ("failures in a row", f"{at_least}{task['consecutive_failures']:d}{alert}"))
    body.append(
        '<dl class="facts" id="facts">'
        + "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
        + "</dl>"
    )
    forms = action_forms(base, task, csrf)
    if forms:
        body.append(f'<p id="actions">{forms}</p>')
    runs = task["runs"]
    body.append(f'<h2 id="history">runs: the latest {len(runs)}</h2>')
    if runs:
        body.append(
            '<table id="runs" class="runs"><thead><tr>'
            + "".join(f"<th>{name}</th>" for name in RUN_COLUMNS)
            + "</tr></thead><tbody>"
        )
        # the latest error unfolded: it is the one read first
        body.extend(_run_row(run, now, index == 0) for index, run in enumerate(runs))
        body.append("</tbody></table>")
    else:
        body.append('<p class="meta">No runs recorded yet.</p>')
    body.append(footer_line)
    return document(f"{task['task']} · {title}", refresh, body)
