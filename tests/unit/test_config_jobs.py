"""``[jobs.NAME]`` tables: what schedule rows may run, a ``call`` or a ``command``, checked as
a task's are; each refusal is one line naming the file, the line, the job and the key."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

from cronlease import Scheduler
from cronlease.config import load_config
from cronlease.errors import ConfigFileError

MODULE = """
def purge(days: int) -> None:
    pass
"""


def write(tmp_path: Path, toml: str) -> Path:
    module = f"jobs_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(MODULE)
    path = tmp_path / "cronlease.toml"
    path.write_text(textwrap.dedent(toml.replace("MODULE", module)).lstrip())
    return path


def test_call_and_command_jobs_are_registered_on_a_scheduler(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [jobs.purge]
        call = "MODULE:purge"

        [jobs.vacuum]
        command = ["echo", "vacuum"]
        env = { LC_ALL = "C" }
        """,
    )
    config = load_config(path)
    assert sorted(config.jobs) == ["purge", "vacuum"]
    assert config.jobs["vacuum"].command == ("echo", "vacuum")
    assert config.schedule_poll is None  # the Scheduler's default
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'c.db'}")
    for job in config.jobs.values():
        job.add_to(scheduler)
    assert sorted(scheduler.jobs) == ["purge", "vacuum"]
    scheduler.store.dispose()


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            '[jobs.purge]\ncall = "MODULE:purge"\nevery = "1m"\n',
            "cronlease.toml:3: job 'purge', key 'every': unknown key",
        ),
        (
            '[jobs.x]\ncall = "MODULE:purge"\ncommand = "true"\n',
            "job 'x', key 'command': give exactly one of 'call'",
        ),
        ('[jobs.x]\ncall = "MODULE:purge"\nshell = true\n', "job 'x', key 'shell': applies to"),
        ("[jobs.x]\ncommand = 5\n", "job 'x', key 'command': must be a string or an array"),
        ('[jobs.x]\ncall = "MODULE:nope"\n', "job 'x', key 'call':"),
        ('[jobs.x]\ncommand = ["a"]\nenv = { "1A" = "b" }\n', "job 'x', key 'env':"),
        ('jobs = "x"\n', "key 'jobs': must be a table of [jobs.NAME] tables"),
        ('[scheduler]\nschedule_poll = "2h"\n', "key 'schedule_poll': must be from 0.05 s"),
        ("[scheduler]\nschedule_poll = true\n", "key 'schedule_poll': must be a duration"),
    ],
)
def test_a_bad_job_table_is_one_line_naming_file_line_job_and_key(
    tmp_path: Path, body: str, words: str
) -> None:
    with pytest.raises(ConfigFileError) as refused:
        load_config(write(tmp_path, body))
    assert words in str(refused.value), str(refused.value)
    assert "\n" not in str(refused.value)
