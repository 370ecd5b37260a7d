"""The pieces both pages are made of: escaping, relative times, the outcome strip, the frame.

Every value that reaches the HTML goes through :func:`e`. Times are shown
relative to the moment the snapshot was taken ("3 min ago", "in 12 s"), with
the absolute ISO time in a ``title`` (hover) and a ``<time datetime>``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from cronlease._safe_text import escape_controls
from cronlease._status import BAD_OUTCOMES

__all__ = [
    "CSS",
    "RUN_COLUMNS",
    "TASK_COLUMNS",
    "document",
    "e",
    "outcome_strip",
    "parse_time",
    "relative",
]

#: the overview's columns, in order (the actions column only when actions are enabled)
TASK_COLUMNS: tuple[str, ...] = ("task", "schedule", "state", "last run", "last 20", "last success")
TASK_COLUMNS += ("next fire", "skipped ticks", "holder", "actions")
#: a task page's run history's columns, in order
RUN_COLUMNS: tuple[str, ...] = ("scheduled for", "attempt", "outcome", "started", "duration")
RUN_COLUMNS += ("holder", "fence", "error")
#: below this width (px) the tables become one card per row: the overview's ten columns
#: need 1160 px for tests/support/page_fleet.py's tasks, 1245 with a name and a holder
#: as long as they are shown (then cut short, whole on hover); 1280 still has the table
NARROW = 1250
#: the same for a task's run history (eight columns: 900 px) and its facts
RUNS_NARROW = 920

_CSS = """
body{font:13px/1.35 system-ui,sans-serif;margin:.5em 1em;color:#222;background:#fff}
h1{font-size:1.25em;margin:0;display:inline;margin-right:.6em}h2{font-size:1.1em;margin:1em 0 .3em}
h1+p.meta{display:inline}
table{border-collapse:collapse;margin:.3em 0}
th,td{border-bottom:1px solid #ddd;padding:1px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3;font-weight:600;white-space:nowrap}
.tasks td{white-space:nowrap;padding:0 5px;line-height:18px}.tasks .sub{font-size:11px}
.tasks th{white-space:normal}.tasks td:nth-child(2),.tasks td:nth-child(8){white-space:normal}
.tasks .sub{white-space:nowrap}
.holder,.tasks td:nth-child(1) a{display:inline-block;max-width:9em;overflow:hidden;
text-overflow:ellipsis;vertical-align:top}.tasks td:nth-child(1) a{max-width:12em}
.meta{color:#555;margin:.2em 0}.sub{color:#777}.meta code{overflow-wrap:anywhere}
a{color:#05c;text-decoration:none}a:hover{text-decoration:underline}
.s-running{color:#05f}.s-paused{color:#b60}.s-idle{color:#555}.s-unoffered{color:#b60}
.s-failing,.s-overdue,.s-invalid{color:#fff;background:#c00;padding:0 4px;border-radius:3px;
font-weight:600;
white-space:nowrap}
tr.flag-failing,tr.flag-overdue,tr.flag-invalid{background:#fff1f1}
.abandoned{color:#c00;font-weight:600}
.o-succeeded,.o-running{color:#070}.o-bad{color:#c00;font-weight:600}
.strip{display:inline-flex;gap:1px;vertical-align:middle}
.strip i{display:inline-block;width:5px;height:12px;background:#ccc}
.strip i.o-succeeded{background:#3a3}.strip i.o-running{background:#59f}
.strip i.o-bad{background:#d22}
.banner{padding:.2em .6em;margin:.3em 0;border-radius:4px;background:#eef7ee}
.banner.bad{background:#c00;color:#fff}.banner.bad a{color:#fff;text-decoration:underline}
.notice{padding:.2em .6em;margin:.3em 0;border:2px solid #3a3;border-radius:4px;background:#f4fbf4}
.notice.bad{border-color:#c00;background:#fee}
.problem{background:#fee;border:1px solid #c00;padding:.1em .5em;margin:.3em 0}
details.problem ul{margin:.2em 0}
form.act{display:inline;margin:0}
form.act button{font:11px/14px system-ui,sans-serif;padding:0 4px;margin:0;border:1px solid #999;
border-radius:3px;background:#f6f6f6;cursor:pointer}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0;max-width:100em}
code{font-size:.95em}
dl.facts{display:grid;grid-template-columns:repeat(3,max-content minmax(12em,max-content));
gap:2px 12px;margin:.4em 0}.runs td{white-space:nowrap}.runs td:last-child{white-space:normal}
dl.facts dt{color:#555}dl.facts dd{margin:0}
dl.facts.form{grid-template-columns:max-content minmax(0,1fr)}
dl.form input,dl.form textarea{font:12px/1.3 ui-monospace,monospace;max-width:100%}
.scroll{overflow-x:auto}
"""


def _cards(table: str, columns: tuple[str, ...], skip: tuple[str, ...], width: int) -> str:
    """Below ``width`` px, the table ``table`` as one card per row: its cells in as many
    columns as fit (two at 400 px), each after its column's name; no header row."""
    labels = "".join(
        f'.{table} td:nth-child({index})::before{{content:"{name}: ";color:#777}}'
        for index, name in enumerate(columns, 1)
        if name not in skip
    )
    return (
        f"@media (max-width:{width}px){{table.{table},.{table} tbody{{display:block}}"
        f".{table} thead{{display:none}}.{table} tr{{display:grid;"
        "grid-template-columns:repeat(auto-fill,minmax(12em,1fr));gap:0 8px;padding:3px 2px;"
        f"border-bottom:1px solid #ccc}}.{table} td{{display:block;border:0;padding:0;"
        f"white-space:normal;min-width:0;overflow-wrap:anywhere}}{labels}}}"
    )


# A task's card: its name, then its buttons, on the first line; the schedule on the next;
# the last run and the strip two columns wide (a hole left before them is filled).
_TASK_CARD = f"""
@media (max-width:{NARROW}px){{
.tasks td:nth-child(1) a,.holder{{max-width:none;display:inline}}.tasks .sub{{white-space:normal}}
.tasks td:nth-child(1){{grid-row:1;grid-column:1/-2;font-weight:600;font-size:1.1em}}
.tasks td:nth-child(2){{grid-column:1/-1}}
.tasks tr{{grid-auto-flow:dense}}.tasks td:nth-child(4),.tasks td:nth-child(5){{grid-column:span 2}}
.tasks td:nth-child(10){{grid-row:1;grid-column:-2/-1;justify-self:end;white-space:nowrap}}
form.act button{{font-size:13px;line-height:20px;padding:0 8px}}
}}
@media (max-width:{RUNS_NARROW}px){{
.runs td:nth-child(8){{grid-column:1/-1}}
dl.facts{{grid-template-columns:max-content minmax(0,1fr)}}
}}
"""

CSS = "\n".join(
    [
        _CSS.strip(),
        _cards("tasks", TASK_COLUMNS, ("task", "actions"), NARROW),
        _cards("runs", RUN_COLUMNS, ("error",), RUNS_NARROW),
        _TASK_CARD.strip(),
    ]
)


def e(value: object) -> str:
    """Escape any value for HTML text or an attribute; None shows as a dash. Controls
    are written as escapes first: a bidi override would reorder the page's text."""
    if value is None or value == "":
        return "-"
    return html.escape(escape_controls(str(value)), quote=True)


def parse_time(text: str) -> datetime:
    """A time of the status JSON (``...Z`` or ``...+03:00``) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def span_text(seconds: float) -> str:
    """How long, as people say it: ``12 s``, ``3 min``, ``2 h``, ``4 d``."""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    if seconds < 86400 * 2:
        return f"{seconds // 3600:.0f} h"
    return f"{seconds // 86400:.0f} d"


def relative(moment: str | None, now: datetime) -> str:
    """``<time title=ISO>3 min ago</time>`` (or ``in 12 s``); a dash for no time."""
    if not moment:
        return "-"
    delta = (parse_time(moment) - now).total_seconds()
    if abs(delta) < 1:
        words = "now"
    elif delta < 0:
        words = f"{span_text(delta)} ago"
    else:
        words = f"in {span_text(delta)}"
    return f'<time datetime="{e(moment)}" title="{e(moment)}">{words}</time>'


def outcome_class(outcome: str) -> str:
    return "o-bad" if outcome in BAD_OUTCOMES else f"o-{e(outcome)}"


def outcome_strip(outcomes: Sequence[Mapping[str, Any] | str]) -> str:
    """The last outcomes, oldest on the left: one small block each, its outcome on hover."""
    cells = []
    for item in reversed(outcomes):
        if isinstance(item, str):
            outcome, title = item, item
        else:
            outcome = str(item["outcome"])
            title = f"{outcome} · {item.get('scheduled_for') or ''}".strip(" ·")
        cells.append(f'<i class="{outcome_class(outcome)}" title="{e(title)}"></i>')
    return f'<span class="strip">{"".join(cells)}</span>' if cells else "-"


def document(title: str, refresh: int | None, body: Iterable[str]) -> str:
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="robots" content="noindex">',
    ]
    if refresh:
        head.append(f'<meta http-equiv="refresh" content="{int(refresh)}">')
    head += [f"<title>{e(title)}</title>", f"<style>{CSS}</style>", "</head><body>"]
    return "\n".join([*head, *body, "</body></html>", ""])
