"""How the ``cronlease`` commands print: error lines, JSON, tables, times and durations."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from cronlease._timing.schedule import Schedule


def _error(message: str) -> None:
    print(f"cronlease: error: {' '.join(message.split())}", file=sys.stderr)


def _print_json(value: object) -> None:
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


# --- formatting --------------------------------------------------------------------


def _zone(schedule: Schedule) -> ZoneInfo | timezone:
    return timezone.utc if schedule.timezone.upper() == "UTC" else ZoneInfo(schedule.timezone)


def _holder(holder: str) -> str:
    """The holder id without the per-attempt nonce."""
    return holder.rsplit("#", 1)[0]


def _error_summary(error: str) -> str:
    """A recorded error without its traceback: the exception line and what follows it."""
    lines = error.strip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    if not lines or not lines[0].startswith("Traceback") or not frames:
        return error.strip()
    rest = lines[frames[-1] + 1 :]
    while rest and rest[0].startswith(" "):
        rest.pop(0)  # the source line (and carets) of the last frame
    return "\n".join(rest) if rest else error.strip()


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _short_time(iso: str | None) -> str:
    return "-" if iso is None else iso.replace("T", " ")


def _format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _print_table(headers: list[str], rows: list[list[str]]) -> None:
    if not rows:
        return
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    for row in [headers, *rows]:
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
