"""Links that ``mkdocs build --strict`` cannot check.

mkdocs validates the Markdown links between pages; it does not look at what ends up in
the HTML: raw HTML in a page, the theme's own links, mkdocstrings' cross-references, the
anchors the API reference invents. So the site is built once, into a temporary directory,
and every internal ``href``/``src`` of every HTML file must name a file of the built
site, and every ``#fragment`` an ``id`` of the page it points at.

README.md, CONTRIBUTING.md, SECURITY.md and CHANGELOG.md are read on GitHub, not in the
site: their relative links must name files of the repository, and their ``#anchors``
headings of the file, slugged as GitHub does.

mkdocs (the ``docs`` extra) missing skips the site's test, or fails it when
``CRONLEASE_TEST_REQUIRE`` names ``docs``, as CI's does.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.conftest import skip_or_fail
from tests.docs.examples import ROOT

GITHUB_FILES = ("README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md")
# the attributes that make the browser fetch or go somewhere, per tag
LINK_ATTRIBUTES = {
    "a": "href",
    "area": "href",
    "link": "href",
    "img": "src",
    "script": "src",
    "iframe": "src",
    "source": "src",
    "audio": "src",
    "video": "src",
    "embed": "src",
}


# ---------------------------------------------------------------- the built site


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            # <a name=...> is the pre-HTML5 anchor: browsers still scroll to it
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)
            elif LINK_ATTRIBUTES.get(tag) == name:
                self.links.append(value)


@cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def broken_site_links(site: Path) -> list[str]:
    """``page → link (why)`` for each internal link of the site at ``site`` that does not
    resolve; external ones (any scheme, or ``//host``) are not followed."""
    site = site.resolve()
    broken = []
    for page_path in sorted(site.rglob("*.html")):
        where = page_path.relative_to(site).as_posix()
        for link in _parse(page_path).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                continue
            path = unquote(parts.path)
            if not path:
                target = page_path
            elif path.startswith("/"):
                target = site / path.lstrip("/")
            else:
                target = page_path.parent / path
            target = Path(os.path.normpath(target))
            if not target.is_relative_to(site):
                broken.append(f"{where} → {link} (outside the site)")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{where} → {link} (no such file)")
                continue
            fragment = unquote(parts.fragment)
            # a bare "#" is the top of the page, wherever it is
            if fragment and target.suffix == ".html" and fragment not in _parse(target).ids:
                broken.append(f"{where} → {link} (no id {fragment!r} there)")
    return broken


def _mkdocs_problem() -> str | None:
    missing = [
        name
        for name in ("mkdocs", "material", "mkdocstrings")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        return f"{', '.join(missing)} not installed (pip install -e '.[docs]')"
    return None


def _build(site: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"


def _inject(page: Path, links: Iterable[str]) -> None:
    anchors = "".join(f'<a href="{link}">injected</a>' for link in links)
    text = page.read_text(encoding="utf-8")
    assert "</body>" in text
    page.write_text(text.replace("</body>", f"{anchors}</body>"), encoding="utf-8")


@pytest.mark.slow  # a site build: seconds
def test_every_internal_link_of_the_built_site_resolves(tmp_path: Path) -> None:
    """One build serves both halves: a copy of the site with broken links injected into
    one small page must be reported with exactly those links more (the checker sees
    them), and the site itself must have none."""
    skip_or_fail("docs", _mkdocs_problem())
    site = tmp_path / "site"
    _build(site)
    assert (site / "index.html").is_file()
    found = broken_site_links(site)

    copy = tmp_path / "copy"
    shutil.copytree(site, copy)
    page = copy / "how-to" / "pgbouncer" / "index.html"
    bad = [
        "../no-such-page/",  # a page that does not exist
        "../retries/#no-such-heading",  # a page that does, an anchor that does not
        "#nor-here",  # an anchor of the page itself
        "/assets/missing.png",  # site-absolute
        "../../../../outside.html",  # out of the site
    ]
    _inject(page, bad)
    extra = set(broken_site_links(copy)) - set(found)
    assert {line.split(" → ")[1].split(" (")[0] for line in extra} == set(bad), extra
    assert {line.split(" → ")[0] for line in extra} == {"how-to/pgbouncer/index.html"}

    assert not found, "broken links in the built site (page → link):\n" + "\n".join(found)


# ---------------------------------------------------------------- GitHub's Markdown


_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
# [text](target "title") and ![alt](target); the text may hold one level of [brackets]
_INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(?:<([^>]*)>|([^\s)]+))(?:\s+\"[^\"]*\")?\s*\)"
)
_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(?:<([^>]*)>|(\S+))", re.M)
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lowercased, punctuation but ``-`` and
    ``_`` dropped, each space a ``-`` (a link's text kept, its target dropped)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def github_anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings; a repeated one gets ``-1``, ``-2``..."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose(path.read_text(encoding="utf-8")):
        heading = _HEADING.match(line)
        if heading is None:
            continue
        slug = github_slug(heading[1])
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def markdown_links(text: str) -> list[str]:
    """The link targets of Markdown prose: inline links and images, and reference
    definitions; code blocks and code spans are not prose."""
    links = []
    for line in _prose(text):
        line = _CODE_SPAN.sub("code", line)
        links += [a or b for a, b in _INLINE.findall(line)]
        links += [a or b for a, b in _DEFINITION.findall(line)]
    return links


def broken_file_links(path: Path, root: Path) -> list[str]:
    """``file → link (why)`` for each relative link of the Markdown file ``path`` that
    names no file or directory under ``root``, or no heading of the Markdown file it
    names; links with a scheme are not followed."""
    where = path.relative_to(root).as_posix()
    broken = []
    for link in markdown_links(path.read_text(encoding="utf-8")):
        parts = urlsplit(link)
        if parts.scheme or parts.netloc:
            continue
        target = Path(os.path.normpath(path.parent / unquote(parts.path))) if parts.path else path
        if not target.is_relative_to(root):
            broken.append(f"{where} → {link} (outside the repository)")
        elif not target.exists():
            broken.append(f"{where} → {link} (no such file)")
        elif (
            parts.fragment
            and target.suffix == ".md"
            and target.is_file()
            and unquote(parts.fragment) not in github_anchors(target)
        ):
            broken.append(f"{where} → {link} (no heading {parts.fragment!r} there)")
    return broken


@pytest.mark.parametrize("name", GITHUB_FILES)
def test_the_relative_links_of_the_repository_files_resolve(name: str) -> None:
    path = ROOT / name
    assert markdown_links(path.read_text(encoding="utf-8")) or name != "README.md"
    broken = broken_file_links(path, ROOT)
    assert not broken, "broken links (file → link):\n" + "\n".join(broken)


def test_the_file_link_check_reports_what_is_broken(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(
        "# A page\n\n## Options: `every=` and more!\n\n## Again\n\n## Again\n", encoding="utf-8"
    )
    (tmp_path / "LICENSE").write_text("MIT\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n"
        "[fine](docs/page.md), [anchor](docs/page.md#options-every-and-more),"
        " [twice](docs/page.md#again-1), [licence](LICENSE), [dir](docs/),"
        " [self](#title), [site](https://example.com/nowhere), [mail](mailto:a@b.c).\n"
        "[gone](docs/gone.md) and [`code` text](docs/page.md#no-such-heading),"
        " ![image](docs/missing.png), [up](../outside.md), [self](#untitled).\n"
        "Not links: `[a](nowhere.md)`.\n\n"
        "```markdown\n[b](nowhere-either.md)\n```\n\n"
        "[ref]: docs/ref-gone.md\n",
        encoding="utf-8",
    )
    assert broken_file_links(readme, tmp_path) == [
        "README.md → docs/gone.md (no such file)",
        "README.md → docs/page.md#no-such-heading (no heading 'no-such-heading' there)",
        "README.md → docs/missing.png (no such file)",
        "README.md → ../outside.md (outside the repository)",
        "README.md → #untitled (no heading 'untitled' there)",
        "README.md → docs/ref-gone.md (no such file)",
    ]
