"""The page's actions against what a security review tried: an opaque or missing origin,
a planted or unparseable cookie, a token that is not ASCII, a name in another Unicode
form, a mount point that needs encoding, a body without a length.

SQLite only, over WSGI/ASGI in process (httpx): what is tested is the page's gate,
not the backend; tests/contract/test_web_actions.py has the gate's basic refusals.
"""

from __future__ import annotations

import asyncio
import io
import re
import unicodedata
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote
from wsgiref.util import setup_testing_defaults

import httpx
import pytest

from cronlease import Scheduler
from cronlease.web import ActionRequest, StatusPage, asgi_app, wsgi_app
from tests.support.leases import paused

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])

ALLOW = {"authorize": lambda request: True, "actions": True}


@pytest.fixture
def scheduler(db_url: str, task_name: str) -> Iterator[Scheduler]:
    scheduler = Scheduler(db_url)
    scheduler.add_task(lambda: None, every="1h", name=task_name)
    scheduler.runner.ensure_schema()
    yield scheduler
    scheduler.runner.close()


def client_for(app: Any, base_url: str = "http://page") -> httpx.Client:
    return httpx.Client(transport=httpx.WSGITransport(app=app), base_url=base_url)


def token_of(client: httpx.Client) -> str:
    page = client.get("/")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert page.status_code == 200 and match is not None
    return match.group(1)


def test_only_the_pages_own_origin_is_accepted(scheduler: Scheduler, task_name: str) -> None:
    app = wsgi_app(scheduler, **ALLOW, trusted_origins=["https://ops.example.com"])
    with client_for(app) as client:
        assert client.get("/").headers["referrer-policy"] == "same-origin"
        form = {"task": task_name, "do": "pause", "csrf": token_of(client)}

        def status(**headers: str) -> int:
            return client.post("/action", data=form, headers=headers).status_code

        assert status(origin="null") == 403  # what any page with no-referrer sends
        assert status() == 403  # no Sec-Fetch-Site, Origin nor Referer: not a browser's form
        assert status(origin="https://page") == 403  # another scheme
        assert status(origin="http://page:8080") == 403  # another port
        assert status(origin="http://page.evil.example") == 403
        assert status(referer="http://evil.example/page") == 403
        assert status(**{"sec-fetch-site": "none"}) == 403
        # Sec-Fetch-Site decides when sent: a browser's word, no page can change it
        assert status(**{"sec-fetch-site": "same-site", "origin": "http://page"}) == 403
        assert not paused(scheduler.store, task_name)
        assert status(origin="http://page:80") == 303  # the default port, spelled out
        assert status(referer="http://page/task?name=x") == 303
        assert status(**{"sec-fetch-site": "same-origin"}) == 303
        assert status(origin="https://ops.example.com") == 303  # trusted (a proxy's Host)
    assert paused(scheduler.store, task_name)
    with pytest.raises(ValueError, match="not an origin"):
        StatusPage(scheduler, **ALLOW, trusted_origins=["https://ops.example.com/path"])
    with pytest.raises(ValueError, match="list of origins"):
        StatusPage(scheduler, **ALLOW, trusted_origins="https://ops.example.com")


def test_over_https_the_cookie_is_host_only_and_a_planted_one_is_ignored(
    scheduler: Scheduler, task_name: str
) -> None:
    with client_for(wsgi_app(scheduler, **ALLOW), "https://page") as client:
        cookie = client.get("/").headers["set-cookie"]
        assert cookie.startswith("__Host-cronlease_csrf=")
        assert "; Path=/;" in cookie and "Secure" in cookie and "SameSite=Strict" in cookie
        token = token_of(client)
        form = {"task": task_name, "do": "pause", "csrf": token}
        client.cookies = httpx.Cookies()
        # a sibling subdomain or plain HTTP can set this one, never the __Host- one
        planted = {"origin": "https://page", "cookie": f"cronlease_csrf={token}"}
        assert client.post("/action", data=form, headers=planted).status_code == 403
        real = {"origin": "https://page", "cookie": f"__Host-cronlease_csrf={token}"}
        assert client.post("/action", data=form, headers=real).status_code == 303


def test_cookie_header_parsed_by_hand(scheduler: Scheduler, task_name: str) -> None:
    with client_for(wsgi_app(scheduler, **ALLOW)) as client:
        other = token_of(client)  # a token of its own: as a planted cookie would be
        client.cookies = httpx.Cookies()
        token = token_of(client)
        client.cookies = httpx.Cookies()

        def status(cookie: str, csrf: str = token) -> int:
            form = {"task": task_name, "do": "pause", "csrf": csrf}
            headers = {"origin": "http://page", "cookie": cookie}
            return client.post("/action", data=form, headers=headers).status_code

        # a non-ASCII token is refused, not a 500 (compare_digest raises TypeError on it)
        assert status(f"cronlease_csrf={token}", csrf="é" * 43) == 403
        # duplicates: the first wins (the browser sends the most specific path first)
        assert status(f"cronlease_csrf={other}; cronlease_csrf={token}") == 403
        # another application's cookie that SimpleCookie cannot parse loses nothing
        assert status(f"theirs=a b; cronlease_csrf={token}; cronlease_csrf={other}") == 303


def test_the_hook_sees_the_task_resolved(db_url: str, task_name: str) -> None:
    scheduler = Scheduler(db_url, namespace="ns")
    name = unicodedata.normalize("NFC", f"{task_name}-café")
    scheduler.add_task(lambda: None, every="1h", name=name)
    scheduler.runner.ensure_schema()
    asked: list[ActionRequest] = []

    def authorize(request: ActionRequest) -> bool:
        asked.append(request)
        return True

    try:
        with client_for(wsgi_app(scheduler, actions=True, authorize=authorize)) as client:
            # the form's name in another Unicode form: the same task
            posted = unicodedata.normalize("NFD", name)
            form = {"task": posted, "do": "pause", "csrf": token_of(client)}
            done = client.post("/action", data=form, headers={"origin": "http://page"})
        assert done.status_code == 303
        assert [request.task for request in asked] == [f"ns:{name}"]  # not the posted text
        assert done.headers["location"] == f"/task?name={quote(f'ns:{name}', safe='')}"
        assert paused(scheduler.store, f"ns:{name}")
    finally:
        scheduler.runner.close()


def test_a_refused_post_keeps_the_snapshot(scheduler: Scheduler, task_name: str) -> None:
    with client_for(wsgi_app(scheduler, **ALLOW, cache=600)) as client:
        token = token_of(client)  # the snapshot: not paused
        scheduler.pause(task_name)  # (as another replica would)
        form = {"task": task_name, "do": "resume", "csrf": token[::-1]}
        refused = client.post("/action", data=form, headers={"origin": "http://page"})
        assert refused.status_code == 403
        # nothing was done: every browser's refresh still reads the one cached snapshot
        assert 'class="s-paused"' not in client.get("/").text
        form["do"], form["csrf"] = "pause", token
        assert client.post("/action", data=form, headers={"origin": "http://page"}).is_redirect
        assert 'class="s-paused"' in client.get("/").text


def call_wsgi(app: Any, **environ: Any) -> tuple[str, dict[str, str], bytes]:
    setup_testing_defaults(environ)
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer.update(status=status, headers=dict(headers))

    body = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], body


def test_wsgi_without_a_length_and_a_mount_that_needs_encoding(scheduler: Scheduler) -> None:
    app = wsgi_app(scheduler, **ALLOW)
    # SCRIPT_NAME as PEP 3333 hands it over: the path's bytes as latin-1 characters
    mount = "/café;x".encode().decode("latin-1")
    status, headers, page = call_wsgi(app, SCRIPT_NAME=mount, PATH_INFO="/")
    assert status.startswith("200")
    assert "Path=/caf%C3%A9%3Bx/;" in headers["Set-Cookie"]
    assert 'action="/caf%C3%A9%3Bx/action"' in page.decode()
    # a chunked body reaches a WSGI app without CONTENT_LENGTH: it cannot be read
    status, _, _ = call_wsgi(
        app,
        REQUEST_METHOD="POST",
        PATH_INFO="/action",
        CONTENT_TYPE="application/x-www-form-urlencoded",
        HTTP_ORIGIN="http://127.0.0.1",
        **{"wsgi.input": io.BytesIO(b"task=x&do=pause")},
    )
    assert status == "411 Length Required"


def test_asgi_root_path_is_stripped_by_whole_segments(scheduler: Scheduler) -> None:
    app = asgi_app(scheduler)

    async def get(root: str, path: str) -> int:
        sent: list[dict[str, Any]] = []
        scope = {"type": "http", "method": "GET", "root_path": root, "path": path, "headers": []}

        async def receive() -> dict[str, Any]:
            return {"type": "http.request"}

        async def send(message: Any) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return int(sent[0]["status"])

    # a server that leaves the mount out of path: "/status" is not "/status.json"'s prefix
    assert asyncio.run(get("/status", "/status.json")) == 200
    assert asyncio.run(get("/ops", "/ops/status.json")) == 200  # Starlette keeps it in
    assert asyncio.run(get("/ops", "/ops")) == 200
