"""Where a task or key is in the config text, so a message can name its line.

Best effort, on the raw lines: TOML parsers do not report positions. Every
task's line is wanted (``TaskSpec.line``), so the task tables' headers are
indexed in one pass over the file: a scan per task made loading 10,000 tasks
take 50 s.
"""

from __future__ import annotations

import re

__all__ = ["SourceLines"]

# [tasks.NAME] / [tasks."NAME"] / [tasks.'NAME'], as written (quotes are not unescaped)
_HEADER = re.compile(
    r"""^\s*\[\s*tasks\s*\.\s*(?:"(?P<basic>[^"]*)"|'(?P<literal>[^']*)'|(?P<bare>[^\s"'\]]+))"""
    r"""\s*\]\s*(#.*)?$"""
)


class SourceLines:
    """The lines of a config file, searched for ``[tasks.NAME]`` tables and their keys."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self._headers: dict[str, int] | None = None
        #: lines read to find task tables: one pass, however many tasks (a test counts it)
        self.lines_scanned = 0

    def table_start(self, task: str) -> int | None:
        if self._headers is None:
            self._headers = {}
            for number, line in enumerate(self.lines, 1):
                self.lines_scanned += 1
                if "tasks" not in line:
                    continue
                found = _HEADER.match(line)
                if found is not None:
                    name = found.group("basic", "literal", "bare")
                    key = next(part for part in name if part is not None)
                    self._headers.setdefault(key, number)
        return self._headers.get(task)

    def line_of(self, task: str | None, key: str | None) -> int | None:
        """Best effort: the line of ``key`` in ``[tasks.task]`` (or the top level)."""
        if task is None:
            start, end = 0, self._first_table()
        else:
            found = self.table_start(task)
            if found is None:
                return self.dotted_line(task, key)
            start = found
            end = self._next_table(found)
            if key is None:
                return found
        if key is None:
            return None
        key_re = re.compile(rf"^\s*({re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
        for number in range(start + 1, end + 1):
            if key_re.match(self.lines[number - 1]):
                return number
        return start if task is not None else None

    def table_key_line(self, table: str, key: str) -> int | None:
        """Best effort: the line of ``key`` in ``[table]``, or of ``table.key = ...`` or
        ``table = { ... key ... }`` at the top level."""
        header = re.compile(rf"^\s*\[\s*{re.escape(table)}\s*\]\s*(#.*)?$")
        key_re = re.compile(rf"^\s*({re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
        for number, line in enumerate(self.lines, 1):
            if header.match(line):
                for inner in range(number + 1, self._next_table(number) + 1):
                    if key_re.match(self.lines[inner - 1]):
                        return inner
                return number
        inline = re.compile(rf"^\s*{re.escape(table)}\s*(\.|=)")
        for number, line in enumerate(self.lines, 1):
            if inline.match(line) and key in line:
                return number
        return None

    def dotted_line(self, task: str, key: str | None) -> int | None:
        # tasks.NAME.key = ... or tasks.NAME = { ... } at the top level
        name = re.escape(task)
        pattern = re.compile(rf"^\s*tasks\s*\.\s*(\"{name}\"|'{name}'|{name})\s*(\.|=)")
        for number, line in enumerate(self.lines, 1):
            if pattern.match(line) and (key is None or key in line):
                return number
        for number, line in enumerate(self.lines, 1):
            if pattern.match(line):
                return number
        # NAME = ... or NAME.key = ... inside a [tasks] table
        in_tasks = re.compile(rf"^\s*(\"{name}\"|'{name}'|{name})\s*(\.|=)")
        for number, line in enumerate(self.lines, 1):
            if re.match(r"^\s*\[\s*tasks\s*\]", line):
                for inner in range(number + 1, self._next_table(number) + 1):
                    if in_tasks.match(self.lines[inner - 1]):
                        return inner
        return None

    def _first_table(self) -> int:
        for number, line in enumerate(self.lines, 1):
            if line.lstrip().startswith("["):
                return number - 1
        return len(self.lines)

    def _next_table(self, start: int) -> int:
        for number in range(start + 1, len(self.lines) + 1):
            if self.lines[number - 1].lstrip().startswith("["):
                return number - 1
        return len(self.lines)
