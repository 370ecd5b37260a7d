"""A minimal Django project whose periodic tasks are cronlease's (cronlease.contrib.django)."""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
# On by default, as in a project `startproject` makes, so that runserver serves the
# admin's CSS; production sets DJANGO_DEBUG=0 (and serves STATIC_ROOT, below).
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",  # the admin's CSS and JavaScript
    # tasks.py discovery, manage.py cronlease, "cronlease: Tasks" on the admin index
    "cronlease.contrib.django",
    "periodic",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
# One database for the app and cronlease's leases (cronlease opens its own pool on it).
# SQLite is fine for several workers on one host; use PostgreSQL or MySQL across hosts.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DATABASE_PATH", str(BASE_DIR / "db.sqlite3")),
    }
}
USE_TZ = True
# With DEBUG, runserver (and, through project/urls.py, any server) serves every app's
# static files from the app itself. In production (DEBUG off) nothing in Django
# serves them: `python manage.py collectstatic` copies them into STATIC_ROOT, and the
# web server in front (nginx, a CDN) or WhiteNoise serves that directory at STATIC_URL.
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
TIME_ZONE = "UTC"
# The tasks' own loggers ("periodic.tasks", "periodic.jobs") and cronlease's run lines.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "cronlease": {"handlers": ["console"], "level": "INFO"},
        "periodic": {"handlers": ["console"], "level": "INFO"},
    },
}

CRONLEASE = {
    "DATABASE": "default",  # a DATABASES alias
    # every serving process (runserver, each gunicorn/uvicorn worker) is a replica, from
    # its first request; `manage.py check`, migrate, shell and scripts never are
    "AUTOSTART": True,
    # tasks declared here take cronlease.toml's keys; periodic/tasks.py declares more
    "TASKS": {
        "nightly-report": {
            "call": "periodic.jobs:nightly_report",
            "cron": "0 3 * * *",
            "timezone": "Europe/Istanbul",
        },
    },
}
