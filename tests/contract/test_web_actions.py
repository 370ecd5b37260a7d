"""The page's actions over HTTP: refused unless enabled, same-origin, with the CSRF token
and authorized; done through the scheduler when they are (the lease row says so).

SQLite only: the actions call ``Scheduler.pause``/``resume``/``run_now``, whose
backends the contract tests already cover; what is tested here is the page's gate.
The browser's side is tests/contract/test_web_browser.py.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from cronlease import LeaseStore, Scheduler
from cronlease.web import ActionRequest, StatusPage, asgi_app, wsgi_app
from tests.support.leases import paused
from tests.support.procs import wait_for

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])

FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture
def scheduler(db_url: str, task_name: str) -> Iterator[Scheduler]:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1h", name=task_name)
    scheduler.runner.ensure_schema()
    yield scheduler
    scheduler.runner.close()


def token_of(client: httpx.Client, path: str = "/") -> str:
    """Load the overview as a browser does: the cookie is set, the form carries its value."""
    page = client.get(path)
    assert page.status_code == 200
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match is not None and client.cookies["cronlease_csrf"] == match.group(1)
    return match.group(1)


def test_read_only_by_default(scheduler: Scheduler) -> None:
    transport = httpx.WSGITransport(app=wsgi_app(scheduler))
    with httpx.Client(transport=transport, base_url="http://page") as client:
        page = client.get("/")
        assert "form-action 'none'" in page.headers["content-security-policy"]
        assert "<form" not in page.text and "set-cookie" not in page.headers
        # no such route: the page never tells an action apart from any other path
        assert client.post("/action", data={"task": "x", "do": "pause"}).status_code == 404
        assert client.get("/action").status_code == 404


def test_enabling_actions_needs_a_hook_and_a_scheduler(scheduler: Scheduler, db_url: str) -> None:
    with pytest.raises(ValueError, match="authorize="):
        StatusPage(scheduler, actions=True)
    with pytest.raises(ValueError, match="actions=True"):
        StatusPage(scheduler, authorize=lambda request: True)
    store = LeaseStore.from_url(db_url)
    with pytest.raises(ValueError, match="Scheduler source"):
        StatusPage(store, actions=True, authorize=lambda request: True)
    store.dispose()


def test_each_refusal_and_a_pause_done(scheduler: Scheduler, task_name: str) -> None:
    asked: list[ActionRequest] = []
    verdict: dict[str, Any] = {"allow": True}

    def authorize(request: ActionRequest) -> bool:
        asked.append(request)
        if verdict["allow"] == "raise":
            raise RuntimeError("the application's hook broke")
        return bool(verdict["allow"])

    app = wsgi_app(scheduler, actions=True, authorize=authorize, cache=60)
    mounted = DispatcherMiddleware(lambda environ, start: [], {"/ops": app})
    transport = httpx.WSGITransport(app=mounted)
    with httpx.Client(transport=transport, base_url="http://page") as client:
        page = client.get("/ops/")
        assert "form-action 'self'" in page.headers["content-security-policy"]
        cookie = page.headers["set-cookie"]
        assert "Path=/ops/" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        token = token_of(client, "/ops/")
        form = {"task": task_name, "do": "pause", "csrf": token}

        def post(data: dict[str, str], **headers: str) -> httpx.Response:
            headers.setdefault("origin", "http://page")  # as a browser sends on a form's POST
            return client.post("/ops/action", data=data, headers=headers)

        assert client.get("/ops/action").status_code == 405  # an action is never a GET
        assert client.get("/ops/action").headers["allow"] == "POST"
        assert post({**form, "csrf": ""}).status_code == 403  # no token
        assert post({**form, "csrf": token[::-1]}).status_code == 403  # a wrong one
        assert post(form, origin="https://evil.example").status_code == 403
        assert post(form, **{"sec-fetch-site": "cross-site"}).status_code == 403
        assert post({**form, "do": "drop"}).status_code == 400
        wrong_type = client.post(
            "/ops/action",
            content=b"task=x",
            headers={"content-type": "x/y", "origin": "http://page"},
        )
        assert wrong_type.status_code == 415
        assert asked == []  # none of these reached the application's hook
        verdict["allow"] = False
        # refused, past the page's own checks: back to the task's page, which says so
        refused = post(form)
        assert refused.status_code == 303 and "not authorized" in refused.text
        assert refused.headers["location"] == f"/ops/task?name={task_name}"
        verdict["allow"] = "raise"
        assert "not authorized" in post(form).text  # an error in the hook refuses
        assert not paused(scheduler.store, task_name)
        verdict["allow"] = True
        assert post({**form, "task": "nosuch"}).status_code == 404
        cookie_jar = client.cookies
        client.cookies = httpx.Cookies()
        assert post(form).status_code == 403  # the form's token without the cookie
        client.cookies = cookie_jar
        done = post(form)
        assert done.status_code == 303, done.text
        assert done.headers["location"] == f"/ops/task?name={task_name}"
        assert paused(scheduler.store, task_name)
        # the redirect's page shows the effect at once (the 60 s snapshot was dropped)
        after = client.get(done.headers["location"])
        assert 'class="s-paused">paused' in after.text and 'value="resume"' in after.text
        assert post({**form, "do": "resume"}).status_code == 303
        assert not paused(scheduler.store, task_name)
    request = asked[-1]
    assert (request.action, request.task, request.method) == ("resume", task_name, "POST")
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert request.raw["SCRIPT_NAME"] == "/ops"  # the application's own request


def test_run_now_through_the_asgi_app(scheduler: Scheduler, task_name: str) -> None:
    app = asgi_app(scheduler, actions=True, authorize=lambda request: True)

    async def go() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        options: dict[str, Any] = {"base_url": "http://page", "headers": {"origin": "http://page"}}
        async with (
            httpx.AsyncClient(transport=transport, **options) as client,
            httpx.AsyncClient(transport=transport, **options) as other,
        ):
            page = await client.get("/")
            token = re.findall(r'name="csrf" value="([^"]+)"', page.text)[0]
            form = {"task": task_name, "do": "run", "csrf": token}
            no_cookie = await other.post("/action", data=form)
            done = await client.post("/action", data=form)
            return page, no_cookie, done

    page, no_cookie, done = asyncio.run(go())
    assert f'id="run-{task_name}"' in page.text
    assert no_cookie.status_code == 403
    assert done.status_code == 303
    runs = wait_for(
        lambda: scheduler.store.recent_runs([task_name], 5).get(task_name), 10, "the manual run"
    )
    assert runs[0].manual


def notice(page: httpx.Response) -> str | None:
    """The notice's text (tags dropped), None when the page has none."""
    match = re.search(r'<div class="notice (ok|bad)" id="notice"[^>]*>(.*?)</div>', page.text)
    return None if match is None else f"{match[1]}: {re.sub(r'<[^>]+>', '', match[2])}"


def test_a_notice_says_what_each_action_did_once(scheduler: Scheduler, task_name: str) -> None:
    slow, release = f"{task_name}-slow", threading.Event()
    scheduler.add_task(lambda: release.wait(30), every="1h", name=slow)
    verdict = {"allow": True}
    app = wsgi_app(scheduler, actions=True, authorize=lambda request: verdict["allow"], cache=60)
    transport = httpx.WSGITransport(app=app)
    headers = {"origin": "http://page"}
    try:
        with httpx.Client(transport=transport, base_url="http://page", headers=headers) as client:
            token = token_of(client)

            def act(do: str, task: str = task_name) -> httpx.Response:
                done = client.post("/action", data={"task": task, "do": do, "csrf": token})
                assert done.status_code == 303, done.text
                assert "cronlease_notice=" in done.headers["set-cookie"]
                assert "HttpOnly" in done.headers["set-cookie"]
                return client.get(done.headers["location"])

            assert notice(act("pause")) == f"ok: {task_name}: paused"
            # shown once: a reload (or the page's own refresh) does not say it again
            assert client.head(f"/task?name={task_name}").status_code == 200
            again = client.get(f"/task?name={task_name}")
            assert notice(again) is None and "cronlease_notice" not in client.cookies
            no_run = act("run")
            assert notice(no_run) == (
                f"bad: {task_name}: not run: it is paused, or a run of it is already in progress"
            )
            assert notice(act("resume")) == f"ok: {task_name}: resumed"
            # (said finished when the run ended before the answer was made, else started)
            ran = notice(act("run"))
            assert ran in (
                f"ok: {task_name}: run {said}" for said in ("started", "finished: succeeded")
            )
            verdict["allow"] = False
            refused = act("pause")
            assert notice(refused) == f"bad: {task_name}: pause refused: not authorized"
            assert not paused(scheduler.store, task_name)
            verdict["allow"] = True
            # a run still going when the page answers: shown running on the page it lands on
            started = act("run", slow)
            assert notice(started) == f"ok: {slow}: run started"
            assert 'class="s-running">running' in started.text
            assert 'class="o-running">running (manual)' in started.text
            busy = act("run", slow)  # the lease is held: not run twice
            assert notice(busy) is not None and "not run" in notice(busy)  # type: ignore[operator]
            # on the overview too, whichever page is read next; a forged notice says nothing
            client.post("/action", data={"task": task_name, "do": "pause", "csrf": token})
            assert notice(client.get("/")) == f"ok: {task_name}: paused"
            client.cookies.set("cronlease_notice", "pause.drop.x")
            forged = client.get("/")
            assert notice(forged) is None and "cronlease_notice=;" in forged.headers["set-cookie"]
            # an ended run names an outcome a run can have, and only for run now
            for planted in ("run.ended-hacked.x", "pause.ended-failed.x", "run.ended-.x"):
                client.cookies.set("cronlease_notice", planted)
                assert notice(client.get("/")) is None, planted
            client.cookies.set("cronlease_notice", "run.ended-timed_out.x")
            assert notice(client.get("/")) == "bad: x: run finished: timed out"
            # a task page that is not there ends the notice too: no later page shows it
            client.cookies.set("cronlease_notice", f"pause.paused.{task_name}")
            gone = client.get("/task", params={"name": "no-such-task"})
            assert gone.status_code == 404 and "cronlease_notice=;" in gone.headers["set-cookie"]
    finally:
        release.set()
    wait_for(lambda: not scheduler.running_tasks, 10, "the slow run's end")
