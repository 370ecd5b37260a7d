"""examples/deploy/: the systemd unit, the Dockerfile and the Kubernetes Deployment, tried
for real as far as this machine allows (docs/design.md §5.31).

- the unit: ``systemd-analyze verify``; its ExecStart run as a real ``cronlease run`` on
  SQLite and stopped the way its ``KillMode`` says (``mixed``: SIGTERM to the main process
  alone; SIGKILL to what is left at ``TimeoutStopSec``), and on a config mistake, whose exit
  status must be one ``RestartPreventExitStatus`` names. ``systemd-run`` needs a running
  systemd, which neither this machine nor CI's (the same machine) has.
- the Dockerfile: hadolint (no container engine runs here: ``docker`` is a client only).
- the manifest: kubernetes-validate's offline schemas (``kubectl`` needs a server).
- the probes (readiness, liveness, HEALTHCHECK): their own commands, exit 0 when healthy
  and 1 when failing, against a running replica and a task's failures.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from cronlease import LeaseStore
from cronlease.config import load_config
from tests.support.attempts import past_slot, record_attempts
from tests.support.procs import ROOT, wait_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEPLOY = ROOT / "examples" / "deploy"
UNIT = DEPLOY / "cronlease.service"
DOCKERFILE = DEPLOY / "Dockerfile"
MANIFEST = DEPLOY / "kubernetes.yaml"
CONFIG = "/etc/cronlease/cronlease.toml"  # where every example puts the config
BIN = Path(sys.executable).parent  # the venv's scripts: cronlease, hadolint, ...
MARGIN = 5.0  # the least a stop timeout may leave over the grace for the last writes


def _service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read(UNIT)
    return parser["Service"]


def _deployment() -> dict:
    (found,) = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d["kind"] == "Deployment"]
    return found


def _container() -> dict:
    (container,) = _deployment()["spec"]["template"]["spec"]["containers"]
    return container


def _healthcheck() -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])$", text, re.MULTILINE)
    assert match, "the Dockerfile has no exec-form HEALTHCHECK"
    return yaml.safe_load(match.group(1))  # a JSON array is YAML too


def _here(argv: list[str], config: Path) -> list[str]:
    """An example's ``cronlease ...`` command line as this tree's cronlease, on ``config``."""
    assert Path(argv[0]).name == "cronlease", argv
    assert CONFIG in argv, f"{argv} does not read {CONFIG}"
    return [
        sys.executable,
        "-m",
        "cronlease",
        *(str(config) if a == CONFIG else a for a in argv[1:]),
    ]


def _env(url: str) -> dict[str, str]:
    """The unit's Environment= plus what its EnvironmentFile= would hold."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLEASE_")}
    for assignment in _service().get("Environment", "").split():
        key, _, value = assignment.partition("=")
        env[key] = value
    return {**env, "PYTHONPATH": str(ROOT), "CRONLEASE_DATABASE_URL": url}


def _probes(config: Path, url: str) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each probe's own command, all three at once (as their probes would come)."""
    container = _container()
    commands = {
        "readiness": container["readinessProbe"]["exec"]["command"],
        "liveness": container["livenessProbe"]["exec"]["command"],
        "HEALTHCHECK": _healthcheck(),
    }
    # readiness and the HEALTHCHECK are one command: run each distinct command once
    running = {
        argv: subprocess.Popen(
            _here(list(argv), config),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(url),
        )
        for argv in {tuple(argv) for argv in commands.values()}
    }
    done = {}
    for argv, process in running.items():
        stdout, stderr = process.communicate(timeout=60)
        done[argv] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return {name: done[tuple(argv)] for name, argv in commands.items()}


def _codes(results: dict[str, subprocess.CompletedProcess[str]]) -> dict[str, int]:
    return {name: result.returncode for name, result in results.items()}


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s?)", value.strip())
    assert match, f"not a plain number of seconds: {value!r}"
    return float(match.group(1))


# --- the files agree with each other and with the config ------------------------


def test_every_stop_timeout_fits_the_shutdown_grace() -> None:
    grace = load_config(DEPLOY / "cronlease.toml").shutdown_grace
    assert grace is not None, "the example config should name its shutdown_grace"
    service = _service()
    pod = _deployment()["spec"]["template"]["spec"]
    docker = re.search(r"--stop-timeout (\d+)", DOCKERFILE.read_text())
    assert docker, "the Dockerfile should say which --stop-timeout to run it with"
    timeouts = {
        "TimeoutStopSec": _seconds(service["TimeoutStopSec"]),
        "terminationGracePeriodSeconds": float(pod["terminationGracePeriodSeconds"]),
        "--stop-timeout": float(docker.group(1)),
    }
    assert {name: t for name, t in timeouts.items() if t < grace + MARGIN} == {}, grace
    # SIGTERM to cronlease alone: it stops running commands itself, after its grace
    assert service["KillMode"] == "mixed" and service["Restart"] == "on-failure"
    assert re.search(r"^STOPSIGNAL SIGTERM$", DOCKERFILE.read_text(), re.MULTILINE)


def test_the_configmap_is_the_example_config() -> None:
    (configmap,) = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d["kind"] == "ConfigMap"]
    shipped = tomllib.loads((DEPLOY / "cronlease.toml").read_text())
    assert tomllib.loads(configmap["data"]["cronlease.toml"]) == shipped


def test_every_example_runs_the_same_command() -> None:
    unit = shlex.split(_service()["ExecStart"])
    docker = re.search(r"^CMD (\[.*\])$", DOCKERFILE.read_text(), re.MULTILINE)
    assert docker, "the Dockerfile has no exec-form CMD"
    commands = {
        "Dockerfile CMD": yaml.safe_load(docker.group(1)),
        "Deployment": _container()["args"],
    }
    assert {name: argv for name, argv in commands.items() if argv[1:] != unit[1:]} == {}, unit


# --- each file checked by the real tool ---------------------------------------


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    cronlease = BIN / "cronlease"
    assert cronlease.exists(), "the venv has no cronlease script"
    # verify checks that ExecStart's program exists: point it at this venv's
    unit = tmp_path / "cronlease.service"
    unit.write_text(UNIT.read_text().replace("/opt/cronlease/bin/cronlease", str(cronlease)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    # a misspelt value is only a warning (exit 0): the unit must print none
    assert (result.returncode, result.stderr, result.stdout) == (0, "", "")


def test_hadolint_passes_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint") or str(BIN / "hadolint")
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_the_manifest_validates_against_the_kubernetes_schemas() -> None:
    result = subprocess.run(
        [str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(MANIFEST)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    deployment = _deployment()
    assert deployment["spec"]["replicas"] == 3
    (variable,) = _container()["env"]
    assert variable["name"] == "CRONLEASE_DATABASE_URL" and "secretKeyRef" in variable["valueFrom"]


# --- run for real --------------------------------------------------------------


def _descendants(pid: int) -> set[int]:
    """Every live process under ``pid``: a command task leads a process group of its own, so
    the replica's group would not stand for the unit's cgroup, but its process tree does."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError):
            continue  # it ended while being read
        if state != "Z":
            parents.setdefault(int(ppid), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found.update(children)
        todo.extend(children)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.add(pid)
        except OSError:
            pass
    return alive


@pytest.mark.slow
def test_the_units_commands_run_ticks_and_stop_cleanly_on_sigterm(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    config = tmp_path / "cronlease.toml"
    # the example's [scheduler], with a task quick enough to see ticks and to be mid-run
    # when SIGTERM comes: the unit's KillMode must let it finish within the grace
    config.write_text(
        (DEPLOY / "cronlease.toml").read_text().split("[tasks.")[0]
        + textwrap.dedent(f"""
            [tasks.tick]
            command = "echo start >> {ledger}; sleep 1; echo end >> {ledger}"
            shell = true
            every = "2s"
        """)
    )
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    service = _service()
    replica = subprocess.Popen(
        _here(shlex.split(service["ExecStart"]), config),
        env=_env(url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    under: set[int] = set()
    try:

        def lines(kind: str) -> int:
            text = ledger.read_text() if ledger.exists() else ""
            return sum(line == kind for line in text.splitlines())

        wait_for(lambda: lines("end") >= 1, 30)
        probes = _probes(config, url)  # next to a replica whose task just succeeded
        assert _codes(probes) == {"readiness": 0, "liveness": 0, "HEALTHCHECK": 0}, probes
        wait_for(lambda: lines("start") > lines("end") and _descendants(replica.pid), 30)
        under = _descendants(replica.pid)
        # KillMode=mixed: SIGTERM to the main process alone; else to every process of the unit
        for pid in [replica.pid] + ([] if service["KillMode"] == "mixed" else sorted(under)):
            os.kill(pid, signal.SIGTERM)
        _, stderr = replica.communicate(timeout=_seconds(service["TimeoutStopSec"]))
    finally:
        if replica.poll() is None:  # what systemd does at TimeoutStopSec
            for pid in [replica.pid, *_alive(under)]:
                os.kill(pid, signal.SIGKILL)
            replica.wait()
    assert replica.returncode == 0, stderr  # 0: Restart=on-failure does not restart it
    assert lines("start") == lines("end"), f"a run was cut short: {ledger.read_text()}"
    assert _alive(under) == set(), "processes left for the final SIGKILL"


def test_a_config_mistake_stops_the_unit_for_good(tmp_path: Path) -> None:
    config = tmp_path / "cronlease.toml"
    config.write_text('[tasks.report]\ncommand = "true"\nevry = "1h"\n')
    service = _service()
    result = subprocess.run(
        _here(shlex.split(service["ExecStart"]), config),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(f"sqlite:///{tmp_path / 'leases.db'}"),
    )
    # not restarted in a loop: the exit status is one the unit prevents restarts for
    assert str(result.returncode) in service["RestartPreventExitStatus"].split(), result.stderr
    assert "task 'report', key 'evry'" in result.stderr
    assert not (tmp_path / "leases.db").exists()  # it started nothing


@pytest.mark.slow
def test_the_probes_tell_a_failing_task_and_an_unreachable_database(tmp_path: Path) -> None:
    config = tmp_path / "cronlease.toml"
    config.write_text('[tasks.report]\ncommand = "true"\nevery = "1h"\n')
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    store = LeaseStore.from_url(url)
    store.create_tables()
    record_attempts(store, "report", past_slot(60), ["failed"])
    store.dispose()
    failing = _probes(config, url)
    # only readiness and the HEALTHCHECK report a failing task: liveness restarts the pod,
    # and a restart cannot fix a task
    assert _codes(failing) == {"readiness": 1, "liveness": 0, "HEALTHCHECK": 1}, failing
    assert "report is failing" in failing["readiness"].stderr
    down = _probes(config, "postgresql://cronlease@127.0.0.1:1/nowhere?connect_timeout=2")
    assert _codes(down) == {"readiness": 1, "liveness": 1, "HEALTHCHECK": 1}, down
