"""The crontab fixtures, and their commands cut out independently of the translator.

The fixtures under ``tests/fixtures/crontabs`` are written as Debian's stock
``/etc/crontab`` and ``/etc/cron.d`` files are: fields separated by tabs, by
runs of spaces, or both. :func:`expected_commands` cuts each command out of
the bytes of its line with a pattern written here from crontab(5), not with
the translator's parser: a macro or five time fields, then the user, each
ended by a run of spaces or tabs; the command is the rest of the line.
"""

from __future__ import annotations

import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "crontabs"
SYSTEM_FILES = sorted(
    [FIXTURES / "crontab", FIXTURES / "crontab.buster", *(FIXTURES / "cron.d").iterdir()]
)

_SYSTEM_ENTRY = re.compile(
    rb"^[ \t]*(?:@[a-z]+|[^ \t#=]+[ \t]+[^ \t]+[ \t]+[^ \t]+[ \t]+[^ \t]+[ \t]+[^ \t]+)"
    rb"[ \t]+(?P<user>[^ \t]+)[ \t]+(?P<command>.*)$"
)


def expected_commands(path: Path) -> list[tuple[int, str]]:
    """(line number, command as the shell gets it) for every entry of a system crontab."""
    found = []
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        match = _SYSTEM_ENTRY.match(line)
        if match:
            # cron hands the shell "\%" as "%" (the fixtures have no other %)
            command = match.group("command").replace(rb"\%", b"%")
            found.append((number, command.decode("utf-8")))
    return found
