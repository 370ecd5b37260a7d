from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path
from periodic import views

urlpatterns = [
    path("", views.index),
    path("healthz", views.healthz),
    re_path(r"^cronlease(?P<rest>/.*)?$", views.cronlease_status),
    path("admin/cronlease/", include("cronlease.contrib.django.urls")),  # read-only, staff
    path("admin/", admin.site.urls),
]
