"""The public API is exactly ``cronlease.__all__`` (like httpx's tests/test_exported_members.py),
and the public modules' signatures name only public types."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cronlease
from cronlease import errors

EXPECTED_ALL = [
    "ClockCheck",
    "ClockChecked",
    "CommandError",
    "ConfigError",
    "ConfigFileError",
    "CronleaseError",
    "DatabaseFileChanged",
    "DatabaseRecovered",
    "DatabaseUnavailable",
    "Event",
    "Health",
    "LeaseLostError",
    "LeaseStore",
    "RowRefused",
    "RunContext",
    "RunFinished",
    "RunLost",
    "RunStarted",
    "Schedule",
    "ScheduleChange",
    "ScheduleError",
    "Scheduler",
    "SchedulerError",
    "Schedules",
    "SendError",
    "StaleScheduleError",
    "StatementError",
    "StoreError",
    "StoredSchedule",
    "Task",
    "TaskTimeout",
    "TickSkipped",
    "UnknownJobError",
    "UnknownScheduleError",
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


# --- the public modules, and the types their signatures name ----------------------------

#: every module a user imports from; ``cronlease.contrib.django`` is left out: importing its
#: pages needs a configured Django (its functions take and return Django's types)
PUBLIC_MODULES = [
    "cronlease",
    "cronlease.cli",
    "cronlease.config",
    "cronlease.contrib.celery",
    "cronlease.contrib.dramatiq",
    "cronlease.contrib.rq",
    "cronlease.errors",
    "cronlease.opentelemetry",
    "cronlease.prometheus",
    "cronlease.schema",
    "cronlease.sentry",
    "cronlease.status",
    "cronlease.store",
    "cronlease.web",
]

#: built by cronlease and handed to the user, never built by the user: their constructors
#: take the engine's own objects (a run's liveness), which stay private
BUILT_BY_CRONLEASE = {"cronlease._task.RunContext"}


def test_the_store_and_status_modules_are_pinned() -> None:
    import cronlease.status
    import cronlease.store

    assert cronlease.store.__all__ == [
        "AcquireRequest",
        "AttemptCandidate",
        "AttemptRequest",
        "FinishRequest",
        "Lease",
        "LeaseInfo",
        "LeaseState",
        "LeaseStore",
        "Outcome",
        "Refusal",
        "RunRecord",
    ]
    assert cronlease.status.__all__ == [
        "ClockCheck",
        "DeclaredTask",
        "Health",
        "RunStatus",
        "Snapshot",
        "StatusReport",
        "StoredTask",
        "TaskStatus",
    ]
    assert cronlease.store.LeaseStore is cronlease.LeaseStore
    assert cronlease.status.Health is cronlease.Health


def test_the_celery_module_is_pinned() -> None:
    import cronlease.contrib.celery

    assert cronlease.contrib.celery.__all__ == [
        "DATABASE_SETTING",
        "KEEP_DELIVERIES",
        "Message",
        "OnceTask",
        "SendTask",
        "Sender",
        "add_beat_schedule",
        "celery_sender",
        "task_id_of",
    ]


def test_the_dramatiq_and_rq_modules_are_pinned() -> None:
    import cronlease.contrib.celery
    import cronlease.contrib.dramatiq
    import cronlease.contrib.rq

    assert cronlease.contrib.dramatiq.__all__ == [
        "KEEP_DELIVERIES",
        "ClaimFailed",
        "Message",
        "OnceMiddleware",
        "SendTask",
        "Sender",
        "dramatiq_sender",
        "task_id_of",
    ]
    assert cronlease.contrib.rq.__all__ == [
        "KEEP_DELIVERIES",
        "Message",
        "SendTask",
        "Sender",
        "once",
        "rq_sender",
        "task_id_of",
    ]
    # one mechanism: the same task body and message for every queue
    for module in (cronlease.contrib.dramatiq, cronlease.contrib.rq):
        assert module.SendTask is cronlease.contrib.celery.SendTask
        assert module.Message is cronlease.contrib.celery.Message
        assert module.KEEP_DELIVERIES == cronlease.contrib.celery.KEEP_DELIVERIES


def test_public_modules_are_every_public_top_level_module() -> None:
    root = Path(cronlease.__file__).parent
    found = {
        f"cronlease.{path.stem if path.suffix else path.name}"
        for path in root.iterdir()
        if not path.name.startswith("_")
        and (path.suffix == ".py" or (path / "__init__.py").exists())
    }
    assert found - {"cronlease.contrib"} == set(PUBLIC_MODULES) - {
        "cronlease",
        "cronlease.contrib.celery",
        "cronlease.contrib.dramatiq",
        "cronlease.contrib.rq",
    }


def test_an_old_name_still_works_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="cronlease.LeaseLost is now cronlease.RunLost"):
        old = cronlease.LeaseLost  # type: ignore[attr-defined]
    assert old is cronlease.RunLost
    assert "LeaseLost" not in cronlease.__all__
    with pytest.raises(AttributeError):
        cronlease.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def public_objects() -> dict[int, str]:
    """id -> public name of everything the public modules export."""
    found = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for member in getattr(module, "__all__", []):
            found.setdefault(id(getattr(module, member)), f"{name}.{member}")
    return found


def namespace_of(module_name: str) -> dict[str, Any]:
    """A module's globals with its ``if TYPE_CHECKING:`` imports done: the names its
    annotations use but it does not import at run time."""
    module = sys.modules[module_name]
    namespace = dict(vars(module))
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            for statement in node.body:
                if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                    continue
                code = ast.Module(body=[statement], type_ignores=[])
                try:
                    exec(compile(code, module.__file__ or "", "exec"), namespace)
                except ImportError:  # a library's name for type checkers only: not ours
                    if isinstance(statement, ast.ImportFrom):
                        assert not (statement.module or "").startswith("cronlease"), statement
                    for alias in statement.names:
                        namespace[alias.asname or alias.name] = Any
    return namespace


def named_types(hint: object) -> Iterator[object]:
    """The classes an annotation names, through unions, generics and ``Callable``."""
    if typing.get_origin(hint) is typing.Literal or hint is None or hint is type(None):
        return
    origin = typing.get_origin(hint)
    if origin is not None:
        if isinstance(origin, type):
            yield origin
        for argument in typing.get_args(hint):
            if isinstance(argument, (list, tuple)):  # Callable's parameters
                for item in argument:
                    yield from named_types(item)
            else:
                yield from named_types(argument)
    elif isinstance(hint, type):
        yield hint


def eval_hint(text: object, namespace: dict[str, Any]) -> object:
    """An annotation as written (a string, under ``from __future__ import annotations``)."""
    if not isinstance(text, str):
        return text
    return eval(text, namespace)  # the package's own annotations, as get_type_hints does


def hints_of(where: str, function: Any, owner: type | None = None) -> dict[str, Any]:
    module = getattr(function, "__module__", None) or "cronlease"
    namespace = namespace_of(module)
    if owner is not None:  # a dataclass's __init__ names its bases' fields, read in their modules
        for klass in reversed(owner.__mro__):
            if klass.__module__.startswith("cronlease"):
                namespace = {**namespace_of(klass.__module__), **namespace}
    try:
        return typing.get_type_hints(function, globalns=namespace)
    except NameError as exc:  # a name neither imported nor under TYPE_CHECKING
        raise AssertionError(f"{where}: an annotation cannot be resolved: {exc}") from None


def private_types_in_signatures() -> list[str]:
    """Every type a public signature names, walked from the public modules through the
    public classes it reaches, that lives in an underscore module and is exported nowhere."""
    public = public_objects()
    found: list[str] = []
    seen: set[int] = set()
    pending: list[tuple[str, Any]] = []
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        pending.extend((f"{name}.{m}", getattr(module, m)) for m in getattr(module, "__all__", []))

    def check(where: str, function: Any, owner: type | None = None) -> None:
        for parameter, hint in hints_of(where, function, owner).items():
            check_hint(where, f" {parameter}", hint)

    def check_hint(where: str, parameter: str, hint: object) -> None:
        for kind in named_types(hint):
            owner = getattr(kind, "__module__", "")
            if not owner.startswith("cronlease"):
                continue
            if id(kind) in public:
                pending.append((public[id(kind)], kind))  # walked in turn
            elif any(part.startswith("_") for part in owner.split(".")):
                name = getattr(kind, "__qualname__", repr(kind))
                found.append(f"{where}{parameter}: {owner}.{name}")

    def check_attributes(where: str, cls: type) -> None:
        """The public annotated attributes of ``cls`` and its cronlease bases, each read in
        its own module (a base's private attributes may name types its subclass never sees)."""
        for klass in cls.__mro__:
            if not klass.__module__.startswith("cronlease"):
                continue
            namespace = namespace_of(klass.__module__)
            for attribute, text in vars(klass).get("__annotations__", {}).items():
                if attribute.startswith("_"):
                    continue
                check_hint(f"{where}.{attribute}", "", eval_hint(text, namespace))

    while pending:
        where, value = pending.pop()
        if id(value) in seen or getattr(value, "__module__", "").split(".")[0] != "cronlease":
            continue
        seen.add(id(value))
        if not inspect.isclass(value):
            if callable(value):
                check(where, value)
            continue
        check_attributes(where, value)
        for attribute, raw in vars(value).items():
            public_attribute = not attribute.startswith("_") or attribute == "__init__"
            if not public_attribute:
                continue
            if attribute == "__init__" and f"{value.__module__}.{value.__qualname__}" in (
                BUILT_BY_CRONLEASE
            ):
                continue
            if isinstance(raw, property) and raw.fget is not None:
                check(f"{where}.{attribute}", raw.fget)
            elif isinstance(raw, (staticmethod, classmethod)):
                check(f"{where}.{attribute}", raw.__func__)
            elif inspect.isfunction(raw):
                check(f"{where}.{attribute}", raw, value)
    return sorted(set(found))


def test_public_signatures_name_only_public_types() -> None:
    found = private_types_in_signatures()
    assert not found, "\n".join(found)
