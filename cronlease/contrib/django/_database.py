"""A Django ``DATABASES`` entry as a SQLAlchemy URL for the same server.

cronlease keeps its own pool on that server (its lease statements and
heartbeats must not wait behind, or hold, a request's connection); only the
coordinates are shared. Django-only ``OPTIONS`` (its isolation level, its own
pool, server-side binding) are not driver arguments and are left out; the
rest go to the driver's ``connect()``. SQLite's ``OPTIONS`` are Django's
pragmas: cronlease sets its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL

from cronlease.errors import ConfigFileError

__all__ = ["WHERE", "database_of"]

#: how errors name the setting
WHERE = "settings.CRONLEASE"

#: ``OPTIONS`` keys that Django reads itself and never hands to the driver
_DJANGO_ONLY = frozenset({"isolation_level", "server_side_binding", "pool", "assume_role"})


def database_of(alias: str, databases: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The URL and ``connect_args`` of ``DATABASES[alias]``; ConfigFileError naming the key."""

    def error(message: str) -> ConfigFileError:
        return ConfigFileError(WHERE, message, key="DATABASE")

    entry = databases.get(alias)
    if not isinstance(entry, Mapping):
        known = ", ".join(sorted(databases)) or "none"
        raise error(f"no DATABASES[{alias!r}] in the settings (aliases: {known})")
    engine = str(entry.get("ENGINE", ""))
    name = entry.get("NAME") or ""
    options = entry.get("OPTIONS") or {}
    if engine.endswith(("sqlite3", "spatialite")):
        text = str(name)
        if not text or text == ":memory:" or text.startswith("file:") or "mode=memory" in text:
            raise error(
                f"DATABASES[{alias!r}] is an in-memory SQLite database: processes cannot "
                "share it; give a file NAME or another alias"
            )
        return URL.create("sqlite", database=str(Path(text).absolute())).render_as_string(
            hide_password=False
        ), None
    if engine.endswith(("postgresql", "postgis")):
        backend = "postgresql"
    elif engine.endswith("mysql"):
        backend = "mysql"
    else:
        raise error(
            f"DATABASES[{alias!r}] has ENGINE {engine!r}: cronlease runs on SQLite, "
            "PostgreSQL and MySQL/MariaDB"
        )
    host = str(entry.get("HOST") or "") or None
    query: dict[str, str] = {}
    if host is not None and host.startswith("/"):  # a Unix socket directory, not a host name
        query["host" if backend == "postgresql" else "unix_socket"] = host
        host = None
    port = entry.get("PORT") or None
    if port is not None and not str(port).isdigit():
        raise error(f"DATABASES[{alias!r}] has PORT {port!r}: not a port number")
    url = URL.create(
        backend,
        username=str(entry.get("USER") or "") or None,
        password=str(entry.get("PASSWORD") or "") or None,
        host=host,
        port=int(port) if port is not None else None,
        database=str(name) or None,
        query=query,
    )
    connect_args = {key: value for key, value in options.items() if key not in _DJANGO_ONLY}
    return url.render_as_string(hide_password=False), connect_args or None
