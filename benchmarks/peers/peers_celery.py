"""The Celery app of peers.py's Celery systems: a task every second, sent by beat
(``PEERS_SYSTEM`` picks RedBeat's settings), run by a worker; both brokered by the
``redis-server`` peers.py starts."""

from __future__ import annotations

import os

import peers
from celery import Celery

SYSTEM = os.environ.get("PEERS_SYSTEM", "celerybeat")

app = Celery("peers", broker=f"redis://127.0.0.1:{peers.REDIS_PORT}/0")
app.conf.beat_schedule = {"tick": {"task": "peers_celery.tick", "schedule": 1.0}}
app.conf.redbeat_redis_url = f"redis://127.0.0.1:{peers.REDIS_PORT}/1"
app.conf.worker_hijack_root_logger = False
if SYSTEM in ("redbeat10", "redbeatfast"):
    # RedBeat's default lock timeout, 5 x beat_max_loop_interval, is 25 minutes
    app.conf.redbeat_lock_timeout = 10
if SYSTEM == "redbeatfast":
    # the standby retries the lock once per loop interval
    app.conf.beat_max_loop_interval = 2


@app.task(name="peers_celery.tick")
def tick() -> None:
    peers.record(SYSTEM, None)
