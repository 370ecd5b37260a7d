"""The page's schedules section over HTTP: added, changed, disabled and removed through
``cronlease.Schedules``, behind the gates of the task actions (same-origin, CSRF token,
the ``authorize`` hook, whose answer is the audit's ``changed_by``); the model's
refusals shown in the form (400, 409 naming the newer version, 422), never a 500.

SQLite and PostgreSQL: the writes are the model's, whose statements
tests/contract/test_schedules.py proves on every backend.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cronlease import Scheduler
from cronlease.errors import UnknownScheduleError
from cronlease.web import ActionRequest, wsgi_app

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgresql"])


def export(customer: str, fmt: str = "csv") -> None:
    """The job the schedules run."""


@pytest.fixture
def scheduler(db_url: str, task_name: str) -> Iterator[Scheduler]:
    # a namespace of its own: jobs other tests' replicas offer are not this page's
    scheduler = Scheduler(db_url, namespace=f"ns-{uuid.uuid4().hex[:8]}")
    scheduler.add_task(lambda: None, every="1h", name=task_name)
    scheduler.register(export)
    scheduler.runner.ensure_schema()
    yield scheduler
    scheduler.runner.close()


def error_of(page: httpx.Response) -> str:
    match = re.search(r'id="form-error"[^>]*>(.*?)</div>', page.text)
    assert match is not None, page.text
    return match.group(1)


class Page:
    """A browser's session on the page: the cookie, the token, the origin."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        listing = client.get("/schedules")
        assert listing.status_code == 200, listing.text
        match = re.search(r'name="csrf" value="([^"]+)"', listing.text)
        assert match is not None
        self.token = match.group(1)

    def post(self, do: str, **fields: Any) -> httpx.Response:
        data = {"do": f"schedule-{do}", "csrf": self.token, **fields}
        return self.client.post("/schedules", data=data, headers={"origin": "http://page"})


def test_a_schedule_added_edited_refused_disabled_and_removed(
    scheduler: Scheduler, task_name: str
) -> None:
    name = f"{task_name}-export"
    app = wsgi_app(scheduler, actions=True, authorize=lambda request: "alice@example.com")
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://page") as client:
        assert 'id="schedules-link"' in client.get("/").text  # the overview links it
        page = Page(client)
        added = page.post(
            "add", name=name, job="export", every="1h", kwargs='{"customer": "acme"}', enabled="y"
        )
        assert added.status_code == 303, added.text
        assert added.headers["location"] == f"/schedule?name={name}"
        shown = client.get(added.headers["location"])
        assert f"<b>{name}</b>: schedule added" in shown.text
        stored = scheduler.schedules.get(name)
        assert (stored.version, stored.every, stored.changed_by) == (1, "1h", "alice@example.com")
        assert dict(stored.kwargs) == {"customer": "acme"} and stored.enabled
        # no replica runs here: the model says none offers its job, and the list says so
        listed = client.get("/schedules").text
        assert f'id="schedule-{name}"' in listed and "not offered" in listed

        edit = {"name": name, "job": "export", "every": "2h", "enabled": "y"}
        changed = page.post("set", version="1", kwargs='{"customer": "acme", "fmt": "xml"}', **edit)
        assert changed.status_code == 303, changed.text
        assert scheduler.schedules.get(name).version == 2
        # the form read at version 1, posted again: refused, naming the newer version and who
        stale = page.post("set", version="1", **{**edit, "every": "5m"})
        assert stale.status_code == 409
        assert "at version 2 (changed by alice@example.com" in error_of(stale)
        assert scheduler.schedules.get(name).every == "2h"

        # refusals shown in the form, the input kept, nothing written
        for fields, code, words in [
            ({"kwargs": "{not json"}, 400, "kwargs: not JSON"),
            ({"args": '{"a": 1}'}, 400, "args: must be a JSON array"),
            ({"job": "nosuch"}, 422, "unknown job &#x27;nosuch&#x27;; known: export"),
            ({"every": "", "cron": "61 * * * *"}, 422, "cron"),
            ({"kwargs": '{"colour": "red"}'}, 422, "colour"),
        ]:
            refused = page.post("set", version="2", **{**edit, **fields})
            assert refused.status_code == code, (fields, refused.text)
            assert words in error_of(refused), (fields, error_of(refused))
        taken = page.post("add", name=task_name, job="export", every="1h", kwargs='{"customer": 1}')
        assert taken.status_code == 422 and "declared in code" in error_of(taken)
        assert f'name="name" value="{task_name}"' in taken.text  # the input shown back
        assert scheduler.schedules.get(name).version == 2

        assert page.post("disable", name=name, version="2").status_code == 303
        assert not scheduler.schedules.get(name).enabled
        removed = page.post("remove", name=name, version="3")
        assert removed.status_code == 303 and removed.headers["location"] == "/schedules"
        with pytest.raises(UnknownScheduleError):
            scheduler.schedules.get(name)
        # its history stays, each change with who made it and what changed
        history = client.get(f"/schedule?name={name}")
        assert history.status_code == 200
        rows = re.findall(r"<tr><td>(\d)</td><td>(\w+)</td>", history.text)
        assert rows == [("4", "remove"), ("3", "set"), ("2", "set"), ("1", "add")]
        assert "every: &quot;1h&quot; → &quot;2h&quot;" in history.text
        assert history.text.count("alice@example.com") == 4
        assert client.get("/schedule?name=nosuch").status_code == 404


def test_a_write_without_the_hooks_permission_or_from_elsewhere_is_refused(
    scheduler: Scheduler, task_name: str
) -> None:
    asked: list[ActionRequest] = []
    verdict: dict[str, Any] = {"allow": False}

    def authorize(request: ActionRequest) -> Any:
        asked.append(request)
        return verdict["allow"]

    name = f"{task_name}-export"
    app = wsgi_app(scheduler, actions=True, authorize=authorize)
    fields = {"name": name, "job": "export", "every": "1h", "kwargs": '{"customer": "a"}'}
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://page") as client:
        page = Page(client)
        refused = page.post("add", **fields)
        assert refused.status_code == 403 and "not authorized" in error_of(refused)
        full = f"{scheduler.namespace}:{name}"
        assert [(r.action, r.task) for r in asked] == [("schedule-add", full)]
        cross = client.post(
            "/schedules",
            data={"do": "schedule-add", "csrf": page.token, **fields},
            headers={"origin": "https://evil.example"},
        )
        assert cross.status_code == 403
        assert page.post("add", **{**fields, "csrf": ""}).status_code == 403
        assert page.post("drop", **fields).status_code == 400
        assert len(asked) == 1  # none of these reached the hook
        for answer in (1, " ", None):  # True or a name allows; nothing else does
            verdict["allow"] = answer
            assert page.post("add", **fields).status_code == 403, answer
        assert scheduler.schedules.list() == []
        verdict["allow"] = True  # True allows: the page and the client are recorded
        assert page.post("add", **fields).status_code == 303
        assert scheduler.schedules.get(name).changed_by.startswith("status page")
    read_only = wsgi_app(scheduler)
    with httpx.Client(transport=httpx.WSGITransport(app=read_only), base_url="http://p") as client:
        assert client.get("/schedules").status_code == 404
        assert client.post("/schedules", data=fields).status_code == 404
