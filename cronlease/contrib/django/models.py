"""Two unmanaged models, for the admin to list cronlease and Django to permit it.

They have no table and no migration (``managed = False``; the lease rows and
the schedule rows are cronlease's own tables, read and written through
:mod:`cronlease._service` and :class:`cronlease.Schedules`): they exist so the
admin index shows "cronlease: Tasks" and "cronlease: Schedules" (admin.py), and
so ``migrate`` creates the permissions a staff user needs, granted as any
model's are (a superuser has them): ``cronlease.view_taskstatus`` ("Can view
task") for the status pages, and ``cronlease.view_schedule``, ``add_schedule``,
``change_schedule`` and ``delete_schedule`` for the schedules kept in the database.
"""

from __future__ import annotations

from django.db import models

__all__ = ["Schedule", "TaskStatus"]


class TaskStatus(models.Model):
    # the primary key is declared: an implicit one would draw the DEFAULT_AUTO_FIELD
    # warning in projects that do not set it
    name = models.CharField(primary_key=True, max_length=255)

    class Meta:
        managed = False
        default_permissions = ("view",)
        verbose_name = "task"
        verbose_name_plural = "tasks"

    def __str__(self) -> str:
        return str(self.name)


class Schedule(models.Model):
    """A schedule kept in the database (``cronlease_schedules``), as the admin lists it:
    never read or written through the ORM (admin.py goes through ``cronlease.Schedules``)."""

    name = models.CharField(primary_key=True, max_length=255)

    class Meta:
        managed = False
        # Django's four: view, add, change, delete
        verbose_name = "schedule"
        verbose_name_plural = "schedules"

    def __str__(self) -> str:
        return str(self.name)
