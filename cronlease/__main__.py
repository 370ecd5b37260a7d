"""``python -m cronlease``: the ``cronlease`` command."""

from __future__ import annotations

import sys

from cronlease.cli import main

if __name__ == "__main__":
    sys.exit(main())
