"""``cronlease.toml``: read a config file into validated task specs; translate a crontab.

Everything is checked before anything starts or any database is touched.
A problem raises :class:`~cronlease.errors.ConfigFileError`, whose one-line
message names the file, the TOML line when it can be found, the task and the key::

    cronlease.toml:7: task 'backup', key 'every': every 'fivem' is not a duration ...

Layout::

    database = "postgresql://app@db/app"   # CRONLEASE_DATABASE_URL overrides
    namespace = "myapp"                    # optional: prefixes every task name
    holder = "web-1"                       # optional: this replica's holder id

    # or, with the pool's settings (config/_database.py):
    # [database]
    # url = "postgresql://app@db/app"
    # pool_size = 1
    # connect_args = { sslmode = "require" }

    [scheduler]
    shutdown_grace = "20s"                 # optional: SIGTERM to exit at most (default 25 s)

    [tasks.purge-sessions]
    call = "myapp.jobs:purge_sessions"     # a Python callable ...
    every = "5m"

    [tasks.backup]
    command = "pg_dump -Fc app -f /backups/app.dump"   # ... or a command
    cron = "0 2 * * *"
    timezone = "Europe/Istanbul"
    timeout = "30m"

``cronlease import-crontab`` writes such a file from a crontab
(:func:`translate_crontab`), ``cronlease import-celery-beat`` from a Celery app's
``beat_schedule`` or django-celery-beat's rows (:func:`translate_celery_app`,
:func:`translate_django_beat`).

The modules, one job each: ``_load`` reads and parses the file, ``_validate``
checks its tables, ``_locate`` finds the line of a key for messages,
``_database`` the database URL or ``[database]`` table, ``_spec`` is what a
valid file declares (and puts it on a scheduler),
``_calls`` imports ``call`` targets, ``_crontab`` translates crontabs,
``_celery`` reads ``[celery]``, ``_celery_import`` translates beat schedules.
"""

from __future__ import annotations

from cronlease._lease.settings import PoolKeywords
from cronlease.config._calls import resolve_call
from cronlease.config._celery import celery_specs
from cronlease.config._celery_import import BeatImport
from cronlease.config._celery_import import translate_app as translate_celery_app
from cronlease.config._celery_import import translate_django as translate_django_beat
from cronlease.config._crontab import Translation, local_timezone, translate_crontab
from cronlease.config._load import DEFAULT_CONFIG, load_config
from cronlease.config._spec import Config, JobSpec, JobTarget, TaskSpec, TaskTarget
from cronlease.config._validate import DATABASE_ENV

__all__ = [
    "DATABASE_ENV",
    "DEFAULT_CONFIG",
    "BeatImport",
    "Config",
    "JobSpec",
    "JobTarget",
    "PoolKeywords",
    "TaskSpec",
    "TaskTarget",
    "Translation",
    "celery_specs",
    "load_config",
    "local_timezone",
    "resolve_call",
    "translate_celery_app",
    "translate_crontab",
    "translate_django_beat",
]
