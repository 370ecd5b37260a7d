"""``cronlease schedule add|set|rm|ls|show|history``, driven as real processes.

Each subcommand on SQLite, text and JSON; the model-facing paths (add, a stale
``--version`` refused naming the newer one and who made it, rm, ls/show/history as
JSON) on SQLite, PostgreSQL and MariaDB; bad input exits 2 in one line naming the
schedule and the key, and writes nothing; a live replica's jobs check a row (an
unknown job lists them); the reads create nothing, and a database that cannot be
reached is the other commands' one line, exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cronlease import RunContext, Scheduler
from cronlease._lease.schema import schedules
from cronlease._schedules.rows import ROW_OPTIONS
from cronlease.cli.parser import build_parser
from tests.conftest import BACKENDS, url_for
from tests.support.cli_forks import CliServer
from tests.support.procs import ROOT, wait_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLEASE_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


SERVER = CliServer(ROOT, _env())


@pytest.fixture(autouse=True, scope="module")
def _cli_server() -> Iterator[None]:
    yield
    SERVER.close()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m cronlease ARGS`` in ``cwd``: its exit status, stdout and stderr."""
    return SERVER.run(list(args), cwd, _env())


def cli_json(*args: str, cwd: Path) -> Any:
    result = cli(*args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def refused(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a command that exited 2 and printed nothing."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cronlease: error: "), result.stderr
    return lines[0].removeprefix("cronlease: error: ")


def write_config(folder: Path, url: str, namespace: str, body: str = "") -> None:
    header = f'database = "{url}"\nnamespace = "{namespace}"\n'
    (folder / "cronlease.toml").write_text(header + textwrap.dedent(body))


@pytest.fixture
def namespace() -> str:
    """Keeps tests apart on the shared servers' databases."""
    return f"t{uuid.uuid4().hex[:10]}"


def export(ctx: RunContext, customer: str, limit: int = 10) -> None:
    """A job a replica offers: its signature is what rows are checked against."""


def purge(days: int) -> None:
    """Another job."""


@pytest.fixture
def replica(tmp_path: Path, namespace: str) -> Iterator[Scheduler]:
    """A live replica (in this process) offering ``export`` and ``purge`` on SQLite."""
    scheduler = Scheduler(url_for("sqlite", tmp_path), namespace=namespace, schedule_poll=0.1)
    scheduler.register(export)
    scheduler.register(purge)
    scheduler.start()
    try:
        wait_for(
            lambda: set(scheduler.schedules.jobs()) == {"export", "purge"}, 20, "its jobs offered"
        )
        yield scheduler
    finally:
        scheduler.shutdown()
        scheduler.store.dispose()


# --- every subcommand, text and JSON ------------------------------------------------------


def test_each_subcommand_on_sqlite_as_text_and_json(tmp_path: Path, namespace: str) -> None:
    write_config(tmp_path, url_for("sqlite", tmp_path), namespace)
    added = cli(
        "schedule",
        "add",
        "nightly",
        "--job",
        "export",
        "--cron",
        "0 3 * * *",
        "--timezone",
        "Europe/Paris",
        "--kwargs",
        '{"customer": "acme"}',
        "--retries",
        "2",
        "--grace",
        "90s",
        "--changed-by",
        "alice",
        cwd=tmp_path,
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == (
        "added schedule 'nightly': version 1, job export, cron '0 3 * * *' (Europe/Paris)\n"
    )
    # no replica offers a job yet: the row is checked when one loads it, and it says so
    assert "no live replica offers any job here" in added.stderr
    cli(
        "schedule",
        "add",
        "weekly",
        "--job",
        "purge",
        "--every",
        "7d",
        "--args",
        "[30]",
        cwd=tmp_path,
    )

    listed = cli("schedule", "ls", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == [
        "NAME",
        "JOB",
        "SCHEDULE",
        "ENABLED",
        "VERSION",
        "CHANGED",
        "BY",
        "CHANGED",
        "AT",
        "REPLICAS",
        "STATE",
    ]
    assert [row.split()[:2] for row in rows] == [["nightly", "export"], ["weekly", "purge"]]
    assert re.search(
        r"^nightly +export +cron '0 3 \* \* \*' \(Europe/Paris\) +yes +1 +alice +\S+ \S+Z +0 +"
        r"not offered: no live replica offers job 'export'$",
        rows[0],
    ), rows[0]
    assert re.search(r"^weekly +purge +every 7d +yes +1 +\S+@\S+ ", rows[1]), rows[1]

    shown = cli("schedule", "show", "nightly", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    fields = dict(re.split(r"  +", line, maxsplit=1) for line in shown.stdout.splitlines())
    assert fields["kwargs"] == '{"customer": "acme"}' and fields["args"] == "[]"
    assert fields["options"] == 'grace = "90s", retries = 2'
    assert fields["version"] == "1" and fields["changed by"] == "alice"
    assert fields["offered by"] == "no live replica"

    changed = cli(
        "schedule", "set", "nightly", "--every", "1h", "--disable", "--version", "1", cwd=tmp_path
    )
    assert changed.returncode == 0, changed.stderr
    assert (
        changed.stdout == "changed schedule 'nightly': version 2, job export, every 1h, disabled\n"
    )
    as_json = cli_json("schedule", "show", "nightly", cwd=tmp_path)
    assert (as_json["every"], as_json["cron"], as_json["timezone"]) == ("1h", None, None)
    assert as_json["enabled"] is False and as_json["kwargs"] == {"customer": "acme"}
    assert re.fullmatch(r"\S+@\S+", as_json["changed_by"])  # user@host, the model's default
    assert as_json["full_name"] == f"{namespace}:nightly" and as_json["namespace"] == namespace
    unset = cli_json("schedule", "set", "nightly", "--unset", "retries", "--enable", cwd=tmp_path)
    assert unset["options"] == {"grace": "90s"} and unset["enabled"] is True

    removed = cli("schedule", "rm", "weekly", cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith("removed schedule 'weekly' (version 2): ")
    assert [s["name"] for s in cli_json("schedule", "ls", cwd=tmp_path)] == ["nightly"]
    assert refused(cli("schedule", "show", "weekly", cwd=tmp_path)).startswith(
        "no schedule named 'weekly'"
    )

    history = cli("schedule", "history", "nightly", cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    header, *lines = history.stdout.splitlines()
    assert header.split() == ["VERSION", "CHANGED", "AT", "CHANGED", "BY", "ACTION", "CHANGES"]
    assert [line.split()[0] for line in lines] == ["1", "2", "3"]
    assert 'every: null -> "1h"' in lines[1] and "enabled: true -> false" in lines[1]
    assert "alice" in lines[0] and " add " in lines[0] and " set " in lines[1]
    kept = cli_json("schedule", "history", "weekly", cwd=tmp_path)  # kept after rm
    assert [(c["version"], c["action"]) for c in kept] == [(1, "add"), (2, "remove")]
    assert kept[1]["changes"]["args"] == {"old": [30], "new": None}

    bare = cli("schedule", cwd=tmp_path)
    assert bare.returncode == 2 and "SUBCOMMAND" in bare.stderr and bare.stdout == ""
    nothing = refused(cli("schedule", "set", "nightly", cwd=tmp_path))
    assert nothing.startswith("schedule set: nothing to change")


# --- the model-facing paths on every backend -----------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_add_stale_set_rm_and_the_reads_as_json(
    backend: str, tmp_path: Path, namespace: str
) -> None:
    write_config(tmp_path, url_for(backend, tmp_path), namespace)
    added = cli_json(
        "schedule", "add", "report", "--job", "purge", "--every", "1h", "--args", "[7]",
        "--changed-by", "alice", cwd=tmp_path,
    )  # fmt: skip
    assert (added["version"], added["changed_by"], added["args"]) == (1, "alice", [7])
    bob = cli_json(
        "schedule", "set", "report", "--args", "[8]", "--version", "1", "--changed-by", "bob",
        cwd=tmp_path,
    )  # fmt: skip
    assert bob["version"] == 2

    stale = refused(
        cli("schedule", "set", "report", "--args", "[9]", "--version", "1", cwd=tmp_path)
    )
    assert stale.startswith("schedule 'report' is at version 2 (changed by bob at "), stale
    assert stale.endswith(", not 1: read it again and redo the change")
    stale_rm = refused(cli("schedule", "rm", "report", "--version", "1", cwd=tmp_path))
    assert "is at version 2 (changed by bob" in stale_rm

    (listed,) = cli_json("schedule", "ls", cwd=tmp_path)
    assert (listed["name"], listed["args"], listed["version"]) == ("report", [8], 2)
    assert cli_json("schedule", "show", "report", cwd=tmp_path) == listed
    removed = cli_json("schedule", "rm", "report", "--version", "2", cwd=tmp_path)
    assert removed == {"name": "report", "removed": True, "version": 3}
    assert cli_json("schedule", "ls", cwd=tmp_path) == []
    history = cli_json("schedule", "history", "report", cwd=tmp_path)
    assert [(c["version"], c["action"], c["changed_by"]) for c in history][:2] == [
        (1, "add", "alice"),
        (2, "set", "bob"),
    ]
    assert history[1]["changes"] == {"args": {"old": [7], "new": [8]}}
    assert history[2]["action"] == "remove"


# --- bad input: exit 2, one line, nothing written --------------------------------------------


@pytest.mark.slow
def test_bad_input_exits_2_naming_the_schedule_and_key_and_writes_nothing(
    tmp_path: Path, namespace: str, replica: Scheduler
) -> None:
    write_config(
        tmp_path,
        url_for("sqlite", tmp_path),
        namespace,
        """
        [tasks.backup]
        command = "true"
        every = "1h"
        """,
    )
    base = ["schedule", "add", "x", "--every", "1m"]
    cases = [
        (
            ["--job", "exprot", "--kwargs", '{"customer": "c"}'],
            "schedule 'x', key 'job': unknown job 'exprot'; known: export, purge",
        ),
        (["--job", "export"], "missing a required argument: 'customer'"),
        (["--job", "purge", "--args", "[1, 2]"], "schedule 'x', key 'args'"),
        (["--job", "export", "--kwargs", '{"customer": "c", "limt": 1}'], "did you mean 'limit'"),
        (["--job", "purge", "--args", "[1"], "schedule 'x', key 'args': not JSON"),
        (
            ["--job", "purge", "--args", "[1]", "--kwargs", "[1]"],
            "schedule 'x', key 'kwargs': must be a JSON object",
        ),
        (
            ["--job", "purge", "--args", "[1]", "--retries", "-1"],
            "schedule 'x', key 'retries': must be a whole number from 0 to 100, not -1",
        ),
        (
            ["--job", "purge", "--args", "[1]", "--recover", "yes"],
            "schedule 'x', key 'recover': must be true or false",
        ),
        (
            ["--job", "purge", "--args", "[1]", "--timezone", "Europe/Paris"],
            "schedule 'x', key 'timezone': applies to cron schedules only",
        ),
        (
            ["--job", "purge", "--args", "[1]", "--jitter", "1m"],
            "schedule 'x', key 'jitter': must be at most half the gap",
        ),
    ]
    for extra, words in cases:
        line = refused(cli(*base, *extra, cwd=tmp_path))
        assert words in line, (extra, line)
    bad_cron = ["schedule", "add", "x", "--job", "purge", "--args", "[1]", "--cron", "61 * * * *"]
    assert refused(cli(*bad_cron, cwd=tmp_path)).startswith("schedule 'x', key 'cron': ")
    taken = refused(
        cli(
            "schedule",
            "add",
            "backup",
            "--job",
            "purge",
            "--every",
            "1m",
            "--args",
            "[1]",
            cwd=tmp_path,
        )
    )
    assert taken == "schedule 'backup': a task declared in code here has that name; choose another"
    assert cli_json("schedule", "ls", cwd=tmp_path) == []
    assert refused(cli("schedule", "history", "x", cwd=tmp_path)).startswith(
        "no schedule named 'x' has a recorded change"
    )

    # a good one, then bad changes of it change nothing
    cli_json(
        "schedule", "add", "x", "--job", "purge", "--every", "1m", "--args", "[1]", cwd=tmp_path
    )
    assert "key 'args'" in refused(cli("schedule", "set", "x", "--args", "[1, 2]", cwd=tmp_path))
    assert "unknown job 'nope'" in refused(
        cli("schedule", "set", "x", "--job", "nope", cwd=tmp_path)
    )
    assert refused(cli("schedule", "set", "y", "--every", "1m", cwd=tmp_path)).startswith(
        "no schedule named 'y'"
    )
    (row,) = cli_json("schedule", "ls", cwd=tmp_path)
    assert (row["version"], row["args"], row["valid"]) == (1, [1], True)
    assert row["offered_by"] == [replica.holder]
    assert len(cli_json("schedule", "history", "x", cwd=tmp_path)) == 1
    shown = cli("schedule", "show", "x", cwd=tmp_path)
    assert f"offered by  {replica.holder}" in shown.stdout and "state       ok" in shown.stdout


# --- the database ------------------------------------------------------------------------


def test_reads_create_nothing_and_an_unreachable_database_exits_1(
    tmp_path: Path, namespace: str
) -> None:
    database = tmp_path / "never.db"
    write_config(tmp_path, f"sqlite:///{database}", namespace)
    listed = cli("schedule", "ls", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        f"no cronlease tables yet in sqlite:///{database}: a replica or cronlease init-db "
        "creates them",
        "(no schedules)",
    ]
    assert cli_json("schedule", "ls", cwd=tmp_path) == []
    assert refused(cli("schedule", "show", "x", cwd=tmp_path)).startswith("no schedule named 'x'")
    assert "no cronlease tables yet" in refused(cli("schedule", "history", "x", cwd=tmp_path))
    assert not database.exists(), "a read created the database"

    down = ["--database", "postgresql://nobody@127.0.0.1:9/none"]
    for words in (
        ["ls"],
        ["show", "x"],
        ["history", "x"],
        ["add", "x", "--job", "j", "--every", "1m"],
        ["set", "x", "--every", "1m"],
        ["rm", "x"],
    ):
        result = cli("schedule", *words, *down, cwd=tmp_path)
        assert result.returncode == 1, (words, result.stderr)
        assert result.stderr.startswith(
            "cronlease: error: database unreachable: postgresql://nobody@127.0.0.1:9/none: "
        ), result.stderr
        assert len(result.stderr.splitlines()) == 1 and result.stdout == ""


# --- the option flags ----------------------------------------------------------------------


def test_a_flag_per_option_a_row_keeps_read_as_cronlease_toml_reads_it(
    tmp_path: Path, namespace: str
) -> None:
    parser = build_parser()
    for verb in ("add", "set"):
        sub = parser.parse_args(["schedule", verb, "x", "--job", "j", "--every", "1"])
        assert sub.handler.__name__ == f"cmd_schedule_{verb}"
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    schedule = commands.choices["schedule"]
    subcommands = next(a for a in schedule._actions if isinstance(a, argparse._SubParsersAction))
    flags = {o for a in subcommands.choices["add"]._actions for o in a.option_strings}
    assert {f"--{key.replace('_', '-')}" for key in ROW_OPTIONS} <= flags
    assert "--ping-url" not in flags  # not kept in a row: its path is a secret

    values = {
        "anchor": "2026-01-01T00:00:30Z",
        "lease_ttl": '"2m"',
        "grace": "30",
        "timeout": "1h",
        "catchup": "all",
        "catchup_limit": "5",
        "retries": "3",
        "retry_delay": "20s",
        "recover": "true",
        "alert_after": "2",
        "jitter": "1.5",
        "roles": '["reports", "batch"]',
    }
    assert set(values) == set(ROW_OPTIONS), "a new option: give it a value here"
    write_config(tmp_path, url_for("sqlite", tmp_path), namespace)
    given = [word for key, text in values.items() for word in (f"--{key.replace('_', '-')}", text)]
    added = cli_json("schedule", "add", "x", "--job", "j", "--every", "1m", *given, cwd=tmp_path)
    # what a [tasks.NAME] table's TOML gives each key (bare words are strings there as quoted)
    toml = "\n".join(
        f"{key} = {text if key not in ('timeout', 'catchup', 'retry_delay') else json.dumps(text)}"
        for key, text in values.items()
    )
    expected = tomllib.loads(toml)
    expected["anchor"] = expected["anchor"].isoformat()
    expected["roles"] = ["batch", "reports"]  # kept sorted, as a task keeps them
    assert dict(added["options"]) == {**expected, "roles": added["options"]["roles"]}
    assert sorted(added["options"]["roles"]) == expected["roles"]
    assert added["every"] == "1m"
    assert cli_json("schedule", "set", "x", "--every", "30", cwd=tmp_path)["every"] == "30s"


def test_a_row_corrupted_by_hand_is_listed_invalid_and_repaired_by_set(
    tmp_path: Path, namespace: str
) -> None:
    url = url_for("sqlite", tmp_path)
    write_config(tmp_path, url, namespace)
    for name in ("good", "broken"):
        added = cli("schedule", "add", name, "--job", "purge", "--every", "1m", cwd=tmp_path)
        assert added.returncode == 0, added.stderr
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.update(schedules)
                .where(schedules.c.name == f"{namespace}:broken")
                .values(kwargs="{not json")
            )
    finally:
        engine.dispose()
    listed = cli("schedule", "ls", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    broken = next(line for line in listed.stdout.splitlines() if line.startswith("broken "))
    assert "invalid: its JSON cannot be read" in broken
    shown = cli_json("schedule", "show", "broken", cwd=tmp_path)
    assert shown["valid"] is False and "JSON" in shown["invalid"]
    repaired = cli_json("schedule", "set", "broken", "--kwargs", "{}", cwd=tmp_path)
    assert (repaired["version"], repaired["kwargs"]) == (2, {})
    assert cli_json("schedule", "history", "broken", cwd=tmp_path)[1]["changes"]["kwargs"] == {
        "old": None,
        "new": {},
    }


# --- the rows in `cronlease status` ------------------------------------------------------


def _corrupt(url: str, name: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.update(schedules).where(schedules.c.name == name).values(kwargs="{not json")
            )
    finally:
        engine.dispose()


CODE_TASK = """
[tasks.coded]
call = "os:getpid"
every = "1h"
"""


def test_status_shows_an_invalid_row_with_its_reason_and_check_fails(
    tmp_path: Path, namespace: str, replica: Scheduler
) -> None:
    url = url_for("sqlite", tmp_path)
    write_config(tmp_path, url, namespace, CODE_TASK)
    for name in ("good", "broken"):
        added = cli(
            "schedule",
            "add",
            name,
            "--job",
            "purge",
            "--every",
            "1m",
            "--args",
            "[1]",
            cwd=tmp_path,
        )
        assert added.returncode == 0, added.stderr
    _corrupt(url, f"{namespace}:broken")

    shown = cli("status", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "invalid" in next(line for line in lines if line.startswith("broken "))
    assert "idle" in next(line for line in lines if line.startswith("good "))
    assert "broken: invalid schedule, not run: its JSON cannot be read" in shown.stdout
    assert "orphaned" not in shown.stdout

    report = cli_json("status", cwd=tmp_path)
    tasks = {task["task"]: task for task in report["tasks"]}
    assert set(tasks) == {"coded", "good", "broken"} and report["orphaned"] == []
    assert (tasks["coded"]["source"], tasks["good"]["source"]) == ("code", "database")
    broken = tasks["broken"]
    assert (broken["shown_state"], broken["job"], broken["unoffered"]) == (
        "invalid",
        "purge",
        False,
    )
    assert "JSON" in broken["invalid"] and report["invalid"] == [f"{namespace}:broken"]
    assert (tasks["good"]["shown_state"], tasks["good"]["invalid"]) == ("idle", None)
    assert tasks["good"]["next_fire_time"] is not None

    checked = cli("status", "--check", cwd=tmp_path)
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    assert f"{namespace}:broken is invalid: its JSON cannot be read" in checked.stderr
    assert cli("status", "--check", "--json", cwd=tmp_path).returncode == 1
    # disabling the row silences it, as pausing a failing task does
    _enable(url, f"{namespace}:broken", enabled=False)
    assert cli("status", "--check", cwd=tmp_path).returncode == 0


def _enable(url: str, name: str, *, enabled: bool) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.update(schedules).where(schedules.c.name == name).values(enabled=enabled)
            )
    finally:
        engine.dispose()


def test_status_says_no_live_replica_offers_a_rows_job_and_check_passes(
    tmp_path: Path, namespace: str
) -> None:
    write_config(tmp_path, url_for("sqlite", tmp_path), namespace, CODE_TASK)
    added = cli(
        "schedule",
        "add",
        "lonely",
        "--job",
        "purge",
        "--every",
        "1h",
        "--args",
        "[1]",
        cwd=tmp_path,
    )
    assert added.returncode == 0, added.stderr

    shown = cli("status", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "unoffered" in next(
        line for line in shown.stdout.splitlines() if line.startswith("lonely ")
    )
    assert "lonely: no live replica offers job 'purge'" in shown.stdout
    task = next(t for t in cli_json("status", cwd=tmp_path)["tasks"] if t["task"] == "lonely")
    assert (task["shown_state"], task["unoffered"], task["invalid"]) == ("unoffered", True, None)
    # not a problem of its own: like a code task no replica runs, once a tick is overdue
    checked = cli("status", "--check", cwd=tmp_path)
    assert checked.returncode == 0, (checked.stdout, checked.stderr)
    # a declared task of the status, known before it first runs (a declared one's words)
    history = cli("history", "lonely", cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert history.stdout == f"no runs of '{namespace}:lonely' recorded\n"
