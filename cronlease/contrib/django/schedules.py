"""The admin's schedules: add, change, delete forms and history of the schedules kept in
the database, every write through :class:`cronlease.Schedules` (admin.py registers
them as "cronlease: Schedules", at ``admin/cronlease/schedule/``).

The model is the process's scheduler's (``get_scheduler().schedules``): the
database and namespace of the settings, the jobs ``tasks.py`` registers (and those
live replicas offer), the code tasks' names. The form formats and reads text; the
model decides: its refusals (an argument that does not fit the job, a bad cron,
a name a code task uses) are the form's errors, on the field the message names;
a stale version (the form carries the version it was read at) is a form error
naming the newer version and who made it. ``changed_by`` is the Django user.
Access is Django's: ``cronlease.view_schedule``, ``add_schedule``,
``change_schedule``, ``delete_schedule`` (models.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from cronlease._schedules.model import Schedules, StoredSchedule
from cronlease.contrib.django._replica import get_scheduler
from cronlease.errors import (
    ConfigError,
    StaleScheduleError,
    StoreError,
    UnknownScheduleError,
)

__all__ = ["ScheduleForm", "SchedulePages", "model"]

_FIELDS = ("job", "every", "cron", "timezone", "args", "kwargs", "enabled")
_KEY = re.compile(r"key '([a-z_]+)'")


def model() -> Schedules:
    """The process's schedules model (the settings' database, namespace and jobs)."""
    return get_scheduler().schedules


def _json_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        help_text=help_text,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )


class ScheduleForm(forms.Form):
    """A schedule as text; :meth:`values` what the model is given."""

    name = forms.CharField(max_length=255)
    job = forms.ChoiceField(help_text="a job the code registers (or a live replica offers)")
    every = forms.CharField(required=False, help_text="e.g. 30s, 5m, 1h; or a cron line")
    cron = forms.CharField(required=False, help_text="e.g. 0 3 * * *")
    timezone = forms.CharField(required=False, help_text="e.g. Europe/Berlin (cron only)")
    args = _json_field("args", 'a JSON array, e.g. ["acme"]')
    kwargs = _json_field("kwargs", 'a JSON object, e.g. {"customer": "acme"}')
    options = _json_field(
        "options", 'a JSON object: grace, timeout, retries, ... e.g. {"retries": 2}'
    )
    enabled = forms.BooleanField(required=False, initial=True)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, jobs: list[str], editing: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        job = self.fields["job"]
        assert isinstance(job, forms.ChoiceField)
        job.choices = [(name, name) for name in jobs]
        if editing:
            self.fields["name"].disabled = True

    def _json(self, key: str, kind: type, empty: Any) -> Any:
        text = (self.cleaned_data.get(key) or "").strip()
        if not text:
            return empty
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not JSON ({exc})") from None
        if not isinstance(value, kind):
            raise forms.ValidationError(f"must be a JSON {'array' if kind is list else 'object'}")
        return value

    def clean_args(self) -> Any:
        return self._json("args", list, [])

    def clean_kwargs(self) -> Any:
        return self._json("kwargs", dict, {})

    def clean_options(self) -> Any:
        options = self._json("options", dict, {})
        clash = sorted(set(options) & {*_FIELDS, "name", "changed_by", "expected_version"})
        if clash:
            raise forms.ValidationError(f"{', '.join(clash)} is a field of its own")
        return options

    def values(self) -> dict[str, Any]:
        """The model's keyword arguments: the fields, the options as keywords."""
        data = self.cleaned_data
        return {
            "job": data["job"],
            "every": data["every"] or None,
            "cron": data["cron"] or None,
            "timezone": data["timezone"] or None,
            "args": data["args"],
            "kwargs": data["kwargs"],
            "enabled": data["enabled"],
            **data["options"],
        }

    def refused(self, exc: Exception) -> None:
        """The model's refusal, on the field its message names (else the form's)."""
        text = str(exc)
        match = _KEY.search(text)
        key = match.group(1) if match else None
        self.add_error(key if key in self.fields and key != "name" else None, text)

    @staticmethod
    def initial_of(schedule: StoredSchedule) -> dict[str, Any]:
        return {
            "name": schedule.name,
            "job": schedule.job,
            "every": schedule.every or "",
            "cron": schedule.cron or "",
            "timezone": schedule.timezone or "",
            "args": json.dumps(list(schedule.args)) if schedule.args else "",
            "kwargs": json.dumps(dict(schedule.kwargs), sort_keys=True) if schedule.kwargs else "",
            "options": json.dumps(dict(schedule.options), sort_keys=True)
            if schedule.options
            else "",
            "enabled": schedule.enabled,
            "version": schedule.version,
        }


def _when(schedule: StoredSchedule) -> str:
    if schedule.cron:
        return f"cron {schedule.cron}" + (f" ({schedule.timezone})" if schedule.timezone else "")
    return f"every {schedule.every}" if schedule.every else "-"


class SchedulePages:
    """The schedule pages of one admin site; ``allowed(request, what)`` is the model
    admin's ``has_<what>_permission``; the URL names are the admin's own."""

    def __init__(
        self,
        site: AdminSite,
        allowed: Callable[[HttpRequest, str], bool],
        record: Callable[[HttpRequest, str, str, str], None],
    ) -> None:
        self.site = site
        self.allowed = allowed
        #: ``record(request, name, action, message)``: Django's admin log of a write
        #: (``add``, ``change``, ``delete``), the model admin's
        self.record = record
        self.prefix = f"{site.name}:cronlease_schedule"

    def _recorded(self, request: HttpRequest, schedules: Schedules, name: str, action: str) -> None:
        """Log a write the model made into Django's admin log (the user's recent actions),
        with the change's words from the schedule's own history."""
        changes = schedules.history(name)
        self.record(request, name, action, changes[-1].text() if changes else "")

    def _permit(self, request: HttpRequest, what: str) -> None:
        if not self.allowed(request, what):
            raise PermissionDenied

    def _url(self, view: str, name: str | None = None) -> str:
        return str(reverse(f"{self.prefix}_{view}", args=[] if name is None else [name]))

    def _render(self, request: HttpRequest, template: str, title: str, **context: Any) -> Any:
        context.update(
            self.site.each_context(request),
            title=title,
            list_url=self._url("changelist"),
            add_url=self._url("add") if self.allowed(request, "add") else None,
        )
        return TemplateResponse(request, f"cronlease/{template}", context)

    def _jobs(self, schedules: Schedules, current: str | None = None) -> list[str]:
        names = list(schedules.jobs())
        if current and current not in names:  # a job no longer offered: kept selectable
            names.insert(0, current)
        return names

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self._permit(request, "view")
        note, rows = "", []
        try:
            for schedule in model().list():
                rows.append(
                    {
                        "schedule": schedule,
                        "url": self._url("change", schedule.name),
                        "when": _when(schedule),
                    }
                )
        except StoreError as exc:
            note = str(exc)
        return self._render(request, "schedules.html", "Schedules", rows=rows, note=note)

    def add(self, request: HttpRequest) -> HttpResponse:
        self._permit(request, "add")
        schedules = model()
        jobs = self._jobs(schedules)
        form = ScheduleForm(request.POST or None, jobs=jobs)
        if request.method == "POST" and form.is_valid():
            name = form.cleaned_data["name"]
            try:
                schedules.add(name, changed_by=_user(request), **form.values())
            except (ConfigError, StoreError) as exc:
                form.refused(exc)
            else:
                self._recorded(request, schedules, name, "add")
                return HttpResponseRedirect(self._url("change", name))
        context = {"form": form, "adding": True, "jobs": jobs, "history": []}
        return self._render(request, "schedule_form.html", "Add schedule", **context)

    def change(self, request: HttpRequest, name: str) -> HttpResponse:
        editable = self.allowed(request, "change")
        self._permit(request, "change" if request.method == "POST" else "view")
        schedules = model()
        schedule = _get(schedules, name)
        jobs = self._jobs(schedules, schedule.job)
        initial = ScheduleForm.initial_of(schedule)
        data = request.POST if request.method == "POST" else None
        form = ScheduleForm(data, initial=initial, jobs=jobs, editing=True)
        if data is not None and form.is_valid():
            given = form.values()
            reset = {key: None for key in schedule.options if key not in given}
            try:
                schedules.update(
                    name,
                    expected_version=form.cleaned_data["version"],
                    changed_by=_user(request),
                    **given,
                    **reset,
                )
            except StaleScheduleError as exc:
                form.add_error(None, str(exc))
            except (ConfigError, StoreError) as exc:
                form.refused(exc)
            else:
                self._recorded(request, schedules, name, "change")
                return HttpResponseRedirect(self._url("change", name))
        context = {
            "form": form,
            "adding": False,
            "editable": editable,
            "schedule": schedule,
            "history": self._history(schedules, name),
            "delete_url": self._url("delete", name) if self.allowed(request, "delete") else None,
        }
        return self._render(request, "schedule_form.html", f"Change schedule {name}", **context)

    def delete(self, request: HttpRequest, name: str) -> HttpResponse:
        self._permit(request, "delete")
        schedules = model()
        schedule = _get(schedules, name)
        error = ""
        if request.method == "POST":
            try:
                version = int(request.POST.get("version", ""))
            except ValueError:
                version = 0
            try:
                schedules.remove(name, expected_version=version, changed_by=_user(request))
            except (ConfigError, StoreError) as exc:
                error = str(exc)
            else:
                self._recorded(request, schedules, name, "delete")
                return HttpResponseRedirect(self._url("changelist"))
        return self._render(
            request,
            "schedule_delete.html",
            f"Delete schedule {name}",
            schedule=schedule,
            error=error,
            change_url=self._url("change", name),
        )

    def history(self, request: HttpRequest, name: str) -> HttpResponse:
        self._permit(request, "view")
        rows = self._history(model(), name)
        if not rows:
            raise Http404(f"no schedule named {name!r}")
        return self._render(request, "schedule_history.html", f"History of {name}", history=rows)

    @staticmethod
    def _history(schedules: Schedules, name: str) -> list[dict[str, Any]]:
        return [
            {"change": change, "what": change.text()}
            for change in reversed(schedules.history(name))  # the latest first
        ]


def _get(schedules: Schedules, name: str) -> StoredSchedule:
    try:
        return schedules.get(name)
    except (UnknownScheduleError, ConfigError):
        raise Http404(f"no schedule named {name!r}") from None


def _user(request: HttpRequest) -> str:
    return str(request.user.get_username()) or f"django user {request.user.pk}"
