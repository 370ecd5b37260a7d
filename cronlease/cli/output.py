"""How the ``cronlease`` commands print: error lines, JSON and tables.

Times, durations and error summaries read as :mod:`cronlease._status.text`
and the status model write them, the same as on the status page.

Whatever a command prints passes :func:`safe_output`: text from the database
or a task (error texts, names and holders of rows another program wrote, a
driver's message) has its terminal controls escaped and any password hidden
(:mod:`cronlease._safe_text`); stored text is not changed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TextIO, cast

from cronlease._safe_text import escape_controls, safe_text


class SafeStream:
    """A text stream whose writes are made safe first; newlines and tabs are kept."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(safe_text(text))
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextmanager
def safe_output() -> Iterator[None]:
    """sys.stdout and sys.stderr made safe for as long as a command runs."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = cast(TextIO, SafeStream(stdout)), cast(TextIO, SafeStream(stderr))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def print_error(message: str) -> None:
    print(f"cronlease: error: {' '.join(message.split())}", file=sys.stderr)


def print_json(value: object) -> None:
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def fit_table(
    headers: list[str], rows: list[list[str]], width: int, shrinkable: Mapping[str, int]
) -> list[list[str]]:
    """``rows`` cut to fit ``width`` columns: the widest of the ``shrinkable`` columns
    (header -> its narrowest) gives way first; a cut cell ends in an ellipsis."""
    rows = [[escape_controls(str(cell), keep="") for cell in row] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    floors = {headers.index(name): floor for name, floor in shrinkable.items()}
    while sum(widths) + 2 * (len(widths) - 1) > width:
        room = [i for i, floor in floors.items() if widths[i] > max(floor, len(headers[i]))]
        if not room:
            break  # as narrow as it gets: longer than width, never unreadable
        widths[max(room, key=lambda i: widths[i])] -= 1
    return [[_cut(cell, widths[i]) for i, cell in enumerate(row)] for row in rows]


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 1] + "\u2026"


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    if not rows:
        return
    # escaped before the widths are measured (a newline in a cell would break the row)
    rows = [[escape_controls(str(cell), keep="") for cell in row] for row in rows]
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    for row in [headers, *rows]:
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
