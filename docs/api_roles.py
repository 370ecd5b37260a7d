"""A griffe extension for the API reference: the docstrings' Sphinx roles as code.

cronlease's docstrings cross-reference in Sphinx's form (:class:`~cronlease.store.LeaseStore`,
:meth:`Scheduler.health() <cronlease.Scheduler.health>`), which Markdown would show
literally. Each becomes inline code of the name a reader knows (`LeaseStore`,
`Scheduler.health()`); a link would fail the strict build wherever the target is private.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):`(?P<text>[^`]+)`")


def _shown(text: str) -> str:
    explicit = re.fullmatch(r"(?P<title>.+?)\s*<[^>]+>", text)
    if explicit:
        return explicit["title"]
    if text.startswith("~"):
        return text[1:].rsplit(".", 1)[-1]
    return text


def plain(docstring: str) -> str:
    return ROLE.sub(lambda match: f"`{_shown(match['text'])}`", docstring)


class SphinxRolesAsCode(Extension):
    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
