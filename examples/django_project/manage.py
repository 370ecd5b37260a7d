#!/usr/bin/env python
"""Django's command-line utility for this example project.

python manage.py runserver          # the scheduler starts in the serving process
python manage.py cronlease_run      # a scheduler alone, without a web server
gunicorn project.wsgi --workers 3   # one scheduler per worker (AppConfig.ready)
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    if sys.argv[1:2] != ["runserver"]:
        # migrate, shell, cronlease_run, ...: AppConfig.ready() must not start a scheduler.
        os.environ.setdefault("CRONLEASE_AUTOSTART", "0")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
