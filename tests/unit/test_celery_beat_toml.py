"""The TOML ``import-celery-beat`` writes for an entry's arguments and options: what TOML
can hold reads back as the same value, what it cannot (None, objects) is refused."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from cronlease.config._celery_import import Untranslatable, _key, _seconds, _value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.mark.parametrize(
    "value",
    [
        [1, -2, 3.5, True, False, "", 'quote " and \\ back', "ünïcode\ttab\x7f"],
        {"queue": "reports", "priority": 5, "headers": {"a.b": "c", "with space": [1, {}]}},
        {"expires": datetime(2026, 3, 29, 1, 30, 15, 250000, tzinfo=timezone.utc)},
        {"when": datetime(2026, 10, 25, 2, 30, tzinfo=timezone(timedelta(hours=2)))},
        {"inf": float("inf"), "neg": float("-inf")},
        [[], [[1]], {}],
    ],
)
def test_what_toml_holds_reads_back_the_same(value: Any) -> None:
    assert tomllib.loads(f"x = {_value(value, 'args')}")["x"] == value


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ([1, None], "args: null (None) has no TOML form"),
        ({"k": object()}, "args: a object"),
        ({1: "a"}, "args: key 1 is not a string"),
    ],
)
def test_what_toml_cannot_hold_is_refused(value: Any, words: str) -> None:
    with pytest.raises(Untranslatable, match=words.replace("(", r"\(").replace(")", r"\)")):
        _value(value, "args")


def test_names_and_periods() -> None:
    for name in ("plain-name_1", "a.b", "with space", "nightly report ☾", 'q"uote'):
        assert tomllib.loads(f"[tasks.{_key(name)}]\nx = 1")["tasks"] == {name: {"x": 1}}
    assert (_seconds(10.0), _seconds(timedelta(minutes=90)), _seconds(2.5)) == ("10", "5400", "2.5")
