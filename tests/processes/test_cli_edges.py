"""The ``cronlease`` command's rough edges (issue 15), each driven as a real process on SQLite.

Each test is a few command runs (about a second each): the rules behind them
(how a table is cut to fit, relative times, the orphan summary, where a
relative SQLite path points) are unit tests in tests/unit/test_cli_text.py.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, inspect, make_url

from cronlease import LeaseStore
from cronlease._lease.model import AcquireRequest
from cronlease._lease.schema import leases
from tests.conftest import url_for
from tests.processes.test_cli import CLI, _env, cli, write_config
from tests.support.attempts import past_slot, record_attempts
from tests.support.leases import set_lease_end, won
from tests.support.old_schema import make_old_tables, old_history

LONG = "nightly-warehouse-export-to-the-archive-bucket"


def tables_in(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        return inspect(engine).get_table_names()
    finally:
        engine.dispose()


def inspect_columns(url: str, table: str) -> list[dict[str, Any]]:
    engine = create_engine(url)
    try:
        return [dict(column) for column in inspect(engine).get_columns(table)]
    finally:
        engine.dispose()


def test_status_fits_100_columns_flags_overdue_and_has_a_wide_view(tmp_path: Path) -> None:
    url = url_for("sqlite", tmp_path)
    write_config(
        tmp_path,
        url,
        f"""
        [tasks.{LONG}]
        command = "true"
        cron = "30 2 * * *"
        timezone = "America/Argentina/Buenos_Aires"

        [tasks.beat]
        command = "true"
        every = "1s"

        [tasks.report]
        command = "true"
        every = "1h"

        [tasks.flaky]
        command = "true"
        every = "1h"
        """,
    )
    store = LeaseStore.from_url(url)
    store.create_tables()
    record_attempts(store, "report", past_slot(180), ["succeeded"])
    beat = past_slot(60)
    record_attempts(store, "beat", beat, ["succeeded"])  # every 1s: overdue now
    set_lease_end(store, "beat", beat / 1000 + 1)  # that run ended then, not just now
    record_attempts(store, "flaky", past_slot(120), ["failed"])
    record_attempts(store, "flaky", past_slot(60), ["timed_out"])  # 2 in a row
    store.dispose()

    narrow = cli("status", cwd=tmp_path)
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, narrow.stdout
    assert lines[0].split() == ["TASK", "SCHEDULE", "STATE", "LAST", "RUN", "NEXT", "HOLDER"]
    rows = {line.split()[0]: line for line in lines[1:] if line.strip()}
    assert re.search(r"\boverdue\b", rows["beat"]), narrow.stdout
    assert re.search(r"\bfailing\s+timed_out (now|\d+s ago)", rows["flaky"]), narrow.stdout
    assert re.search(r"succeeded\s+(now|\d+s ago)\s+in \d+[smh]", rows["report"]), narrow.stdout
    (cut,) = [name for name in rows if name.startswith("nightly")]
    assert cut.endswith("\u2026") and LONG.startswith(cut[:-1])  # cut, with an ellipsis
    assert not re.search(r"\d\d:\d\d:\d\d", narrow.stdout)  # no ISO instant in the narrow view

    wide = cli("status", "-o", "wide", cwd=tmp_path)
    assert wide.returncode == 0, wide.stderr
    header = wide.stdout.splitlines()[0]
    for column in ("HOLDER", "FENCE", "LAST SLOT", "FAILURES", "ABANDONED", "LEASE UNTIL"):
        assert column in header
    (flaky,) = [line for line in wide.stdout.splitlines() if line.startswith("flaky ")]
    assert flaky[header.index("FAILURES") :].split()[0] in ("2", "2+")  # 2+: at least
    assert LONG in wide.stdout and "ago" not in wide.stdout
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z", wide.stdout)


def test_orphaned_rows_are_summarised_listed_on_request_and_forgotten(tmp_path: Path) -> None:
    url = url_for("sqlite", tmp_path)
    store = LeaseStore.from_url(url)
    store.create_tables()
    orphans = [f"gone-{index:02d}" for index in range(12)]
    for name in [*orphans, "kept"]:
        record_attempts(store, name, past_slot(60), ["failed"])
    request = AcquireRequest(name="gone-busy", slot=past_slot(1), ttl=60, holder="h")
    assert won(store.acquire(request)) is not None
    store.dispose()
    write_config(tmp_path, url, '[tasks.kept]\ncommand = "true"\nevery = "1h"\n')

    summary = cli("status", cwd=tmp_path).stdout
    assert "13 orphaned lease row(s)" in summary and "and 8 more" in summary
    assert "gone-11" not in summary and len(summary.splitlines()) < 10
    assert "cronlease status --orphaned" in summary and "cronlease forget TASK" in summary
    listed = cli("status", "--orphaned", cwd=tmp_path).stdout
    assert all(re.search(rf"^{name}\s", listed, re.M) for name in [*orphans, "gone-busy"])

    forgot = cli("forget", "gone-00", cwd=tmp_path)
    assert forgot.returncode == 0 and "history" in forgot.stdout, forgot.stderr
    held = cli("forget", "gone-busy", cwd=tmp_path)
    assert held.returncode == 2 and "a run holds the lease of 'gone-busy'" in held.stderr
    declared = cli("forget", "kept", cwd=tmp_path)  # its next tick would make a new row
    assert declared.returncode == 2 and "declared in" in declared.stderr
    assert "--force" in declared.stderr
    assert cli("forget", "kept", "--force", cwd=tmp_path).returncode == 0

    store = LeaseStore.from_url(url)
    assert [row.name for row in store.leases(["gone-00", "gone-01", "gone-busy", "kept"])] == [
        "gone-01",
        "gone-busy",
    ]
    assert store.history("gone-00") == store.history("kept") == []
    assert len(store.history("gone-01")) == 1
    store.dispose()


def test_forget_finishes_a_forget_cut_short_and_names_a_run_outliving_its_lease(
    tmp_path: Path,
) -> None:
    url = url_for("sqlite", tmp_path)
    store = LeaseStore.from_url(url)
    store.create_tables()
    record_attempts(store, "halfway", past_slot(60), ["failed", "succeeded"])
    with store.engine.begin() as conn:  # a forget stopped after the row, before the history
        conn.execute(leases.delete().where(leases.c.name == "halfway"))
    request = AcquireRequest(name="lapsed", slot=past_slot(1), ttl=60, holder="h")
    assert won(store.acquire(request)) is not None
    set_lease_end(store, "lapsed", time.time() - 3600)  # its heartbeat stopped; the run did not
    store.dispose()

    finished = cli("forget", "halfway", "--database", url, cwd=tmp_path)
    assert finished.returncode == 0 and "no lease row left" in finished.stdout, finished.stderr
    running = cli("forget", "lapsed", "--database", url, cwd=tmp_path)
    assert running.returncode == 2
    assert "is still 'running' though its lease ended 1h" in running.stderr, running.stderr
    assert "stuck-run watcher" in running.stderr
    nothing = cli("forget", "halfway", "--database", url, cwd=tmp_path)
    assert nothing.returncode == 2 and "nothing to forget" in nothing.stderr

    store = LeaseStore.from_url(url)
    assert store.history("halfway") == []
    assert [run.outcome for run in store.history("lapsed")] == ["running"]
    assert [row.name for row in store.leases(["lapsed"])] == ["lapsed"]
    store.dispose()


def test_read_commands_on_an_empty_database_create_nothing(tmp_path: Path) -> None:
    database = tmp_path / "empty.db"
    sqlite3.connect(database).close()  # a file, no tables
    url = f"sqlite:///{database}"
    write_config(tmp_path, url, '[tasks.job]\ncommand = "true"\nevery = "1h"\n')

    status = cli("status", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert f"no cronlease tables yet in {url}" in status.stdout
    assert re.search(r"^job\s+every 1h\s+idle\s+never", status.stdout, re.M)
    history = cli("history", "job", cwd=tmp_path)
    assert history.returncode == 0 and "no cronlease tables yet" in history.stdout
    unknown = cli("history", "nosuch", cwd=tmp_path)
    assert unknown.returncode == 2 and "no task 'nosuch'" in unknown.stderr
    assert tables_in(url) == []

    # tables of an earlier version: said so, and not upgraded by a read (a write's job)
    engine = create_engine(url)
    make_old_tables(engine, old_history("job", [past_slot(60)]))
    engine.dispose()
    earlier = cli("status", cwd=tmp_path)
    assert earlier.returncode == 1 and "of an earlier version" in earlier.stderr
    assert "attempt" not in [column["name"] for column in inspect_columns(url, "cronlease_runs")]


def test_an_unreachable_database_is_named_so_and_exits_1(tmp_path: Path) -> None:
    down = "postgresql://nobody@127.0.0.1:9/none"
    for command in (["status"], ["pause", "job"]):  # a read, a write
        result = cli(*command, "--database", down, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith(f"cronlease: error: database unreachable: {down}: ")
        assert "creating the cronlease tables" not in result.stderr


def test_a_server_that_refuses_and_a_file_that_is_no_database_are_named_so(
    tmp_path: Path,
) -> None:
    for backend, reason in (
        ("postgresql", 'database "cronlease_nosuch" does not exist'),
        ("mysql", "Unknown database 'cronlease_nosuch'"),
    ):
        url = make_url(url_for(backend, tmp_path)).set(database="cronlease_nosuch")
        given = url.render_as_string(hide_password=False)
        result = cli("status", "--database", given, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert result.stderr == f"cronlease: error: cannot connect: {url!r}: {reason}\n"
    garbage = tmp_path / "notes.db"
    garbage.write_text("not a database, " * 1000)
    result = cli("status", "--database", f"sqlite:///{garbage}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(f"cronlease: error: not a database: sqlite:///{garbage}: ")


def test_read_commands_leave_a_sqlite_journal_mode_and_read_a_read_only_copy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cronlease.db"
    store = LeaseStore.from_url(f"sqlite:///{path}")
    store.create_tables()
    record_attempts(store, "job", past_slot(60), ["succeeded"])
    store.dispose()
    with sqlite3.connect(path) as conn:  # a file of an application in rollback-journal mode
        assert conn.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    copy = tmp_path / "copy.db"
    copy.write_bytes(path.read_bytes())
    copy.chmod(0o444)

    status = cli("status", "--database", f"sqlite:///{path}", cwd=tmp_path)
    assert status.returncode == 0 and re.search(r"^job\s", status.stdout, re.M), status.stderr
    with sqlite3.connect(path) as conn:  # not switched to WAL: that is a write
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    read_only = f"sqlite:///file:{copy}?mode=ro&uri=true"  # read-only even for root
    status = cli("status", "--database", read_only, cwd=tmp_path)
    assert status.returncode == 0 and re.search(r"^job\s", status.stdout, re.M), status.stderr


def test_trigger_leaves_tables_of_an_earlier_version_to_its_scheduler_to_upgrade(
    tmp_path: Path,
) -> None:
    url = url_for("sqlite", tmp_path)
    engine = create_engine(url)
    make_old_tables(engine, old_history("job", [past_slot(60)]))
    engine.dispose()
    write_config(tmp_path, url, '[tasks.job]\ncommand = "true"\nevery = "1h"\n')

    result = cli("trigger", "job", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "attempt" in [column["name"] for column in inspect_columns(url, "cronlease_runs")]


def test_a_closed_pipe_ends_quietly_with_141(tmp_path: Path) -> None:
    url = url_for("sqlite", tmp_path)
    write_config(tmp_path, url, '[tasks.job]\ncommand = "true"\nevery = "1h"\n')
    # the reader is gone before the command writes its first byte (`| head -0`)
    proc = subprocess.Popen(
        [*CLI, "status", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 141, stderr
    assert stderr == ""


def test_bare_cronlease_prints_the_help_and_subcommands_no_epilog(tmp_path: Path) -> None:
    bare = cli(cwd=tmp_path)
    assert bare.returncode == 2
    assert "the following arguments are required" not in bare.stderr
    assert all(verb in bare.stderr for verb in ("run", "status", "history", "forget"))
    assert re.search(r"^  141  ", bare.stderr, re.M)  # the table of exit statuses
    sub_help = cli("status", "--help", cwd=tmp_path)
    assert sub_help.returncode == 0 and "exit status:" not in sub_help.stdout
    assert "cronlease --help" in sub_help.stdout


def test_a_relative_sqlite_path_is_the_config_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "cronlease.toml").write_text(
        'database = "sqlite:///leases.db"\n[tasks.job]\ncommand = "true"\nevery = "1h"\n'
    )
    made = cli("init-db", "-c", "app/cronlease.toml", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (folder / "leases.db").exists() and not (tmp_path / "leases.db").exists()
    there = json.loads(cli("status", "--json", cwd=folder).stdout)
    assert there["database"] == f"sqlite:///{folder.resolve() / 'leases.db'}"
    assert there["tables"] is True
