"""A recorded run as read back: which outcomes are failures and the streak they make,
its error in one line, its holder without the per-attempt nonce.

The engine's log lines (a task becoming failing, a run's start and end, a
ping's body) and the status model (``cronlease._status``) read runs by the
same rules, so they live below both (docs/design.md §5.28).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cronlease._lease.outcomes import (
    FAILURE_OUTCOMES,
    STREAK_ENDING_OUTCOMES,
    STREAK_NEUTRAL_OUTCOMES,
    Outcome,
)

__all__ = [
    "FAILURE_OUTCOMES",
    "STREAK_NEUTRAL_OUTCOMES",
    "failure_streak",
    "holder_id",
    "summarize_error",
]


_TRACEBACK = re.compile(r"(?:\+ )?(?:Exception Group )?Traceback \(most recent call last\):")
_FRAME = '  File "'
# "cronlease._shell_task.CommandError: ..." -> "CommandError: ...": the full text has the path.
_MODULE_PATH = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*(?::|$))")
# The margin an exception group draws around the tracebacks it holds ("  | ", "    | ").
_GROUP_MARGIN = re.compile(r"^ *\| ")
# The rules an exception group draws between its sub-exceptions ("+-+---- 1 ----", "+----").
_GROUP_RULE = re.compile(r"^ *\+[-+]")


def summarize_error(error: str) -> str:
    """One line for a recorded error: what was said before any traceback, and how it ended.

    The message is the text after a traceback's last frame (so a chained
    exception shows the one raised last), or the whole text without one; its
    first line is kept, and its last after a "...", when it has several (a
    command's stderr tail ends with what went wrong). The exception's module
    path is dropped (``CommandError: ...``), and the words before a traceback,
    written by cronlease ("lease lost during the run; the task failed:") or a
    command, are kept in front.
    """
    text = error.strip()
    lines = text.splitlines()
    # The history keeps the end of a long error behind "...": its first line is a fragment.
    truncated = text.startswith("...") and len(lines) > 1
    if "Exception Group Traceback" in text:
        lines = [_GROUP_MARGIN.sub("", line, count=1) for line in lines]
    frames = [i for i, line in enumerate(lines) if line.startswith(_FRAME)]
    if not frames:
        # (indented lines are a traceback's source lines, or a stack trace's in stderr)
        kept = [line for line in lines[1 if truncated else 0 :] if not line[:1].isspace()]
        return _first_and_last(kept or lines)
    message = [line for line in lines[frames[-1] + 1 :] if not _GROUP_RULE.match(line)]
    while message and message[0].startswith(" "):
        message.pop(0)  # the source line (and carets) of the last frame
    if not message:
        message = [lines[-1]]
    message[0] = _MODULE_PATH.sub("", message[0], count=1)
    said = "" if truncated or frames[0] == 0 else _TRACEBACK.split(lines[0], maxsplit=1)[0]
    ending = _first_and_last(message)
    return f"{said.strip()} {ending}" if said.strip() else ending


def _first_and_last(lines: list[str]) -> str:
    kept = [line.strip() for line in lines if line.strip()]
    if len(kept) <= 1:
        return kept[0] if kept else ""
    return f"{kept[0]} ... {kept[-1]}"


def failure_streak(outcomes: Sequence[Outcome], *, read_all: bool = False) -> tuple[int, bool]:
    """How many runs in a row did not succeed, newest first, and whether it may be more.

    ``outcomes`` are a task's latest runs, newest first (manual runs and every
    attempt count alike: each is a run that failed). The count stops at the first
    ``succeeded``; :data:`STREAK_NEUTRAL_OUTCOMES` are passed over (which outcome does
    what: :mod:`cronlease._lease.outcomes`). The second value
    is True when no success ended the count and ``read_all`` is False (fewer runs
    were read than the task has, e.g. a read of N runs returned N): then the
    streak is "at least" the count.
    """
    count = 0
    for outcome in outcomes:
        if outcome in STREAK_ENDING_OUTCOMES:
            return count, False
        if outcome in FAILURE_OUTCOMES:
            count += 1
    return count, count > 0 and not read_all


def holder_id(holder: str) -> str:
    """The replica's holder id, without the per-attempt nonce the store appends."""
    return holder.rsplit("#", 1)[0]
