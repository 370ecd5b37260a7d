"""Roles: which replicas may run a task (docs/design.md §5.34).

A task with ``roles`` runs only on a replica that has at least one of them; a
task without roles runs on every replica, whatever its roles. A replica without
roles therefore runs the role-less tasks only: a fleet that gives its worker
pods ``--role reports`` keeps reports off its web pods by saying nothing there.

Role names are short words (letters, digits, ``_ . -``), so a replica's roles
fit its member row as one comma-joined column (:data:`MAX_ROLES_LENGTH`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cronlease.errors import ConfigError

__all__ = ["MAX_ROLES_LENGTH", "can_run", "decode", "encode", "parse_roles", "replica_roles"]

#: the member row's ``roles`` column: every role of a replica, comma-joined
MAX_ROLES_LENGTH = 255
_ROLE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def parse_roles(value: object) -> tuple[str, ...]:
    """The sorted, distinct roles of ``value`` (an array of role names); ConfigError
    (its message without a subject: the caller names the task or the replica)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(
            f'must be an array of role names such as ["reports"], not {type(value).__name__}'
        )
    roles: set[str] = set()
    for role in value:
        if not isinstance(role, str) or not _ROLE.fullmatch(role):
            raise ConfigError(f"a role is 1 to 64 letters, digits, '_', '.' or '-', not {role!r}")
        roles.add(role)
    joined = ",".join(sorted(roles))
    if len(joined) > MAX_ROLES_LENGTH:
        raise ConfigError(f"roles take at most {MAX_ROLES_LENGTH} characters, comma-joined")
    return tuple(sorted(roles))


def can_run(task_roles: tuple[str, ...], replica_roles: Iterable[str]) -> bool:
    """Whether a replica with ``replica_roles`` runs a task with ``task_roles``."""
    return not task_roles or not set(task_roles).isdisjoint(replica_roles)


def encode(roles: tuple[str, ...]) -> str:
    """The member row's form: comma-joined ("" for none)."""
    return ",".join(roles)


def decode(stored: str | None) -> frozenset[str]:
    """A member row's roles (a row an older version wrote has none)."""
    return frozenset(role for role in (stored or "").split(",") if role)


def replica_roles(value: object) -> tuple[str, ...]:
    """``Scheduler(roles=...)`` checked: ConfigError naming the argument."""
    try:
        return parse_roles(value)
    except ConfigError as exc:
        raise ConfigError(f"Scheduler(roles=): {exc}") from None
