"""The admin pages' URLs (views.py) for a URLconf that includes them:
``path("admin/cronlease/", include("cronlease.contrib.django.urls"))``.

Not needed for the admin: admin.py gives it the same pages, linked from its index.
Included before the admin, it also serves the admin's schedule pages
(``schedule/...``, admin.py's), which its task pages' pattern would otherwise catch.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.decorators.http import require_safe

from cronlease.contrib.django.admin import ScheduleAdmin
from cronlease.contrib.django.models import Schedule
from cronlease.contrib.django.views import history, tasks

app_name = "cronlease"
tasks_view = admin.site.admin_view(require_safe(tasks))  # read-only: a POST is a 405
history_view = admin.site.admin_view(require_safe(history))
urlpatterns = [
    path("", tasks_view, name="tasks"),
    # Included at admin/cronlease/ before the admin, these would catch the admin
    # index's link to admin/cronlease/taskstatus/ as a task's name: they serve it
    path("taskstatus/", tasks_view),
    path("taskstatus/<path:task>/", history_view),
    path("schedule/", include(ScheduleAdmin(Schedule, admin.site).get_urls())),
    path("<path:task>/", history_view, name="history"),
]
