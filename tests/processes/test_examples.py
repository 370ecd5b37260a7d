"""The README's first command runs a real scheduler: run the example as a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import ROOT, wait_for


@pytest.mark.slow
def test_quickstart_runs_ticks_and_stops_cleanly(tmp_path: Path) -> None:
    log = tmp_path / "quickstart.log"
    env = {k: v for k, v in os.environ.items() if k != "CRONLEASE_DATABASE_URL"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "quickstart.py")],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            wait_for(lambda: log.read_text().count("refresh_cache ran") >= 2, 20, "two runs")
        finally:
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=30)
    text = log.read_text()
    assert code == 0, text
    assert (tmp_path / "cronlease.db").exists()  # the default SQLite file, in the working dir
    assert "refresh_cache: succeeded in " in text  # the run line (README, "Log lines")
    assert "Traceback" not in text


def test_the_fastapi_example_answers_metrics_at_metrics_without_a_redirect(
    tmp_path: Path,
) -> None:
    """A scraper configured with /metrics gets the metrics, not a 307 to /metrics/."""
    probe = (
        "from fastapi.testclient import TestClient\n"
        "from fastapi_app import app\n"
        "client = TestClient(app, follow_redirects=False)\n"  # no lifespan: nothing starts
        "response = client.get('/metrics')\n"
        "print(response.status_code, response.headers.get('content-type'))\n"
        "print(response.text)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLEASE_")}
    env["CRONLEASE_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cronlease.db'}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "examples"), str(ROOT)])
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    status, content_type = result.stdout.splitlines()[0].split(" ", 1)
    assert status == "200", result.stdout
    assert content_type.startswith("text/plain"), content_type
    assert "cronlease_" in result.stdout  # instrument(scheduler) registered its metrics
