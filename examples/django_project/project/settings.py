"""A minimal Django project that runs cronlease tasks (see periodic/apps.py)."""

from __future__ import annotations

import os

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["periodic.apps.PeriodicConfig"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
DATABASES: dict[str, dict[str, str]] = {}  # this example keeps no data of its own
USE_TZ = True
TIME_ZONE = "UTC"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"cronlease": {"handlers": ["console"], "level": "INFO"}},
}

# cronlease: one database shared by every process of every replica.
CRONLEASE_DATABASE_URL = os.environ.get("CRONLEASE_DATABASE_URL", "sqlite:///cronlease.db")
# Modules that declare tasks on periodic.cron.scheduler; imported by PeriodicConfig.ready().
CRONLEASE_TASK_MODULES = ["periodic.tasks"]
