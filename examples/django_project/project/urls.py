from __future__ import annotations

from django.urls import path, re_path
from periodic import views

urlpatterns = [
    path("", views.index),
    path("healthz", views.healthz),
    re_path(r"^cronlease(?P<rest>/.*)?$", views.cronlease_status),
]
