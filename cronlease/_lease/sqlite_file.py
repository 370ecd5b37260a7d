"""Whether a SQLite lease file is still the one at its path (docs/design.md §5.17).

A replica's pooled connections keep the file they opened. When that file is
deleted or another one is moved to its path, they go on using the old one
while a replica started afterwards opens (or creates) the new one: two
databases, each believing it holds every lease, and every slot runs twice.

So the first connection pins the file's identity (``st_dev``, ``st_ino`` of
the path once it is open), and

- :meth:`FileGuard.check` compares the path with it before every acquisition
  batch (one ``stat``, microseconds; no statement), raising
  :class:`~cronlease.errors.DatabaseFileChanged`: a replica takes no lease on a
  file that is no longer the one at the path;
- every later connection is checked as it opens, and refused if it opened a
  different file (or created one at the deleted path): heartbeats and
  finishes never write to a database the replica did not start on.

The identity is only as good as the old file's inode staying allocated: the
pooled connections hold it open, so its number cannot be given to a new file.
A process that closed every connection to it (``engine.dispose()``) could be
fooled by a new file that got the freed number; a running replica never does.
The replica does not reopen the new file: the old one holds the lease history
and the leases of runs still going, and the new one knows neither (an empty
file would let it rerun what the fleet just ran; a restored copy would roll
the slot cursors back). A restart is the operator's decision.
``PRAGMA data_version`` is no help here: it says whether other connections
wrote to the file this connection has open, not whether the path still names it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine

from cronlease.errors import DatabaseFileChanged

__all__ = ["FileGuard", "FileIdentity", "guard_of", "watch"]


@dataclass(frozen=True)
class FileIdentity:
    """A file as the kernel knows it: the same pair means the same file."""

    device: int
    inode: int

    def __post_init__(self) -> None:
        if self.device < 0 or self.inode < 0:
            raise ValueError("a file identity is two non-negative numbers")

    @classmethod
    def at(cls, path: str) -> FileIdentity | None:
        """The identity of the file ``path`` names now; None if there is none."""
        try:
            status = os.stat(path)
        except OSError:
            return None
        return cls(status.st_dev, status.st_ino)


class FileGuard:
    """Pins the file an engine's first connection opened and tells when the path moved on."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pinned: FileIdentity | None = None

    @property
    def pinned(self) -> FileIdentity | None:
        """The file this engine opened first; None before its first connection."""
        return self._pinned

    def opened(self) -> None:
        """A connection just opened the path: pin the file, or refuse a different one."""
        now = FileIdentity.at(self.path)
        with self._lock:
            if self._pinned is None:
                self._pinned = now
                return
            pinned = self._pinned
        if now != pinned:
            # A DB-API error, so the pool reports it as a database failure.
            raise sqlite3.OperationalError(self._message())

    def check(self) -> None:
        """Raise DatabaseFileChanged if the path no longer names the pinned file."""
        pinned = self._pinned
        if pinned is not None and FileIdentity.at(self.path) != pinned:
            raise DatabaseFileChanged(self._message())

    def _message(self) -> str:
        now = "no file" if FileIdentity.at(self.path) is None else "another file"
        return (
            f"the SQLite lease file {self.path} was deleted or replaced under this replica "
            f"(the path names {now} now): it takes no lease until it is restarted"
        )


_GUARDS: weakref.WeakKeyDictionary[Engine, FileGuard] = weakref.WeakKeyDictionary()


def database_path(url: URL) -> str | None:
    """The file a SQLite URL opens, absolute (None for a form this guard cannot follow)."""
    database = url.database or ""
    if str(url.query.get("uri", "")).lower() in ("true", "1"):
        if not database.startswith("file:"):
            return None
        database = database[len("file:") :].split("?", 1)[0]
    return os.path.abspath(database) if database else None


def watch(engine: Engine, url: URL) -> None:
    """Guard ``engine``'s SQLite file: pin it at the first connection, check each later one."""
    path = database_path(url)
    if path is None:
        return
    guard = FileGuard(path)
    _GUARDS[engine] = guard

    # First among the connect hooks: a connection to another file is refused before
    # the others switch it to WAL (which would write to it).
    @event.listens_for(engine, "connect", insert=True)
    def _opened(_dbapi_connection: Any, _record: Any) -> None:
        guard.opened()


def guard_of(engine: Engine) -> FileGuard | None:
    """The guard of an engine :func:`watch` set up; None for other engines."""
    return _GUARDS.get(engine)
