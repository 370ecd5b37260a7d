"""The status page's HTML: server-rendered, no JavaScript, every value escaped.

It formats what :func:`~cronlease.web.collect.collect_status` returns (the
status model as JSON): times, error summaries and lease text read as in the CLI.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from cronlease._safe_text import escape_controls
from cronlease._status import format_duration, lease_text

DEFAULT_REFRESH = 10

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
.overdue,.abandoned{color:#c00;font-weight:bold}
.problem{background:#fee;border:1px solid #c00;padding:.5em;margin:.5em 0}
pre{white-space:pre-wrap;margin:.3em 0;max-width:100em}code{font-size:.95em}
""".strip()


def _e(value: object) -> str:
    """Escape any value for HTML text or an attribute; None shows as a dash. Controls
    are written as escapes first: a bidi override would reorder the page's text."""
    if value is None or value == "":
        return "-"
    return html.escape(escape_controls(str(value)), quote=True)


def _duration(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def _error_cell(run: Mapping[str, Any]) -> str:
    error, summary = run["error"], run["error_summary"]
    if not error:
        return "-"
    if summary == error.strip():  # one line: nothing more to unfold
        return f'<code class="error">{_e(summary)}</code>'
    return (
        f'<details><summary><code class="error">{_e(summary)}</code></summary>'
        f"<pre>{_e(error)}</pre></details>"
    )


def _state(task: Mapping[str, Any]) -> str:
    state = _e(task["state"])
    overdue = ' <span class="overdue">overdue</span>' if task["overdue"] else ""
    return f'<td class="state-{state}">{state}{overdue}</td>'


def _abandoned(task: Mapping[str, Any]) -> str:
    count = task.get("abandoned")
    if count is None:  # the data was collected without counting them
        return "<td>-</td>"
    return f'<td class="abandoned">{count:d}</td>' if count else "<td>0</td>"


def _clock(skew: Mapping[str, float] | None) -> str:
    if not skew:
        return ""
    # the same words as ``cronlease status``: skew > 0 means this host is behind
    return (
        f" · this host {-skew['skew']:+.3f} s off the database clock "
        f"(±{skew['round_trip'] / 2:.3f} s)"
    )


def _render_task(task: Mapping[str, Any]) -> str:
    runs = task["runs"]
    parts = [
        f'<section class="task" id="task-{_e(task["name"])}">',
        f"<h2>{_e(task['name'])}</h2>",
        "<table><tr><th>schedule</th><th>state</th><th>paused</th><th>holder</th>"
        "<th>fence</th><th>last slot</th><th>lease</th><th>next fire time</th>"
        "<th>abandoned runs</th></tr>",
        f"<tr><td>{_e(task['schedule'])}</td>"
        f"{_state(task)}"
        f"<td>{'yes' if task['paused'] else 'no'}</td>"
        f"<td>{_e(task['holder'])}</td><td>{_e(task['fence'])}</td>"
        f"<td>{_e(task['last_slot_time'])}</td><td>{_e(lease_text(task['lease_expires_in']))}</td>"
        f"<td>{_e(task['next_fire_time'])}</td>{_abandoned(task)}</tr></table>",
    ]
    if runs:
        parts.append(
            "<table><tr><th>scheduled for</th><th>attempt</th><th>outcome</th><th>duration</th>"
            "<th>holder</th><th>fence</th><th>error</th></tr>"
        )
        for run in runs:
            outcome = run["outcome"] + (" (manual)" if run["manual"] else "")
            parts.append(
                f"<tr><td>{_e(run['scheduled_for'])}</td><td>{_e(run.get('attempt'))}</td>"
                f'<td class="outcome-{_e(run["outcome"])}">{_e(outcome)}</td>'
                f"<td>{_e(_duration(run['duration']))}</td><td>{_e(run['holder'])}</td>"
                f"<td>{_e(run['fence'])}</td><td>{_error_cell(run)}</td></tr>"
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
        + _clock(status.get("clock_skew"))
        + f" · page generated {_e(status['generated_at'])}"
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
        connection = replica.get("connection")
        if connection:
            body.append(
                f'<div class="problem" id="connection">this replica: '
                f"<code>{_e(connection['text'])}</code></div>"
            )
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
            "<th>last slot</th><th>lease</th><th>abandoned runs</th></tr>"
        )
        body.extend(
            f"<tr><td>{_e(o['name'])}</td><td>{_e(o['state'])}</td><td>{_e(o['holder'])}</td>"
            f"<td>{_e(o['fence'])}</td><td>{_e(o['last_slot_time'])}</td>"
            f"<td>{_e(lease_text(o['lease_expires_in']))}</td>{_abandoned(o)}</tr>"
            for o in orphaned
        )
        body.append("</table>")
    return "\n".join([*head, *body, "</body></html>", ""])
