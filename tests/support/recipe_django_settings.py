"""The example Django project's settings, plus the test's task module."""

from __future__ import annotations

from project.settings import *  # noqa: F403  (examples/django_project is on PYTHONPATH)
from project.settings import CRONLEASE_TASK_MODULES

CRONLEASE_TASK_MODULES = [*CRONLEASE_TASK_MODULES, "tests.support.recipe_django_tasks"]
