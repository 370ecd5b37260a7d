"""``cronlease import-crontab`` as a real process, its output fed to ``cronlease check``.

A crontab with a line that cannot be translated faithfully is a config
mistake: exit 2, every refused line on stderr with its file and line, and
nothing written; ``--partial`` writes the rest, each refused line kept in the
output as a comment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_forks import CliServer
from tests.support.crontabs import SYSTEM_FILES, expected_commands
from tests.support.procs import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLEASE_")}
    env["PYTHONPATH"] = str(ROOT)  # this tree's cronlease, whatever the venv has installed
    return env


#: each command a fork of one interpreter that imported the CLI, not an interpreter start
SERVER = CliServer(ROOT, _env())


@pytest.fixture(autouse=True, scope="module")
def _cli_server() -> Iterator[None]:
    yield
    SERVER.close()


def cli(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """``python -m cronlease ARGS`` in ``cwd``, ``stdin`` its input: exit status and bytes."""
    return SERVER.run_bytes(list(args), cwd, _env(), stdin)


def checked(path: Path, cwd: Path) -> Any:
    result = cli("check", "--json", "-c", str(path), "--database", "sqlite:///never.db", cwd=cwd)
    assert result.returncode == 0, result.stderr.decode()
    assert not (cwd / "never.db").exists()
    return json.loads(result.stdout)


@pytest.mark.parametrize("fixture", SYSTEM_FILES, ids=lambda path: path.name)
def test_a_debian_system_crontab_translates_byte_for_byte_and_checks(
    fixture: Path, tmp_path: Path
) -> None:
    result = cli(
        "import-crontab", str(fixture), "--system", "--timezone", "Europe/Berlin", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr.decode()
    assert b"not translated" not in result.stderr
    config = tmp_path / "cronlease.toml"
    config.write_bytes(result.stdout)
    tasks = tomllib.loads(result.stdout.decode("utf-8"))["tasks"]
    assert [task["command"] for task in tasks.values()] == [
        command for _, command in expected_commands(fixture)
    ]
    data = checked(config, tmp_path)
    assert [task["name"] for task in data["tasks"]] == list(tasks)
    assert {task["timezone"] for task in data["tasks"]} == {"Europe/Berlin"}


def test_refused_lines_exit_2_and_write_nothing_unless_partial(tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_bytes(
        b"MAILTO=ops@example.com\n"
        b"*/10 * * * * /usr/bin/env echo ten\n"
        b"@reboot /usr/local/bin/warm-up\n"
        b"0 4 * * * echo report | mail -s 'at %H' ops\n"
        b"@hourly date\n"
    )
    output = tmp_path / "out.toml"
    output.write_text("# the previous translation\n")
    refused = cli(
        "import-crontab", str(crontab), "--timezone", "UTC", "-o", str(output), cwd=tmp_path
    )
    stderr = refused.stderr.decode()
    assert refused.returncode == 2, stderr
    assert refused.stdout == b""
    assert output.read_text() == "# the previous translation\n"
    assert f"{crontab}:3: not translated (@reboot" in stderr
    assert f"{crontab}:4: not translated (an unescaped %" in stderr
    assert "2 line(s)" in stderr and "--partial" in stderr

    partial = cli(
        "import-crontab",
        str(crontab),
        "--timezone",
        "UTC",
        "--partial",
        "-o",
        str(output),
        cwd=tmp_path,
    )
    assert partial.returncode == 0, partial.stderr.decode()
    assert f"{crontab}:3: not translated (@reboot" in partial.stderr.decode()
    text = output.read_text(encoding="utf-8")
    assert f"# NOT TRANSLATED {crontab}:3 (@reboot" in text
    assert f"# NOT TRANSLATED {crontab}:4 (an unescaped %" in text
    data = checked(output, tmp_path)
    assert [(t["name"], t["cron"]) for t in data["tasks"]] == [
        ("echo", "*/10 * * * *"),
        ("date", "0 * * * *"),
    ]


def test_lines_end_at_newline_only_as_in_cron(tmp_path: Path) -> None:
    """Read without newline translation: a CRLF crontab is refused, not quietly fixed."""
    dos = b"SHELL=/bin/sh\r\n17 * * * *\troot\tcd / && run-parts --report /etc/cron.hourly\r\n"
    for args, stdin in (
        (["-"], dos),
        ([str(tmp_path / "dos")], None),
    ):
        (tmp_path / "dos").write_bytes(dos)
        result = cli(
            "import-crontab", *args, "--system", "--timezone", "UTC", cwd=tmp_path, stdin=stdin
        )
        assert result.returncode == 2
        assert b":2: not translated (a carriage return" in result.stderr
        assert result.stdout == b""


def test_a_crontab_that_is_not_utf8_is_refused_with_its_line(tmp_path: Path) -> None:
    crontab = tmp_path / "latin1"
    crontab.write_bytes(b"# ok\n0 3 * * * echo caf\xe9\n")
    result = cli("import-crontab", str(crontab), "--timezone", "UTC", cwd=tmp_path)
    assert result.returncode == 2
    assert f"{crontab}:2: not UTF-8".encode() in result.stderr
    assert result.stdout == b""
