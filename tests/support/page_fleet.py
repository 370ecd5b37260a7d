"""A fleet's worth of history for the status page: tasks that succeed, one failing on
every run, one overdue, one paused, one running, skipped ticks, for the page tests and
docs/screenshots/make.py.

History is written through the store as the fleet writes it (acquire, then finish),
for past slots; then each run's start and end are moved to its slot's time, as they
would be had it run then (otherwise every run "started just now").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from cronlease import Scheduler
from cronlease._lease.model import AcquireRequest, Outcome
from cronlease._lease.schema import leases, runs
from cronlease._lease.store import LeaseStore
from cronlease._timing.schedule import slot_of
from tests.support.leases import won

FAILURE = (
    "exited with status 3\n"
    "stderr (last lines):\n"
    "Traceback (most recent call last):\n"
    '  File "/app/jobs/sync.py", line 41, in main\n'
    "    rows = fetch(api)\n"
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.com', "
    "port=443): Max retries exceeded"
)


def noop() -> None:
    pass


def write_history(
    store: LeaseStore,
    name: str,
    slots: Sequence[datetime],
    outcomes: Sequence[Outcome],
    *,
    holders: Sequence[str] = ("web-1", "web-2", "worker-1"),
    duration: float = 1.5,
    error: str = FAILURE,
) -> None:
    """One run per slot (oldest first), its outcome the next of ``outcomes`` (cycled)."""
    for index, moment in enumerate(slots):
        slot = slot_of(moment)
        holder = holders[index % len(holders)]
        request = AcquireRequest(name=name, slot=slot, ttl=60, holder=holder)
        lease = won(store.acquire(request))
        assert lease is not None, f"{name}: slot {slot} refused"
        outcome = outcomes[index % len(outcomes)]
        store.finish(lease, outcome, None if outcome == "succeeded" else error)
        started = slot / 1000 + 0.05
        took = duration * (1 + (index % 3) / 4)
        with store.engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(runs.c.name == name, runs.c.slot == slot)
                .values(started_at=started, finished_at=started + took)
            )
            conn.execute(
                leases.update()
                .where(leases.c.name == name)
                .values(acquired_at=started, expires_at=started + took)
            )


def past_fire_times(
    scheduler: Scheduler, name: str, count: int, *, end: datetime
) -> list[datetime]:
    """The task's last ``count`` fire times before ``end``."""
    schedule = scheduler.get_task(name).schedule
    span = timedelta(seconds=schedule.smallest_gap() * (count + 1))
    return schedule.missed(end - span, end, count + 5)[-count:]


# name, schedule (add_task keywords), outcomes cycled oldest first
FLEET: list[tuple[str, dict[str, Any], list[Outcome]]] = [
    ("billing-invoices", {"cron": "0 2 * * *", "timezone": "Europe/Istanbul"}, ["succeeded"]),
    ("billing-reminders", {"cron": "30 9 * * 1-5"}, ["succeeded"]),
    ("cache-warm", {"every": "5m"}, ["succeeded"]),
    ("cleanup-sessions", {"every": "15m"}, ["succeeded"]),
    ("cleanup-uploads", {"cron": "0 */6 * * *"}, ["succeeded"]),
    ("digest-daily", {"cron": "0 7 * * *"}, ["succeeded"]),
    ("digest-weekly", {"cron": "0 8 * * 1"}, ["succeeded"]),
    ("export-warehouse", {"cron": "15 * * * *"}, ["succeeded"]),
    ("feeds-refresh", {"every": "10m"}, ["succeeded", "succeeded", "timed_out", "succeeded"]),
    ("index-rebuild", {"cron": "0 3 * * 0"}, ["succeeded"]),
    ("mail-bounces", {"every": "5m"}, ["succeeded"]),
    ("metrics-rollup", {"every": "1h"}, ["succeeded"]),
    ("partner-sync", {"every": "10m"}, ["succeeded", "succeeded", "failed", "failed"]),
    ("payouts", {"cron": "0 9,17 * * *"}, ["succeeded"]),
    ("queue-depth", {"every": "5m"}, ["succeeded"]),
    ("reports-export", {"every": "15m"}, ["succeeded"]),
    ("search-sync", {"every": "2m"}, ["succeeded"]),
    ("sitemap", {"cron": "0 4 * * *"}, ["succeeded"]),
    ("stale-carts", {"every": "30m"}, ["succeeded"]),
    ("subscriptions-renew", {"cron": "0 0 * * *"}, ["succeeded"]),
    ("thumbnails", {"every": "5m"}, ["succeeded"]),
    ("tokens-expire", {"every": "1h"}, ["succeeded"]),
    ("trial-ending", {"cron": "0 10 * * *"}, ["succeeded"]),
    ("usage-meter", {"every": "10m"}, ["succeeded"]),
    ("vat-rates", {"cron": "0 1 1 * *"}, ["succeeded"]),
    ("webhooks-retry", {"every": "5m"}, ["succeeded", "failed", "succeeded", "succeeded"]),
]
# the flagged ones: failing on every run since the ninth; the overdue one ran last 25
# minutes ago (no replica has taken its ticks since); one paused; one running now
FAILING = "crm-sync"
OVERDUE = "geo-ip-update"
PAUSED = "newsletter-send"
RUNNING = "backup-db"


def populate(url: str, *, size: int = len(FLEET)) -> Scheduler:
    """A scheduler (not started) of ``size`` plain tasks and the four flagged ones."""
    scheduler = Scheduler(url)
    now = datetime.now(timezone.utc)
    for name, when, _ in FLEET[:size]:
        scheduler.add_task(noop, name=name, **when)
    scheduler.add_task(noop, name=FAILING, every="5m", alert_after=2)
    scheduler.add_task(noop, name=OVERDUE, every="1m")
    scheduler.add_task(noop, name=PAUSED, cron="0 6 * * *")
    scheduler.add_task(noop, name=RUNNING, cron="0 * * * *")
    scheduler.runner.ensure_schema()
    store = scheduler.store
    for name, _, outcomes in FLEET[:size]:
        write_history(store, name, past_fire_times(scheduler, name, 20, end=now), outcomes)
    failing = past_fire_times(scheduler, FAILING, 20, end=now)
    write_history(store, FAILING, failing, ["succeeded"] * 8 + ["failed"] * 12, duration=0.4)
    overdue_end = now - timedelta(minutes=25)
    write_history(
        store, OVERDUE, past_fire_times(scheduler, OVERDUE, 20, end=overdue_end), ["succeeded"]
    )
    write_history(store, PAUSED, past_fire_times(scheduler, PAUSED, 6, end=now), ["succeeded"])
    scheduler.pause(PAUSED)
    hourly = past_fire_times(scheduler, RUNNING, 6, end=now)
    write_history(store, RUNNING, hourly[:-1], ["succeeded"], duration=600)
    running = AcquireRequest(name=RUNNING, slot=slot_of(hourly[-1]), ttl=300, holder="worker-2")
    assert won(store.acquire(running)) is not None
    # this replica's own tally, as its timer would have kept it: the export outlasts its tick
    skips = scheduler.runner.skips
    export = scheduler.get_task("reports-export") if size > 16 else scheduler.get_task(FAILING)
    for slot in range(3):
        skips.skipped(export, slot, "overlap")
    skips.skipped(scheduler.get_task(OVERDUE), 0, "capacity")
    return scheduler
