"""The connection settings of a replica, the same on every backend (docs/design.md §8).

Three places can give them, for three kinds of deployment:

- keywords: ``Scheduler(url, pool_size=1, max_overflow=2, pool_timeout=10,
  pool_idle_timeout=60, connect_args={...})``;
- the database URL's query, where only a URL can be given (``--database``,
  ``CRONLEASE_DATABASE_URL``): ``postgresql://app@db/app?pool_size=2&max_overflow=1``.
  cronlease takes its parameters out before the URL reaches the driver;
- ``cronlease.toml``'s ``[database]`` table (``cronlease/config/_database.py``).

A setting named as a keyword (or a ``[database]`` key) wins over the same
parameter in the URL, with one WARNING when the two differ: the URL is often
shared, the keyword is this application's decision. Every bad value is a
one-line :class:`~cronlease.errors.ConfigError` naming the setting (and the URL
parameter, when it came from there).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple

from sqlalchemy.engine import URL

from cronlease._timing.schedule import parse_duration
from cronlease.errors import ConfigError

__all__ = [
    "DEFAULT_POOL",
    "POOL_PARAMETERS",
    "READER_POOL",
    "PoolKeywords",
    "PoolSettings",
    "parse_value",
    "pool_from_url",
    "resolve_pool",
]

logger = logging.getLogger("cronlease")


@dataclass(frozen=True)
class PoolSettings:
    """How many connections a store's pool holds, and for how long.

    ``pool_size`` connections are kept open between uses, ``max_overflow``
    more are opened for a burst and closed when returned; a checkout that
    finds all of them in use waits ``pool_timeout`` seconds, then fails (a
    StoreError: the tick is skipped as ``error``). A kept connection unused
    for ``pool_idle_timeout`` seconds is closed.
    """

    pool_size: int = 1
    max_overflow: int = 2
    pool_timeout: float = 10.0
    pool_idle_timeout: float = 60.0

    def __post_init__(self) -> None:
        # SQLAlchemy reads pool_size=0 and max_overflow=-1 as "no limit": refused here.
        _check_count("pool_size", self.pool_size, least=1)
        _check_count("max_overflow", self.max_overflow, least=0)
        _check_seconds("pool_timeout", self.pool_timeout)
        _check_seconds("pool_idle_timeout", self.pool_idle_timeout)

    @property
    def most(self) -> int:
        """The most connections the pool opens at once."""
        return self.pool_size + self.max_overflow

    def with_values(self, values: Mapping[str, Any]) -> PoolSettings:
        """These settings with ``values`` (already of the right types) replacing some."""
        unknown = sorted(set(values) - set(POOL_PARAMETERS))
        if unknown:
            raise ConfigError(f"unknown pool setting {unknown[0]!r}")
        return replace(self, **values)


def _check_count(name: str, value: object, *, least: int) -> None:
    if type(value) is not int or value < least:
        raise ConfigError(f"{name} must be a whole number, at least {least}, not {value!r}")


def _check_seconds(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{name} must be a positive number of seconds, not {value!r}")


class PoolKeywords(NamedTuple):
    """The pool settings of ``Scheduler(...)``'s keywords, None where not given."""

    pool_size: int | None = None
    max_overflow: int | None = None
    pool_timeout: float | None = None
    pool_idle_timeout: float | None = None

    def given(self) -> dict[str, Any]:
        return {name: value for name, value in self._asdict().items() if value is not None}


#: the settings a replica's store gets unless told otherwise: in steady state one
#: connection for acquisition and finishing (the heartbeat has one of its own)
DEFAULT_POOL = PoolSettings()
#: what the status page and the CLI read through: one connection, no overflow
READER_POOL = PoolSettings(pool_size=1, max_overflow=0)
POOL_PARAMETERS = tuple(field.name for field in fields(PoolSettings))


def parse_value(name: str, raw: object) -> Any:
    """A setting's value from text (a URL parameter) or TOML (int, float, duration string)."""
    if name in ("pool_size", "max_overflow"):
        if isinstance(raw, str) and raw.strip().isdigit():
            return int(raw.strip())
        if type(raw) is int:
            return raw
        least = 1 if name == "pool_size" else 0
        raise ConfigError(f"{name} must be a whole number, at least {least}, not {raw!r}")
    return parse_duration(raw, what=name).total_seconds()


def pool_from_url(url: URL) -> tuple[URL, dict[str, Any]]:
    """``url`` without cronlease's query parameters, and their values (checked)."""
    found = {name: url.query[name] for name in POOL_PARAMETERS if name in url.query}
    if not found:
        return url, {}
    values = {}
    for name, raw in found.items():
        if isinstance(raw, tuple):
            raise ConfigError(f"database URL parameter {name} is given {len(raw)} times")
        try:
            values[name] = parse_value(name, raw)
            PoolSettings().with_values({name: values[name]})  # the value's own bounds
        except ConfigError as exc:
            raise ConfigError(f"database URL parameter {name}={raw}: {exc}") from None
    return url.difference_update_query(list(found)), values


def resolve_pool(
    url_values: Mapping[str, Any],
    keywords: Mapping[str, Any],
    *,
    base: PoolSettings = DEFAULT_POOL,
) -> PoolSettings:
    """``base``, then the URL's parameters, then ``keywords`` (which win); checked.
    A keyword whose value is None was not given."""
    keywords = {name: value for name, value in keywords.items() if value is not None}
    for name, value in keywords.items():
        if name in url_values and url_values[name] != value:
            logger.warning(
                "%s=%r overrides %s=%r in the database URL", name, value, name, url_values[name]
            )
    return base.with_values(url_values).with_values(keywords)
