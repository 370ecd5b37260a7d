"""Connection settings, the same on every backend: keywords, URL parameters, [database].

Engines are made, never connected (no server needed): the pool they carry is
what each setting must change. Before issue 14 SQLite ignored the pool options
(SQLAlchemy's 5 + 10), ``Scheduler`` took none, a URL parameter reached the
driver, and the config file had no ``[database]`` table.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from cronlease import ConfigError, ConfigFileError, Scheduler
from cronlease._lease.database import create_store_engine
from cronlease._lease.pool import StorePool
from cronlease._service import config_scheduler
from cronlease.config import DATABASE_ENV, load_config

BACKENDS = {
    "sqlite": "sqlite:///{tmp}/leases.db",
    "postgresql": "postgresql://app@127.0.0.1:1/app",
    "mysql": "mysql://app@127.0.0.1:1/app",
}


def shape(engine: Engine) -> tuple[int, int, float, float]:
    pool = engine.pool
    assert isinstance(pool, StorePool)
    return pool.size(), pool._max_overflow, pool.timeout(), pool.idle_timeout


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_every_backend_gets_the_same_small_pool(backend: str, tmp_path: Path) -> None:
    engine = create_store_engine(BACKENDS[backend].format(tmp=tmp_path))
    assert shape(engine) == (1, 2, 10.0, 60.0)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_url_parameters_set_the_pool_and_never_reach_the_driver(
    backend: str, tmp_path: Path
) -> None:
    url = BACKENDS[backend].format(tmp=tmp_path)
    url += "?pool_size=3&max_overflow=0&pool_timeout=2.5&pool_idle_timeout=5m"
    engine = create_store_engine(url)
    assert shape(engine) == (3, 0, 2.5, 300.0)
    assert "pool" not in str(engine.url)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_scheduler_keywords_set_the_pool(backend: str, tmp_path: Path) -> None:
    scheduler = Scheduler(
        BACKENDS[backend].format(tmp=tmp_path),
        pool_size=2,
        max_overflow=1,
        pool_timeout=3,
        pool_idle_timeout=7.5,
    )
    assert shape(scheduler.store.engine) == (2, 1, 3, 7.5)


def test_a_keyword_wins_over_the_url_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path}/leases.db?pool_size=5&max_overflow=4"
    with caplog.at_level(logging.WARNING, logger="cronlease"):
        scheduler = Scheduler(url, pool_size=2, max_overflow=4)
    assert shape(scheduler.store.engine)[:2] == (2, 4)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["pool_size=2 overrides pool_size=5 in the database URL"]


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"pool_size": 0}, "pool_size must be a whole number, at least 1, not 0"),
        ({"pool_size": 1.5}, "pool_size must be a whole number, at least 1, not 1.5"),
        ({"max_overflow": -1}, "max_overflow must be a whole number, at least 0, not -1"),
        ({"pool_timeout": 0}, "pool_timeout must be a positive number of seconds, not 0"),
        (
            {"pool_idle_timeout": float("inf")},
            "pool_idle_timeout must be a positive number of seconds, not inf",
        ),
        ({"pool_timeout": True}, "pool_timeout must be a positive number of seconds, not True"),
    ],
)
def test_a_bad_keyword_is_one_line_naming_it(
    tmp_path: Path, keywords: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Scheduler(f"sqlite:///{tmp_path}/leases.db", **keywords)  # type: ignore[arg-type]
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("pool_size=two", "database URL parameter pool_size=two: pool_size must be a whole"),
        ("max_overflow=-1", "database URL parameter max_overflow=-1: max_overflow must be"),
        ("pool_timeout=soon", "database URL parameter pool_timeout=soon: pool_timeout 'soon'"),
        ("pool_idle_timeout=0", "database URL parameter pool_idle_timeout=0: pool_idle_timeout"),
        ("pool_size=1&pool_size=2", "database URL parameter pool_size is given 2 times"),
    ],
)
def test_a_bad_url_parameter_is_one_line_naming_it(
    tmp_path: Path, query: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Scheduler(f"postgresql://app@127.0.0.1:1/app?{query}")
    assert str(raised.value).startswith(message), raised.value
    assert "\n" not in str(raised.value)


def test_pool_settings_with_an_engine_are_an_error(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/app.db")
    with pytest.raises(ConfigError, match="pool_size= configures an engine cronlease makes"):
        Scheduler(engine=engine, pool_size=2)
    with pytest.raises(ConfigError, match="connect_args= configures an engine"):
        Scheduler(engine=engine, connect_args={"timeout": 3})
    Scheduler(engine=engine)  # without them it is the user's pool, as before


def test_connect_args_reach_the_driver(tmp_path: Path) -> None:
    store = Scheduler(f"sqlite:///{tmp_path}/l.db", connect_args={"no_such_argument": 1}).store
    with pytest.raises(TypeError, match="no_such_argument"), store.engine.connect():
        pass


# --- the config file ------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cronlease.toml"
    path.write_text(text + '\n[tasks.a]\ncommand = "true"\nevery = 5\n')
    return path


def test_the_database_table_sets_the_replica_pool_and_wins_over_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    path = write(
        tmp_path,
        f'[database]\nurl = "sqlite:///{tmp_path}/l.db?pool_size=4&max_overflow=3"\n'
        'pool_size = 2\npool_timeout = "4s"\npool_idle_timeout = 30\n'
        "connect_args = { timeout = 2.5 }\n",
    )
    config = load_config(path, import_calls=False)
    scheduler = config_scheduler(config.database, config)
    # the table's pool_size wins; the URL's max_overflow stands; the rest from the table
    assert shape(scheduler.store.engine) == (2, 3, 4.0, 30.0)
    assert dict(config.connect_args or {}) == {"timeout": 2.5}


def test_the_environment_url_keeps_its_parameters_under_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATABASE_ENV, f"sqlite:///{tmp_path}/env.db?max_overflow=0&pool_size=3")
    config = load_config(write(tmp_path, "[database]\npool_size = 1\n"), import_calls=False)
    assert config.database_source == "environment"
    assert shape(config_scheduler(config.database, config).store.engine)[:2] == (1, 0)


def test_a_bad_parameter_in_the_environment_url_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATABASE_ENV, "postgresql://app@db/app?pool_size=lots")
    with pytest.raises(ConfigFileError) as raised:
        load_config(write(tmp_path, ""), import_calls=False)
    assert str(raised.value) == (
        f"{tmp_path / 'cronlease.toml'}: {DATABASE_ENV}: database URL parameter "
        "pool_size=lots: pool_size must be a whole number, at least 1, not 'lots'"
    )


def test_a_plain_database_string_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    url = f"sqlite:///{tmp_path}/l.db?pool_size=2"
    config = load_config(write(tmp_path, f'database = "{url}"'), import_calls=False)
    assert config.database == url
    assert shape(config_scheduler(config.database, config).store.engine)[:2] == (2, 2)
