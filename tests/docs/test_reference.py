"""The reference pages name everything the code has: every command and option of the
``cronlease`` parser is on docs/reference/cli.md, every export of ``cronlease`` on the
Python API, Events or Errors page."""

from __future__ import annotations

import argparse
import re

import pytest

import cronlease
import cronlease.errors
from cronlease.cli.parser import build_parser
from tests.docs.examples import ROOT

REFERENCE = ROOT / "docs" / "reference"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each command of ``parser`` by its words, a command's subcommands too
    (``schedule add``)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {words}": s for words, s in _subcommands(sub).items()})
    return found


def test_every_command_and_option_is_on_the_cli_page() -> None:
    page = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    missing = []
    for name, sub in _subcommands(build_parser()).items():
        if f"### `cronlease {name}`" not in page:
            missing.append(name)
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue  # a hidden, deprecated spelling
            missing += [f"{name} {o}" for o in action.option_strings if f"`{o}" not in page]
    assert not missing, f"docs/reference/cli.md lacks: {missing}"


def test_every_export_is_in_the_api_reference() -> None:
    pages = "".join(
        (REFERENCE / name).read_text(encoding="utf-8")
        for name in ("api.md", "events.md", "errors.md")
    )
    rendered_whole = set(cronlease.errors.__all__) if "::: cronlease.errors" in pages else set()
    missing = [
        name
        for name in cronlease.__all__
        if name != "__version__"
        and name not in rendered_whole
        and f"::: cronlease.{name}\n" not in pages
    ]
    assert not missing, f"not in the API reference: {missing}"


def test_each_usage_block_is_the_parsers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's ``usage:`` blocks are argparse's own text (at 80 columns): a flag
    added to the parser and not to the page fails here, not in a reader's shell."""
    monkeypatch.setenv("COLUMNS", "80")
    page = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    commands = _subcommands(build_parser())
    # the command's words: lowercase, where a positional's metavar is uppercase
    usage = r"```text\n(usage: cronlease ([a-z][\w-]*(?: [a-z][\w-]*)*) .*?)\n```"
    blocks = dict(re.findall(usage, page, re.S))
    shown = {verb: usage for usage, verb in blocks.items()}
    assert set(shown) == set(commands), "a command without its usage block"
    stale = [
        verb for verb, sub in commands.items() if shown[verb] != sub.format_usage().rstrip("\n")
    ]
    assert not stale, f"docs/reference/cli.md: usage of {stale} differs from the parser's"
