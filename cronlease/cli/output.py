"""How the ``cronlease`` commands print: error lines, JSON and tables.

Times, durations and error summaries read as :mod:`cronlease._status.text`
and the status model write them, the same as on the status page.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime

from cronlease._status import format_time


def print_error(message: str) -> None:
    print(f"cronlease: error: {' '.join(message.split())}", file=sys.stderr)


def print_json(value: object) -> None:
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def short_time(moment: datetime | None) -> str:
    """A time for a table cell: :func:`format_time` with a space for the ``T``."""
    return "-" if moment is None else format_time(moment).replace("T", " ")


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    if not rows:
        return
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    for row in [headers, *rows]:
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
