"""Plain functions that settings.CRONLEASE["TASKS"] names with ``call``."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def nightly_report() -> None:
    log.info("nightly report")
