"""examples/fastapi_app.py with the ledger task: ``uvicorn tests.support.recipe_fastapi:app``."""

from __future__ import annotations

from fastapi_app import app, scheduler  # examples/ is on PYTHONPATH

from tests.support.recipes import attach

attach(scheduler, use_async=True)

__all__ = ["app"]
