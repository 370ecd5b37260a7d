"""The one model of schedules kept in the database: :class:`Schedules`.

Every surface (Python, and the CLI, status page and Django admin built on it)
adds, changes and removes rows through it, so every write is checked the same
way (:func:`cronlease._schedules.rows.declare`: the task a replica would build)
and audited the same way (one ``cronlease_schedule_changes`` row in the write's
transaction). Usable without a running scheduler: ``Schedules(url)`` in a web
request; ``scheduler.schedules`` is bound to a scheduler's store, namespace,
jobs and code tasks.
"""

from __future__ import annotations

import builtins
import getpass
import json
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.engine import Engine

from cronlease._lease.database import scheduler_engine
from cronlease._lease.model import check_task_name
from cronlease._lease.schedule_rows import ScheduleRow, Written
from cronlease._lease.settings import PoolKeywords
from cronlease._lease.store import LeaseStore
from cronlease._lease.table_state import schedule_tables_present
from cronlease._schedules.jobs import Job, Jobs, stand_in
from cronlease._schedules.rows import (
    COLUMNS,
    Decoded,
    declare,
    decode,
    encode,
    normalized,
    short_name,
)
from cronlease._task import Task
from cronlease.errors import (
    ConfigError,
    ScheduleError,
    StaleScheduleError,
    UnknownJobError,
    UnknownScheduleError,
)

__all__ = ["ScheduleChange", "Schedules", "StoredSchedule", "default_changed_by"]


def default_changed_by() -> str:
    """``user@host``: who changed a schedule when the caller does not say."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class StoredSchedule:
    """One schedule row, as read. ``invalid`` says why replicas will not run it (a row
    changed behind the model's back, a job no longer offered); None when it loads."""

    name: str
    namespace: str | None
    job: str
    every: str | None
    cron: str | None
    timezone: str | None
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    options: Mapping[str, Any]
    enabled: bool
    version: int
    changed_by: str
    changed_at: datetime
    full_name: str
    invalid: str | None = None
    #: the live replicas that offer its job (holder ids), as read with it: empty when
    #: none does, so none runs it (a row returned by a write is not given them)
    offered_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScheduleChange:
    """One audited change: ``changes`` maps each field to ``(old, new)``."""

    name: str
    version: int
    action: str
    changed_by: str
    changed_at: datetime
    changes: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    seq: int = 0

    def text(self) -> str:
        """What the change did, field by field (``every: "2s" → "3s"``; an add shows the
        new values, a removal the old ones), as the page and the admin show it."""

        def shown(value: Any) -> str:
            return "-" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)

        parts = []
        for key, (old, new) in self.changes.items():
            if self.action == "add":
                parts.append(f"{key}: {shown(new)}")
            elif self.action == "remove":
                parts.append(f"{key}: {shown(old)}")
            else:
                parts.append(f"{key}: {shown(old)} → {shown(new)}")
        return "; ".join(parts)


class _Known(dict[str, "Callable[..., Any] | str"]):
    """The known jobs (name -> callable or a replica's description), and who offers them."""

    def __init__(self) -> None:
        super().__init__()
        self.offered_by: dict[str, list[str]] = {}


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


class Schedules:
    """Schedules kept in the database, on one database and namespace.

    ``jobs``: the jobs this writer knows (a mapping of name to callable); a row is
    checked against them, and against the descriptions live replicas publish for the
    others. ``code_tasks``: names that code-declared tasks use here, refused as
    schedule names (``scheduler.schedules`` knows them). Every method raises
    StoreError when the database fails.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: Engine | None = None,
        namespace: str | None = None,
        jobs: Mapping[str, Callable[..., Any]] | None = None,
        store: LeaseStore | None = None,
        code_tasks: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        given = sum(x is not None for x in (url, engine, store))
        if given > 1:
            raise ConfigError("give a database URL, an engine or a store, one of them")
        self.namespace = check_task_name(namespace) if namespace else None
        self.store = (
            store
            if store is not None
            else LeaseStore(scheduler_engine(url, engine, PoolKeywords(), None))
        )
        self._owned = store is None
        self._jobs = jobs if isinstance(jobs, Jobs) else Jobs(jobs)
        self._code_tasks = code_tasks or (lambda: ())
        self._ready = False

    # --- reading --------------------------------------------------------------------

    def _full(self, name: str) -> str:
        name = check_task_name(name)
        full = f"{self.namespace}:{name}" if self.namespace else name
        return check_task_name(full)

    def _tables(self) -> None:
        """Before a write: the tables, made if missing (as any writer makes them)."""
        if not self._ready:
            self.store.create_tables()
            self._ready = True

    def _readable(self) -> bool:
        """Before a read: whether there is anything to read. A read never creates tables
        (the status commands and page read with this model: docs/design.md §5.29)."""
        if not self._ready:
            self._ready = schedule_tables_present(self.store.engine)
        return self._ready

    def get(self, name: str) -> StoredSchedule:
        """The schedule ``name``; UnknownScheduleError if there is none."""
        full = self._full(name)
        row = self.store.schedule_rows.row(full) if self._readable() else None
        if row is None:
            raise UnknownScheduleError(f"no schedule named {name!r}")
        return self._shown(row, self._known_jobs())

    def list(self) -> list[StoredSchedule]:
        """Every schedule of the namespace, sorted by name."""
        if not self._readable():
            return []
        _, rows = self.store.schedule_rows.rows(self.namespace or "")
        known = self._known_jobs()
        return [self._shown(row, known) for row in rows]

    def history(self, name: str) -> builtins.list[ScheduleChange]:
        """Every change of ``name``, oldest first; kept after it is removed."""
        full = self._full(name)
        found = self.store.schedule_rows.history(full) if self._readable() else []
        changes = []
        for change in found:
            try:
                diff = {k: (v[0], v[1]) for k, v in json.loads(change.changes).items()}
            except (ValueError, TypeError, IndexError, AttributeError):
                diff = {}
            changes.append(
                ScheduleChange(
                    name=short_name(change.name, self.namespace or ""),
                    version=change.version,
                    action=change.action,
                    changed_by=change.changed_by,
                    changed_at=_when(change.changed_at),
                    changes=diff,
                    seq=change.seq,
                )
            )
        return changes

    def jobs(self) -> dict[str, builtins.list[str]]:
        """The known jobs: each name, with the live replicas that offer it (none for a job
        only this writer's registry has)."""
        offered: dict[str, builtins.list[str]] = {name: [] for name in self._jobs.names()}
        live = self.store.schedule_rows.offered(self.namespace or "") if self._readable() else []
        for offer in live:
            offered.setdefault(offer.job, []).append(offer.holder)
        return dict(sorted(offered.items()))

    # --- writing --------------------------------------------------------------------

    def add(
        self,
        name: str,
        *,
        job: str,
        every: object = None,
        cron: str | None = None,
        timezone: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        enabled: bool = True,
        changed_by: str | None = None,
        **options: Any,
    ) -> StoredSchedule:
        """Add the schedule ``name``, running ``job`` on ``every``/``cron``; ``options``
        are a task's (grace, timeout, retries, ...), checked by the same code.
        ScheduleError (nothing written) when a replica would refuse it, or the name is
        taken."""
        full = self._full(name)
        values = self._checked(
            name,
            full,
            dict(
                job=job,
                every=every,
                cron=cron,
                timezone=timezone,
                args=args,
                kwargs=kwargs,
                enabled=enabled,
                options=options,
            ),
        )

        def decide(old: ScheduleRow | None) -> Written:
            if old is not None:
                raise ScheduleError(
                    f"schedule {name!r}: exists already (version {old.version}, changed "
                    f"by {old.changed_by}); change it with update()"
                )
            diff = {
                key: [None, values.column(key)]
                for key in COLUMNS
                if values.column(key) not in (None, [], {})
            }
            return Written("add", encode(values), 1, json.dumps(diff, sort_keys=True))

        row = self._write(full, decide, changed_by)
        assert row is not None
        return self._shown(row, None)

    def update(
        self,
        name: str,
        *,
        expected_version: int | None = None,
        changed_by: str | None = None,
        **changes: Any,
    ) -> StoredSchedule:
        """Change fields of ``name`` (job, every, cron, timezone, args, kwargs, enabled, or
        an option; an option given None goes back to its default). With
        ``expected_version``, StaleScheduleError when the row has another version.
        Setting ``every`` clears ``cron`` and ``timezone``; setting ``cron`` clears ``every``."""
        full = self._full(name)
        # read first to check outside the transaction; the write checks the version again
        self._tables()
        current = self.store.schedule_rows.row(full)
        if current is None:
            raise UnknownScheduleError(f"no schedule named {name!r}")
        self._stale(name, current, expected_version)
        merged = self._merged(current, changes)
        values = self._checked(name, full, merged)

        def decide(old: ScheduleRow | None) -> Written:
            if old is None:
                raise UnknownScheduleError(f"no schedule named {name!r}")
            self._stale(name, old, expected_version)
            try:
                before: Decoded | None = decode(old)
            except ConfigError:
                before = None
            diff = {
                key: [before.column(key) if before else None, values.column(key)]
                for key in COLUMNS
                if before is None or before.column(key) != values.column(key)
            }
            return Written("set", encode(values), old.version + 1, json.dumps(diff, sort_keys=True))

        row = self._write(full, decide, changed_by)
        assert row is not None
        return self._shown(row, None)

    def remove(
        self, name: str, *, expected_version: int | None = None, changed_by: str | None = None
    ) -> None:
        """Remove ``name``: replicas stop firing it within a poll; its history stays."""
        full = self._full(name)
        self._tables()

        def decide(old: ScheduleRow | None) -> Written:
            if old is None:
                raise UnknownScheduleError(f"no schedule named {name!r}")
            self._stale(name, old, expected_version)
            try:
                gone = decode(old)
                diff = {
                    key: [gone.column(key), None]
                    for key in COLUMNS
                    if gone.column(key) not in (None, [], {})
                }
            except ConfigError:
                diff = {"job": [old.job, None]}
            return Written("remove", None, old.version + 1, json.dumps(diff, sort_keys=True))

        self._write(full, decide, changed_by)

    def close(self) -> None:
        """Close the connections of a model made from a URL or an engine."""
        if self._owned:
            self.store.dispose()

    # --- helpers --------------------------------------------------------------------

    def _write(
        self, full: str, decide: Callable[[ScheduleRow | None], Written], changed_by: str | None
    ) -> ScheduleRow | None:
        self._tables()
        who = changed_by if changed_by is not None else default_changed_by()
        if not isinstance(who, str) or not who.strip():
            raise ConfigError("changed_by must be a non-empty string")
        return self.store.schedule_rows.write(self.namespace or "", full, decide, who[:255])

    @staticmethod
    def _stale(name: str, row: ScheduleRow, expected: int | None) -> None:
        if expected is not None and row.version != expected:
            raise StaleScheduleError(
                f"schedule {name!r} is at version {row.version} (changed by "
                f"{row.changed_by} at {_when(row.changed_at):%Y-%m-%d %H:%M:%S} UTC), not "
                f"{expected}: read it again and redo the change",
                version=row.version,
                changed_by=row.changed_by,
            )

    def _merged(self, current: ScheduleRow, changes: Mapping[str, Any]) -> dict[str, Any]:
        try:
            old = decode(current)
        except ConfigError:  # a corrupted row: what is given replaces what cannot be read
            old = Decoded(job=current.job, every=current.every, cron=current.cron)
        merged: dict[str, Any] = {
            "job": old.job,
            "every": old.every,
            "cron": old.cron,
            "timezone": old.timezone,
            "args": old.args,
            "kwargs": old.kwargs,
            "enabled": old.enabled,
            "options": dict(old.options),
        }
        if "every" in changes and changes["every"] is not None:
            merged["cron"] = merged["timezone"] = None
        if "cron" in changes and changes["cron"] is not None:
            merged["every"] = None
        for key, value in changes.items():
            if key in merged and key != "options":
                merged[key] = value
            elif value is None:
                merged["options"].pop(key, None)
            else:
                merged["options"][key] = value
        return merged

    def _known_jobs(self) -> _Known:
        """Each known job: this writer's callable, else a live replica's description; and
        the live replicas that offer each."""
        known = _Known()
        for offer in self.store.schedule_rows.offered(self.namespace or ""):
            known.setdefault(offer.job, offer.description)
            known.offered_by.setdefault(offer.job, []).append(offer.holder)
        for job in self._jobs.all():
            known[job.name] = job.func if job.func is not None else job.describe()
        return known

    def _function(
        self, job_name: str, known: Mapping[str, Callable[..., Any] | str]
    ) -> Callable[[str, float | None], Callable[..., Any]]:
        local: Job | None = self._jobs.job(job_name)
        if local is not None:
            return local.function
        description = known[job_name]
        assert isinstance(description, str)
        made = stand_in(job_name, description)
        return lambda _name, _timeout: made

    def _checked(self, name: str, full: str, given: Mapping[str, Any]) -> Decoded:
        """The values as stored, checked as a replica will load them; ScheduleError."""
        self._tables()
        try:
            values = normalized(**given)
        except ConfigError as exc:
            raise ScheduleError(f"schedule {name!r}, {exc}") from None
        if name in set(self._code_tasks()):
            raise ScheduleError(
                f"schedule {name!r}: a task declared in code here has that name; choose another"
            )
        known = self._known_jobs()
        if values.job not in known:
            listed = ", ".join(sorted(known)) or "none (no live replica offers any)"
            if known or len(self._jobs):
                raise UnknownJobError(
                    f"schedule {name!r}, key 'job': unknown job {values.job!r}; known: {listed}"
                )
            # nothing known here: the replicas check it when they load it
            function: Callable[[str, float | None], Callable[..., Any]] = _any_function
        else:
            function = self._function(values.job, known)
        try:
            declare(short_name(full, self.namespace or ""), self.namespace, values, function)
        except ConfigError as exc:
            raise ScheduleError(f"schedule {name!r}, {exc}") from None
        return values

    def judged(self) -> builtins.list[tuple[StoredSchedule, Task | None]]:
        """Every schedule of the namespace as :meth:`list` shows it, each with the task a
        replica would build from it (None when it is ``invalid``: no replica runs it), for
        the status model. Creates no table: StoreError when they do not exist. One
        statement, the rows; when there are any, a second: the jobs live replicas offer."""
        rows = self.store.schedule_rows.rows_only(self.namespace or "")
        known = self._known_jobs() if rows else _Known()
        return [self._judged(row, known) for row in rows]

    def _shown(
        self, row: ScheduleRow, known: Mapping[str, Callable[..., Any] | str] | None
    ) -> StoredSchedule:
        return self._judged(row, known)[0]

    def _judged(
        self, row: ScheduleRow, known: Mapping[str, Callable[..., Any] | str] | None
    ) -> tuple[StoredSchedule, Task | None]:
        """The row as shown, and the task made from it when it is valid (with no job known
        to judge it by, the task of a stand-in that takes any arguments: its schedule and
        options are the row's, and a row no replica could load for them is invalid)."""
        invalid: str | None = None
        task: Task | None = None
        try:
            values = decode(row)
        except ConfigError as exc:
            values = Decoded(
                job=row.job,
                every=row.every,
                cron=row.cron,
                timezone=row.timezone,
                enabled=row.enabled,  # a column of its own: still read
            )
            invalid = str(exc)
        name = short_name(row.name, self.namespace or "")
        # a job nobody here knows, while some are known (this code's or live replicas'), is
        # the row's fault; with none known at all (no replica up, a writer without the
        # code) nothing can be judged: offered_by, empty, says that none runs it
        if invalid is None and known:
            if values.job not in known:
                invalid = f"no live replica offers job {values.job!r}"
            else:
                try:
                    function = self._function(values.job, known)
                    task = declare(name, self.namespace, values, function)
                except ConfigError as exc:
                    invalid = str(exc)
        elif invalid is None and known is not None:
            # nothing known to judge the job by; the schedule and options are the row's
            try:
                task = declare(name, self.namespace, values, _any_function)
            except ConfigError as exc:  # a schedule or option no replica would take
                invalid = str(exc)
        stored = StoredSchedule(
            name=name,
            namespace=self.namespace,
            job=values.job,
            every=values.every,
            cron=values.cron,
            timezone=values.timezone,
            args=values.args,
            kwargs=dict(values.kwargs),
            options=dict(values.options),
            enabled=values.enabled,
            version=row.version,
            changed_by=row.changed_by,
            changed_at=_when(row.changed_at),
            full_name=row.name,
            invalid=invalid,
            offered_by=tuple(known.offered_by.get(values.job, ()))
            if isinstance(known, _Known)
            else (),
        )
        return stored, task


def _anything(*args: Any, **kwargs: Any) -> None:
    """A job no one here knows: any arguments fit (the replicas check them on load)."""


def _any_function(name: str, timeout: float | None) -> Callable[..., Any]:
    return _anything
