"""The JSON logging recipe of docs/reference/log-lines.md ("Logging as JSON"), word for
word, for the replica scripts: a test reads their run lines' ``cronlease_*`` fields from it."""

from __future__ import annotations

import json
import logging


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # the run lines' fields: task, scheduled_for, replica, fence, attempt, outcome, ...
        entry.update({k: v for k, v in vars(record).items() if k.startswith("cronlease_")})
        return json.dumps(entry)
