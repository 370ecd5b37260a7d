"""WSGI entry point: ``gunicorn project.wsgi --workers 3``.

Each worker imports this module after the fork and sets Django up, so
each worker starts its replica on its first request (CRONLEASE["AUTOSTART"]).
"""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
application = get_wsgi_application()
