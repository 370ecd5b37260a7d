"""Run inside the throwaway Django project (tests/processes/test_django_app.py):
migrate Django's own tables, make a superuser and two staff users, and fetch the
cronlease admin pages with Django's test client. Prints one ``name status`` line per
page, then whether the scheduler was started (the test client is not a serving
process).

The project's URLconf includes ``cronlease.contrib.django.urls`` at
``admin/cronlease/``; ``project_admin_urls`` (the second argument's module) has
the admin alone, whose index links the same pages through admin.py."""

from __future__ import annotations

import os
import sys

import django

os.environ["DJANGO_SETTINGS_MODULE"] = "project_settings"
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402  (after setup)
from django.contrib.auth.models import Permission  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from cronlease.contrib.django import scheduler  # noqa: E402

task, admin_only = sys.argv[1], sys.argv[2]
LINK = 'href="/admin/cronlease/taskstatus/"'  # the admin index's entry
call_command("migrate", verbosity=0, interactive=False)
users = get_user_model().objects
users.create_superuser("admin", "admin@example.com", "pw")
anonymous = Client()
print("anonymous", anonymous.get("/admin/cronlease/").status_code, flush=True)
client = Client()
client.force_login(users.get(username="admin"))


def fetch(name: str, client: Client, path: str) -> None:
    response = client.get(path)
    body = response.content.decode()
    shown = task in body and "succeeded" in body
    print(name, response.status_code, "shown" if shown else f"missing:\n{body}", flush=True)


def index(name: str, client: Client) -> None:
    linked = LINK in client.get("/admin/").content.decode()
    print(name, "linked" if linked else "unlinked", flush=True)


fetch("tasks", client, "/admin/cronlease/")
fetch("history", client, f"/admin/cronlease/{task}/")
print("unknown", client.get("/admin/cronlease/no-such-task/").status_code, flush=True)
print("post", client.post("/admin/cronlease/").status_code, flush=True)
index("index", client)
fetch("linked", client, "/admin/cronlease/taskstatus/")  # the include serves the link too

staff = users.create_user("staff", "staff@example.com", "pw", is_staff=True)
plain = Client()
plain.force_login(staff)
index("staff index", plain)
print("staff tasks", plain.get("/admin/cronlease/").status_code, flush=True)
print("staff linked", plain.get("/admin/cronlease/taskstatus/").status_code, flush=True)
viewer = users.create_user("viewer", "viewer@example.com", "pw", is_staff=True)
viewer.user_permissions.add(
    Permission.objects.get(content_type__app_label="cronlease", codename="view_taskstatus")
)
granted = Client()
granted.force_login(viewer)
index("granted index", granted)
fetch("granted tasks", granted, "/admin/cronlease/")

with override_settings(ROOT_URLCONF=admin_only):  # no include: the admin's own pages
    index("admin index", client)
    fetch("admin tasks", client, "/admin/cronlease/taskstatus/")
    fetch("admin history", client, f"/admin/cronlease/taskstatus/{task}/")
    print("admin post", client.post("/admin/cronlease/taskstatus/").status_code, flush=True)
    print("admin staff", plain.get("/admin/cronlease/taskstatus/").status_code, flush=True)
    index("admin granted index", granted)
print("started", scheduler.running, flush=True)
