"""Run inside the throwaway Django project (tests/processes/test_django_app.py):
migrate Django's own tables, make a superuser, and fetch the cronlease admin pages
with Django's test client. Prints one ``name status`` line per page, then whether
the scheduler was started (the test client is not a serving process)."""

from __future__ import annotations

import os
import sys

import django

os.environ["DJANGO_SETTINGS_MODULE"] = "project_settings"
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402  (after setup)
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from cronlease.contrib.django import scheduler  # noqa: E402

task = sys.argv[1]
call_command("migrate", verbosity=0, interactive=False)
get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
anonymous = Client()
print("anonymous", anonymous.get("/admin/cronlease/").status_code, flush=True)
client = Client()
client.force_login(get_user_model().objects.get(username="admin"))
for name, path in [("tasks", "/admin/cronlease/"), ("history", f"/admin/cronlease/{task}/")]:
    response = client.get(path)
    body = response.content.decode()
    shown = task in body and "succeeded" in body
    print(name, response.status_code, "shown" if shown else f"missing:\n{body}", flush=True)
print("unknown", client.get("/admin/cronlease/no-such-task/").status_code, flush=True)
print("post", client.post("/admin/cronlease/").status_code, flush=True)
print("started", scheduler.running, flush=True)
