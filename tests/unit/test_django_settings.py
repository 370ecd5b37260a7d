"""settings.CRONLEASE and DATABASES, read as cronlease.contrib.django reads them (no
Django setup needed: the rules are plain functions of the two settings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from cronlease.contrib.django._database import database_of
from cronlease.contrib.django._settings import read_settings
from cronlease.errors import ConfigFileError

PG = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": "app",
    "USER": "web",
    "PASSWORD": "p@ss/word",
    "HOST": "db.internal",
    "PORT": "6432",
    "OPTIONS": {"sslmode": "require", "isolation_level": 2},
}


def test_a_postgresql_entry_is_the_same_server_with_the_driver_options() -> None:
    url, connect_args = database_of("default", {"default": PG})
    parsed = make_url(url)
    assert (parsed.drivername, parsed.username, parsed.password) == (
        "postgresql",
        "web",
        "p@ss/word",
    )
    assert (parsed.host, parsed.port, parsed.database) == ("db.internal", 6432, "app")
    assert connect_args == {"sslmode": "require"}  # Django's isolation_level is not the driver's


def test_a_mysql_entry_and_a_unix_socket() -> None:
    entry = {"ENGINE": "django.db.backends.mysql", "NAME": "app", "HOST": "/run/mysqld/sock"}
    url, connect_args = database_of("jobs", {"jobs": entry})
    parsed = make_url(url)
    assert (parsed.drivername, parsed.host, parsed.database) == ("mysql", None, "app")
    assert dict(parsed.query) == {"unix_socket": "/run/mysqld/sock"}
    assert connect_args is None


def test_a_sqlite_entry_is_its_file_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url, _ = database_of(
        "default", {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}
    )
    assert make_url(url).database == str(tmp_path / "db.sqlite3")


@pytest.mark.parametrize(
    ("databases", "expected"),
    [
        ({}, "no DATABASES['default']"),
        ({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}, "in-memory"),
        (
            {"default": {"ENGINE": "django.db.backends.oracle", "NAME": "x"}},
            "ENGINE 'django.db.backends.oracle'",
        ),
    ],
)
def test_a_database_cronlease_cannot_share_names_the_key(
    databases: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigFileError) as caught:
        database_of("default", databases)  # type: ignore[arg-type]
    assert str(caught.value).startswith("settings.CRONLEASE: key 'DATABASE': ")
    assert expected in str(caught.value)


SQLITE = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "/tmp/x.db"}}


def test_tasks_are_checked_by_the_cronlease_toml_code() -> None:
    found = read_settings(
        {"TASKS": {"backup": {"command": "true", "cron": "0 2 * * *"}}, "AUTOSTART": True}, SQLITE
    )
    assert found.autostart and found.alias == "default"
    assert found.config.tasks["backup"].schedule.expression == "0 2 * * *"
    with pytest.raises(ConfigFileError) as caught:
        read_settings({"TASKS": {"backup": {"command": "true", "every": "5q"}}}, SQLITE)
    assert str(caught.value).startswith("settings.CRONLEASE: task 'backup', key 'every': ")
    with pytest.raises(ConfigFileError) as caught:
        read_settings(
            {"TASKS": {"backup": {"command": "true", "cron": "@daily", "colour": 1}}}, SQLITE
        )
    assert "task 'backup', key 'colour': unknown key" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"AUTOSTARTS": True}, "key 'AUTOSTARTS': unknown key; did you mean 'AUTOSTART'?"),
        ({"AUTOSTART": "yes"}, "key 'AUTOSTART': must be True or False"),
        ({"TASKS": []}, "key 'TASKS': must be a dict"),
        ({"ROLES": "reports"}, "key 'ROLES': must be an array of role names"),
        ({"SCHEDULE_POLL": "soon"}, "key 'SCHEDULE_POLL': "),
        ({"SCHEDULE_POLL": 0.001}, "key 'SCHEDULE_POLL': must be from 0.05 s to 1 hour"),
        ({"JOBS": []}, "key 'JOBS': must be a table of [jobs.NAME] tables"),
        ({"JOBS": {"export": {"command": "true", "every": "5m"}}}, "job 'export', key 'every'"),
        ([], "must be a dict"),
    ],
)
def test_a_settings_mistake_names_the_setting_and_key(value: object, expected: str) -> None:
    with pytest.raises(ConfigFileError) as caught:
        read_settings(value, SQLITE)
    assert str(caught.value).startswith("settings.CRONLEASE: ")
    assert expected in str(caught.value)


def test_roles_are_the_replicas_and_reach_its_config() -> None:
    found = read_settings({"ROLES": ["reports", "ops", "reports"]}, SQLITE)
    assert found.config.roles == ("ops", "reports")  # sorted, distinct: as Scheduler(roles=)
    assert read_settings({}, SQLITE).config.roles == ()


def test_schedule_poll_and_jobs_reach_the_config() -> None:
    found = read_settings(
        {"SCHEDULE_POLL": "2s", "JOBS": {"export": {"command": "true"}}}, SQLITE
    ).config
    assert found.schedule_poll == 2.0
    assert list(found.jobs) == ["export"]
    defaults = read_settings({}, SQLITE).config
    assert (defaults.schedule_poll, defaults.jobs) == (None, {})
