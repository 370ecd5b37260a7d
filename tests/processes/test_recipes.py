"""The framework recipes in examples/, run as users run them: real servers, several workers.

Each test starts the real server (uvicorn, gunicorn, Django under gunicorn plus
``manage.py cronlease run``) as a subprocess on one database, waits until the
scheduler of every worker handles ticks, counts at least three more ticks of an
``every="1s"`` task at the ledger, stops the servers with SIGTERM and checks that
they exit cleanly and that every slot between the first and the last ran once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import url_for
from tests.support import ledger
from tests.support.ledger import assert_every_slot_once
from tests.support.procs import ROOT, wait_for

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples"
DJANGO_PROJECT = EXAMPLES / "django_project"
TICKS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str) -> tuple[int, str] | None:
    """(status, body), or None while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


@dataclass
class Server:
    """A server process whose output goes to a file (read when a check fails)."""

    argv: Sequence[str]
    env: dict[str, str]
    cwd: Path
    log: Path
    popen: subprocess.Popen[bytes] = field(init=False)

    def __post_init__(self) -> None:
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, *self.argv],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def terminate(self) -> None:
        """SIGTERM (once: a second one may mean "stop waiting" to a cronlease replica)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        """The exit status (killed after 30 s: a hang fails the test)."""
        try:
            return self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            raise AssertionError(f"{self.argv} ignored SIGTERM:\n{self.output()}") from None


@dataclass
class Recipe:
    url: str
    name: str
    tmp_path: Path
    servers: list[Server] = field(default_factory=list)

    def env(self, *paths: Path, **extra: str) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("CRONLEASE_", "DJANGO_", "GUNICORN_", "WEB_CONCURRENCY"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT), *map(str, paths)]),
            CRONLEASE_DATABASE_URL=self.url,
            CRONLEASE_TEST_TASK=self.name,
            PYTHONUNBUFFERED="1",
            **extra,
        )
        return env

    def start(self, argv: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> Server:
        log = self.tmp_path / f"server-{len(self.servers)}.log"
        server = Server(argv, env, cwd or self.tmp_path, log)
        self.servers.append(server)
        return server

    def logs(self) -> str:
        return "\n".join(f"--- {s.argv}\n{s.output()}" for s in self.servers)

    def alive_pids(self) -> set[int]:
        return {pid for pid, _ in ledger.entries(self.url, f"{self.name}:alive")}

    def runs(self) -> list[tuple[int, int]]:
        return ledger.entries(self.url, self.name)

    def wait_until_answering(self, url: str) -> str:
        def answered() -> str | None:
            for server in self.servers:
                assert server.alive(), f"a server exited early:\n{self.logs()}"
            result = http_get(url)
            return result[1] if result is not None and result[0] == 200 else None

        body: str | None = None

        def check() -> bool:
            nonlocal body
            body = answered()
            return body is not None

        wait_for(check, 20, lambda: f"{url} to answer 200; logs:\n{self.logs()}")
        assert body is not None
        return body

    def count_ticks(self, processes: int, poke: str | None = None) -> set[int]:
        """Wait until ``processes`` schedulers handle ticks, then for TICKS more runs.
        ``poke``: a URL fetched while waiting (a worker that starts its scheduler on its
        first request needs one)."""

        def up() -> bool:
            if poke is not None:
                http_get(poke)
            return len(self.alive_pids()) >= processes

        wait_for(
            up,
            20,
            lambda: (
                f"{processes} processes with a working scheduler "
                f"(saw {self.alive_pids()}); logs:\n{self.logs()}"
            ),
        )
        alive = self.alive_pids()
        baseline = len(self.runs())
        wait_for(
            lambda: len(self.runs()) >= baseline + TICKS,
            TICKS + 8,
            lambda: f"{TICKS} runs after every worker was up; logs:\n{self.logs()}",
        )
        return alive

    def stop_and_check(self, alive: set[int]) -> None:
        for server in self.servers:  # their shutdowns overlap
            server.terminate()
        codes = [server.wait() for server in self.servers]
        assert codes == [0] * len(codes), f"exit statuses {codes}; logs:\n{self.logs()}"
        runs = self.runs()
        slots = [slot for slot, _ in runs]
        assert len(slots) >= TICKS, runs
        assert_every_slot_once(slots)
        # Runs happened in the processes whose scheduler we saw working, no one else.
        assert {pid for _, pid in runs} <= self.alive_pids(), (runs, self.alive_pids())
        for pid in alive:  # every worker is gone, none left running tasks
            wait_for(lambda pid=pid: not _process_exists(pid), 10, f"pid {pid} to exit")
        assert "Traceback" not in self.logs(), self.logs()


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent has not reaped it yet.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def recipe(request: pytest.FixtureRequest, tmp_path: Path, task_name: str) -> Iterator[Recipe]:
    backend = getattr(request, "param", "sqlite")
    url = url_for(backend, tmp_path)
    ledger.setup(url)
    recipe = Recipe(url, task_name, tmp_path)
    try:
        yield recipe
    finally:
        for server in recipe.servers:
            if server.alive():
                server.popen.kill()
                server.popen.wait()


@pytest.mark.parametrize("recipe", ["sqlite", "postgresql"], indirect=True)
def test_fastapi_under_uvicorn_with_two_workers(recipe: Recipe) -> None:
    port = free_port()
    recipe.start(
        [
            "-m",
            "uvicorn",
            "tests.support.recipe_fastapi:app",
            "--workers",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        recipe.env(EXAMPLES),
    )
    base = f"http://127.0.0.1:{port}"
    health = json.loads(recipe.wait_until_answering(f"{base}/healthz"))
    assert health["ok"] is True
    alive = recipe.count_ticks(2)
    page = http_get(f"{base}/cronlease/")
    assert page is not None and page[0] == 200
    assert recipe.name in page[1] and "succeeded" in page[1]
    status = http_get(f"{base}/cronlease/status.json")
    assert status is not None and status[0] == 200
    names = [task["name"] for task in json.loads(status[1])["tasks"]]
    assert recipe.name in names and "refresh_cache" in names
    metrics = http_get(f"{base}/metrics")
    assert metrics is not None and metrics[0] == 200
    # /metrics is this worker's: it ran the task's ticks or saw them taken by the other
    # worker (it is alive, count_ticks says so), and counted which
    seen = [
        line
        for line in metrics[1].splitlines()
        if line.startswith(("cronlease_runs_total{", "cronlease_ticks_skipped_total{"))
        and f'task="{recipe.name}"' in line
    ]
    assert seen, metrics[1][-2000:]
    recipe.stop_and_check(alive)


@pytest.mark.parametrize(
    ("module", "preload"),
    [
        ("tests.support.recipe_flask", False),
        ("tests.support.recipe_flask", True),
        # started at import, in the --preload master before the fork: restarted in each worker
        ("tests.support.recipe_flask_started_at_import", True),
    ],
    ids=["post-worker-init", "post-worker-init-preload", "started-before-fork-preload"],
)
def test_flask_under_gunicorn_with_three_workers(
    recipe: Recipe, module: str, preload: bool
) -> None:
    port = free_port()
    argv = ["-m", "gunicorn", "--workers", "3", "--bind", f"127.0.0.1:{port}"]
    if module.endswith("started_at_import"):
        processes = 4  # the master keeps the scheduler it started, as a replica of its own
    else:
        argv += ["--config", str(EXAMPLES / "gunicorn.conf.py")]
        processes = 3
    if preload:
        argv.append("--preload")
    recipe.start([*argv, f"{module}:app"], recipe.env(EXAMPLES))
    base = f"http://127.0.0.1:{port}"
    recipe.wait_until_answering(f"{base}/healthz")
    alive = recipe.count_ticks(processes)
    master = recipe.servers[0].popen.pid
    assert (master in alive) == (processes == 4), (master, alive)
    page = http_get(f"{base}/cronlease/")
    assert page is not None and page[0] == 200 and recipe.name in page[1]
    recipe.stop_and_check(alive)


def test_django_under_gunicorn_and_a_cronlease_run_command(recipe: Recipe) -> None:
    port = free_port()
    env = recipe.env(DJANGO_PROJECT, DJANGO_SETTINGS_MODULE="tests.support.recipe_django_settings")
    recipe.start(
        [
            "-m",
            "gunicorn",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--chdir",
            str(DJANGO_PROJECT),
            "project.wsgi:application",
        ],
        env,
    )
    command = recipe.start([str(DJANGO_PROJECT / "manage.py"), "cronlease", "run"], env)
    base = f"http://127.0.0.1:{port}"
    recipe.wait_until_answering(f"{base}/healthz")
    # two gunicorn workers (AUTOSTART: each from its first request) and the command
    alive = recipe.count_ticks(3, poke=f"{base}/healthz")
    assert command.popen.pid in alive
    page = http_get(f"{base}/cronlease/")
    assert page is not None and page[0] == 200 and recipe.name in page[1]
    status = http_get(f"{base}/cronlease/status.json")
    assert status is not None and status[0] == 200
    assert recipe.name in [task["name"] for task in json.loads(status[1])["tasks"]]
    # the admin is styled: its page names the stylesheet, which is served (DEBUG, the
    # example's default: staticfiles_urlpatterns under gunicorn, as runserver does)
    login = http_get(f"{base}/admin/login/")
    assert login is not None and login[0] == 200
    assert 'href="/static/admin/css/base.css"' in login[1], login[1]
    css = http_get(f"{base}/static/admin/css/base.css")
    assert css is not None and css[0] == 200 and "body" in css[1]
    recipe.stop_and_check(alive)


def test_django_management_commands_do_not_start_the_scheduler(recipe: Recipe) -> None:
    """``manage.py check`` runs AppConfig.ready() but must not run tasks (AUTOSTART is on)."""
    env = recipe.env(DJANGO_PROJECT, DJANGO_SETTINGS_MODULE="tests.support.recipe_django_settings")
    result = subprocess.run(
        [sys.executable, str(DJANGO_PROJECT / "manage.py"), "check"],
        cwd=recipe.tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "started with" not in result.stderr
    assert recipe.runs() == []
