#!/usr/bin/env python
"""Django's command-line utility for this example project.

python manage.py migrate                   # Django's tables (the admin's users)
python manage.py createsuperuser           # for /admin/, where "cronlease: Tasks" is
python manage.py runserver                 # serving: a replica from the first request
python manage.py cronlease run             # a replica alone, without a web server
python manage.py cronlease status          # every task's lease, state, last run
python manage.py cronlease pause TASK      # also resume, trigger, history, check, ...
python manage.py cronlease --help          # every command manage.py cronlease runs
gunicorn project.wsgi --workers 3          # one replica per worker

With DJANGO_DEBUG=0 (production), run `python manage.py collectstatic` and serve
STATIC_ROOT at STATIC_URL (settings.py) for the admin to have its CSS.
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
