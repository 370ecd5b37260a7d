"""Run inside the throwaway Django project (tests/processes/test_django_schedules.py):
add, change, refuse and delete a schedule through the admin's forms with Django's
test client, as a superuser and as staff granted each permission. Prints one line
per step (``label`` and what it showed), for the test to compare."""

from __future__ import annotations

import os
import sys

import django
import sqlalchemy as sa

os.environ["DJANGO_SETTINGS_MODULE"] = "project_settings"
django.setup()

from django.contrib.admin.models import LogEntry  # noqa: E402  (after setup)
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Permission  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from cronlease._lease.schema import schedules  # noqa: E402
from cronlease.contrib.django import scheduler  # noqa: E402
from cronlease.errors import UnknownScheduleError  # noqa: E402


def export(customer: str, fmt: str = "csv") -> None:
    """The job the schedules run."""


scheduler.register(export)
task, name, admin_only = sys.argv[1], sys.argv[2], sys.argv[3]
BASE = "/admin/cronlease/schedule/"
call_command("migrate", verbosity=0, interactive=False)
users = get_user_model().objects
users.create_superuser("admin", "admin@example.com", "pw")
client = Client()
client.force_login(users.get(username="admin"))


def say(*words: object) -> None:
    print(*words, flush=True)


def shows(response: object, *texts: str) -> bool:
    body = response.content.decode()  # type: ignore[attr-defined]
    return all(text in body for text in texts)


index = client.get("/admin/")
say("index", shows(index, f'href="{BASE}"', f'href="{BASE}add/"', ">Schedules<"))
form = {"name": name, "job": "export", "every": "1h", "kwargs": '{"customer": "acme"}'}
form["enabled"] = "on"
added = client.post(f"{BASE}add/", form)
say("add", added.status_code, added.get("Location"))
stored = scheduler.schedules.get(name)
say("stored", stored.version, stored.every, stored.changed_by)
other = {**form, "name": f"{name}-2"}
for label, fields, text in [
    ("code task", {"name": task}, "a task declared in code here has that name"),
    ("kwargs", {"kwargs": '{"colour": 1}'}, "colour"),
    ("cron", {"every": "", "cron": "61 * * * *"}, "cron"),
    ("json", {"args": "{x"}, "not JSON"),
    ("job", {"job": "nosuch"}, "Select a valid choice"),
]:
    refused = client.post(f"{BASE}add/", {**other, **fields})
    say(label, refused.status_code, shows(refused, "errornote", text))
say("listed", [s.name for s in scheduler.schedules.list()] == [name])
change = f"{BASE}{name}/change/"
say("form", shows(client.get(change), 'value="1h"', 'name="version" value="1"', "<h2>History"))
changed = client.post(change, {**form, "every": "2h", "version": "1"})
say("change", changed.status_code, scheduler.schedules.get(name).version)
stale = client.post(change, {**form, "every": "5m", "version": "1"})
say("stale", stale.status_code, shows(stale, "is at version 2 (changed by admin"))
say("kept", scheduler.schedules.get(name).every)
say("history", shows(client.get(change), "every: &quot;1h&quot; → &quot;2h&quot;"))
say("list", shows(client.get(BASE), f'href="{change}"', "export", "not offered"))


def staff(username: str, *codenames: str) -> Client:
    user = users.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="cronlease", codename=codename)
        )
    session = Client()
    session.force_login(user)
    return session


plain = staff("plain")
say("plain", plain.get(BASE).status_code, plain.get(f"{BASE}add/").status_code)
viewer = staff("viewer", "view_schedule")
say("viewer", viewer.get(BASE).status_code, viewer.get(f"{BASE}add/").status_code)
seen = viewer.get(change)
say("viewer form", seen.status_code, shows(seen, 'name="_save"'))
say("viewer post", viewer.post(change, {**form, "version": "2"}).status_code)
editor = staff("editor", "view_schedule", "change_schedule")
edited = editor.post(change, {**form, "every": "3h", "version": "2"})
say("editor", edited.status_code, scheduler.schedules.get(name).changed_by)
say("editor delete", editor.post(f"{BASE}{name}/delete/", {"version": "3"}).status_code)

delete = f"{BASE}{name}/delete/"
stale_delete = client.post(delete, {"version": "2"})
say("stale delete", stale_delete.status_code, shows(stale_delete, "is at version 3"))
deleted = client.post(delete, {"version": "3"})
say("delete", deleted.status_code, deleted.get("Location"))
try:
    scheduler.schedules.get(name)
    say("gone", False)
except UnknownScheduleError:
    say("gone", True)
history = client.get(f"{BASE}{name}/history/")
say("kept history", history.status_code, shows(history, ">remove<", ">editor<"))
with override_settings(ROOT_URLCONF=admin_only):  # no include: the admin's own pages
    say("admin only", client.get(BASE).status_code, client.get(f"{BASE}add/").status_code)

# a row broken in the database: the status view says why no replica runs it
broken = f"{name}-broken"
scheduler.schedules.add(broken, job="export", every="1h", kwargs={"customer": "acme"})
with scheduler.store.engine.begin() as conn:
    conn.execute(
        sa.update(schedules).where(schedules.c.name.endswith(broken)).values(kwargs="{garbage")
    )
status = client.get("/admin/cronlease/")
say(
    "status invalid",
    status.status_code,
    shows(status, broken, "invalid schedule, not run:", "JSON"),
)

# each write through the pages is in Django's admin log, by whom, with the change's words
logged = LogEntry.objects.filter(object_id=name).order_by("action_time", "pk")
say("admin log", *[f"{entry.action_flag}:{entry.user.get_username()}" for entry in logged])
say("logged change", any("every" in entry.get_change_message() for entry in logged))
