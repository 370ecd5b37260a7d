#!/usr/bin/env python
"""Django's command-line utility for this example project.

python manage.py migrate                   # Django's tables (the admin's users)
python manage.py runserver                 # serving: a replica from the first request
python manage.py cronlease run             # a replica alone, without a web server
python manage.py cronlease status          # every task's lease, state, last run
gunicorn project.wsgi --workers 3          # one replica per worker
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
