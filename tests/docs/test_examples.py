"""Every code example of README.md and docs/**/*.md runs (tests/docs/examples.py says how).

One test per page: its Python blocks executed in order in a fresh directory, its TOML
loaded by cronlease's config loader, its ``cronlease`` command lines parsed by the
command's parser (and run, where the page marks them). A block that cannot run here is
marked ``<!-- example: skip (reason) -->`` and counted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.examples import ROOT, blocks, check_page, pages

LOGGERS = ("", "cronlease", "apscheduler")


@pytest.fixture
def page_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh working directory, no database from the environment, and logging put back
    as it was (a page may configure logging, and `cronlease ...` run in process does)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CRONLEASE_DATABASE_URL", raising=False)
    monkeypatch.delenv("CRONLEASE_DISABLED", raising=False)
    saved = {
        name: (logging.getLogger(name).level, list(logging.getLogger(name).handlers))
        for name in LOGGERS
    }
    try:
        yield tmp_path
    finally:
        for name, (level, handlers) in saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.handlers[:] = handlers


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_the_page_examples_run(page: Path, page_dir: Path) -> None:
    check_page(page, page_dir)


def test_the_examples_are_collected() -> None:
    every = [block for page in pages() for block in blocks(page) if block.kind != "setup"]
    kinds = {block.kind for block in every}
    assert {"python", "toml", "console"} <= kinds, kinds
    skipped = [block for block in every if block.marker == "skip"]
    assert all(block.reason for block in skipped)
    # most examples run: a skip is the exception, with its reason
    assert len(skipped) * 5 < len(every), [block.where for block in skipped]
    # the README's Development section says how many there are
    said = re.search(r"the documentation's (\d+) code examples", (ROOT / "README.md").read_text())
    assert said and int(said[1]) == len(every), f"README.md: {len(every)} code examples now"


BROKEN_PAGES = {
    "python": (
        "```python\nfrom cronlease import Scheduler\n\n"
        "@Scheduler().task(evry='1m')\ndef job() -> None: ...\n```\n"
    ),
    "toml": '```toml\n[tasks.x]\ncommand = "true"\nevry = "1m"\n```\n',
    "verb": "```console\n$ cronlease stauts\n```\n",
    "flag": "```console\n$ cronlease status --jsn\n```\n",
    "run": "<!-- example: run -->\n```console\n$ cronlease history nothing\n```\n",
    "left running": "```python\nfrom cronlease import Scheduler\ns = Scheduler()\ns.start()\n```\n",
}


@pytest.mark.parametrize("text", BROKEN_PAGES.values(), ids=BROKEN_PAGES.keys())
def test_a_broken_example_fails(text: str, page_dir: Path) -> None:
    page = page_dir / "page.md"
    page.write_text("# A page\n\n" + text, encoding="utf-8")
    with pytest.raises(AssertionError):
        check_page(page, page_dir)


def test_a_skip_needs_a_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- example: skip -->\n```python\nx\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs a"):
        blocks(page)


def main() -> None:
    """``python -m tests.docs.test_examples``: what the collector finds, per kind."""
    every = [block for page in pages() for block in blocks(page) if block.kind != "setup"]
    skipped = sum(block.marker == "skip" for block in every)
    print(
        f"{len(every)} examples in {len(pages())} pages: {len(every) - skipped} checked, "
        f"{skipped} skipped with a reason"
    )


if __name__ == "__main__":
    main()
