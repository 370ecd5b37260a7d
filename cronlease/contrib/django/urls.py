"""The admin pages' URLs (views.py): ``include("cronlease.contrib.django.urls")``."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path
from django.views.decorators.http import require_safe

from cronlease.contrib.django.views import history, tasks

app_name = "cronlease"
urlpatterns = [
    # read-only: a POST is refused (405), not served
    path("", admin.site.admin_view(require_safe(tasks)), name="tasks"),
    path("<path:task>/", admin.site.admin_view(require_safe(history)), name="history"),
]
