"""Task names have one stored form and nothing invisible (issue 11, item 13).

Names that look the same must be the same string: a composed and a
decomposed "é" were two tasks with two leases, each running every tick; a
zero-width space or a right-to-left override made a name that looks like
another one. Names are stored in NFC; invisible characters are refused with
the name and the character.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from cronlease import Scheduler
from cronlease._lease.model import check_task_name
from cronlease._task import Task
from cronlease.config import load_config
from cronlease.errors import ConfigError, ConfigFileError

COMPOSED = "caf\u00e9"
DECOMPOSED = "cafe\u0301"

INVISIBLE = {
    "zero-width-space": "\u200b",
    "zero-width-joiner": "\u200d",
    "right-to-left-override": "\u202e",
    "left-to-right-isolate": "\u2066",
    "pop-directional-isolate": "\u2069",
    "right-to-left-mark": "\u200f",
    "byte-order-mark": "\ufeff",
    "soft-hyphen": "\u00ad",
    "line-separator": "\u2028",
    "paragraph-separator": "\u2029",
    "no-break-space": "\u00a0",
    "ideographic-space": "\u3000",
    "variation-selector": "\ufe0f",
    "hangul-filler": "\u3164",
    "tag-character": "\U000e0041",
    "private-use": "\ue000",
    "escape": "\x1b",
    "delete": "\x7f",
    "c1-control": "\x9b",
}


def test_the_two_forms_are_different_strings() -> None:
    assert COMPOSED != DECOMPOSED
    assert unicodedata.normalize("NFC", DECOMPOSED) == COMPOSED


def test_a_decomposed_name_is_stored_composed() -> None:
    task = Task.declare(lambda: None, every=60, name=DECOMPOSED)
    assert task.name == COMPOSED
    assert task.full_name == COMPOSED
    namespaced = Task.declare(lambda: None, every=60, name="job", namespace=DECOMPOSED)
    assert namespaced.namespace == COMPOSED
    assert namespaced.full_name == f"{COMPOSED}:job"
    assert check_task_name(DECOMPOSED) == COMPOSED


def test_a_name_declared_in_both_forms_is_declared_twice(tmp_path: Path) -> None:
    scheduler = Scheduler(f"sqlite:///{tmp_path / 'leases.db'}", namespace=DECOMPOSED)
    try:
        scheduler.add_task(lambda: None, every=60, name=COMPOSED)
        with pytest.raises(ConfigError, match="declared twice"):
            scheduler.add_task(lambda: None, every=60, name=DECOMPOSED)
        assert list(scheduler.tasks) == [COMPOSED]
        assert scheduler.namespace == COMPOSED
        assert scheduler.get_task(DECOMPOSED).full_name == f"{COMPOSED}:{COMPOSED}"
    finally:
        scheduler.store.dispose()


@pytest.mark.parametrize("char", list(INVISIBLE.values()), ids=list(INVISIBLE))
def test_a_name_with_an_invisible_character_is_refused(char: str) -> None:
    name = f"back{char}up"
    with pytest.raises(ConfigError) as raised:
        Task.declare(lambda: None, every=60, name=name)
    message = str(raised.value)
    assert char not in message, "the message must show the character escaped"
    assert f"back\\u{ord(char):04x}up" in message or f"back{repr(char)[1:-1]}up" in message
    assert f"U+{ord(char):04X}" in message


def test_visible_unicode_names_are_accepted() -> None:
    for name in ("nightly-rapor", "günlük-yedek", "日次バックアップ", "αβγ", "a b", "emoji-\u2764"):
        assert Task.declare(lambda: None, every=60, name=name).name == name


def test_a_config_with_both_forms_is_declared_twice_with_file_task_and_line(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cronlease.toml"
    config.write_text(
        f'[tasks."{COMPOSED}"]\ncommand = "true"\nevery = 5\n\n'
        f'[tasks."{DECOMPOSED}"]\ncommand = "true"\nevery = 5\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigFileError) as raised:
        load_config(config, import_calls=False)
    error = raised.value
    assert "declared twice" in str(error)
    assert (error.path, error.task, error.line) == (str(config), DECOMPOSED, 5)


def test_a_config_names_its_tasks_in_the_stored_form(tmp_path: Path) -> None:
    config = tmp_path / "cronlease.toml"
    config.write_text(
        f'namespace = "{DECOMPOSED}"\n[tasks."{DECOMPOSED}"]\ncommand = "true"\nevery = 5\n',
        encoding="utf-8",
    )
    loaded = load_config(config, import_calls=False)
    assert list(loaded.tasks) == [COMPOSED]
    assert loaded.namespace == COMPOSED
    assert loaded.tasks[COMPOSED].line == 2
    assert loaded.full_name(DECOMPOSED) == f"{COMPOSED}:{COMPOSED}"


def test_a_config_task_with_a_bidi_override_is_refused_naming_file_and_task(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cronlease.toml"
    name = "report\u202eexe.txt"
    config.write_text(
        '[tasks."report\\u202eexe.txt"]\ncommand = "true"\nevery = 5\n', encoding="utf-8"
    )
    with pytest.raises(ConfigFileError) as raised:
        load_config(config, import_calls=False)
    assert raised.value.task == name
    assert "U+202E" in str(raised.value)
    assert str(raised.value).startswith(f"{config}")
