"""FastAPI: the scheduler starts and stops with the application (its lifespan).

    pip install 'cronlease[prometheus]' fastapi uvicorn
    cd examples && uvicorn fastapi_app:app --workers 2

Every worker process runs its own scheduler, as every replica of your
deployment does: each tick still runs once, in one worker of one replica.
``CRONLEASE_DATABASE_URL`` points all of them at one database (default: the
SQLite file ./cronlease.db, fine for several workers on one host; use
PostgreSQL or MySQL when replicas run on several hosts).

- ``/cronlease/`` is the read-only status page (put it behind your auth),
  ``/cronlease/status.json`` the same as JSON;
- ``/healthz`` answers 503 when a task is overdue or the database has been
  unreachable for a minute (a Kubernetes liveness/readiness probe);
- ``/metrics`` serves this worker's Prometheus metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from cronlease import RunContext, Scheduler
from cronlease.prometheus import instrument
from cronlease.web import asgi_app

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s: %(message)s")
logging.getLogger("apscheduler").setLevel(logging.WARNING)
log = logging.getLogger("fastapi_app")

scheduler = Scheduler(os.environ.get("CRONLEASE_DATABASE_URL"))
instrument(scheduler)


@scheduler.task(every="30s")
async def refresh_cache(ctx: RunContext) -> None:
    """An async task runs on the application's event loop: await freely, never block it."""
    await asyncio.sleep(0)
    log.info("refresh_cache for %s on pid %s", ctx.scheduled_for.isoformat(), os.getpid())


@scheduler.task(cron="0 3 * * *", timezone="Europe/Istanbul", name="nightly-report")
def nightly_report() -> None:
    """A plain function runs in a worker thread of the scheduler."""
    log.info("nightly report")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    scheduler.start()  # started inside the running loop: async tasks run on it
    try:
        yield
    finally:
        # shutdown() waits for running tasks, which may need this loop: wait in a thread.
        await asyncio.to_thread(scheduler.shutdown)


app = FastAPI(lifespan=lifespan)
app.mount("/cronlease", asgi_app(scheduler))


@app.get("/")
async def index() -> dict[str, str]:
    return {"hello": "world", "status page": "/cronlease/"}


@app.get("/metrics")
def metrics() -> Response:
    # a route, not a mount: a mounted app answers /metrics with a redirect to /metrics/
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@app.get("/healthz")
def healthz() -> JSONResponse:  # a plain def: FastAPI runs it in a thread (health() reads the DB)
    health = scheduler.health()
    return JSONResponse(
        {"ok": health.ok, "problems": list(health.problems), "pid": os.getpid()},
        status_code=200 if health.ok else 503,
    )
