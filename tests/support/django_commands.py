"""Run inside the throwaway Django project (tests/processes/test_django_app.py): each
argument is a JSON list of words, run as ``call_command("cronlease", *words)`` one
after the other in this one process (a process per command costs seconds). Prints a
JSON list of ``{"code", "out", "err"}``: the exit status (call_command raises
SystemExit on a failure, returns on success) and what the command printed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

import django

os.environ["DJANGO_SETTINGS_MODULE"] = "project_settings"
django.setup()

from django.core.management import call_command  # noqa: E402  (after setup)

results = []
for argument in sys.argv[1:]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            call_command("cronlease", *json.loads(argument))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    results.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
