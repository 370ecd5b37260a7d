"""The code examples of README.md and docs/**/*.md, found and checked as a reader would run them.

A page's fenced blocks are checked in order:

- ``python``: executed, the page's blocks sharing one namespace, in a fresh working
  directory (so the default ``sqlite:///cronlease.db`` is a file of the test's own);
- ``toml``: written as ``cronlease.toml`` in that directory and loaded by cronlease's own
  loader (:func:`cronlease.config.load_config`), so it must validate;
- ``console``, ``sh``, ``bash``, ``shell``: every ``cronlease ...`` command in them (also
  ``python -m cronlease`` and ``manage.py cronlease``) is parsed by the command's own
  argument parser, so its verb and flags must exist.

HTML comments right before a block steer it (they do not show on the page):

- ``<!-- example: skip (reason) -->``: not run; the reason is required, and counted;
- ``<!-- example: run -->``: the console block's ``cronlease`` commands are also run, in
  process, in the page's directory, and must exit 0;
- ``<!-- example: setup ... -->``: Python run in the page's namespace at that point,
  for what a page assumes without showing (an application object, a table).

docs/design.md is the engineers' document, not a user's page: it is not collected.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOT_COLLECTED = {ROOT / "docs" / "design.md"}
SHELLS = {"console", "sh", "bash", "shell"}
KINDS = {"python", "toml", *SHELLS}
MARKERS = {"skip", "run", "setup"}

# a fence, possibly indented (inside a list item): its indent, language and body
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S
)
# a marker starts its line: one quoted in the text (`<!-- example: ... -->`) is not one
MARKER = re.compile(
    r"^[ ]*<!-- example: (?P<name>[\w-]+)(?: \((?P<reason>[^)]*)\))?(?P<code>.*?)-->", re.M | re.S
)


@dataclass(frozen=True)
class Block:
    """A fenced block (or a setup comment) of a page, with the marker that precedes it."""

    page: Path
    line: int
    kind: str  # python, toml, a shell, or "setup"
    code: str
    marker: str | None = None
    reason: str | None = None

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"


def shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def pages() -> list[Path]:
    docs = sorted(path for path in (ROOT / "docs").rglob("*.md") if path not in NOT_COLLECTED)
    return [ROOT / "README.md", *docs]


def blocks(page: Path) -> list[Block]:
    """The page's checkable blocks and setup comments, in order."""
    text = page.read_text(encoding="utf-8")
    found: list[tuple[int, Block]] = []
    pending: tuple[str, str | None] | None = None
    tokens = sorted(
        [(m.start(), "marker", m) for m in MARKER.finditer(text)]
        + [(m.start(), "fence", m) for m in FENCE.finditer(text)],
        key=lambda token: token[0],
    )
    for start, what, match in tokens:
        line = text.count("\n", 0, start) + 1
        if what == "marker":
            name = match["name"]
            if name not in MARKERS:
                raise ValueError(f"{page}:{line}: unknown example marker {name!r}")
            if name == "setup":
                found.append((start, Block(page, line, "setup", dedent(match["code"]))))
            else:
                if name == "skip" and not (match["reason"] or "").strip():
                    raise ValueError(f"{page}:{line}: 'example: skip' needs a (reason)")
                pending = (name, match["reason"])
            continue
        lang = match["lang"]
        marker, reason = pending if pending else (None, None)
        pending = None
        if lang not in KINDS:
            continue
        body = "".join(
            row[len(match["indent"]) :] for row in match["body"].splitlines(keepends=True)
        )
        found.append((start, Block(page, line, lang, body, marker, reason)))
    return [block for _, block in found]


def dedent(code: str) -> str:
    lines = code.strip("\n").splitlines()
    return "\n".join(lines) + "\n"


def commands(block: Block) -> Iterator[list[str]]:
    """The argument lists of the ``cronlease`` commands in a shell block."""
    text = block.code.replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.strip()
        if block.kind == "console":
            if not line.startswith("$ "):
                continue  # output, not a command
            line = line[2:]
        for part in re.split(r"&&|\|\||[|;]", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
                words = words[1:]  # VAR=value before the command
            argv = cronlease_argv(words)
            if argv is not None:
                yield argv


def cronlease_argv(words: list[str]) -> list[str] | None:
    if words[:1] == ["cronlease"]:
        return words[1:]
    for prefix in (["python", "-m", "cronlease"], ["python", "manage.py", "cronlease"]):
        if words[: len(prefix)] == prefix:
            return words[len(prefix) :]
    return None


def check_command(argv: list[str], where: str) -> None:
    """The verb and every flag exist: the command's own parser accepts the line."""
    from cronlease.cli.parser import build_parser

    parser = build_parser()
    parser.exit_on_error = False
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except (SystemExit, argparse.ArgumentError) as exc:
        message = err.getvalue() or str(exc)
        raise AssertionError(f"{where}: `cronlease {shlex.join(argv)}`: {message}") from None
    if not hasattr(args, "handler"):
        raise AssertionError(f"{where}: `cronlease {shlex.join(argv)}` names no command")


def run_command(argv: list[str], where: str) -> None:
    from cronlease.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code == 0, (
        f"{where}: `cronlease {shlex.join(argv)}` exited {code}\n{out.getvalue()}{err.getvalue()}"
    )


def check_page(page: Path, workdir: Path) -> dict[str, int]:
    """Check every block of ``page`` with ``workdir`` as the working directory (the caller's
    to set); returns the counts of what was checked. Raises AssertionError on a failure."""
    from cronlease import Scheduler
    from cronlease.config import load_config

    namespace: dict[str, Any] = {"__name__": "docs_example"}
    counts = {"python": 0, "toml": 0, "command": 0, "skipped": 0}
    try:
        for block in blocks(page):
            if block.kind == "setup":
                exec(compile(block.code, f"{block.where} (setup)", "exec"), namespace)
                continue
            if block.marker == "skip":
                counts["skipped"] += 1
                continue
            if block.kind == "python":
                try:
                    exec(compile(block.code, block.where, "exec"), namespace)
                except Exception as exc:
                    raise AssertionError(f"{block.where}: {type(exc).__name__}: {exc}") from exc
                counts["python"] += 1
            elif block.kind == "toml":
                path = workdir / "cronlease.toml"
                path.write_text(block.code, encoding="utf-8")
                try:
                    load_config(path, import_calls=False)
                except Exception as exc:
                    raise AssertionError(f"{block.where}: {exc}") from exc
                counts["toml"] += 1
            else:
                for argv in commands(block):
                    check_command(argv, block.where)
                    if block.marker == "run":
                        run_command(argv, block.where)
                    counts["command"] += 1
        running = [
            name
            for name, value in namespace.items()
            if isinstance(value, Scheduler) and value.running
        ]
        assert not running, f"{shown(page)}: scheduler(s) left running: {running}"
    finally:
        for value in list(namespace.values()):
            if isinstance(value, Scheduler) and value.running:
                value.shutdown(wait=False)
    return counts
