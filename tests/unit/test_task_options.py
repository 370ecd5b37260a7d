"""Decorator = file: the same task options, checked by the same code, with the same errors."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import cronlease as cl
import cronlease._declare
from cronlease import RunContext, Scheduler, Task
from cronlease._options import OPTIONS, SCHEDULE_KEYS, kept_options
from cronlease._status.rules import DeclaredTask
from cronlease.config import TaskSpec, load_config
from cronlease.config._validate import TASK_KEYS
from cronlease.errors import ConfigError, ConfigFileError
from tests.support.reference_docs import options_table, shown_default

#: keys of a [tasks.NAME] table that cannot be decorator options: what to run (the decorated
#: function is its own call), how a command is run and what sends a Celery task
#: (celery_sender's, in Python)
FILE_ONLY = {
    "call",
    "command",
    "shell",
    "cwd",
    "env",
    "celery_task",
    "celery_app",
    "celery_options",
}
#: decorator keywords a table cannot have: its name is the table's ([tasks.NAME])
DECORATOR_ONLY = {"name"}


def decorator_keywords() -> dict[str, object]:
    """The keyword-only parameters of ``Scheduler.task``'s decorator-factory overload, with
    their defaults (read from the source: the overload exists for type checkers only)."""
    tree = ast.parse(Path(inspect.getfile(cronlease._declare)).read_text())
    found: list[dict[str, object]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "task" and node.args.kwonlyargs:
            names = [arg.arg for arg in node.args.kwonlyargs]
            defaults = [ast.literal_eval(d) if d else REQUIRED for d in node.args.kw_defaults]
            found.append(dict(zip(names, defaults, strict=True)))
    assert len(found) == 1, found
    return found[0]


REQUIRED = object()


def parsed_default(key: str, value: object) -> object:
    return OPTIONS[key].parse(value)


def table_defaults() -> dict[str, object]:
    return {key: option.parse(option.default) for key, option in OPTIONS.items()}


def test_every_file_key_is_a_decorator_option_and_vice_versa() -> None:
    assert set(TASK_KEYS) - FILE_ONLY == decorator_keywords().keys() - DECORATOR_ONLY


def test_the_decorator_add_task_the_file_and_the_readme_have_the_tables_keys_and_defaults(
    tmp_path: Path,
) -> None:
    defaults = table_defaults()
    # the decorator's overload: every key, with the table's default (as parsed: "10s" is 10.0)
    keywords = decorator_keywords()
    assert keywords.pop("name") is None
    assert list(keywords) == list(OPTIONS)
    assert {key: parsed_default(key, value) for key, value in keywords.items()} == defaults
    # add_task: takes every key (and refuses another), declares the table's defaults
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'never-opened.db'}")
    try:
        schedules: dict[str, dict[str, object]] = {
            "every": {"every": "1m"},
            "cron": {"cron": "0 3 * * *"},
            "timezone": {"cron": "0 3 * * *", "timezone": "Europe/Istanbul"},
            "anchor": {"every": "1m", "anchor": datetime(2026, 1, 1, tzinfo=timezone.utc)},
        }
        for key, option in OPTIONS.items():
            given = schedules.get(key, {"every": "1m", key: option.default})
            assert scheduler.add_task(job, name=f"t-{key}", **given)
        plain = scheduler.add_task(job, name="plain", every="1m")
    finally:
        scheduler.store.dispose()
    kept = {key: value for key, value in defaults.items() if key not in SCHEDULE_KEYS}
    assert kept_options(plain) == kept
    # a [tasks.NAME] table: every key, and the same defaults when not given
    assert set(TASK_KEYS) - FILE_ONLY == set(OPTIONS)
    path = tmp_path / "cronlease.toml"
    path.write_text('[tasks.plain]\ncall = "tests.unit.test_task_options:job"\nevery = "1m"\n')
    spec = load_config(path, import_calls=False).tasks["plain"]
    assert kept_options(spec) == kept
    # Task and TaskSpec keep exactly the table's options, with its defaults
    for kind in (Task, TaskSpec):
        fields = {f.name: f for f in dataclasses.fields(kind)}
        assert {key for key in fields if key in OPTIONS} == set(kept)
        for key, value in kept.items():
            f = fields[key]
            default = f.default_factory() if callable(f.default_factory) else f.default
            assert parsed_default(key, default) == value, (kind, key)
    # the README's table: every key, each with the table's default shown
    readme = options_table()
    for key, option in OPTIONS.items():
        row = next(line for line in readme.splitlines() if f"`{key}`" in line.split(" | ")[0])
        assert shown_default(option) in row.split(" | ")[1], key


def test_the_decorator_options_are_the_ones_task_declare_takes() -> None:
    # the overload is for type checkers; Task.declare is what checks: both the same keys
    declared = Task.declare(
        job,
        name="t",
        every="1m",
        anchor=datetime(2026, 1, 1, tzinfo=timezone.utc),
        lease_ttl="2m",
        grace="10s",
        timeout="30s",
        enabled=False,
        catchup="all",
        catchup_limit=3,
        retries=2,
        retry_delay="5s",
        recover=True,
        args=(),
        kwargs={},
    )
    fields = {field.name for field in dataclasses.fields(Task)}
    options = decorator_keywords().keys() - DECORATOR_ONLY - {"every", "cron", "timezone", "anchor"}
    assert options <= fields
    assert declared.enabled is False and declared.grace == 10.0


# --- the same one-line errors -------------------------------------------------------

BAD_VALUES: list[tuple[str, str, object]] = [
    ("retries", "-1", -1),
    ("retries", '"3"', "3"),
    ("catchup", '"most"', "most"),
    ("catchup_limit", "0", 0),
    ("lease_ttl", '"2d"', "2d"),
    ("grace", '"0s"', "0s"),
    ("timeout", '"8d"', "8d"),
    ("retry_delay", "true", True),
    ("enabled", '"yes"', "yes"),
    ("recover", "1", 1),
    ("every", "true", True),
    ("every", '"fivem"', "fivem"),
    ("args", '"x"', "x"),
    ("kwargs", "[1]", [1]),
    ("anchor", "2026-01-01T00:00:00", datetime(2026, 1, 1)),
    ("jitter", '"soon"', "soon"),
    # more than half the 5 s gap: the jittered start and its grace would reach the next slot
    ("jitter", '"3s"', "3s"),
    ("roles", '"reports"', "reports"),
    ("roles", '["no spaces"]', ["no spaces"]),
]


@pytest.mark.parametrize(("key", "toml", "python"), BAD_VALUES, ids=lambda v: str(v))
def test_a_bad_value_is_the_same_error_from_the_decorator_and_the_file(
    key: str, toml: str, python: object, tmp_path: Path
) -> None:
    path = tmp_path / "cronlease.toml"
    schedule = "" if key == "every" else "every = 5\n"
    path.write_text(f'[tasks.a]\ncall = "os.path:join"\n{schedule}{key} = {toml}\n')
    with pytest.raises(ConfigFileError) as from_file:
        load_config(path, import_calls=False)
    assert from_file.value.key == key
    options: dict[str, Any] = {} if key == "every" else {"every": 5}
    with pytest.raises(ConfigError) as from_decorator:
        Task.declare(job, name="a", **options, **{key: python})
    assert str(from_decorator.value) == f"task 'a', key {key!r}: {from_file.value.detail}"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'call = "os.path:join"\nevery = 5\nargs = ["a"]\nkwargs = { dayz = 3 }\n',
            "6: task 'a', key 'kwargs': join() got an unexpected keyword argument 'dayz'",
        ),
        (
            'call = "os.path:basename"\nevery = 5\n',
            "2: task 'a': basename() missing a required argument: 'p'; to receive the run's "
            "context, name the parameter ctx or annotate it ': RunContext'",
        ),
        (
            'command = "true"\nevery = 5\nanchor = 2026-01-01T00:00:00\n',
            "5: task 'a', key 'anchor': must be a date-time with its offset, such as "
            "2026-01-01T00:00:00Z, not one without",
        ),
        (
            'command = "true"\nevery = 5\nname = "b"\n',
            "5: task 'a', key 'name': a task's name is its table's, [tasks.NAME]",
        ),
    ],
)
def test_the_file_checks_a_calls_signature_when_it_imports_it(
    body: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "cronlease.toml"
    path.write_text(f'database = "sqlite:///{tmp_path / "never.db"}"\n[tasks.a]\n{body}')
    with pytest.raises(ConfigFileError) as raised:
        load_config(path)
    assert str(raised.value) == f"{path}:{message}"
    # (``cronlease check`` and ``run``: tests/processes/test_config.py)


def test_an_unknown_decorator_option_is_a_config_error_naming_it(tmp_path: Path) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'never-opened.db'}")
    try:
        with pytest.raises(ConfigError) as raised:

            @scheduler.task(every="5s", evry="5s")  # type: ignore[call-overload]
            def purge() -> None:
                pass

        assert str(raised.value) == "task 'purge', key 'evry': unknown key; did you mean 'every'?"
        with pytest.raises(ConfigError, match=r"key 'nme': unknown key; did you mean 'name'\?"):
            scheduler.add_task(job, every="5s", nme="x")
        with pytest.raises(ConfigError, match=r"task 'x', key 'namespace': give it to Scheduler"):
            scheduler.add_task(job, every="5s", name="x", namespace="other")
        assert scheduler.tasks == {}
    finally:
        scheduler.store.dispose()
    assert not (tmp_path / "never-opened.db").exists()


def test_the_file_gives_grace_anchor_and_enabled_as_the_decorator_does(tmp_path: Path) -> None:
    path = tmp_path / "cronlease.toml"
    path.write_text(
        '[tasks.job]\ncall = "tests.unit.test_task_options:job"\nevery = "1h"\n'
        'anchor = 2026-01-01T00:30:00Z\ngrace = "2m"\nenabled = false\n'
    )
    spec = load_config(path, import_calls=False).tasks["job"]
    decorated = Task.declare(
        job,
        every="1h",
        anchor=datetime(2026, 1, 1, 0, 30, tzinfo=timezone.utc),
        grace=120,
        enabled=False,
    )
    assert spec.schedule == decorated.schedule
    assert (spec.grace, spec.enabled) == (decorated.grace, decorated.enabled)
    assert DeclaredTask.of(decorated).enabled is False  # the status shows it disabled


# --- the context: by annotation or by the name ctx, never by position -------------------


def job() -> None:
    pass


def purge(days: int) -> None:
    pass


def annotated(context: RunContext, days: int = 1) -> None:  # a string annotation here
    pass


def named(ctx, days):  # type: ignore[no-untyped-def]
    pass


def keyword(days: int, *, ctx: RunContext) -> None:
    pass


async def async_keyword(days: int, ctx: RunContext) -> None:
    pass


def by_class(run):  # type: ignore[no-untyped-def]
    pass


by_class.__annotations__ = {"run": RunContext}  # as without `from __future__ import annotations`


def anything(whatever):  # type: ignore[no-untyped-def]
    pass


def optional(days: int = 1, context: RunContext | None = None) -> None:
    pass


def aliased(context: cl.RunContext) -> None:  # a module alias, as `import cronlease as cl`
    pass


def union_class(run):  # type: ignore[no-untyped-def]
    pass


union_class.__annotations__ = {"run": typing.Optional[RunContext]}  # noqa: UP045 (the point)


CONTEXT = object()


@pytest.mark.parametrize(
    ("func", "options", "called_with"),
    [
        (purge, {"args": [30]}, ((30,), {})),
        (purge, {"kwargs": {"days": 30}}, ((), {"days": 30})),
        (annotated, {"args": [30]}, ((CONTEXT, 30), {})),
        (named, {"args": [30]}, ((CONTEXT, 30), {})),
        (keyword, {"args": [30]}, ((30,), {"ctx": CONTEXT})),
        (async_keyword, {"args": [30]}, ((30,), {"ctx": CONTEXT})),
        (by_class, {}, ((CONTEXT,), {})),
        (optional, {"args": [30]}, ((30,), {"context": CONTEXT})),
        (aliased, {}, ((CONTEXT,), {})),
        (union_class, {}, ((CONTEXT,), {})),
        (job, {}, ((), {})),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_the_context_goes_where_a_parameter_asks_for_it(
    func: Any, options: dict[str, Any], called_with: tuple[Any, ...]
) -> None:
    task = Task.declare(func, every="1m", **options)
    context: Any = CONTEXT
    assert task.call_arguments(context) == called_with
    assert task.wants_context is (CONTEXT in (*called_with[0], *called_with[1].values()))


def test_a_required_parameter_that_does_not_ask_for_the_context_is_an_error() -> None:
    with pytest.raises(ConfigError) as raised:
        Task.declare(anything, every="1m")
    assert str(raised.value) == (
        "task 'anything': anything() missing a required argument: 'whatever'; to receive the "
        "run's context, name the parameter ctx or annotate it ': RunContext'"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"kwargs": {"dayz": 3}},
            "key 'kwargs': purge() got an unexpected keyword argument 'dayz'; did you mean 'days'?",
        ),
        ({"args": [1, 2]}, "key 'args': purge() too many positional arguments"),
        ({}, "purge() missing a required argument: 'days'"),
    ],
)
def test_args_and_kwargs_must_fit_the_signature(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Task.declare(purge, every="1m", **options)
    assert message in str(raised.value)
    assert str(raised.value).startswith("task 'purge'")


def test_kwargs_cannot_give_the_context() -> None:
    with pytest.raises(ConfigError, match=r"key 'kwargs': keyword\(\) receives the run's context"):
        Task.declare(keyword, every="1m", args=[1], kwargs={"ctx": 2})


class AsyncCallable:
    async def __call__(self) -> None:
        pass


def test_a_class_with_an_async_call_is_not_an_async_task_but_its_instance_is() -> None:
    # calling the class only makes an instance: awaiting that would fail every run
    assert not Task.declare(AsyncCallable, every="1m").is_async
    assert Task.declare(AsyncCallable(), every="1m", name="instance").is_async
