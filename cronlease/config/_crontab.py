"""``cronlease import-crontab``: translate a crontab into an equivalent ``cronlease.toml``.

Understood: five-field entries, the ``@hourly``/``@daily``/``@weekly``/
``@monthly``/``@yearly`` macros, ``VAR=value`` lines (they apply to the entries
after them, as in cron), ``SHELL`` (other than ``/bin/sh`` the command runs as
``[SHELL, "-c", command]``), ``CRON_TZ`` (the time zone of the entries after
it) and, with ``system=True``, the user column of ``/etc/crontab`` and
``/etc/cron.d`` files. Cron runs every entry through a shell, so every task is
``shell = true``.

Not translatable, and reported: ``@reboot``, commands with an unescaped ``%``
(cron turns it into a newline and standard input), malformed or invalid
schedules. ``MAILTO``/``MAILFROM`` are dropped (cronlease logs output; it does
not mail it).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cronlease._safe_text import escape_controls
from cronlease._timing.schedule import Schedule
from cronlease.errors import ConfigError

__all__ = ["Translation", "local_timezone", "translate_crontab"]

_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_DROPPED = {"MAILTO", "MAILFROM", "CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING"}


@dataclass
class Translation:
    """The TOML text, and one message per crontab line that could not be translated."""

    toml: str
    tasks: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def local_timezone() -> str | None:
    """This machine's IANA time zone name (the one cron schedules in), if it can be found."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and "/" in tz and not tz.startswith("/"):
        return tz
    try:
        name = Path("/etc/timezone").read_text().strip()
        if name:
            return name
    except OSError:
        pass
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        return None
    marker = "zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else None


def translate_crontab(
    text: str, *, source: str = "crontab", system: bool = False, timezone: str = "UTC"
) -> Translation:
    """Translate crontab ``text``; ``source`` names it in messages."""
    out: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    env: dict[str, str] = {}
    shell = "/bin/sh"
    zone = timezone
    names: set[str] = set()
    users: set[str] = set()

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue

        def skip(reason: str, number: int = number, line: str = line) -> None:
            problems.append(f"{source}:{number}: not translated ({reason}): {line}")

        assignment = _ASSIGNMENT.match(line)
        if assignment:
            var, value = assignment.group(1), _unquote(assignment.group(2))
            if var == "SHELL":
                shell = value
            elif var == "CRON_TZ":
                zone = value
            elif var in _DROPPED:
                notes.append(
                    f"{source}:{number}: {var} dropped: cronlease logs command output, "
                    "it does not mail it"
                )
            else:
                env[var] = value
            continue

        if line.startswith("@"):
            macro, _, rest = line.partition(" ")
            macro = macro.lower()
            if macro == "@reboot":
                skip("@reboot has no cronlease equivalent: start it with the service instead")
                continue
            if macro not in _MACROS:
                skip(f"unknown macro {macro}")
                continue
            expression, rest = macro, rest.strip()
        else:
            parts = line.split(None, 5)
            if len(parts) < 6:
                skip("expected five time fields and a command")
                continue
            expression, rest = " ".join(parts[:5]), parts[5]
        user = None
        if system:
            user, _, rest = rest.strip().partition(" ")
            users.add(user)
        command = rest.strip()
        if not command:
            skip("no command")
            continue
        if re.search(r"(?<!\\)%", command):
            skip("an unescaped % feeds standard input in cron; move that input into a script")
            continue
        command = command.replace("\\%", "%")
        try:
            schedule = Schedule.cron(expression, timezone=zone)
        except ConfigError as exc:
            skip(str(exc))
            continue

        name = _unique(_name_for(command), names)
        out.append("")
        out.append(f"# {source}:{number}: {line}")
        if user is not None:
            out.append(f"# ran as user {user!r}; cronlease runs it as the user it runs as")
        out.append(f"[tasks.{name}]")
        out.append(f"cron = {_string(schedule.expression)}")
        if schedule.timezone != "UTC":
            out.append(f"timezone = {_string(schedule.timezone)}")
        if shell == "/bin/sh":
            out.append(f"command = {_string(command)}")
            out.append("shell = true")
        else:
            out.append(f"command = [{_string(shell)}, {_string('-c')}, {_string(command)}]")
        if env:
            pairs = ", ".join(f"{var} = {_string(value)}" for var, value in env.items())
            out.append(f"env = {{ {pairs} }}")

    if len(users) > 0:
        notes.append(
            f"{source}: the crontab ran commands as {', '.join(sorted(users))}; "
            "cronlease runs every command as its own user"
        )
    header = [
        f"# cronlease.toml translated from {source} by `cronlease import-crontab`.",
        "# Every replica running `cronlease run` with this file runs each entry once per tick.",
        '# database = "postgresql://user@host/db"   # or set CRONLEASE_DATABASE_URL; '
        "default sqlite:///cronlease.db",
    ]
    return Translation(
        toml="\n".join(header + out) + "\n", tasks=len(names), problems=problems, notes=notes
    )


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _name_for(command: str) -> str:
    """A readable task name from the program a command runs."""
    words = command.split()
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)  # FOO=bar program ...
    program = os.path.basename(words[0]) if words else ""
    if (
        program in {"cd", "sh", "bash", "env", "nice", "ionice", "flock", "timeout"}
        and len(words) > 1
    ):
        candidates = [w for w in words[1:] if not w.startswith("-") and not w.isdigit()]
        if candidates:
            program = os.path.basename(candidates[-1 if program == "cd" else 0])
    slug = re.sub(r"[^a-z0-9]+", "-", program.lower()).strip("-")
    return slug or "job"


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}-{n}"
    taken.add(candidate)
    return candidate


def _string(value: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML). JSON leaves DEL, C1 and bidi
    controls as they are: TOML refuses a raw DEL, and none of them may reach a terminal."""
    return escape_controls(json.dumps(value, ensure_ascii=False), keep="", unicode_escapes=True)
