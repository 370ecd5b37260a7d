"""One statements module per backend; :func:`statements_for` picks the one for an engine."""

from __future__ import annotations

import importlib

from sqlalchemy.engine import Engine

from cronlease._lease.dialects.base import Statements
from cronlease.errors import ConfigError

__all__ = ["Statements", "statements_for"]

_MODULES = {
    "sqlite": "cronlease._lease.dialects.sqlite",
    "postgresql": "cronlease._lease.dialects.postgresql",
    "mysql": "cronlease._lease.dialects.mysql",
    "mariadb": "cronlease._lease.dialects.mysql",
}


def statements_for(engine: Engine) -> Statements:
    """The statements for ``engine``'s backend; ConfigError for one cronlease does not support."""
    module_name = _MODULES.get(engine.dialect.name)
    if module_name is None:
        raise ConfigError(
            f"cronlease does not support {engine.dialect.name!r} databases: "
            "use SQLite, PostgreSQL or MySQL/MariaDB"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"cronlease has no statements for {engine.dialect.name!r} yet") from exc
    statements: Statements = module.STATEMENTS
    return statements
