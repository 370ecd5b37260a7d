from __future__ import annotations

import os

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from cronlease.contrib.django import scheduler
from cronlease.web import StatusPage

_status_page = StatusPage(scheduler)


def index(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"hello": "world", "status page": "/cronlease/"})


@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    health = scheduler.health()
    return JsonResponse(
        {"ok": health.ok, "problems": list(health.problems), "pid": os.getpid()},
        status=200 if health.ok else 503,
    )


# Put your own auth in front, e.g. django.contrib.admin.views.decorators.staff_member_required.
def cronlease_status(request: HttpRequest, rest: str | None = None) -> HttpResponse:
    """The read-only status page (``/cronlease/``) and its JSON (``/cronlease/status.json``)."""
    rest = rest or ""
    base = request.path[: len(request.path) - len(rest)]
    code, headers, body = _status_page.respond(
        request.method or "GET", rest, request.META.get("QUERY_STRING", ""), base
    )
    response = HttpResponse(body, status=code)
    for name, value in headers:
        response[name] = value
    return response
