"""The config file's database: ``database = "URL"``, or a ``[database]`` table.

Layout of the table (every key optional; ``CRONLEASE_DATABASE_URL`` overrides ``url``)::

    [database]
    url = "postgresql://app@db/app"
    pool_size = 1              # connections kept open (default 1)
    max_overflow = 2           # more for a burst, closed when returned (default 2)
    pool_timeout = "10s"       # how long a checkout waits when all are in use
    pool_idle_timeout = "60s"  # an unused kept connection is closed after this
    connect_args = { sslmode = "require" }   # passed to the driver's connect()

The pool keys win over the same parameters in the URL's query (a WARNING when
they differ; docs/design.md §8). Every problem is a one-line
:class:`~cronlease.errors.ConfigFileError` naming the file, the line and the
key as ``database.KEY``.

A relative SQLite path in the file (or the default ``cronlease.db``) is the
file's folder's, as ``call =`` and ``cwd =`` are: ``cronlease status -c
examples/cronlease.toml`` reads the database ``cd examples && cronlease run``
writes. A URL from ``CRONLEASE_DATABASE_URL`` or ``--database`` is the
command line's, so it stays relative to the working directory.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from cronlease._lease.database import normalize_url
from cronlease._lease.settings import (
    DEFAULT_POOL,
    POOL_PARAMETERS,
    PoolKeywords,
    parse_value,
    pool_from_url,
)
from cronlease.config._locate import SourceLines
from cronlease.errors import ConfigError, ConfigFileError

__all__ = ["DATABASE_KEYS", "DatabaseTable", "beside"]

DATABASE_KEYS = ("url", *POOL_PARAMETERS, "connect_args")


class DatabaseTable:
    """Reads ``database`` (a URL string or a table) of one config file."""

    def __init__(self, path: Path, source: SourceLines) -> None:
        self.path = path
        self.source = source

    def error(self, message: str, key: str | None = None) -> ConfigFileError:
        if key is None:
            return ConfigFileError(
                self.path, message, key="database", line=self.source.line_of(None, "database")
            )
        return ConfigFileError(
            self.path,
            message,
            key=f"database.{key}",
            line=self.source.table_key_line("database", key),
        )

    def read(self, value: object) -> tuple[str | None, PoolKeywords, Mapping[str, Any] | None]:
        """The URL the file gives (None: none), its pool settings and connect_args."""
        if isinstance(value, str):
            return value, PoolKeywords(), None
        if not isinstance(value, dict):
            raise self.error(f"must be a URL string or a [database] table, not {_kind(value)}")
        for key in value:
            if key not in DATABASE_KEYS:
                close = difflib.get_close_matches(key, DATABASE_KEYS, n=1)
                hint = (
                    f"did you mean {close[0]!r}?"
                    if close
                    else f"known keys: {', '.join(DATABASE_KEYS)}"
                )
                raise self.error(f"unknown key; {hint}", key)
        url = value.get("url")
        if url is not None and not isinstance(url, str):
            raise self.error(f"must be a string, not {_kind(url)}", "url")
        pool: dict[str, Any] = {}
        for name in POOL_PARAMETERS:
            if name not in value:
                continue
            try:
                pool[name] = parse_value(name, value[name])
                DEFAULT_POOL.with_values({name: pool[name]})  # its bounds
            except ConfigError as exc:
                raise self.error(str(exc), name) from None
        connect_args = value.get("connect_args")
        if connect_args is not None:
            if not isinstance(connect_args, dict):
                raise self.error(
                    f"must be a table of the driver's connect() arguments, not "
                    f"{_kind(connect_args)}",
                    "connect_args",
                )
            for arg, arg_value in connect_args.items():
                if not isinstance(arg_value, (str, int, float, bool)):
                    raise self.error(
                        f"{arg}: must be a string, number or boolean, not {_kind(arg_value)}",
                        "connect_args",
                    )
        return url, PoolKeywords(**pool), connect_args

    def check_url(self, url: str, *, key: str | None, env: str | None = None) -> None:
        """The URL parses and its pool parameters are valid; an error names where it came
        from (``env``: the environment variable, else the file's key)."""
        try:
            pool_from_url(normalize_url(url))
        except ConfigError as exc:
            if env is not None:
                raise ConfigFileError(self.path, f"{env}: {exc}") from None
            raise self.error(str(exc), key) from None


def beside(url: str, folder: Path) -> str:
    """``url`` with a relative SQLite file path made absolute in ``folder``; any other
    URL as it is (in memory, a ``file:`` URI, an absolute path, another backend)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url  # check_url names the mistake
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:":
        return url
    if path.startswith("file:") or Path(path).is_absolute():
        return url
    absolute = parsed.set(database=str(folder.resolve() / path))
    return absolute.render_as_string(hide_password=False)


def _kind(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    names.update({list: "an array", dict: "a table"})
    return names.get(type(value), f"a {type(value).__name__}")
