"""``call = "package.module:function"``: check the form, import the callable."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cronlease.errors import ConfigError

__all__ = ["import_target", "is_async", "resolve_call", "split_call"]


def resolve_call(target: str, base: Path | None = None) -> Callable[..., Any]:
    """Import ``"pkg.module:function"`` (attributes may be dotted) and return the callable.

    ``base`` (the config file's directory) is put on ``sys.path`` first.
    Raises :class:`ConfigError`.
    """
    obj = import_target(target, base)
    if not callable(obj):
        raise ConfigError(f"{target!r} is a {type(obj).__name__}, not a callable")
    return obj  # type: ignore[no-any-return]


def import_target(target: str, base: Path | None = None) -> Any:
    """Import ``"pkg.module:attribute"`` (the attribute may be dotted) and return it,
    ``base`` put on ``sys.path`` first; ConfigError naming what could not be found."""
    module_name, attribute = split_call(target)
    if base is not None:
        folder = str(base.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the application's module may raise anything on import
        raise ConfigError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return obj


_CALL_FORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def split_call(target: str) -> tuple[str, str]:
    if not _CALL_FORM.match(target) or ".." in target or target.endswith("."):
        raise ConfigError(f"{target!r} is not of the form 'package.module:function'")
    module_name, attribute = target.split(":", 1)
    return module_name, attribute


def is_async(func: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004
    )
