"""``cronlease import-crontab``: translate a crontab into an equivalent ``cronlease.toml``.

Lines are read as cron reads them (:mod:`cronlease.config._crontab_lines`):
fields separated by any run of spaces or tabs, the command the rest of the
line byte for byte. Understood: five-field entries, the ``@hourly``/
``@daily``/``@weekly``/``@monthly``/``@yearly`` macros, assignments (they
apply to the entries after them, as in cron), ``SHELL`` (other than
``/bin/sh`` the command runs as ``[SHELL, "-c", command]``), ``CRON_TZ`` (the
time zone of the entries after it, as cronie reads it) and, with
``system=True``, the user column of ``/etc/crontab`` and ``/etc/cron.d`` files.
Cron runs every entry through a shell, so every task is ``shell = true``.

A line that cannot be translated faithfully is refused with its line number
and the reason, never rewritten: ``@reboot``, an unescaped ``%`` (cron turns
it into standard input), invalid schedules, a variable name cronlease cannot
set, a last line without its newline (cron ignores it). An entry after a
refused assignment is refused too: it would run without the value cron gives
it. Refused lines stay in the TOML as comments. ``MAILTO``/``MAILFROM`` are
dropped with a note (cronlease logs output; it does not mail it).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cronlease._safe_text import escape_controls
from cronlease._timing.schedule import Schedule
from cronlease.config._crontab_lines import Assignment, Entry, Refused, read_line
from cronlease.errors import ConfigError

__all__ = ["Translation", "local_timezone", "toml_comment", "toml_string", "translate_crontab"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")  # FOO=bar program ...
_DROPPED = {"MAILTO", "MAILFROM", "CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING"}


@dataclass
class Translation:
    """The TOML text of the lines translated, and one message per line refused.

    With problems, the TOML is a partial translation: the refused lines are in
    it as comments only.
    """

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


@dataclass
class _State:
    """What the assignments so far give the entries after them."""

    zone: str
    shell: str = "/bin/sh"
    env: dict[str, str] = field(default_factory=dict)
    refused_assignment: int | None = None  # the line of the first one refused

    def assign(self, assignment: Assignment) -> None:
        name, value = assignment.name, assignment.value
        if name == "SHELL":
            if not value:
                raise Refused("an empty SHELL")
            self.shell = value
        elif name == "CRON_TZ":
            try:
                Schedule.cron("* * * * *", timezone=value)
            except ConfigError as exc:
                raise Refused(str(exc)) from None
            self.zone = value
        elif name not in _DROPPED:
            if not _IDENTIFIER.fullmatch(name):
                raise Refused(
                    f"{name!r} is not an environment variable name a cronlease task can set"
                )
            self.env[name] = value


def translate_crontab(
    text: str, *, source: str = "crontab", system: bool = False, timezone: str = "UTC"
) -> Translation:
    """Translate crontab ``text``; ``source`` names it in messages.

    Lines end at ``\n`` only, as cron's do: give the text as read, without
    newline translation (a ``\r`` left in a command is refused, not dropped).
    """
    out: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    state = _State(zone=timezone)
    names: set[str] = set()
    users: set[str] = set()
    where = toml_comment(source)

    lines = text.split("\n")
    unterminated = lines[-1]  # "" when the text ends with its newline
    for number, line in enumerate(lines, 1):
        try:
            parsed = _read(line, state, number, system=system, last=line is unterminated)
            if isinstance(parsed, Assignment) and parsed.name in _DROPPED:
                notes.append(
                    f"{source}:{number}: {parsed.name} dropped: cronlease logs command "
                    "output, it does not mail it"
                )
            if not isinstance(parsed, Entry):
                continue
            entry = parsed
            schedule = Schedule.cron(entry.when, timezone=state.zone)
        except (Refused, ConfigError) as exc:
            problems.append(f"{source}:{number}: not translated ({exc}): {line}")
            out.append("")
            out.append(
                f"# NOT TRANSLATED {where}:{number} "
                f"({toml_comment(str(exc))}): {toml_comment(line)}"
            )
            continue

        command = entry.command
        name = _unique(_name_for(command), names)
        out.append("")
        out.append(f"# {where}:{number}: {toml_comment(line)}")
        if entry.user is not None:
            users.add(entry.user)
            out.append(
                f"# ran as user {toml_comment(repr(entry.user))}; "
                "cronlease runs it as the user it runs as"
            )
        out.append(f"[tasks.{name}]")
        out.append(f"cron = {toml_string(schedule.expression)}")
        if schedule.timezone != "UTC":
            out.append(f"timezone = {toml_string(schedule.timezone)}")
        if state.shell == "/bin/sh":
            out.append(f"command = {toml_string(command)}")
            out.append("shell = true")
        else:
            argv = ", ".join(toml_string(part) for part in (state.shell, "-c", command))
            out.append(f"command = [{argv}]")
        if state.env:
            pairs = ", ".join(f"{var} = {toml_string(value)}" for var, value in state.env.items())
            out.append(f"env = {{ {pairs} }}")

    if len(users) > 0:
        notes.append(
            f"{source}: the crontab ran commands as {toml_comment(', '.join(sorted(users)))}; "
            "cronlease runs every command as its own user"
        )
    header = [
        f"# cronlease.toml translated from {where} by `cronlease import-crontab`.",
        "# Every replica running `cronlease run` with this file runs each entry once per tick.",
        '# database = "postgresql://user@host/db"   # or set CRONLEASE_DATABASE_URL; '
        "default sqlite:///cronlease.db",
    ]
    return Translation(
        toml="\n".join(header + out) + "\n", tasks=len(names), problems=problems, notes=notes
    )


def _read(
    line: str, state: _State, number: int, *, system: bool, last: bool
) -> Assignment | Entry | None:
    """What ``line`` is; an assignment is applied to ``state``."""
    if last and line.strip(" \t") and not line.lstrip(" \t").startswith("#"):
        raise Refused("no newline at the end of the file: cron ignores this last line")
    parsed = read_line(line, system=system)
    if isinstance(parsed, Assignment):
        try:
            state.assign(parsed)
        except Refused:
            if state.refused_assignment is None:
                state.refused_assignment = number
            raise
    elif parsed is not None and state.refused_assignment is not None:
        raise Refused(
            f"it follows the assignment on line {state.refused_assignment}, which was "
            "not translated"
        )
    return parsed


def toml_comment(text: str) -> str:
    """``text`` fit for a TOML comment: TOML refuses controls there, terminals misread them."""
    return escape_controls(text, keep="\t")


# Naming a task after its command: the work it does, not the shell around it. Debian's
# cron.d entries guard the work (`[ -x /usr/sbin/logcheck ] && ...`, `if ...; then
# nice -n10 /usr/sbin/logcheck -R; fi`): their first word is `if`, `test` or `[`.
_SEPARATOR = re.compile(r"(&&|\|\||[;|&{}()])")
_CLAUSE_WORDS = {"then", "do", "else", "elif"}  # a new simple command starts after them
_KEYWORDS = {"if", "fi", "while", "until", "done", "for", "case", "esac", "!", "time"}
_CHECKS = {"[", "[[", "test", "true", "false", ":", "cd", "which", "type", "sleep"}  # not work
_SUBSTITUTION = re.compile(r"\$\([^()]*\)|`[^`]*`")  # $(date +%d) in a test: not a command
_SHELL_C = re.compile(r"""\b(?:sh|bash|dash)\s+-c\s+(['"])(.*?)\1""")  # sh -c 'the command'
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_WRAPPERS = {"sh", "bash", "dash", "env", "nice", "ionice", "nohup", "chronic", "exec"}
_WRAPPERS_WITH_ONE_ARGUMENT = {"flock", "timeout"}  # a lock file, a duration, then the command
_NAMED_BY_ARGUMENT = {"run-parts", "invoke-rc.d", "service", "systemctl"}  # the thing they run


def _name_for(command: str) -> str:
    """A readable task name: the program the command's first piece of work runs."""
    for words in _simple_commands(command):
        program = _program_of(words)
        if program:
            slug = re.sub(r"[^a-z0-9]+", "-", program.lower()).strip("-")
            if slug:
                return slug
    return "job"


def _simple_commands(command: str) -> list[list[str]]:
    text = _SHELL_C.sub(lambda found: found[2], _SUBSTITUTION.sub(" ", command))
    # a quoted argument is one word, whatever it holds (perl -e 'sleep int(rand(43200))')
    text = _QUOTED.sub(lambda found: "SLEEP" if found[0][1:].startswith("sleep") else "Q", text)
    found: list[list[str]] = [[]]
    for token in _SEPARATOR.sub(r" \1 ", text).split():
        if _SEPARATOR.fullmatch(token) or token in _CLAUSE_WORDS:
            found.append([])
        else:
            found[-1].append(token)
    return [words for words in found if words]


def _program_of(words: list[str]) -> str | None:
    while words and (words[0] in _KEYWORDS or _ASSIGNED.match(words[0])):
        words = words[1:]  # if ..., ! ..., FOO=bar program ...
    while words:
        program, arguments = os.path.basename(words[0]), words[1:]
        if words[0] in _CHECKS or (program == "command" and "-v" in arguments):
            return None
        if arguments[:2] == ["-e", "SLEEP"]:  # perl -e 'sleep int(rand(43200))': a delay
            return None
        positional = [w for w in arguments if not w.startswith("-") and not _ASSIGNED.match(w)]
        if program in _WRAPPERS or program == "command":
            words = [w for w in positional if not w.isdigit()]  # nice 10 X, sh -c 'X ...'
        elif program in _WRAPPERS_WITH_ONE_ARGUMENT:
            words = positional[1:]
        elif program in _NAMED_BY_ARGUMENT and positional:
            return os.path.basename(positional[-1 if program == "run-parts" else 0])
        else:
            return program
    return None


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}-{n}"
    taken.add(candidate)
    return candidate


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML). JSON leaves DEL, C1 and bidi
    controls as they are: TOML refuses a raw DEL, and none of them may reach a terminal."""
    return escape_controls(json.dumps(value, ensure_ascii=False), keep="", unicode_escapes=True)
