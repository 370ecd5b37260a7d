"""``translate_crontab`` on crontabs in the shapes Debian ships, and on every line rule.

Each command of a fixture is compared with the bytes of its line as
:mod:`tests.support.crontabs` cuts them out from crontab(5)'s grammar.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from cronlease.config import load_config, translate_crontab
from tests.support.crontabs import FIXTURES, SYSTEM_FILES, expected_commands

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_the_fixtures_are_shaped_like_debians() -> None:
    crontab = (FIXTURES / "crontab").read_bytes()
    assert b"17 *\t* * *\troot    cd / && run-parts --report /etc/cron.hourly\n" in crontab
    assert b"\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts" in crontab
    assert len(SYSTEM_FILES) >= 8
    assert sum(len(expected_commands(path)) for path in SYSTEM_FILES) >= 20


@pytest.mark.parametrize("path", SYSTEM_FILES, ids=lambda path: path.name)
def test_every_command_of_a_system_crontab_is_kept_byte_for_byte(path: Path) -> None:
    result = translate_crontab(
        path.read_text(encoding="utf-8"), source=path.name, system=True, timezone="UTC"
    )
    assert result.problems == []
    tasks = tomllib.loads(result.toml)["tasks"]
    translated = [(task["command"], task["_line"]) for task in _with_lines(result.toml, tasks)]
    expected = expected_commands(path)
    assert [command for command, _ in translated] == [command for _, command in expected]
    assert [line for _, line in translated] == [number for number, _ in expected]


def _with_lines(toml: str, tasks: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    """The tasks in file order, each with the crontab line its comment names."""
    lines = [int(n) for n in re.findall(r"^# [^:\n]+:(\d+): ", toml, re.M)]
    assert len(lines) == len(tasks)
    return [{**task, "_line": line} for task, line in zip(tasks.values(), lines, strict=True)]


def test_debians_crontab_translates_to_the_jobs_cron_runs(tmp_path: Path) -> None:
    text = (FIXTURES / "crontab").read_text(encoding="utf-8")
    result = translate_crontab(text, source="/etc/crontab", system=True, timezone="Europe/Berlin")
    path = tmp_path / "cronlease.toml"
    path.write_text(result.toml, encoding="utf-8")
    tasks = list(load_config(path).tasks.values())
    assert [(t.schedule.expression, t.command) for t in tasks] == [
        ("17 * * * *", "cd / && run-parts --report /etc/cron.hourly"),
        (
            "25 6 * * *",
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }",
        ),
        (
            "47 6 * * 7",
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }",
        ),
        (
            "52 6 1 * *",
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }",
        ),
    ]
    assert all(t.shell and t.schedule.timezone == "Europe/Berlin" for t in tasks)
    assert [note for note in result.notes if "root" in note]
    assert "root\t" not in "".join(result.notes)


def test_assignments_with_tabs_quotes_and_indentation() -> None:
    text = (FIXTURES / "cron.d" / "logrotate").read_text(encoding="utf-8")
    result = translate_crontab(text, source="logrotate", system=True)
    tasks = tomllib.loads(result.toml)["tasks"]
    env = {
        "PATH": "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LOGROTATE_OPTS": "--state /var/lib/logrotate/status ",  # quoted: its blank kept
    }
    assert [task["env"] for task in tasks.values()] == [env, env, env]
    assert [task["cron"] for task in tasks.values()] == [
        "25 6 * * *",
        "0 * * * *",
        "0 4 * * mon,thu",
    ]
    # the trailing tab is the command's: cron hands the shell the rest of the line
    assert tasks["find"]["command"].endswith("-mmin +60 -delete\t")
    assert any("MAILTO dropped" in note for note in result.notes)


def line_of(text: str, **options: object) -> tuple[dict[str, object] | None, list[str]]:
    """The one task ``text`` translates to (None if refused), and the problems."""
    result = translate_crontab(text, **options)  # type: ignore[arg-type]
    tasks = list(tomllib.loads(result.toml).get("tasks", {}).values())
    assert len(tasks) + len(result.problems) >= 1
    return (tasks[-1] if tasks else None), result.problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0 3 * * *\tbackup.sh --all\n", "backup.sh --all"),
        ("0\t3\t*\t*\t*\t\tbackup.sh\n", "backup.sh"),
        ("  \t0 3 * * * backup.sh\n", "backup.sh"),
        ("@daily\tbackup.sh\n", "backup.sh"),
        ("0 3 * * * echo a  b\\ \n", "echo a  b\\ "),  # trailing blank after a backslash: an arg
        ("0 3 * * * date +\\%F\n", "date +%F"),
        ("0 3 * * * printf '\\\\n' \\\\\n", "printf '\\\\n' \\\\"),  # \\ is kept as it is
        ("0 3 * * * echo \\\\\\%\n", "echo \\\\%"),  # \\ then \%
        ("0 3 * * * echo caf\u00e9\u00a0x\n", "echo caf\u00e9\u00a0x"),  # NBSP is no blank
    ],
)
def test_the_command_is_the_rest_of_the_line(text: str, expected: str) -> None:
    task, problems = line_of(text)
    assert problems == []
    assert task is not None and task["command"] == expected


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("@reboot start-thing\n", 1, "@reboot"),
        ("# c\n@Daily backup.sh\n", 2, "unknown macro '@Daily'"),
        ('0 4 * * * echo "%H" | mail ops\n', 1, "unescaped %"),
        ("0 4 * * * echo \\\\%H\n", 1, "unescaped %"),  # \\ escapes the backslash, not the %
        ("61 * * * * broken-minute\n", 1, "minute 61"),
        ("5/10 * * * * ambiguous\n", 1, "'5/10'"),
        ("0 3 * * *\n", 1, "no command"),
        ("0 3 * * *\t \n", 1, "no command"),
        ("0 3 * * * * backup.sh\n", 1, "begins with '*'"),
        ("0 3 * * * backup.sh\r\n", 1, "carriage return"),
        ("0 3\u00a0* * * * backup.sh\n", 1, "hour field"),
        ("\n0 3 * * * backup.sh", 2, "no newline"),
        ("MAILTO=\n", 1, "neither an assignment nor an entry"),
        ("FOO-BAR=1\n", 1, "'FOO-BAR'"),
        ("CRON_TZ=Mars/Olympus\n", 1, "Mars/Olympus"),
    ],
)
def test_a_line_that_cannot_be_translated_faithfully_is_refused(
    text: str, line: int, reason: str
) -> None:
    result = translate_crontab(text, source="tab")
    assert len(result.problems) == 1, result.problems
    assert result.problems[0].startswith(f"tab:{line}: not translated (")
    assert reason in result.problems[0]
    assert result.tasks == 0


def test_a_system_crontab_entry_needs_a_user_and_a_command() -> None:
    result = translate_crontab("17 * * * *\troot\t\n17 * * * * root\n", system=True)
    assert len(result.problems) == 2
    assert all("not translated (no command after the user 'root')" in p for p in result.problems)


def test_entries_after_a_refused_assignment_are_refused_too() -> None:
    result = translate_crontab("FOO-BAR=1\n0 3 * * * a\nFOO=2\n0 4 * * * b\n", source="t")
    assert result.tasks == 0
    assert [p.split(" (")[0] for p in result.problems] == [
        "t:1: not translated",
        "t:2: not translated",
        "t:4: not translated",
    ]
    assert "the assignment on line 1" in result.problems[1]


@pytest.mark.parametrize(
    ("line", "name", "value"),
    [
        ("FOO=bar", "FOO", "bar"),
        ("FOO\t=\tbar baz \t", "FOO", "bar baz"),  # unquoted: trailing blanks trimmed
        ("FOO = ' x '", "FOO", " x "),
        ('FOO="a # b"   ', "FOO", "a # b"),
        ('"FOO" = x', "FOO", "x"),
        ("FOO=a'b", "FOO", "a'b"),
        ("FOO=$HOME/bin", "FOO", "$HOME/bin"),  # cron substitutes nothing
        ('FOO=""', "FOO", ""),
    ],
)
def test_assignment_lines_read_as_cron_reads_them(line: str, name: str, value: str) -> None:
    task, problems = line_of(f"{line}\n0 3 * * * x\n")
    assert problems == []
    assert task is not None and task["env"] == {name: value}


def test_shell_and_cron_tz_apply_to_the_entries_after_them() -> None:
    result = translate_crontab(
        "0 1 * * * a\nSHELL = /bin/bash\n\tCRON_TZ\t=\tAsia/Kolkata\n0 2 * * * b\n",
        timezone="Europe/Berlin",
    )
    a, b = tomllib.loads(result.toml)["tasks"].values()
    assert a["command"] == "a" and a["shell"] is True and a["timezone"] == "Europe/Berlin"
    assert b["command"] == ["/bin/bash", "-c", "b"] and b["timezone"] == "Asia/Kolkata"


def test_refused_lines_are_kept_as_comments_in_the_partial_translation() -> None:
    result = translate_crontab("@reboot warm-up\n0 3 * * * backup.sh\x1b\n", source="c")
    assert result.tasks == 1 and len(result.problems) == 1
    assert "# NOT TRANSLATED c:1 (@reboot" in result.toml
    assert "\x1b" not in result.toml  # escaped in the comment and in the string
    assert tomllib.loads(result.toml)["tasks"]["backup-sh"]["command"] == "backup.sh\x1b"


def test_tasks_are_named_after_the_work_not_the_shell_around_it() -> None:
    """Debian's cron.d entries guard their work (``[ -x X ] && ...``, ``if ...; then X;
    fi``, ``test -x X || ...``): named after their first word they were ``if``,
    ``if-2``, ``test``, ``command``; they are named after the program they run."""
    names = {}
    for path in SYSTEM_FILES:
        result = translate_crontab(
            path.read_text(encoding="utf-8"), source=path.name, system=True, timezone="UTC"
        )
        names[path.name] = list(tomllib.loads(result.toml)["tasks"])
    assert names["mdadm"] == ["checkarray"]
    assert names["zfsutils-linux"] == ["trim", "scrub"]
    assert names["php"] == ["sessionclean"]
    assert names["anacron"] == ["anacron"]
    assert names["certbot"] == ["certbot"]  # after its random delay (perl -e 'sleep ...')
    assert names["sysstat"] == ["debian-sa1", "debian-sa1-2"]
    assert names["crontab"] == ["cron-hourly", "cron-daily", "cron-weekly", "cron-monthly"]
    shell = {"if", "test", "command", "then", "fi", "job", "date", "sleep", "perl"}
    assert not {name.rsplit("-", 1)[0] for found in names.values() for name in found} & shell


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("FOO=bar /usr/bin/backup --full", "backup"),
        ("flock -n /tmp/x.lock /opt/job.sh", "job-sh"),
        ("nice -n 10 ionice -c3 /usr/bin/updatedb", "updatedb"),
        ('bash -c "cd /srv && ./deploy.sh"', "deploy-sh"),
        ("if [ -x /usr/sbin/logcheck ]; then nice -n10 /usr/sbin/logcheck -R; fi", "logcheck"),
    ],
)
def test_wrappers_and_guards_are_looked_through(command: str, name: str) -> None:
    result = translate_crontab(f"0 3 * * * {command}\n", source="crontab", timezone="UTC")
    assert list(tomllib.loads(result.toml)["tasks"]) == [name]
