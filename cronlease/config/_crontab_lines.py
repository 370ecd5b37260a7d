"""One crontab line read the way cron reads it: an assignment, an entry, or nothing.

The rules are Debian cron's (vixie cron 3.0 and its descendants, crontab(5)):

- Leading spaces and tabs are skipped; a line whose first other character is
  ``#``, or that is empty, is nothing.
- Every other line is first tried as an assignment (cron's ``load_env`` state
  machine): a name, optionally in matching quotes, ended by whitespace or
  ``=``; whitespace; ``=``; whitespace; a value, optionally in matching quotes.
  An unquoted value runs to the end of the line less its trailing whitespace
  (``#`` and quotes inside it are kept); after a quoted one only whitespace may
  follow. Nothing is substituted (``$HOME`` stays ``$HOME``). ``NAME=`` with
  nothing after it is not an assignment (cron wants ``NAME=""``).
- Anything else is an entry: a macro or five time fields, then (system
  crontabs) the user, each ended by a run of spaces or tabs — only those two
  are blanks to cron — then the command: the rest of the line, byte for byte.
  The blanks before the command are a separator; the trailing ones are kept,
  as cron passes them to the shell (``echo a\\ `` ends in an escaped blank).
- In the command, ``\\%`` is ``%`` and any other backslash pair is left as it
  is (``\\\\%`` is a backslash pair and then an unescaped ``%``); an unescaped
  ``%`` ends the command and feeds the rest to its standard input, which a
  cronlease command has no way to say, so such a line is refused.

Whatever cannot be carried over unchanged raises :class:`Refused` with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cronlease._timing import crontab

__all__ = ["MACROS", "Assignment", "Entry", "Refused", "read_assignment", "read_line"]

BLANKS = " \t"
# C's isspace() in cron's locale: what load_env skips and trims.
_C_SPACE = " \t\n\v\f\r"
# Case matters: cron compares macro names with strcmp.
MACROS = frozenset(crontab.MACROS)
_FIELD_NAMES = ["minute", "hour", "day-of-month", "month", "day-of-week"]
_FIELD_CHARS = re.compile(r"[0-9A-Za-z*,/-]+")
# A single value with a step ("5/10"): Debian's cron reads it as the value
# alone, cronie as "5-59/10"; there is no translation both would agree with.
_VALUE_WITH_STEP = re.compile(r"(?:^|,)[0-9A-Za-z]+/")
_ENTRY = re.compile(r"([^ \t]+(?:[ \t]+[^ \t]+){4})(?:[ \t]+(.*))?", re.S)
_MACRO = re.compile(r"(@[^ \t]*)(?:[ \t]+(.*))?", re.S)
_USER = re.compile(r"([^ \t]+)(?:[ \t]+(.*))?", re.S)


class Refused(Exception):
    """The line cannot be translated faithfully; the message says why."""


@dataclass(frozen=True)
class Assignment:
    name: str
    value: str


@dataclass(frozen=True)
class Entry:
    when: str  # a macro, or the five fields joined by one space
    user: str | None  # the user column of a system crontab
    command: str  # as the shell gets it: "\%" already "%"


def read_line(line: str, *, system: bool) -> Assignment | Entry | None:
    """The line (without its newline) as cron reads it; raises :class:`Refused`."""
    body = line.lstrip(BLANKS)
    if not body or body.startswith("#"):
        return None
    if "\0" in body:
        raise Refused("a NUL character")
    assignment = read_assignment(body)
    if assignment is not None:
        return assignment
    if "\r" in body:
        raise Refused(
            "a carriage return (DOS line endings?): cron would pass it to the shell as "
            "part of the command"
        )
    if body.startswith("@"):
        macro = _MACRO.fullmatch(body)
        assert macro is not None  # every line starting with @ matches
        when, rest = macro.group(1), macro.group(2)
        if when == "@reboot":
            raise Refused("@reboot has no cronlease equivalent: start it with the service instead")
        if when not in MACROS:
            raise Refused(
                f"unknown macro {when!r} (cron knows {', '.join(sorted(MACROS))}, in lower case)"
            )
    else:
        fields = _ENTRY.fullmatch(body)
        if fields is None:
            hint = ' (an empty value is written NAME="")' if body.rstrip().endswith("=") else ""
            raise Refused(
                "neither an assignment nor an entry: expected five time fields, "
                + ("the user " if system else "")
                + f"and a command{hint}"
            )
        parts = re.split(r"[ \t]+", fields.group(1))
        _check_fields(parts)
        when, rest = " ".join(parts), fields.group(2)
    user = None
    if system:
        if not rest:
            raise Refused("no user and no command")
        column = _USER.fullmatch(rest)
        assert column is not None  # rest starts with a non-blank
        user, rest = column.group(1), column.group(2)
        if user.startswith("*"):
            raise Refused(
                "the user begins with '*' (a sixth time field?): Debian's cron refuses the line"
            )
    if not rest:
        raise Refused("no command" + (f" after the user {user!r}" if user else ""))
    if rest.startswith("*") and user is None:
        raise Refused(
            "the command begins with '*' (a sixth time field?): Debian's cron refuses the line"
        )
    return Entry(when=when, user=user, command=_unescape_percent(rest))


def read_assignment(body: str) -> Assignment | None:
    """``body`` (leading blanks skipped) as an assignment, if cron reads it as one.

    A port of cron's ``load_env`` state machine, state by state, so that the
    lines it takes (and the ones it leaves to be parsed as entries) are the same.
    """
    name: list[str] = []
    value: list[str] = []
    target = name
    state = "name-start"
    quote = ""
    i = 0
    while state != "error" and i < len(body):
        char = body[i]
        if state in ("name-start", "value-start"):
            if char in "'\"":
                quote = char
                i += 1
            state = "name" if state == "name-start" else "value"
            if i == len(body):
                break
            char = body[i]
        if state in ("name", "value"):
            if quote:
                if char == quote:
                    state = "equals" if state == "name" else "done"
                    i += 1
                    continue
                if state == "name" and char == "=":
                    state = "error"
                    continue
            elif state == "name":
                if char in _C_SPACE:
                    state = "equals"
                    i += 1
                    continue
                if char == "=":
                    state = "equals"
                    continue
            target.append(char)
            i += 1
        elif state == "equals":
            if char == "=":
                state, target, quote = "after-equals", value, ""
            elif char not in _C_SPACE:
                state = "error"
            i += 1
        elif char in _C_SPACE:  # "after-equals" or "done": blanks are skipped
            i += 1
        else:
            state = "value-start" if state == "after-equals" else "error"
    if state == "done":
        return Assignment("".join(name), "".join(value))
    if state == "value" and not quote:
        return Assignment("".join(name), "".join(value).rstrip(_C_SPACE))
    return None


def _check_fields(parts: list[str]) -> None:
    """Refuse what is not in cron's field grammar before the schedule parser reads it."""
    for label, text in zip(_FIELD_NAMES, parts, strict=True):
        if not _FIELD_CHARS.fullmatch(text):
            raise Refused(f"{label} field {text!r} has characters cron's grammar does not have")
        if _VALUE_WITH_STEP.search(text):
            raise Refused(
                f"{label} field {text!r}: a single value with a step means the value alone "
                "to Debian's cron and value-to-last to cronie; write 'N' or 'N-LAST/STEP'"
            )


def _unescape_percent(command: str) -> str:
    """cron's scan of the command: ``\\%`` becomes ``%``; an unescaped ``%`` is refused."""
    out: list[str] = []
    escaped = False
    for char in command:
        if escaped:
            if char == "%":
                out[-1] = "%"  # the backslash goes
            else:
                out.append(char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif char == "%":
            raise Refused(
                "an unescaped % ends the command and feeds the rest to its standard input "
                "in cron; move that input into a script, or write \\% for a literal %"
            )
        else:
            out.append(char)
    return "".join(out)
