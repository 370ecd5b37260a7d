"""The read-only admin pages: every task's status, and a task's latest runs.

The admin index links them ("cronlease: Tasks", admin.py), at
``admin/cronlease/taskstatus/``; urls.py mounts the same pages where a URLconf
includes it (``admin/cronlease/``, before ``admin.site.urls``). Either way they
are the admin's: its staff login, then Django's permission
``cronlease.view_taskstatus`` (models.py; a superuser has it).

Each page reads what ``manage.py cronlease status`` / ``history`` read (the status
model, through :mod:`cronlease._service`) and shows the cells the CLI prints
(:mod:`cronlease._status.cells`); nothing on them writes. A read never creates
the tables (a database without them says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from cronlease._service import (
    Failure,
    UsageError,
    commands_named,
    no_tables,
    open_store,
    read_history,
    read_report,
    redact,
    tables_exist,
)
from cronlease._status.cells import history_rows, status_rows, task_notes
from cronlease.contrib.django._replica import PROG, declared_config
from cronlease.errors import StoreError

__all__ = ["PERMISSION", "Pages", "history", "tasks"]

HISTORY_LIMIT = 50
#: who may read the pages (models.py): granted as any model's view permission
PERMISSION = "cronlease.view_taskstatus"


@dataclass(frozen=True)
class Pages:
    """The two pages on an admin ``site``, linking to each other by these URL names."""

    site: AdminSite
    tasks_url: str
    history_url: str

    def tasks(self, request: HttpRequest) -> HttpResponse:
        _permit(request)
        with commands_named(PROG):  # hints name the commands a Django project has
            return self._tasks(request)

    def history(self, request: HttpRequest, task: str) -> HttpResponse:
        _permit(request)
        with commands_named(PROG):
            return self._history(request, task)

    def _tasks(self, request: HttpRequest) -> HttpResponse:
        config = declared_config()
        headers: list[str] = []
        rows: list[list[str]] = []
        notes: list[str] = []
        note = ""
        try:
            with open_store(config.database, config, read_only=True) as store:
                found = tables_exist(store, config.database)
                report = read_report(store, config, tables=found)
            headers, rows = status_rows(report, wide=True)
            notes = task_notes(report)
            note = "" if found else no_tables(config.database)
        except (Failure, StoreError) as exc:
            note = str(exc)
        return self._page(
            request,
            "cronlease tasks",
            headers=headers,
            # the task column links to its history
            rows=[(reverse(self.history_url, args=[row[0]]), row) for row in rows],
            link_first=True,
            note=note,
            notes=notes,
            database=redact(config.database),
        )

    def _history(self, request: HttpRequest, task: str) -> HttpResponse:
        config = declared_config()
        headers: list[str] = []
        rows: list[list[str]] = []
        note = ""
        try:
            with open_store(config.database, config, read_only=True) as store:
                found = tables_exist(store, config.database)
                name, runs = read_history(store, config, task, HISTORY_LIMIT, tables=found)
            headers, rows = history_rows(runs)
            if not runs:
                note = f"no runs of {name!r} recorded" + (
                    "" if found else f": {no_tables(config.database)}"
                )
        except UsageError as exc:  # no such task
            raise Http404(str(exc)) from None
        except (Failure, StoreError) as exc:
            note = str(exc)
        return self._page(
            request,
            f"cronlease: {task}",
            headers=headers,
            rows=[("", row) for row in rows],
            link_first=False,
            note=note,
            database=redact(config.database),
        )

    def _page(self, request: HttpRequest, title: str, **context: Any) -> HttpResponse:
        context.update(
            self.site.each_context(request), title=title, tasks_url=reverse(self.tasks_url)
        )
        return TemplateResponse(request, "cronlease/table.html", context)


def _permit(request: HttpRequest) -> None:
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied


_included = Pages(admin.site, "cronlease:tasks", "cronlease:history")


def tasks(request: HttpRequest) -> HttpResponse:
    """Every task's status (urls.py's ``tasks``)."""
    return _included.tasks(request)


def history(request: HttpRequest, task: str) -> HttpResponse:
    """A task's latest runs (urls.py's ``history``)."""
    return _included.history(request, task)
