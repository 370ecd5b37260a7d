"""The registry: one module per backend; :func:`statements_for` picks the one for an engine.

This is the one place that maps a database's name to its module. Adding a
backend is a module beside these (a :class:`Statements` subclass as
``STATEMENTS``), a line in :data:`MODULES`, and its name among the contract
suite's backends (docs/design.md §3, "Adding a backend").
"""

from __future__ import annotations

import importlib

from sqlalchemy.engine import URL, Engine

from cronlease._lease.dialects.base import Statements
from cronlease.errors import ConfigError

__all__ = [
    "DRIVERS",
    "MODULES",
    "Statements",
    "backend_for_url",
    "installed_backends",
    "statements_for",
    "statements_for_url",
]

#: SQLAlchemy's backend name (``dialect.name``, ``url.get_backend_name()``) -> module
MODULES = {
    "sqlite": "cronlease._lease.dialects.sqlite",
    "postgresql": "cronlease._lease.dialects.postgresql",
    "mysql": "cronlease._lease.dialects.mysql",
    "mariadb": "cronlease._lease.dialects.mysql",
}

#: the driver a URL naming only its backend gets (``postgresql://``: psycopg 3)
DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}


def statements_for(engine: Engine) -> Statements:
    """The statements for ``engine``'s backend; ConfigError for one cronlease does not support."""
    return statements_named(engine.dialect.name)


def statements_named(name: str) -> Statements:
    """The statements of the backend SQLAlchemy calls ``name``; ConfigError for one
    cronlease does not support, or whose driver is not installed."""
    try:
        return _backend(name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"cronlease has no statements for {name!r} yet") from exc


def backend_for_url(url: URL) -> Statements:
    """The backend of ``url``, for making its engine: ConfigError for one cronlease does
    not support, ModuleNotFoundError when its driver is not installed (the factory
    names the driver)."""
    return _backend(url.get_backend_name())


def installed_backends() -> list[Statements]:
    """Every backend whose module imports here (its driver installed), in
    :data:`MODULES` order: what tells a driver's exception apart (faults.py,
    pool.py, connect_errors.py), where no engine is at hand."""
    if not _INSTALLED:
        found: list[Statements] = []
        for name in dict.fromkeys(MODULES.values()):
            try:
                found.append(importlib.import_module(name).STATEMENTS)
            except ModuleNotFoundError:
                continue  # its driver is not installed: none of its errors can occur
        _INSTALLED[:] = found
    return _INSTALLED


_INSTALLED: list[Statements] = []


def _backend(name: str) -> Statements:
    module_name = MODULES.get(name)
    if module_name is None:
        raise ConfigError(
            f"cronlease does not support {name!r} databases: "
            "use SQLite, PostgreSQL or MySQL/MariaDB"
        )
    statements: Statements = importlib.import_module(module_name).STATEMENTS
    return statements


def statements_for_url(url: URL) -> Statements | None:
    """The statements for ``url``'s backend; None when cronlease cannot use it here
    (unsupported, or its driver not installed: opening it says why)."""
    try:
        return statements_named(url.get_backend_name())
    except ConfigError:
        return None
