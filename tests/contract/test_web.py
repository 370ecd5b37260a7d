"""The status page: what it shows, what it never shows or does, served for real."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import inspect as sa_inspect
from starlette.applications import Starlette
from starlette.routing import Mount
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from cronlease import LeaseStore, Scheduler
from cronlease._timing.schedule import Schedule
from cronlease.web import asgi_app, make_server, wsgi_app
from tests.conftest import url_for
from tests.support.attempts import abandon_runs, past_slot, record_attempts
from tests.support.procs import Proc

XSS = "<script>document.title='pwned'</script>"


def failing_task() -> None:
    raise ValueError(f"bad input {XSS}")


def make_scheduler(url: str, name: str) -> Scheduler:
    """A scheduler whose tasks ran for real: one succeeded, one failed, one paused."""
    scheduler = Scheduler(url)
    scheduler.add_task(lambda: None, every="1m", name=name)
    scheduler.add_task(
        failing_task, cron="*/5 * * * *", timezone="Europe/Istanbul", name=f"{name}-bad"
    )
    scheduler.add_task(lambda: None, every="1h", name=f"{name}-paused")
    assert scheduler.run_now(name) == "succeeded"
    assert scheduler.run_now(f"{name}-bad") == "failed"
    scheduler.pause(f"{name}-paused")
    return scheduler


@contextmanager
def serving(app: Callable[..., Iterable[bytes]]) -> Iterator[str]:
    """A real HTTP server (stdlib) for a WSGI app; yields its base URL."""
    from wsgiref.simple_server import WSGIRequestHandler
    from wsgiref.simple_server import make_server as stdlib_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = stdlib_server("127.0.0.1", 0, app, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def request(url: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


@pytest.fixture
def scheduler(db_url: str, task_name: str) -> Iterator[Scheduler]:
    scheduler = make_scheduler(db_url, task_name)
    yield scheduler
    scheduler.runner.close()


def test_page_shows_tasks_runs_and_escaped_errors(scheduler: Scheduler, task_name: str) -> None:
    with serving(wsgi_app(scheduler)) as base:
        status, headers, page = request(f"{base}/")
        task_status, _, task_page = request(f"{base}/task?name={task_name}-bad")
    assert status == task_status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "script-src" not in headers["Content-Security-Policy"]  # default-src 'none' covers it
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert "form-action 'none'" in headers["Content-Security-Policy"]  # read-only by default
    assert "<form" not in page and "Set-Cookie" not in headers
    for name in (task_name, f"{task_name}-bad", f"{task_name}-paused"):
        assert f'id="task-{name}"' in page
    # the schedule in words, and as declared
    assert "every minute <span" in page and "every 1m" in page
    assert "every 5 minutes <span" in page
    assert "cron &#x27;*/5 * * * *&#x27; (Europe/Istanbul)" in page
    assert 'class="o-succeeded">succeeded (manual)' in page
    assert 'class="o-bad">failed (manual)' in page
    assert 'class="s-paused">paused' in page
    # it failed on its one run (alert_after 1): flagged, first, and counted at the top
    assert '<span class="s-failing"' in page and "<b>1 failing</b>" in page
    assert page.index(f'id="task-{task_name}-bad"') < page.index(f'id="task-{task_name}"')
    assert scheduler.holder in page
    assert "+03:00" in page  # the cron task's next fire time, in its own time zone (hover)
    # The error is shown as text on the task's page: escaped, never as markup.
    assert "bad input &lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in task_page
    assert "ValueError" in task_page
    for body in (page, task_page):
        assert "<script" not in body.lower()


def test_json_has_the_same_data(scheduler: Scheduler, task_name: str) -> None:
    with serving(wsgi_app(scheduler)) as base:
        status, headers, body = request(f"{base}/status.json")
        status2, _, body2 = request(f"{base}/?format=json")
    assert status == status2 == 200
    assert headers["Content-Type"] == "application/json"
    data, data2 = json.loads(body), json.loads(body2)
    assert [t["name"] for t in data["tasks"]] == [t["name"] for t in data2["tasks"]]
    tasks = {task["name"]: task for task in data["tasks"]}
    ok, bad, paused = tasks[task_name], tasks[f"{task_name}-bad"], tasks[f"{task_name}-paused"]
    assert ok["state"] == "idle" and ok["holder"] is None and ok["fence"] == 1
    assert ok["last_holder"] == scheduler.holder  # no run holds the lease: no holder now
    assert [run["outcome"] for run in ok["runs"]] == ["succeeded"]
    assert ok["runs"][0]["duration"] is not None and ok["last_success_at"] is not None
    assert bad["runs"][0]["outcome"] == "failed" and XSS in bad["runs"][0]["error"]
    assert bad["last_success_at"] is None
    assert paused["paused"] is True and paused["state"] == "paused" and paused["runs"] == []
    assert paused["next_fire_time"] is None  # it fires nothing until resumed
    assert ok["next_fire_time"].endswith(".000Z")  # a UTC schedule: UTC, written Z
    next_fire = datetime.fromisoformat(ok["next_fire_time"].replace("Z", "+00:00"))
    # the first fire after the moment the report was made, to the millisecond (not
    # after "now": a minute may turn between the request and this line)
    generated = datetime.fromisoformat(data["generated_at"].replace("Z", "+00:00"))
    assert generated <= next_fire <= generated + timedelta(minutes=1) and next_fire.second == 0
    assert data["database_error"] is None
    # (a shared test server holds other tests' rows: those are orphans from this page's view)
    assert not {o["name"] for o in data["orphaned"]} & set(tasks)
    assert data["replica"]["holder"] == scheduler.holder
    assert data["replica"]["running"] is False
    assert data["replica"]["counters"]["runs_failed"] == 1


@pytest.mark.parametrize("backend", ["sqlite"])
def test_read_only_methods_and_unknown_paths(scheduler: Scheduler) -> None:
    with serving(wsgi_app(scheduler)) as base:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            status, headers, _ = request(f"{base}/", method)
            assert status == 405, method
            assert headers["Allow"] == "GET, HEAD"
        status, headers, body = request(f"{base}/", "HEAD")
        assert status == 200 and body == "" and int(headers["Content-Length"]) > 1000
        assert request(f"{base}/pause")[0] == 404
        assert request(f"{base}/status.json", "POST")[0] == 405


@pytest.mark.parametrize("backend", ["sqlite"])
def test_mounted_under_a_prefix_wsgi_and_asgi(scheduler: Scheduler, task_name: str) -> None:
    def other_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"the app"]

    app = DispatcherMiddleware(other_app, {"/ops/cron": wsgi_app(scheduler)})
    with serving(app) as base:
        status, _, page = request(f"{base}/ops/cron/")
        assert status == 200 and 'href="/ops/cron/status.json"' in page
        status, _, body = request(f"{base}/ops/cron/status.json")
        assert status == 200 and task_name in body
        assert request(f"{base}/elsewhere")[2] == "the app"

    starlette = Starlette(routes=[Mount("/ops/cron", app=asgi_app(scheduler))])

    async def fetch() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=starlette)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [
                await client.get("/ops/cron/"),
                await client.get("/ops/cron/status.json"),
                await client.post("/ops/cron/"),
                await client.head("/ops/cron/"),
            ]

    import asyncio

    page, data, post, head = asyncio.run(fetch())
    assert page.status_code == 200 and 'href="/ops/cron/status.json"' in page.text
    assert f'id="task-{task_name}"' in page.text
    assert data.status_code == 200 and data.json()["tasks"][0]["name"] == task_name
    assert post.status_code == 405 and head.status_code == 200 and head.content == b""


def test_never_shows_the_database_password(tmp_path: Path, task_name: str) -> None:
    url = url_for("postgresql", tmp_path)  # the test server trusts local connections
    password = "s3cret-Pa55word"
    with_password = url.replace("postgres@", f"postgres:{password}@", 1)
    assert password in with_password
    scheduler = Scheduler(with_password)
    scheduler.add_task(lambda: None, every="1m", name=task_name)
    assert scheduler.run_now(task_name) == "succeeded"
    unreachable = LeaseStore.from_url(f"postgresql://postgres:{password}@127.0.0.1:1/test")
    with serving(wsgi_app(scheduler)) as base, serving(wsgi_app(unreachable)) as down:
        pages = [request(f"{base}/"), request(f"{base}/status.json")]
        pages += [request(f"{down}/"), request(f"{down}/status.json")]
    assert [status for status, _, _ in pages] == [200, 200, 503, 503]
    for _, _, body in pages:
        assert password not in body
        assert "postgres:***@127.0.0.1" in body
    assert task_name in pages[0][2]
    assert "database unavailable" in pages[2][2]
    assert json.loads(pages[3][2])["database_error"]
    scheduler.runner.close()
    unreachable.dispose()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_controls_and_url_encoded_passwords_in_errors_are_not_shown(
    db_url: str, task_name: str
) -> None:
    """Issue 11, item 13: a bidi override would reorder the page's text; a URL-encoded
    password or a short one in a URL was shown as it was."""
    scheduler = Scheduler(db_url)

    def fails() -> None:
        raise ValueError("txt.\u202eexe \x1b[2J postgresql://app:s3cr%40t%21x@db/app u:ab@")

    scheduler.add_task(fails, every="1m", name=task_name)
    assert scheduler.run_now(task_name) == "failed"
    with serving(wsgi_app(scheduler)) as base:
        _, _, page = request(f"{base}/task?name={task_name}")
        _, _, overview = request(f"{base}/")
        _, _, data = request(f"{base}/status.json")
    scheduler.runner.close()
    assert "txt.\\u202eexe \\x1b[2J postgresql://app:***@db/app" in page
    for body in (page, overview, data):
        assert "\u202e" not in body and "\x1b" not in body and "s3cr" not in body


@pytest.mark.parametrize("backend", ["sqlite"])
def test_store_source_with_declared_tasks_lists_orphans(db_url: str, task_name: str) -> None:
    old = make_scheduler(db_url, task_name)  # its tasks ran; now only one is still declared
    old.runner.close()
    store = LeaseStore.from_url(db_url)
    store.pause("billing:other-namespace")  # a row of another application: not ours
    declared = {task_name: Schedule.every("1m")}
    with serving(wsgi_app(store, tasks=declared)) as base:
        data = json.loads(request(f"{base}/status.json")[2])
        page = request(f"{base}/")[2]
    assert [task["name"] for task in data["tasks"]] == [task_name]
    assert data["replica"] is None
    assert sorted(o["name"] for o in data["orphaned"]) == [
        f"{task_name}-bad",
        f"{task_name}-paused",
    ]
    assert 'id="orphaned"' in page and f"{task_name}-bad" in page
    assert "billing:other-namespace" not in page
    # Without declared tasks, every lease row is shown as a task.
    with serving(wsgi_app(store)) as base:
        names = [t["name"] for t in json.loads(request(f"{base}/status.json")[2])["tasks"]]
    assert f"{task_name}-bad" in names and "billing:other-namespace" in names
    store.dispose()


def test_page_shows_each_attempt_and_the_abandoned_runs_of_a_task(
    db_url: str, task_name: str
) -> None:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1h", name=task_name)
    scheduler.add_task(lambda: None, every="1h", name=f"{task_name}-calm")
    store = scheduler.store
    store.create_tables()
    abandon_runs(store, task_name, 2, first_slot=past_slot(600))
    slot = past_slot(60)
    record_attempts(store, task_name, slot, ["timed_out", "succeeded"])
    gone = f"{task_name}-gone"  # no longer declared: an orphan, its abandoned run still counted
    abandon_runs(store, gone, 1, first_slot=past_slot(600))
    with serving(wsgi_app(scheduler)) as base:
        data = json.loads(request(f"{base}/status.json")[2])
        page = request(f"{base}/")[2]
        own = request(f"{base}/task?name={task_name}")[2]
        calm = request(f"{base}/task?name={task_name}-calm")[2]
    tasks = {task["name"]: task for task in data["tasks"]}
    assert tasks[task_name]["abandoned"] == 2 and tasks[f"{task_name}-calm"]["abandoned"] == 0
    assert [(run["slot"], run["attempt"]) for run in tasks[task_name]["runs"][:2]] == [
        (slot, 2),
        (slot, 1),
    ]
    # other tests' rows share the run's schema: only this test's orphan is looked at
    assert [o["abandoned"] for o in data["orphaned"] if o["name"] == gone] == [1]
    row = page.split(f'id="task-{task_name}"')[1].split("</tr>")[0]
    assert 'class="o-succeeded">succeeded' in row  # the last attempt's outcome
    assert '<dt>abandoned runs</dt><dd><span class="abandoned">2</span></dd>' in own
    assert "<th>scheduled for</th><th>attempt</th><th>outcome</th>" in own
    rows = own.split('<table id="runs"')[1].split("<tr>")[2:]  # after the header
    assert [row.split("</td>")[1] for row in rows[:2]] == ["<td>2", "<td>1"]
    assert 'class="o-bad">timed_out' in rows[1]
    assert "<dt>abandoned runs</dt><dd>0</dd>" in calm
    scheduler.runner.close()


def test_a_database_without_tables_is_shown_empty_and_left_untouched(tmp_path: Path) -> None:
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'fresh.db'}")
    with serving(wsgi_app(store)) as base:
        status, _, page = request(f"{base}/")
    assert status == 200 and "No tasks." in page
    assert not sa_inspect(store.engine).has_table("cronlease_leases")  # read-only: not created
    store.dispose()


def test_serve_runs_until_sigterm(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cronlease.db'}"
    script = (
        "import sys\n"
        "from cronlease import LeaseStore\n"
        "from cronlease.web import serve\n"
        f"store = LeaseStore.from_url({url!r})\n"
        "serve(store, port=0, ready=lambda u: print('ready', u, flush=True))\n"
        "print('stopped', flush=True)\n"
    )
    proc = Proc("-c", script)
    try:
        base = proc.expect("ready", 30).split()[1]
        assert base.startswith("http://127.0.0.1:")
        assert request(base)[0] == 200
        assert proc.terminate() == 0, proc.stderr()
        proc.expect("stopped", 5)
    finally:
        proc.kill()


def test_make_server_binds_loopback_by_default(tmp_path: Path) -> None:
    store = LeaseStore.from_url(f"sqlite:///{tmp_path / 'cronlease.db'}")
    server = make_server(store, port=0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()
        store.dispose()
