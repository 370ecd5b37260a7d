"""How a task's callable is called: which parameter asks for the RunContext, and whether
the declared ``args``/``kwargs`` fit its signature (checked when declared, not at the first run).

A parameter asks for the context by its annotation (``ctx: RunContext``, or the
string ``"RunContext"`` that ``from __future__ import annotations`` leaves) or by
its name, ``ctx`` — never by its position alone: ``def purge(days)`` with
``args = [30]`` is called ``purge(30)``. A first positional parameter that
asks is given the context positionally, any other by keyword.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import re
import typing
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from cronlease._options import OptionError

__all__ = ["CONTEXT_NAME", "call_shape", "context_parameter"]

#: the parameter name that asks for the context without an annotation
CONTEXT_NAME = "ctx"
#: a string annotation naming the context: ``RunContext``, ``cl.RunContext``,
#: ``RunContext | None``, ``Optional[RunContext]`` (a word, not a parse: the name
#: is cronlease's, and a false match only passes the context to a parameter so named)
_CONTEXT_ANNOTATION = re.compile(r"(?<![\w.])(?:\w+\.)*RunContext\b")
_NAMED_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)
_HOW_TO_ASK = "to receive the run's context, name the parameter ctx or annotate it ': RunContext'"


def call_shape(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    context_type: type,
) -> str | None:
    """Where the context goes: None (not passed), "" (first positional argument) or the
    keyword. OptionError (key ``args``, ``kwargs`` or None) when the call cannot bind.

    Without arguments the answer is the function's alone, kept per function: 100,000
    tasks of one function bound its signature 100,000 times (a fifth of declaring them)."""
    if not args and not kwargs:
        with contextlib.suppress(TypeError):  # not weakly referable, or not hashable
            kept = _NO_ARGUMENTS.get(func)
            if kept is not None and kept[0] is context_type:
                return kept[1]
            known = _call_shape(func, args, kwargs, context_type)
            _NO_ARGUMENTS[func] = (context_type, known)
            return known
    return _call_shape(func, args, kwargs, context_type)


#: call_shape of functions declared without arguments, with the context type asked for
#: (a call that raises is never kept)
_NO_ARGUMENTS: weakref.WeakKeyDictionary[Any, tuple[type, str | None]] = weakref.WeakKeyDictionary()


def _call_shape(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    context_type: type,
) -> str | None:
    try:
        signature = _signature(func)
    except (TypeError, ValueError):  # a builtin without a signature: called as declared
        return None
    label = getattr(func, "__name__", None) or type(func).__name__
    parameters = list(signature.parameters.values())
    asking = [p for p in parameters if p.kind in _NAMED_KINDS and _asks(p, context_type)]
    context: str | None = None
    if asking:
        parameter = asking[0]
        if parameter is parameters[0] and parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            context = ""
        elif parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise OptionError(
                None,
                f"{label}() asks for the run's context in positional-only parameter "
                f"{parameter.name!r}, which is not its first: make it the first",
            )
        else:
            context = parameter.name
    marker = object()
    positional = (marker, *args) if context == "" else tuple(args)
    keywords = dict(kwargs)
    if context:
        if context in keywords:
            raise OptionError(
                "kwargs",
                f"{label}() receives the run's context as {context!r}: kwargs cannot give it",
            )
        keywords[context] = marker
    _check_keywords(label, parameters, kwargs)
    try:
        signature.bind(*positional, **keywords)
    except TypeError as exc:
        message = str(exc)
        missing = message.startswith("missing")
        hint = f"; {_HOW_TO_ASK}" if missing and context is None else ""
        raise OptionError(_blamed(message, args, kwargs), f"{label}() {message}{hint}") from None
    return context


#: signatures of the callables declared lately: the schedule rows of one job are declared
#: by the thousand (a replica loading 10,000 rows), each checked against one signature
_SIGNATURES: weakref.WeakKeyDictionary[Any, inspect.Signature] = weakref.WeakKeyDictionary()


def _signature(func: Callable[..., Any]) -> inspect.Signature:
    try:
        known = _SIGNATURES.get(func)
    except TypeError:  # not weakly referable (a builtin) or not hashable
        return inspect.signature(func)
    if known is None:
        known = inspect.signature(func)
        with contextlib.suppress(TypeError):
            _SIGNATURES[func] = known
    return known


def context_parameter(func: Callable[..., Any], context_type: type) -> str | None:
    """The name of ``func``'s parameter that asks for the context; None if none asks (or
    it has no signature). What a job's description says of it (cronlease/_schedules)."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    for parameter in parameters:
        if parameter.kind in _NAMED_KINDS and _asks(parameter, context_type):
            return parameter.name
    return None


def _check_keywords(
    label: str, parameters: list[inspect.Parameter], kwargs: Mapping[str, Any]
) -> None:
    """A misspelt keyword first: bind() would first report the parameter it leaves missing."""
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    names = [p.name for p in parameters if p.kind in _NAMED_KINDS[1:]]
    for key in kwargs:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise OptionError(
                "kwargs", f"{label}() got an unexpected keyword argument {key!r}{hint}"
            )


def _asks(parameter: inspect.Parameter, context_type: type) -> bool:
    annotation = parameter.annotation
    if isinstance(annotation, str):
        if _CONTEXT_ANNOTATION.search(annotation):
            return True
    elif annotation is context_type or context_type in typing.get_args(annotation):
        return True  # RunContext, or RunContext | None, Optional[RunContext]
    return parameter.name == CONTEXT_NAME


def _blamed(message: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
    """The key a binding error is about, for the file's line and the message's subject."""
    if "keyword" in message or "multiple values" in message:
        return "kwargs"
    if "positional" in message:
        return "args"
    if args or not kwargs:
        return "args" if args else None
    return "kwargs"
