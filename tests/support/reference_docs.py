"""The docs' tables that are rendered from the code's: the task options of
docs/reference/task-options.md (:data:`cronlease._options.OPTIONS`) and design.md's outcomes
(:data:`cronlease._lease.outcomes.OUTCOMES`).

``python -m tests.support.reference_docs`` rewrites each between its markers;
``tests/unit/test_reference_docs.py`` fails while a committed one differs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from cronlease._lease.outcomes import OUTCOMES
from cronlease._options import OPTIONS, Option

ROOT = Path(__file__).resolve().parents[2]
END = "<!-- /generated -->"


@dataclass(frozen=True)
class Generated:
    """A table in a docs file, between ``<!-- generated: NAME ... -->`` and :data:`END`."""

    path: Path
    name: str
    render: Callable[[], str]

    @property
    def begin(self) -> str:
        return f"<!-- generated: {self.name} (python -m tests.support.reference_docs) -->"

    def committed(self) -> str:
        text = self.path.read_text(encoding="utf-8")
        start = text.index(self.begin) + len(self.begin) + 1
        return text[start : text.index(END, start)]

    def write(self) -> bool:
        """Replace the committed table with the rendered one; whether it changed."""
        text = self.path.read_text(encoding="utf-8")
        old = self.committed()
        if old == self.render():
            return False
        start = text.index(self.begin) + len(self.begin) + 1
        self.path.write_text(text[:start] + self.render() + text[start + len(old) :])
        return True


def shown_default(option: Option) -> str:
    """An option's default as the README writes it (TOML's words)."""
    if option.shown is not None:
        return option.shown
    value: Any = option.default
    if value is None or value == () or value == {}:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


#: where the options' meanings point, as pages of the site: the table sits on
#: docs/reference/task-options.md, beside the Timeouts, Jitter and Roles sections
SITE_LINKS = {
    "(Timeouts, above)": "([Timeouts](#timeouts))",
    "(#retries-and-crash-recovery)": "(../how-to/retries.md)",
    "(#failure-alerts)": "(../how-to/alerting.md#failure-alerts)",
    "(#sentry-crons-healthchecks-style-pings-opentelemetry)": (
        "(../how-to/alerting.md#sentry-crons-healthchecks-style-pings-opentelemetry)"
    ),
}


def site_options_table() -> str:
    """:func:`options_table` with its links pointing at the site's pages."""
    table = options_table()
    for old, new in SITE_LINKS.items():
        table = table.replace(old, new)
    return table


def options_table() -> str:
    """One row per option, options of one meaning (``catchup``, ``catchup_limit``) in one."""
    lines = ["| key | default | meaning |", "| --- | --- | --- |"]
    for meaning, group in groupby(OPTIONS.values(), key=lambda option: option.meaning):
        options = list(group)
        keys = ", ".join(f"`{option.key}`" for option in options)
        defaults = [shown_default(option) for option in options]
        default = defaults[0] if len(set(defaults)) == 1 else ", ".join(defaults)
        lines.append(f"| {keys} | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


def outcomes_table() -> str:
    """One row per outcome, a column per property."""
    lines = [
        "| outcome | a finish records it | failure streak | next attempt | page | "
        "metrics at zero | meaning |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    streak = {"counts": "counts", "ends": "ends it", "passed": "passed over"}
    for name, rules in OUTCOMES.items():
        cells = (
            f"`{name}`",
            "yes" if rules.final else "no",
            streak[rules.streak],
            rules.next_attempt or "—",
            "red" if rules.bad else "—",
            "yes" if rules.metric_at_zero else "—",
            rules.meaning,
        )
        lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


TABLES = (
    Generated(ROOT / "docs" / "reference" / "task-options.md", "options", site_options_table),
    Generated(ROOT / "docs" / "design.md", "outcomes", outcomes_table),
)


def main() -> None:
    for table in TABLES:
        if table.write():
            print(f"{table.path.relative_to(ROOT)}: {table.name} table rewritten", file=sys.stderr)


if __name__ == "__main__":
    main()
