"""The example Django project's settings, on the test's database, plus the test's app."""

from __future__ import annotations

import os

from project.settings import *  # noqa: F403  (examples/django_project is on PYTHONPATH)
from project.settings import INSTALLED_APPS

from tests.support.django_project import databases_entry

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.recipe_django"]
DATABASES = {"default": databases_entry(os.environ["CRONLEASE_DATABASE_URL"])}
