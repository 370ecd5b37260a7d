"""Where a task or key is in the config text, so a message can name its line.

Best effort, on the raw lines: TOML parsers do not report positions.
"""

from __future__ import annotations

import re

__all__ = ["SourceLines"]


class SourceLines:
    """The lines of a config file, searched for ``[tasks.NAME]`` tables and their keys."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def table_start(self, task: str) -> int | None:
        quoted = "|".join(re.escape(form) for form in (task, f'"{task}"', f"'{task}'"))
        header = re.compile(rf"^\s*\[\s*tasks\s*\.\s*({quoted})\s*\]\s*(#.*)?$")
        for number, line in enumerate(self.lines, 1):
            if header.match(line):
                return number
        return None

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
