"""The read-only admin pages: every task's status, and a task's latest runs.

Staff only (``admin.site.admin_view``); mount them beside the admin::

    path("admin/cronlease/", include("cronlease.contrib.django.urls")),
    path("admin/", admin.site.urls),

Each page reads what ``manage.py cronlease status`` / ``history`` read (the status
model, through :mod:`cronlease._service`) and shows the cells the CLI prints
(:mod:`cronlease._status.cells`); nothing on them writes. A read never creates
the tables (a database without them says so).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from cronlease._service import (
    Failure,
    UsageError,
    no_tables,
    open_store,
    read_history,
    read_report,
    redact,
    tables_exist,
)
from cronlease._status.cells import history_rows, status_rows
from cronlease.contrib.django._replica import declared_config
from cronlease.errors import StoreError

__all__ = ["history", "tasks"]

HISTORY_LIMIT = 50


def _page(request: HttpRequest, title: str, **context: Any) -> HttpResponse:
    context.update(admin.site.each_context(request), title=title)
    return TemplateResponse(request, "cronlease/table.html", context)


def tasks(request: HttpRequest) -> HttpResponse:
    config = declared_config()
    headers: list[str] = []
    rows: list[list[str]] = []
    note = ""
    try:
        with open_store(config.database, config, read_only=True) as store:
            found = tables_exist(store, config.database)
            report = read_report(store, config, tables=found)
        headers, rows = status_rows(report, wide=True)
        note = "" if found else no_tables(config.database)
    except (Failure, StoreError) as exc:
        note = str(exc)
    return _page(
        request,
        "cronlease tasks",
        headers=headers,
        rows=[(row[0], row) for row in rows],  # the task column links to its history
        link_first=True,
        note=note,
        database=redact(config.database),
    )


def history(request: HttpRequest, task: str) -> HttpResponse:
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
    return _page(
        request,
        f"cronlease: {task}",
        headers=headers,
        rows=[("", row) for row in rows],
        link_first=False,
        note=note,
        database=redact(config.database),
    )
