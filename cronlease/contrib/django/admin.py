"""The admin's entries for cronlease: "cronlease: Tasks" on the admin index, whose pages
are the read-only status pages (views.py), at ``admin/cronlease/taskstatus/``, and
"cronlease: Schedules", the schedules kept in the database (schedules.py), at
``admin/cronlease/schedule/``.

Discovered by ``django.contrib.admin`` as any app's ``admin.py`` is; nothing to add to
the URLconf. Who sees them is Django's permissions: ``cronlease.view_taskstatus``,
and ``cronlease.view_schedule``, ``add_schedule``, ``change_schedule``,
``delete_schedule`` (models.py), on top of the admin's staff login.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.http import require_safe

from cronlease.contrib.django.models import Schedule, TaskStatus
from cronlease.contrib.django.schedules import SchedulePages
from cronlease.contrib.django.views import Pages

__all__ = ["ScheduleAdmin", "TaskStatusAdmin"]


@admin.register(TaskStatus)
class TaskStatusAdmin(admin.ModelAdmin):
    """No change list of rows: the model's URLs are the status pages, view-only."""

    def get_urls(self) -> list[Any]:
        opts = self.opts
        prefix = f"{opts.app_label}_{opts.model_name}"
        site = self.admin_site
        pages = Pages(site, f"{site.name}:{prefix}_changelist", f"{site.name}:{prefix}_history")

        def tasks(request: HttpRequest) -> HttpResponse:
            return pages.tasks(request)

        def history(request: HttpRequest, task: str) -> HttpResponse:
            return pages.history(request, task)

        wrap = self.admin_site.admin_view
        return [
            # read-only: a POST is refused (405), not served
            path("", wrap(require_safe(tasks)), name=f"{prefix}_changelist"),
            path("<path:task>/", wrap(require_safe(history)), name=f"{prefix}_history"),
        ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """The schedules' list, add, change (with its history), delete and history pages,
    each asking Django's permission of its kind; nothing goes through the ORM."""

    def get_urls(self) -> list[Any]:
        opts = self.opts
        prefix = f"{opts.app_label}_{opts.model_name}"
        kinds = {
            "view": self.has_view_permission,
            "add": self.has_add_permission,
            "change": self.has_change_permission,
            "delete": self.has_delete_permission,
        }
        pages = SchedulePages(
            self.admin_site, lambda request, kind: kinds[kind](request), self.record
        )
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(require_safe(pages.changelist)), name=f"{prefix}_changelist"),
            path("add/", wrap(pages.add), name=f"{prefix}_add"),
            path(
                "<path:name>/history/", wrap(require_safe(pages.history)), name=f"{prefix}_history"
            ),
            path("<path:name>/delete/", wrap(pages.delete), name=f"{prefix}_delete"),
            path("<path:name>/change/", wrap(pages.change), name=f"{prefix}_change"),
        ]

    def record(self, request: HttpRequest, name: str, action: str, message: str) -> None:
        """A write of the schedule pages in Django's admin log, as the admin logs its own
        models' (the index's recent actions): the schedule's name, the change's words."""
        obj = Schedule(name=name)  # unmanaged: nothing is read or written through the ORM
        if action == "add":
            self.log_addition(request, obj, message)
        elif action == "change":
            self.log_change(request, obj, message)
        elif hasattr(self, "log_deletions"):  # Django 5.1 and later
            self.log_deletions(request, [obj])
        else:
            self.log_deletion(request, obj, str(obj))
