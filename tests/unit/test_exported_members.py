"""The public API is exactly ``cronlease.__all__`` (like httpx's tests/test_exported_members.py)."""

from __future__ import annotations

import inspect
import re

import cronlease
from cronlease import errors

EXPECTED_ALL = [
    "AcquireRequest",
    "AttemptCandidate",
    "AttemptRequest",
    "ClockChecked",
    "CommandError",
    "ConfigError",
    "ConfigFileError",
    "CronleaseError",
    "DatabaseFileChanged",
    "DatabaseRecovered",
    "DatabaseUnavailable",
    "Event",
    "Finish",
    "Lease",
    "LeaseInfo",
    "LeaseLost",
    "LeaseLostError",
    "LeaseStore",
    "Refusal",
    "RowRefused",
    "RunContext",
    "RunFinished",
    "RunRecord",
    "RunStarted",
    "Schedule",
    "Scheduler",
    "SchedulerError",
    "StatementError",
    "StoreError",
    "Task",
    "TaskTimeout",
    "TickSkipped",
    "UnknownTaskError",
    "__version__",
]

TREE_LINE = re.compile(r"^[\s│]*(?:[├└]── )?(?P<name>[A-Z]\w+)\b")


def test_all_is_pinned() -> None:
    assert cronlease.__all__ == EXPECTED_ALL


def test_every_exported_member_exists_and_belongs_to_cronlease() -> None:
    for name in cronlease.__all__:
        member = getattr(cronlease, name)
        if name == "__version__":
            assert isinstance(member, str)
            assert re.fullmatch(r"\d+\.\d+\.\d+\S*", member)
            continue
        assert member.__module__.startswith("cronlease."), name
        assert member.__name__ == name


def test_no_unlisted_public_class_or_function() -> None:
    public = {
        name
        for name, value in vars(cronlease).items()
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
    }
    assert public <= set(cronlease.__all__)


def exception_classes() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    }


def test_errors_all_lists_every_exception() -> None:
    assert sorted(errors.__all__) == sorted(exception_classes())


def test_every_exception_derives_from_cronlease_error() -> None:
    classes = exception_classes()
    assert "CronleaseError" in classes
    for name, cls in classes.items():
        assert issubclass(cls, errors.CronleaseError), name
        assert getattr(cronlease, name) is cls, f"{name} is not exported from cronlease"


def docstring_tree() -> dict[str, str | None]:
    """The exception tree drawn in the errors module docstring: {class: parent}."""
    doc = errors.__doc__ or ""
    lines = doc.split("::", 1)[1].splitlines()
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name)
    for line in lines:
        if not line.strip():
            if parents:
                break  # the blank line after the tree ends it
            continue
        match = TREE_LINE.match(line)
        if not match:
            continue  # a continuation line of a description
        column = match.start("name")
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[match.group("name")] = stack[-1][1] if stack else None
        stack.append((column, match.group("name")))
    return parents


def test_docstring_tree_lists_every_exception_with_its_parent() -> None:
    tree = docstring_tree()
    classes = exception_classes()
    assert set(tree) == set(classes)
    assert tree["CronleaseError"] is None
    for name, parent in tree.items():
        if parent is not None:
            assert classes[parent] in classes[name].__bases__, f"{name} is not under {parent}"


def test_config_error_is_a_value_error() -> None:
    # Callers validating input may catch ValueError.
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.UnknownTaskError, KeyError)


def test_default_message_is_the_docstring() -> None:
    assert (
        str(errors.StoreError())
        == "The lease database could not be reached or refused a statement."
    )
    assert str(errors.UnknownTaskError("no task 'x'")) == "no task 'x'"
