from __future__ import annotations

from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import path, re_path
from periodic import views

urlpatterns = [
    path("", views.index),
    path("healthz", views.healthz),
    re_path(r"^cronlease(?P<rest>/.*)?$", views.cronlease_status),
    # the admin index links cronlease's read-only pages ("cronlease: Tasks", for users
    # with the cronlease.view_taskstatus permission): no URL of their own to add
    path("admin/", admin.site.urls),
    # the static files (the admin's CSS) under any server while DEBUG is on; nothing
    # otherwise (production serves STATIC_ROOT: see settings.py)
    *staticfiles_urlpatterns(),
]
