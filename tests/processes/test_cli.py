"""The ``cronlease`` command, driven as real processes on SQLite (and PostgreSQL when reachable).

Side effects are counted at a ledger the command tasks write themselves
(``>>`` opens it with O_APPEND; one short line per write is atomic).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from cronlease import LeaseStore
from cronlease._lease.model import AcquireRequest
from tests.conftest import url_for
from tests.support.attempts import abandon_runs, past_slot, record_attempts
from tests.support.cli_forks import CliServer
from tests.support.leases import set_lease_end, won
from tests.support.procs import ROOT, Proc, process_gone, wait_for

CLI = [sys.executable, "-m", "cronlease"]
BACKENDS = ["sqlite", "postgresql"]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLEASE_")}
    env["PYTHONPATH"] = str(ROOT)  # this tree's cronlease, not the one the venv installed
    env.update(extra or {})
    return env


#: the module's short commands, each a fork of one interpreter that imported the CLI
#: (an interpreter start costs about a second of CPU here, and these tests run ~100)
SERVER = CliServer(ROOT, _env())


@pytest.fixture(autouse=True, scope="module")
def _cli_server() -> Iterator[None]:
    yield
    SERVER.close()


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m cronlease ARGS`` in ``cwd``: its exit status, stdout and stderr."""
    if env:  # a variable the interpreter itself may read at its start: a real one
        return subprocess.run(
            [*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=60, env=_env(env)
        )
    return SERVER.run(list(args), cwd, _env())


def cli_json(*args: str, cwd: Path) -> Any:
    result = cli(*args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def now_ms() -> int:
    return int(time.time() * 1000)


def ledger(path: Path) -> list[list[str]]:
    """The complete lines of a ledger file, split into words."""
    if not path.exists():
        return []
    text = path.read_text()
    return [line.split() for line in text.splitlines(keepends=True) if line.endswith("\n")]


def slots(path: Path) -> list[int]:
    return [int(words[0]) for words in ledger(path)]


class Replica:
    """A ``cronlease`` process (forked from the fork server: no interpreter start, see
    tests/support/procs.py) whose output is read as it comes."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self._proc = Proc("-m", "cronlease", *args, env=_env(env), cwd=cwd, inherit_env=False)
        self.process = self._proc.popen

    @property
    def lines(self) -> list[str]:
        """Its complete lines so far: its log (stderr) in order, then what it printed."""
        log = self._proc.stderr().splitlines(keepends=True)
        return [line.rstrip("\n") for line in log if line.endswith("\n")] + list(self._proc.drain())

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_log(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        regex = re.compile(pattern)

        def found() -> re.Match[str] | None:
            ended = self.process.poll() is not None  # before reading: all it wrote is there
            if ended:
                self._proc.read_to_end()
            match = next((m for line in self.lines if (m := regex.search(line))), None)
            if match is None and ended:
                raise AssertionError(f"no log line matching {pattern!r}:\n{self.output}")
            return match

        match = wait_for(found, timeout, lambda: f"a line matching {pattern!r}:\n{self.output}")
        assert match is not None
        return match

    @property
    def holder(self) -> str:
        return self.wait_for_log(r"cronlease replica (\S+) started").group(1)

    def stop(self, timeout: float = 30.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float = 30.0) -> int:
        code = self.process.wait(timeout)
        self._proc.read_to_end()
        return code

    def kill(self) -> None:
        self._proc.kill()


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for replica in started:
        replica.kill()


def write_config(folder: Path, url: str, body: str, namespace: str | None = None) -> Path:
    path = folder / "cronlease.toml"
    header = f'database = "{url}"\n'
    if namespace:
        header += f'namespace = "{namespace}"\n'
    path.write_text(header + textwrap.dedent(body))
    return path


@pytest.fixture
def namespace() -> str:
    """Keeps tests apart on a shared PostgreSQL database."""
    return f"t{uuid.uuid4().hex[:10]}"


# --- check ------------------------------------------------------------------------


def test_check_lists_tasks_with_schedule_ttl_and_next_fire_times(tmp_path: Path) -> None:
    database = tmp_path / "never.db"
    write_config(
        tmp_path,
        f"sqlite:///{database}",
        """
        [tasks.sync]
        command = ["echo", "sync"]
        every = "90s"

        [tasks.report]
        call = "os.path:join"
        args = ["reports", "today"]  # join() has a required parameter: check binds the call
        cron = "0 2 * * *"
        timezone = "Europe/Istanbul"
        lease_ttl = "2m"

        [tasks.off]
        command = "true"
        every = "1h"
        enabled = false
        """,
    )
    result = cli("check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "cronlease.toml: OK, 3 task(s)" in out
    assert re.search(r"^sync  every 90s  ttl 1m30s$", out, re.M)
    assert re.search(r"^report  cron '0 2 \* \* \*' \(Europe/Istanbul\)  ttl 2m$", out, re.M)
    assert re.search(r"^off  every 1h  ttl 5m, DISABLED$", out, re.M)
    assert "  command: echo sync" in out and "  call: os.path:join" in out
    assert len(re.findall(r"^  next: \S+T02:00:00\.000\+03:00$", out, re.M)) == 3

    data = cli_json("check", cwd=tmp_path)
    tasks = {task["name"]: task for task in data["tasks"]}
    assert tasks["sync"]["lease_ttl"] == 90.0 and tasks["report"]["lease_ttl"] == 120.0
    sync_next = [
        time.mktime(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) for t in tasks["sync"]["next"]
    ]
    assert [b - a for a, b in itertools.pairwise(sync_next)] == [90.0, 90.0]
    assert tasks["off"]["enabled"] is False
    assert not database.exists(), "check must not touch the database"


def test_check_warns_of_a_program_it_cannot_run_and_connects_only_when_asked(
    tmp_path: Path,
) -> None:
    database = tmp_path / "leases.db"
    (tmp_path / "script.sh").write_text("#!/bin/sh\n")  # not executable
    write_config(
        tmp_path,
        f"sqlite:///{database}",
        """
        [tasks.backup]
        command = "no-such-binary --now"
        every = "1h"

        [tasks.local]
        command = "./script.sh"
        every = "1h"

        [tasks.piped]
        command = "no-such-binary | cat"  # a shell's words are its own: not judged
        shell = true
        every = "1h"

        [tasks.fine]
        command = ["true"]
        every = "1h"
        """,
    )
    result = cli("check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr  # a warning does not make the config invalid
    warnings = result.stderr.splitlines()
    assert len(warnings) == 2, result.stderr
    assert warnings[0].startswith(
        "cronlease: warning: cronlease.toml: task 'backup', command: program 'no-such-binary' "
        "is not found on PATH ("
    )
    assert warnings[1].startswith(
        "cronlease: warning: cronlease.toml: task 'local', command: program './script.sh' "
        "is not an executable file ("
    )
    assert all("check exits 0" in line for line in warnings)
    assert "OK, 4 task(s)" in result.stdout and ", 2 warning(s)" in result.stdout
    assert "database: not connected" in result.stdout and "--connect" in result.stdout
    assert not database.exists()

    connected = cli("check", "--connect", cwd=tmp_path)
    assert connected.returncode == 0, connected.stderr
    assert "database: the SQLite file does not exist yet" in connected.stdout
    assert "cronlease init-db creates it" in connected.stdout
    assert not database.exists(), "check --connect creates nothing"
    nowhere = ["--connect", "--database", f"sqlite:///{tmp_path}/no/such/folder/x.db"]
    uncreatable = cli("check", *nowhere, cwd=tmp_path)
    assert uncreatable.returncode == 1, uncreatable.stdout  # no replica could create it
    assert uncreatable.stdout.splitlines()[-1] == (
        f"database: cannot create the SQLite file sqlite:///{tmp_path}/no/such/folder/x.db: "
        f"its folder {tmp_path}/no/such/folder does not exist"
    )
    assert cli("init-db", cwd=tmp_path).returncode == 0
    present = cli_json("check", "--connect", cwd=tmp_path)
    assert present["connection"] == {
        "connected": True,
        "reachable": True,
        "tables": "present",
        "error": None,
    }
    assert [(w["task"], w["key"]) for w in present["warnings"]] == [
        ("backup", "command"),
        ("local", "command"),
    ]
    assert cli_json("check", cwd=tmp_path)["connection"]["connected"] is False

    down = ["--connect", "--database", "postgresql://nobody@127.0.0.1:9/none"]
    unreachable = cli("check", *down, cwd=tmp_path)
    assert unreachable.returncode == 1
    assert unreachable.stdout.splitlines()[-1].startswith("database unreachable: ")
    as_json = cli("check", *down, "--json", cwd=tmp_path)
    assert (
        as_json.returncode == 1 and json.loads(as_json.stdout)["connection"]["reachable"] is False
    )


def test_check_count_lists_real_local_times_in_text_and_json(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        f"sqlite:///{tmp_path / 'never.db'}",
        """
        [tasks.nightly]
        command = "true"
        cron = "30 2 * * *"
        timezone = "Europe/Berlin"

        [tasks.sync]
        command = "true"
        every = "6h"
        """,
    )
    # (6h, not a short interval: the text and the JSON are two calls, and a fire time
    # passing between them shifted the JSON's list by one, a flake under load)
    berlin = ZoneInfo("Europe/Berlin")
    result = cli("check", "--count", "9", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    listed: dict[str, list[datetime]] = {}
    task = ""
    for line in result.stdout.splitlines():
        if line and not line.startswith(" ") and "  " in line:
            task = line.split()[0]
        elif line.startswith("  next: "):
            listed.setdefault(task, []).append(
                datetime.fromisoformat(line[8:].replace("Z", "+00:00"))
            )
    assert {name: len(times) for name, times in listed.items()} == {"nightly": 9, "sync": 9}
    for local in listed["nightly"]:
        there = local.astimezone(berlin)  # the wall time exists, with Berlin's offset then
        assert (local.utcoffset(), local.replace(tzinfo=None)) == (
            there.utcoffset(),
            there.replace(tzinfo=None),
        )
        assert (local.minute, local.hour in (2, 3)) == (30, True) or local.minute == 0
    assert all(t.utcoffset() == timedelta(0) for t in listed["sync"])

    data = cli_json("check", "--count", "9", cwd=tmp_path)
    assert data["count"] == 9
    tasks = {task["name"]: task for task in data["tasks"]}
    for name, times in listed.items():
        fires = tasks[name]["fires"]
        assert [datetime.fromisoformat(f["local"].replace("Z", "+00:00")) for f in fires] == times
        for fire in fires:
            utc = datetime.fromisoformat(fire["utc"].replace("Z", "+00:00"))
            assert utc.utcoffset() == timedelta(0)
            assert fire["slot"] == round(utc.timestamp() * 1000)
            assert datetime.fromisoformat(fire["local"].replace("Z", "+00:00")) == utc
        assert tasks[name]["next"] == [f["local"] for f in fires]
    assert len(cli_json("check", cwd=tmp_path)["tasks"][0]["fires"]) == 3  # the default

    for bad, why in (("0", "at least 1"), ("1001", "at most 1000"), ("x", "not an integer")):
        refused = cli("check", "--count", bad, cwd=tmp_path)
        assert refused.returncode == 2 and refused.stdout == ""
        assert "--count" in refused.stderr and why in refused.stderr


# --- the fleet: two replicas, pause, resume, status, history ---------------------------


#: a replica's DEBUG line for a tick the database refused because the task is paused
PAUSED_TICK = re.compile(r": tick (\S+): not acquired \(paused\)$")


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_two_replicas_run_each_slot_once_and_pause_resume_fleet_wide(
    backend: str, tmp_path: Path, namespace: str, replicas: list[Replica]
) -> None:
    url = url_for(backend, tmp_path)
    book = tmp_path / "ledger"
    write_config(
        tmp_path,
        url,
        f"""
        [tasks.tick]
        command = 'echo "$CRONLEASE_SLOT $CRONLEASE_FENCE" >> {book}'
        shell = true
        every = 1
        """,
        namespace,
    )
    # DEBUG: each replica says each tick it was refused, and why
    replicas += [Replica("run", "--log-level", "debug", cwd=tmp_path) for _ in range(2)]
    holders = {replica.holder for replica in replicas}
    wait_for(lambda: len(slots(book)) >= 3, 20, "three ticks")

    paused = cli("pause", "tick", cwd=tmp_path)
    assert paused.returncode == 0, paused.stderr
    paused_at = now_ms()
    status = cli_json("status", cwd=tmp_path)
    assert status["tasks"][0]["state"] == "paused" and status["tasks"][0]["paused"]
    refused = cli("trigger", "tick", cwd=tmp_path)
    assert refused.returncode == 1 and "paused" in refused.stderr

    def refused_as_paused(replica: Replica) -> set[int]:
        """The slots more than one tick after the pause that ``replica`` was refused."""
        found = (PAUSED_TICK.search(line) for line in replica.lines)
        ticks = (datetime.fromisoformat(m.group(1)) for m in found if m)
        return {s for t in ticks if (s := round(t.timestamp() * 1000)) > paused_at + 1000}

    # the window ends once every replica has asked for the same tick and been refused
    # (a sleep instead guessed how long a loaded machine takes to decide one)
    wait_for(
        lambda: set.intersection(*map(refused_as_paused, replicas)),
        15,
        lambda: f"a tick refused as paused by both replicas:\n{replicas[0].output}",
    )
    assert max(slots(book)) <= paused_at + 1000, "a tick ran more than one tick after pause"
    count_while_paused = len(slots(book))

    resumed = cli("resume", "tick", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    resumed_at = now_ms()
    wait_for(lambda: len([s for s in slots(book) if s > resumed_at]) >= 2, 15, "ticks after resume")
    assert len(slots(book)) > count_while_paused
    for replica in replicas:  # their shutdowns overlap
        replica.process.send_signal(signal.SIGTERM)
    for replica in replicas:
        assert replica.wait() == 0, replica.output

    ran = slots(book)
    assert len(ran) == len(set(ran)), f"a slot ran twice: {sorted(ran)}"
    ordered = sorted(ran)
    for before, after in itertools.pairwise(ordered):
        if before <= paused_at + 1000 and after >= resumed_at - 1000:
            continue  # the paused span
        assert after - before == 1000, f"tick missed between {before} and {after}: {ordered}"

    history = cli_json("history", "tick", "--limit", "1000", cwd=tmp_path)
    assert {run["slot"] for run in history} == set(ran)
    assert {run["outcome"] for run in history} == {"succeeded"}
    assert all(not run["manual"] and run["holder"] in holders for run in history)
    fences = {int(words[0]): int(words[1]) for words in ledger(book)}
    assert all(fences[run["slot"]] == run["fence"] for run in history)

    (task,) = cli_json("status", cwd=tmp_path)["tasks"]
    assert task["name"] == f"{namespace}:tick" and task["schedule"] == "every 1s"
    assert task["state"] == "idle" and not task["paused"]  # leases are released on shutdown
    assert task["last_slot"] == max(ran) and task["last_run"]["slot"] == max(ran)
    assert task["last_run"]["outcome"] == "succeeded" and task["last_holder"] in holders
    assert task["holder"] is None  # no run holds the lease: HOLDER is empty
    assert task["fence"] == max(fences.values())
    assert task["next_fire_time"] is not None


# --- trigger --------------------------------------------------------------------------


HOLD = '''
[tasks.hold]
command = """echo "$CRONLEASE_SLOT $CRONLEASE_MANUAL $$" >> {book}
while [ ! -e {release} ]; do sleep 0.05; done"""
shell = true
{schedule}
'''


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_trigger_runs_once_and_is_refused_while_a_run_is_in_progress(
    backend: str, tmp_path: Path, namespace: str, replicas: list[Replica]
) -> None:
    url = url_for(backend, tmp_path)
    book, release = tmp_path / "ledger", tmp_path / "release"
    write_config(
        tmp_path,
        url,
        HOLD.format(book=book, release=release, schedule='cron = "0 0 1 1 *"'),
        namespace,
    )
    first = Replica("trigger", "hold", cwd=tmp_path)
    replicas.append(first)
    wait_for(lambda: len(ledger(book)) == 1, 20, "the triggered run to start")

    second = cli("trigger", "hold", cwd=tmp_path)
    assert second.returncode == 1
    assert "a run is in progress" in second.stderr and second.stderr.count("\n") == 1
    status = cli_json("status", cwd=tmp_path)["tasks"][0]
    assert status["state"] == "running" and status["last_run"]["outcome"] == "running"
    assert status["last_run"]["manual"]

    release.touch()
    assert first.wait() == 0, first.output
    assert f"{namespace}:hold: succeeded" in first.output
    again = cli("trigger", "hold", cwd=tmp_path)
    assert again.returncode == 0, again.stderr

    runs = ledger(book)
    assert len(runs) == 2 and all(words[1] == "1" for words in runs)  # CRONLEASE_MANUAL
    history = cli_json("history", "hold", cwd=tmp_path)
    assert [(run["outcome"], run["manual"]) for run in history] == [("succeeded", True)] * 2
    assert {run["slot"] for run in history} == {int(words[0]) for words in runs}

    # The same from the database alone, anywhere: the stored name carries the namespace.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    name = f"{namespace}:hold"
    by_url = cli_json("history", name, "--database", url, cwd=elsewhere)
    assert by_url == history
    assert cli("pause", name, "--database", url, cwd=elsewhere).returncode == 0
    rows = {t["name"]: t for t in cli_json("status", "--database", url, cwd=elsewhere)["tasks"]}
    assert rows[name]["state"] == "paused"
    assert cli("resume", name, "--database", url, cwd=elsewhere).returncode == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_verb_that_prints_a_result_has_json_of_the_model_its_text_formats(
    backend: str, tmp_path: Path, namespace: str
) -> None:
    url = url_for(backend, tmp_path)
    write_config(
        tmp_path,
        url,
        """
        [tasks.ok]
        command = "true"
        cron = "0 0 1 1 *"

        [tasks.bad]
        command = "sh -c 'echo broken >&2; exit 3'"
        cron = "0 0 1 1 *"
        """,
        namespace,
    )
    name = f"{namespace}:ok"
    assert cli_json("init-db", cwd=tmp_path) == {"database": url, "tables": "ready"}
    assert cli("init-db", cwd=tmp_path).stdout == f"cronlease tables are ready on {url}\n"
    assert cli_json("pause", "ok", cwd=tmp_path) == {"task": name, "paused": True}
    assert cli("pause", "ok", cwd=tmp_path).stdout.startswith(f"paused {name!r} on every")
    assert cli_json("resume", "ok", cwd=tmp_path) == {"task": name, "paused": False}
    assert cli("resume", "ok", cwd=tmp_path).stdout == f"resumed {name!r} on every replica\n"

    done = cli_json("trigger", "ok", cwd=tmp_path)
    assert done["task"] == name and done["outcome"] == "succeeded"
    (stored,) = cli_json("history", "ok", cwd=tmp_path)
    assert done["run"] == stored  # the run as history shows it
    text = cli("trigger", "ok", cwd=tmp_path)
    assert re.fullmatch(rf"{name}: succeeded in \S+ \(fence \d+\)\n", text.stdout), text.stdout

    failed = cli("trigger", "bad", "--json", cwd=tmp_path)
    assert failed.returncode == 1
    model = json.loads(failed.stdout)
    assert model["outcome"] == "failed" and "status 3" in model["run"]["error_summary"]

    assert cli_json("forget", "ok", "--force", cwd=tmp_path) == {
        "task": name,
        "forgotten": True,
        "had_lease_row": True,
    }


# --- stopping --------------------------------------------------------------------------


def test_sigterm_waits_for_the_running_task_then_exits_0(
    tmp_path: Path, replicas: list[Replica]
) -> None:
    book, release = tmp_path / "ledger", tmp_path / "release"
    write_config(
        tmp_path,
        url_for("sqlite", tmp_path),
        HOLD.format(book=book, release=release, schedule="every = 1"),
    )
    replica = Replica("run", "--grace", "30", cwd=tmp_path)
    replicas.append(replica)
    wait_for(lambda: len(ledger(book)) == 1, 20, "a run to start")
    replica.process.send_signal(signal.SIGTERM)
    replica.wait_for_log("received SIGTERM")
    assert replica.process.poll() is None  # still waiting for the run
    release.touch()
    assert replica.wait() == 0, replica.output
    history = cli_json("history", "hold", cwd=tmp_path)
    assert [run["outcome"] for run in history] == ["succeeded"]
    assert len(ledger(book)) == 1  # stopped firing at SIGTERM


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_past_the_grace_records_the_run_interrupted_and_kills_it(
    backend: str, tmp_path: Path, namespace: str, replicas: list[Replica]
) -> None:
    book, release = tmp_path / "ledger", tmp_path / "release"
    write_config(
        tmp_path,
        url_for(backend, tmp_path),
        HOLD.format(book=book, release=release, schedule="every = 1"),
        namespace,
    )
    replica = Replica("run", "--grace", "0.5", cwd=tmp_path)
    replicas.append(replica)
    wait_for(lambda: len(ledger(book)) == 1, 20, "a run to start")
    assert replica.stop() == 0, replica.output
    pid = int(ledger(book)[0][2])
    wait_for(lambda: process_gone(pid), 10, "the command to be terminated")
    (run,) = cli_json("history", "hold", cwd=tmp_path)
    assert run["outcome"] == "interrupted" and run["slot"] == int(ledger(book)[0][0])
    (task,) = cli_json("status", cwd=tmp_path)["tasks"]
    assert task["last_run"]["outcome"] == "interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_during_a_command_logs_one_shutdown_story_in_order_agreeing_with_history(
    backend: str, tmp_path: Path, namespace: str, replicas: list[Replica]
) -> None:
    pidfile = tmp_path / "pid"
    write_config(
        tmp_path,
        url_for(backend, tmp_path),
        f"""
        [tasks.backup]
        command = "sh -c 'echo $$ > {pidfile}; exec sleep 30'"
        every = 1
        """,
        namespace,
    )
    # 2 s: 1.6 s for the run to end, then 0.4 s for its command to end after SIGTERM
    replica = Replica("run", "--grace", "2", cwd=tmp_path)
    replicas.append(replica)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 20, "the command")
    pid = int(pidfile.read_text())
    replica.process.send_signal(signal.SIGTERM)
    assert replica.wait(timeout=20) == 0, replica.output
    assert process_gone(pid), "the command outlived the replica"

    lines = replica.lines[
        next(i for i, line in enumerate(replica.lines) if "received SIGTERM" in line) :
    ]
    task = rf"{namespace}:backup"
    story = [
        r"received SIGTERM, shutting down",
        rf"shutdown: waiting up to 1\.[56]\d* s for 1 run in progress \({task}\) to end$",
        rf"shutdown: gave up waiting for 1 run in progress \({task}\) to end after 1\.\d+ s",
        r"the replica stops past its grace period: terminating the process group",
        rf"{task}: interrupted by shutdown after \d+(\.\d+)? s \(recorded; its lease is "
        r"released\), tick \S+ replica=\S+ fence=1 attempt=1$",
        r"cronlease replica \S+ stopped$",
    ]
    found = iter(lines)  # each in order, each after the one before
    for pattern in story:
        assert any(re.search(pattern, line) for line in found), (pattern, "\n".join(lines))
    assert re.search(story[-1], lines[-1]), "\n".join(lines)  # nothing said after it
    said = "\n".join(lines)
    for contradiction in ("failed", "keeps renewing", "still running after shutdown"):
        assert contradiction not in said, said
    (run,) = cli_json("history", "backup", cwd=tmp_path)
    assert run["outcome"] == "interrupted" and run["fence"] == 1


def never_ending_task(folder: Path, book: Path, grace: str) -> str:
    """A config whose one task is a Python call that never returns (nothing can stop it)."""
    module = f"forever_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(
        textwrap.dedent(
            f"""
            import threading

            def forever(ctx):
                with open({str(book)!r}, "a") as book:
                    book.write(f"{{ctx.slot}} run\\n")
                threading.Event().wait()
            """
        )
    )
    return f"""
        [scheduler]
        shutdown_grace = "{grace}"

        [tasks.forever]
        call = "{module}:forever"
        every = 1
        """


@pytest.mark.slow
def test_sigterm_with_a_task_that_never_ends_exits_within_the_configured_grace(
    tmp_path: Path, replicas: list[Replica]
) -> None:
    book = tmp_path / "ledger"
    grace = 1.5
    write_config(
        tmp_path, url_for("sqlite", tmp_path), never_ending_task(tmp_path, book, f"{grace}s")
    )
    replica = Replica("run", cwd=tmp_path)
    replicas.append(replica)
    wait_for(lambda: len(ledger(book)) == 1, 30, "a run to start")
    replica.process.send_signal(signal.SIGTERM)
    # every wait is bounded by the grace (a generous allowance here for a loaded machine;
    # before, the run alone was waited for 25 s and then 10 s more)
    assert replica.wait(timeout=grace + 12) == 0, replica.output
    said = replica.wait_for_log(
        r"shutdown: waiting up to (\S+) (m?s) for 1 run in progress \(forever\)"
    )
    up_to = float(said.group(1)) / (1000 if said.group(2) == "ms" else 1)
    # what the shutdown's waits before it left of the grace: most of it
    assert grace - 1 <= up_to <= grace, said.group(0)
    replica.wait_for_log(r"shutdown: gave up waiting for 1 run in progress \(forever\) to end")
    replica.wait_for_log(r"forever: interrupted by shutdown after .* it ends with the process")
    (run,) = cli_json("history", "forever", cwd=tmp_path)
    assert run["outcome"] == "interrupted" and run["slot"] == int(ledger(book)[0][0])


@pytest.mark.slow
def test_a_second_sigterm_stops_the_waiting_at_once(
    tmp_path: Path, replicas: list[Replica]
) -> None:
    book = tmp_path / "ledger"
    write_config(tmp_path, url_for("sqlite", tmp_path), never_ending_task(tmp_path, book, "10m"))
    replica = Replica("run", cwd=tmp_path)
    replicas.append(replica)
    wait_for(lambda: len(ledger(book)) == 1, 30, "a run to start")
    replica.process.send_signal(signal.SIGTERM)
    replica.wait_for_log(r"shutdown: waiting up to .* for 1 run in progress \(forever\)")
    assert replica.process.poll() is None  # it waits: the grace is ten minutes
    replica.process.send_signal(signal.SIGTERM)
    assert replica.wait(timeout=20) == 0, replica.output
    replica.wait_for_log("received SIGTERM again: not waiting any longer")
    (run,) = cli_json("history", "forever", cwd=tmp_path)
    assert run["outcome"] == "interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_command_past_its_timeout_is_killed_with_its_children_and_timed_out(
    backend: str, tmp_path: Path, namespace: str
) -> None:
    pidfile = tmp_path / "grandchild"
    write_config(
        tmp_path,
        url_for(backend, tmp_path),
        f"""
        [tasks.slow]
        command = ["sh", "-c", "sleep 60 & echo $! > {pidfile}; wait"]
        cron = "0 0 1 1 *"
        timeout = "1s"
        """,
        namespace,
    )
    started = time.monotonic()
    result = cli("trigger", "slow", cwd=tmp_path)
    assert result.returncode == 1
    assert f"{namespace}:slow: timed_out" in result.stdout
    assert "killed after its timeout of 1 s" in result.stderr
    assert time.monotonic() - started < 20
    grandchild = int(pidfile.read_text())
    wait_for(lambda: process_gone(grandchild), 10, "the grandchild to be killed")
    (run,) = cli_json("history", "slow", cwd=tmp_path)
    assert run["outcome"] == "timed_out" and "timeout of 1 s" in run["error"]


@pytest.mark.slow
def test_disabled_replica_fires_nothing_and_exits_0_on_sigterm(
    tmp_path: Path, replicas: list[Replica]
) -> None:
    database = tmp_path / "cronlease.db"
    book = tmp_path / "ledger"
    write_config(
        tmp_path,
        f"sqlite:///{database}",
        f"""
        [tasks.tick]
        command = 'echo x >> {book}'
        shell = true
        every = 1
        """,
    )
    replica = Replica("run", cwd=tmp_path, env={"CRONLEASE_DISABLED": "1"})
    replicas.append(replica)
    replica.wait_for_log("CRONLEASE_DISABLED=1: this replica fires nothing")
    time.sleep(1.5)  # a fixed window of more than one tick
    assert replica.stop() == 0, replica.output
    assert not book.exists() and not database.exists()


# --- the other commands ------------------------------------------------------------------


def test_status_lists_orphaned_lease_rows(tmp_path: Path) -> None:
    url = url_for("sqlite", tmp_path)
    write_config(tmp_path, url, '[tasks.gone]\ncommand = "true"\ncron = "0 0 1 1 *"\n')
    assert cli("trigger", "gone", cwd=tmp_path).returncode == 0
    write_config(tmp_path, url, '[tasks.kept]\ncommand = "true"\nevery = "1h"\n')
    status = cli_json("status", cwd=tmp_path)
    assert [task["name"] for task in status["tasks"]] == ["kept"]
    assert status["tasks"][0]["last_run"] is None and status["tasks"][0]["state"] == "idle"
    assert [row["name"] for row in status["orphaned"]] == ["gone"]
    text = cli("status", cwd=tmp_path).stdout
    assert "1 orphaned lease row(s), of tasks no longer declared: gone" in text


def test_status_check_fails_on_an_overdue_task_and_shows_clock_skew(tmp_path: Path) -> None:
    url = url_for("sqlite", tmp_path)
    write_config(tmp_path, url, '[tasks.beat]\ncommand = "true"\nevery = "1s"\n')
    store = LeaseStore.from_url(url)
    store.create_tables()
    # the fleet last took a tick a minute ago: the next one is long overdue
    old = won(
        store.acquire(
            AcquireRequest(name="beat", slot=now_ms() - 60_000, ttl=1, holder="gone", tolerance=1)
        )
    )
    assert old is not None
    store.finish(old, "succeeded")
    set_lease_end(store, "beat", old.slot / 1000 + 1)  # that run ended then, not just now
    store.dispose()
    result = cli("status", "--check", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "beat is overdue" in result.stderr
    status = json.loads(cli("status", "--json", cwd=tmp_path).stdout)
    assert status["overdue"] == ["beat"]
    assert abs(status["clock_skew"]["skew"]) < 1.0
    assert cli("pause", "beat", cwd=tmp_path).returncode == 0
    assert cli("status", "--check", cwd=tmp_path).returncode == 0  # paused is not overdue


@pytest.mark.parametrize("backend", BACKENDS)
def test_history_shows_each_attempt_of_a_slot_and_status_counts_abandoned_runs(
    backend: str, tmp_path: Path, namespace: str
) -> None:
    url = url_for(backend, tmp_path)
    write_config(tmp_path, url, '[tasks.job]\ncommand = "true"\nevery = "1h"\n', namespace)
    name = f"{namespace}:job"
    store = LeaseStore.from_url(url)
    store.create_tables()
    abandon_runs(store, name, 2, first_slot=past_slot(600))
    slot = past_slot(60)
    attempts = record_attempts(store, name, slot, ["failed", "failed", "succeeded"])
    store.dispose()

    history = cli_json("history", "job", cwd=tmp_path)
    newest = history[:3]
    assert [(run["slot"], run["attempt"], run["outcome"]) for run in newest] == [
        (slot, 3, "succeeded"),
        (slot, 2, "failed"),
        (slot, 1, "failed"),
    ]
    assert [run["fence"] for run in reversed(newest)] == [lease.fence for lease in attempts]
    assert sorted(run["fence"] for run in newest) == [run["fence"] for run in reversed(newest)]
    assert [run["outcome"] for run in history[3:]] == ["succeeded", "abandoned", "abandoned"]
    assert all(run["attempt"] == 1 for run in history[3:])
    text = cli("history", "job", cwd=tmp_path).stdout.splitlines()
    assert text[0].split()[:5] == ["SCHEDULED", "FOR", "ATTEMPT", "OUTCOME", "DURATION"]
    # the attempts of the slot, newest first, one row each, next to each other
    assert [line.split()[2:4] for line in text[1:4]] == [
        ["3", "succeeded"],
        ["2", "failed"],
        ["1", "failed"],
    ]

    (task,) = cli_json("status", cwd=tmp_path)["tasks"]
    assert task["abandoned"] == 2 and task["last_run"]["attempt"] == 3
    lines = cli("status", "-o", "wide", cwd=tmp_path).stdout.splitlines()
    header = lines[0].split()
    assert "ABANDONED" in header
    column = lines[0].index("ABANDONED")
    assert lines[1][column:].split()[0] == "2"


@pytest.mark.slow
def test_init_db_and_errors_exit_codes(tmp_path: Path) -> None:
    database = tmp_path / "fresh.db"
    created = cli("init-db", "--database", f"sqlite:///{database}", cwd=tmp_path)
    assert created.returncode == 0 and database.exists()

    no_config = cli("status", cwd=tmp_path)
    assert no_config.returncode == 2 and "-c FILE or --database URL" in no_config.stderr
    missing = cli("check", "-c", "nope.toml", cwd=tmp_path)
    assert missing.returncode == 2 and "nope.toml" in missing.stderr
    unreachable = cli("status", "--database", "postgresql://nobody@127.0.0.1:9/none", cwd=tmp_path)
    assert unreachable.returncode == 1 and unreachable.stderr.count("\n") == 1
    write_config(tmp_path, f"sqlite:///{database}", '[tasks.a]\ncommand = "true"\nevery = 5\n')
    unknown = cli("pause", "b", cwd=tmp_path)
    assert unknown.returncode == 2 and "no task 'b'" in unknown.stderr
    bad_usage = cli("history", cwd=tmp_path)
    assert bad_usage.returncode == 2
    helped = cli("--help", cwd=tmp_path)
    assert helped.returncode == 0
    assert re.search(r"^  2 +usage or configuration error", helped.stdout, re.M)


def test_import_crontab_prints_a_config_that_checks(tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text(
        "MAILTO=ops@example.com\n"
        "*/10 * * * * /usr/bin/env echo ten\n"
        "@hourly date\n"
        "@reboot /usr/local/bin/warm-up\n"
    )
    refused = cli("import-crontab", str(crontab), "--timezone", "Europe/Istanbul", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""  # one line cannot be translated
    assert "crontab:4: not translated (@reboot" in refused.stderr
    result = cli(
        "import-crontab", str(crontab), "--timezone", "Europe/Istanbul", "--partial", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "crontab:4: not translated (@reboot" in result.stderr
    (tmp_path / "cronlease.toml").write_text(result.stdout)
    checked = cli_json("check", cwd=tmp_path)
    assert [(t["name"], t["cron"], t["timezone"]) for t in checked["tasks"]] == [
        ("echo", "*/10 * * * *", "Europe/Istanbul"),
        ("date", "0 * * * *", "Europe/Istanbul"),
    ]
    clean = tmp_path / "clean"
    clean.write_text("root_line_ignored=1\n5 4 * * sun root echo weekly\n")
    system = cli("import-crontab", str(clean), "--system", "--timezone", "UTC", cwd=tmp_path)
    assert system.returncode == 0, system.stderr
    assert 'cron = "5 4 * * sun"' in system.stdout and "ran as user 'root'" in system.stdout


@pytest.mark.slow
def test_the_example_config_runs_a_call_task_and_a_command_task(
    tmp_path: Path, replicas: list[Replica]
) -> None:
    examples = tmp_path / "examples"  # a copy: its SQLite file is made next to the config
    examples.mkdir()
    for name in ("cronlease.toml", "jobs.py"):
        shutil.copy(ROOT / "examples" / name, examples / name)
    replica = Replica("run", "-c", "examples/cronlease.toml", cwd=tmp_path)
    replicas.append(replica)
    replica.wait_for_log(r"INFO jobs: hello from slot")
    replica.wait_for_log(r"INFO cronlease\.task\.disk-usage: disk-usage ran for \d{4}-")
    replica.process.send_signal(signal.SIGINT)
    assert replica.wait() == 0, replica.output
    assert "Traceback" not in replica.output
    # the example's relative SQLite path is the config file's folder's, not the cwd's
    assert (examples / "cronlease.db").exists() and not (tmp_path / "cronlease.db").exists()


@contextmanager
def web_page(tmp_path: Path, *args: str) -> Iterator[str]:
    """``cronlease web --port 0`` running: its page's URL; SIGTERM ends it, with status 0."""
    proc = Proc(
        "-m", "cronlease", "web", "--port", "0", *args, env=_env(), cwd=tmp_path, inherit_env=False
    )
    try:
        line = proc.expect("status page on http://127.0.0.1:")  # said once the server listens
        yield line.split(" on ", 1)[1].strip()
    finally:
        code = proc.terminate()
    assert code == 0, proc.stderr()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_web_serves_the_status_page_until_sigterm(tmp_path: Path) -> None:
    url = url_for("sqlite", tmp_path)
    write_config(tmp_path, url, '[tasks.shown]\ncommand = "true"\nevery = "1h"\n')
    assert cli("init-db", cwd=tmp_path).returncode == 0
    with web_page(tmp_path) as page_url:
        with urllib.request.urlopen(page_url, timeout=10) as response:
            html = response.read().decode()
        assert "shown" in html
        data = get_json(page_url + "status.json")
        assert [task["name"] for task in data["tasks"]] == ["shown"]


def test_web_judges_the_config_tasks_as_status_does(tmp_path: Path) -> None:
    """The page of ``cronlease web -c FILE`` knows each task's alert_after and enabled."""
    url = url_for("sqlite", tmp_path)
    body = """\
        [tasks.flaky]
        command = "false"
        every = "1h"
        alert_after = 3

        [tasks.off]
        command = "true"
        every = "1h"
        enabled = false
    """
    config = write_config(tmp_path, url, body)
    store = LeaseStore.from_url(url)
    store.create_tables()
    record_attempts(store, "flaky", past_slot(60), ["failed", "failed"])
    store.dispose()
    with web_page(tmp_path, "-c", str(config)) as page_url:
        tasks = {task["name"]: task for task in get_json(page_url + "status.json")["tasks"]}
        with urllib.request.urlopen(page_url, timeout=10) as response:
            html = response.read().decode()
    flaky, off = tasks["flaky"], tasks["off"]
    assert flaky["consecutive_failures"] == 2 and flaky["shown_state"] != "failing"
    assert off["enabled"] is False and off["next_fire_time"] is None
    assert re.search(r'id="task-off".*?<td>disabled</td>', html)
