"""``[celery]`` in the config file and ``run --celery-app``: each refusal names the file,
the line, the key and the beat entry, and the CLI exits 2 (``cronlease check``)."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

pytest.importorskip("celery")

from cronlease.cli import main
from cronlease.config import load_config
from cronlease.errors import ConfigFileError

APP_MODULE = """
from celery import Celery
from celery.schedules import solar

app = Celery("t", broker="memory://localhost//", set_as_current=False)


def sunset():  # as beat_schedule holds it, without ephem (only its computations need it)
    made = solar.__new__(solar)
    made.event, made.lat, made.lon = "sunset", -37.81, 144.96
    return made


app.conf.beat_schedule = {SCHEDULE}
"""


def write(tmp_path: Path, toml: str, schedule: str = "{}") -> tuple[Path, str]:
    """A config file and, beside it, a Celery app module of a name no other test uses."""
    module = f"beat_app_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(APP_MODULE.replace("{SCHEDULE}", schedule))
    path = tmp_path / "cronlease.toml"
    path.write_text(textwrap.dedent(toml.replace("MODULE", module)).lstrip())
    return path, module


def refusal(path: Path) -> ConfigFileError:
    with pytest.raises(ConfigFileError) as raised:
        load_config(path, import_calls=True)
    return raised.value


def test_an_app_that_cannot_be_imported(tmp_path: Path) -> None:
    toml = 'database = "sqlite://"\n\n[celery]\napp = "no_such_celery_mod:app"\n'
    path, _ = write(tmp_path, toml)
    error = refusal(path)
    assert (error.key, error.line) == ("celery.app", 4)
    assert "cannot import module 'no_such_celery_mod'" in str(error)
    assert str(error).startswith(f"{path}:4: key 'celery.app': ")


def test_an_attribute_that_is_not_an_app(tmp_path: Path) -> None:
    path, module = write(tmp_path, '[celery]\napp = "MODULE:Celery"\n')
    error = refusal(path)
    assert (error.key, error.line) == ("celery.app", 2)
    assert f"'{module}:Celery' is a type, not a Celery application" in str(error)
    path, module = write(tmp_path, '[celery]\napp = "MODULE:nothing"\n')
    assert f"module {module!r} has no attribute 'nothing'" in str(refusal(path))
    path, _ = write(tmp_path, '[celery]\napp = "MODULE.app"\n')
    assert refusal(path).key == "celery.app"


def test_a_solar_entry(tmp_path: Path) -> None:
    schedule = '{"dusk": {"task": "t.dusk", "schedule": sunset()}}'
    path, _ = write(tmp_path, '[celery]\napp = "MODULE:app"\n', schedule)
    error = refusal(path)
    assert (error.key, error.line) == ("celery.app", 2)
    assert "beat entry 'dusk', key 'schedule': solar schedules" in str(error)


def test_an_entry_with_the_name_of_a_task(tmp_path: Path) -> None:
    schedule = '{"report": {"task": "t.report", "schedule": 60.0}}'
    toml = """
        [celery]
        app = "MODULE:app"

        [tasks.report]
        command = "true"
        every = "1m"
    """
    path, _ = write(tmp_path, toml, schedule)
    error = refusal(path)
    assert (error.task, error.key, error.line) == ("report", "celery.app", 2)
    assert "beat entry 'report' has the name of a [tasks] table" in str(error)


def test_an_option_of_the_table(tmp_path: Path) -> None:
    path, _ = write(tmp_path, '[celery]\napp = "MODULE:app"\nevery = "1m"\n')
    error = refusal(path)
    assert error.key == "celery.every" and error.line == 3
    path, _ = write(tmp_path, '[celery]\napp = "MODULE:app"\nretries = "x"\n')
    assert refusal(path).key == "celery.retries"


@pytest.mark.parametrize(
    ("toml", "schedule", "said"),
    [
        ('[celery]\napp = "no_such_celery_mod:app"\n', "{}", "key 'celery.app'"),
        (
            '[celery]\napp = "MODULE:app"\n',
            '{"dusk": {"task": "t", "schedule": sunset()}}',
            "beat entry 'dusk', key 'schedule'",
        ),
        (
            '[celery]\napp = "MODULE:app"\n\n[tasks.a]\ncommand = "true"\nevery = 5\n',
            '{"a": {"task": "t", "schedule": 5}}',
            "task 'a', key 'celery.app'",
        ),
    ],
    ids=["bad-app", "solar", "clash"],
)
def test_check_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, schedule: str, said: str
) -> None:
    path, _ = write(tmp_path, toml, schedule)
    assert main(["check", "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and said in err, err


def test_run_celery_app_without_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cronlease.toml: the app's entries with the defaults; a bad entry exits 2 naming it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    _, module = write(tmp_path, "", '{"dusk": {"task": "t", "schedule": sunset()}}')
    (tmp_path / "cronlease.toml").unlink()
    code = main(["run", "--celery-app", f"{module}:app", "--database", "sqlite://"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--celery-app {module}:app: beat entry 'dusk', key 'schedule': solar" in err
    assert "cronlease.toml" not in err  # no file was needed, none is blamed
