"""Screenshots of the status page: the overview of 30 tasks, a failing task's page, and
the overview on a phone.

Run from the repository root (``python docs/screenshots/make.py``): it builds a
fleet's history in a temporary SQLite database (tests/support/page_fleet.py),
serves the page with actions enabled and has Debian's headless ``chromium`` take
``overview.png`` and ``task.png`` at 1280x800, a small laptop screen, and
``overview-narrow.png`` 400 px wide (the page's narrow view: one card per task).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cronlease.web import make_server
from tests.support.page_fleet import FAILING, populate

HERE = Path(__file__).resolve().parent
WIDE = "1280,800"
NARROW = "400,900"


def shoot(chromium: str, url: str, out: Path, profile: str, size: str = WIDE) -> None:
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--window-size={size}",
            f"--screenshot={out}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    print("wrote", out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out)


def main() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("Debian's chromium is needed: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        scheduler = populate(f"sqlite:///{tmp}/cronlease.db")
        server = make_server(
            scheduler, port=0, refresh=None, actions=True, authorize=lambda request: True
        )
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{server.server_port}"
        try:
            shoot(chromium, f"{base}/", HERE / "overview.png", f"{tmp}/profile")
            task = f"{base}/task?name={quote(FAILING, safe='')}"
            shoot(chromium, task, HERE / "task.png", f"{tmp}/profile")
            shoot(chromium, f"{base}/", HERE / "overview-narrow.png", f"{tmp}/profile", NARROW)
        finally:
            server.shutdown()
            server.server_close()
            scheduler.runner.close()


if __name__ == "__main__":
    main()
