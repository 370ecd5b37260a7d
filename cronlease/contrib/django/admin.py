"""The admin's entry for cronlease: "cronlease: Tasks" on the admin index, whose pages
are the read-only status pages (views.py), at ``admin/cronlease/taskstatus/``.

Discovered by ``django.contrib.admin`` as any app's ``admin.py`` is; nothing to add to
the URLconf. Who sees it is Django's permission: ``cronlease.view_taskstatus``
(models.py), on top of the admin's staff login.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.http import require_safe

from cronlease.contrib.django.models import TaskStatus
from cronlease.contrib.django.views import Pages

__all__ = ["TaskStatusAdmin"]


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
