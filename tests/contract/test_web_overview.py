"""The overview reads at a glance (issue 15): one row per task, failing and overdue first
and counted in a banner, the last outcomes as a strip, times relative with the ISO time
on hover, skipped ticks by reason; each task has a page of its own, its name escaped
in the URL. SQLite: what is tested is the page, the model's reads are covered elsewhere."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import httpx
import pytest

from cronlease import Scheduler
from cronlease.web import wsgi_app
from tests.support.page_fleet import FAILING, OVERDUE, PAUSED, RUNNING, populate, write_history

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])

ODD = "odd/name?x=1&y=<b>#frag"  # every character a URL or HTML gives a meaning to


@pytest.fixture
def fleet(db_url: str) -> Iterator[Scheduler]:
    scheduler = populate(db_url, size=3)
    yield scheduler
    scheduler.runner.close()


def rows_of(page: str) -> list[str]:
    return re.findall(r'<tr id="task-([^"]+)"', page)


def test_failing_and_overdue_first_flagged_and_counted(fleet: Scheduler) -> None:
    transport = httpx.WSGITransport(app=wsgi_app(fleet))
    with httpx.Client(transport=transport, base_url="http://page") as client:
        page = client.get("/").text
        data = client.get("/status.json").json()
    order = rows_of(page)
    assert order[:2] == [FAILING, OVERDUE], order
    assert sorted(order[2:]) == order[2:] and len(order) == 7  # the rest by name
    banner = page.split('id="banner"')[1].split("</div>")[0]
    assert "<b>1 failing</b>" in banner and "<b>1 overdue</b>" in banner
    assert f'href="/task?name={FAILING}"' in banner
    row = {name: page.split(f'<tr id="task-{name}"')[1].split("</tr>")[0] for name in order}
    assert 'class="flag-failing"' in row[FAILING] and 'class="flag-overdue"' in row[OVERDUE]
    assert '<span class="s-failing" title="12 failed runs in a row (failing from 2)">' in page
    assert 'class="s-paused">paused' in row[PAUSED] and 'class="s-running">running' in row[RUNNING]
    # the last 20 outcomes, oldest on the left: 8 successes then 12 failures
    strip = re.findall(r'<i class="(o-[a-z_]+)"', row[FAILING])
    assert strip == ["o-succeeded"] * 8 + ["o-bad"] * 12
    # times relative, the ISO time on hover
    success = data["tasks"][[t["name"] for t in data["tasks"]].index(FAILING)]["last_success_at"]
    hover = f'<time datetime="{success}" title="{success}">'
    assert re.search(rf"{re.escape(hover)}(59 min|1 h) ago</time>", row[FAILING])
    assert re.search(r'title="[^"]+">in \d+ (s|min)</time>', row[FAILING])  # next fire
    assert "every 5 minutes" in row[FAILING] and "every 5m" in row[FAILING]
    assert "1 capacity" in row[OVERDUE] and "3 overlap" in row[FAILING]  # this replica's skips
    assert "worker-2" in row[RUNNING]  # the holder


def test_each_task_has_a_page_with_its_history(fleet: Scheduler, task_name: str) -> None:
    odd = f"{task_name}-{ODD}"
    fleet.add_task(lambda: None, every="1h", name=odd)
    now = datetime.now(timezone.utc)
    times = fleet.get_task(odd).schedule.missed(now - timedelta(hours=4), now, 3)
    write_history(fleet.store, odd, times, ["failed", "succeeded", "failed"])
    transport = httpx.WSGITransport(app=wsgi_app(fleet))
    with httpx.Client(transport=transport, base_url="http://page") as client:
        overview = client.get("/").text
        link = f"/task?name={quote(odd, safe='')}"
        assert f'href="{link}"' in overview.replace("&amp;", "&")
        page = client.get(link)
        assert client.get("/task?name=nosuch").status_code == 404
        assert client.post(link).status_code == 405
    assert page.status_code == 200
    assert "<b>" not in page.text and "&lt;b&gt;" in page.text  # the name is text
    runs = page.text.split('id="runs"')[1].split("</table>")[0].split("<tr>")[2:]
    assert len(runs) == 3
    assert 'class="o-bad">failed' in runs[0] and "<details open>" in runs[0]  # latest unfolded
    assert "<details><summary>" in runs[2]  # older ones folded
    assert "exited with status 3" in runs[0] and "requests.exceptions.ConnectionError" in runs[0]
    assert 'class="o-succeeded">succeeded' in runs[1]
