"""The data the status page shows: leases, recent runs and replica health, JSON-ready.

Reads only (never creates tables) and scrubs the database password from any
text that came from the driver or a task.
"""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sqlalchemy import inspect as sa_inspect
from sqlalchemy.exc import SQLAlchemyError

from cronlease._lease.model import LeaseInfo, RunRecord
from cronlease._lease.store import LeaseStore
from cronlease._timing.schedule import Schedule, time_of_slot
from cronlease.errors import StoreError

if TYPE_CHECKING:
    from cronlease.web.app import StatusPage

# Never replace a password shorter than this in error text: it would mangle the text.
MIN_SCRUBBED_PASSWORD = 4


# --- collecting ------------------------------------------------------------------


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


def _holder(holder: str) -> str:
    """The holder id without the per-attempt nonce."""
    return holder.rsplit("#", 1)[0]


def _zone(schedule: Schedule) -> tzinfo:
    try:
        return ZoneInfo(schedule.timezone)
    except (KeyError, ValueError):
        return timezone.utc


def _in_namespace(name: str, namespace: str | None) -> bool:
    if namespace:
        return name.startswith(f"{namespace}:")
    return ":" not in name


class _Scrubber:
    """Removes the database password from text that came from a driver or a task."""

    def __init__(self, store: LeaseStore) -> None:
        password = store.engine.url.password
        self.password = (
            str(password) if password and len(str(password)) >= MIN_SCRUBBED_PASSWORD else None
        )

    def __call__(self, text: str | None) -> str | None:
        if text is None or self.password is None:
            return text
        return text.replace(self.password, "***")


def _run_dict(run: RunRecord, scrub: _Scrubber) -> dict[str, Any]:
    duration = run.duration
    return {
        "slot": run.slot,
        "scheduled_for": time_of_slot(run.slot).isoformat(timespec="milliseconds"),
        "manual": run.manual,
        "fence": run.fence,
        "holder": _holder(run.holder),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration": None if duration is None else round(duration, 3),
        "outcome": run.outcome,
        "error": scrub(run.error),
    }


def _task_dict(
    name: str,
    schedule: Schedule | None,
    row: LeaseInfo | None,
    runs: list[RunRecord],
    db_now: float | None,
    now: datetime,
    scrub: _Scrubber,
) -> dict[str, Any]:
    acquired = row is not None and row.fence > 0  # a row made by pause was never acquired
    held = row is not None and db_now is not None and row.held(db_now)
    state = row.state(db_now) if row is not None else "idle"
    upcoming = schedule.upcoming(now, 1) if schedule is not None else []
    cursor = row.slot if row is not None and row.slot >= 0 else None
    last_success = next((run for run in runs if run.outcome == "succeeded"), None)
    return {
        "name": name,
        "declared": schedule is not None,
        "schedule": str(schedule) if schedule is not None else None,
        "state": state,
        "paused": bool(row and row.paused),
        "running": held,
        "holder": _holder(row.holder) if row is not None and acquired else None,
        "fence": row.fence if row is not None and acquired else None,
        "last_slot": cursor,
        "last_slot_time": (
            time_of_slot(cursor).isoformat(timespec="milliseconds") if cursor is not None else None
        ),
        "lease_expires_at": _iso(row.expires_at) if row is not None and acquired else None,
        "lease_expires_in": (
            round(row.expires_at - db_now, 3)
            if row is not None and acquired and db_now is not None
            else None
        ),
        "next_fire_time": (
            upcoming[0].astimezone(_zone(schedule)).isoformat() if schedule and upcoming else None
        ),
        "last_success_at": _iso(last_success.finished_at) if last_success else None,
        "runs": [_run_dict(run, scrub) for run in runs],
    }


def _tables_missing(store: LeaseStore) -> bool:
    try:
        return not sa_inspect(store.engine).has_table("cronlease_leases")
    except SQLAlchemyError:
        return False


def collect_status(page: StatusPage) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data. Reads only; never raises StoreError."""
    store = page.store
    scrub = _Scrubber(store)
    now = datetime.now(timezone.utc)
    declared = page.declared()
    rows: dict[str, LeaseInfo] = {}
    history: dict[str, list[RunRecord]] = {}
    db_now: float | None = None
    database_error: str | None = None
    try:
        rows = {row.name: row for row in store.leases()}
        db_now = store.database_time()
        names = list(declared) if declared is not None else sorted(rows)
        if page.runs:
            history = store.recent_runs(names, page.runs)
    except StoreError as exc:
        if not _tables_missing(store):
            database_error = scrub(str(exc))
        rows, history = {}, {}
    if declared is not None:
        tasks = [
            _task_dict(name, schedule, rows.get(name), history.get(name, []), db_now, now, scrub)
            for name, schedule in sorted(declared.items())
        ]
        orphaned = [
            _task_dict(name, None, row, [], db_now, now, scrub)
            for name, row in rows.items()
            if name not in declared and _in_namespace(name, page.namespace)
        ]
    else:
        tasks = [
            _task_dict(name, None, row, history.get(name, []), db_now, now, scrub)
            for name, row in rows.items()
        ]
        orphaned = []
    result: dict[str, Any] = {
        "title": page.title,
        "generated_at": now.isoformat(timespec="milliseconds"),
        "database": store.url,
        "database_time": _iso(db_now),
        "database_error": database_error,
        "namespace": page.namespace,
        "tasks": tasks,
        "orphaned": orphaned,
        "replica": None,
    }
    scheduler = page.scheduler
    if scheduler is not None:
        replica: dict[str, Any] = {
            "holder": scheduler.holder,
            "running": scheduler.running,
            "runs_in_progress": scheduler.running_tasks,
            "counters": dict(sorted(scheduler.stats.snapshot().items())),
            "health": None,
        }
        if database_error is None:
            health = scheduler.health()
            replica["health"] = {
                "ok": health.ok,
                "problems": [scrub(p) for p in health.problems],
                "overdue": list(health.overdue),
                "database_down_for": health.database_down_for,
            }
        result["replica"] = replica
    return result
