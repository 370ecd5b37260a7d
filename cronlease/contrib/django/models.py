"""One unmanaged model, for the admin to list cronlease and Django to permit it.

It has no table and no migration (``managed = False``; the lease rows are
cronlease's own tables, read through :mod:`cronlease._service`): it exists so
the admin index shows "cronlease: Tasks", linking to the status pages
(admin.py), and so ``migrate`` creates the permission ``cronlease.view_taskstatus``
("Can view task") that a staff user needs to see them, granted as any
model's is (a superuser has it).
"""

from __future__ import annotations

from django.db import models

__all__ = ["TaskStatus"]


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
