"""Two replicas as real processes, logging with the JSON recipe of
docs/reference/log-lines.md: from their two logs, who ran which tick — each run line
names the replica, the tick as a local ISO time, the fence and the outcome, in its text
and its ``cronlease_*`` fields — and no APScheduler INFO line at the default level."""

from __future__ import annotations

import inspect
import json
from datetime import datetime
from typing import Any

import pytest

from cronlease._timing.schedule import time_of_slot
from tests.support import ledger
from tests.support.json_log import JsonFormatter
from tests.support.procs import ROOT, Proc, wait_for


def test_the_replicas_log_with_the_docs_recipe_word_for_word() -> None:
    page = ROOT / "docs" / "reference" / "log-lines.md"
    assert inspect.getsource(JsonFormatter) in page.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])
def test_two_replicas_logs_tell_who_ran_which_tick(db_url: str, task_name: str) -> None:
    ledger.setup(db_url)
    env = {"CRONLEASE_TEST_JSON_LOG": "1"}
    replicas = [Proc("-m", "tests.support.replica", db_url, task_name, env=env) for _ in range(2)]
    try:
        for replica in replicas:
            replica.expect("started")
        wait_for(lambda: len(ledger.entries(db_url, task_name)) >= 4, 30, "four runs")
    finally:
        codes = [replica.terminate() for replica in replicas]
    assert codes == [0, 0], [replica.stderr()[-2000:] for replica in replicas]
    logs = [
        [json.loads(line) for line in replica.stderr().splitlines() if line.startswith("{")]
        for replica in replicas
    ]
    ran: dict[str, int] = {}  # the tick (ISO) -> the pid whose log says it ran it
    for replica, log in zip(replicas, logs, strict=True):
        assert not [entry for entry in log if entry["logger"].startswith("apscheduler")], log
        lines = [entry for entry in log if entry.get("cronlease_task") == task_name]
        replica_ids = {entry["cronlease_replica"] for entry in lines}
        assert len(replica_ids) <= 1, replica_ids  # each log names its own replica only
        for entry in lines:
            check_run_line(entry, replica.popen.pid)
            if "cronlease_outcome" in entry:
                assert entry["cronlease_scheduled_for"] not in ran  # a tick runs once
                ran[entry["cronlease_scheduled_for"]] = replica.popen.pid
    expected = {
        time_of_slot(slot).isoformat(timespec="seconds"): pid
        for slot, pid in ledger.entries(db_url, task_name)
    }
    assert ran == expected


def check_run_line(entry: dict[str, Any], pid: int) -> None:
    """A started or finished line: its fields, and the same facts in its text."""
    message = entry["message"]
    replica = entry["cronlease_replica"]
    assert replica.split(":")[1] == str(pid)  # the holder id status shows: host:pid:random
    scheduled = entry["cronlease_scheduled_for"]
    assert datetime.fromisoformat(scheduled).utcoffset() is not None  # local, with its offset
    assert f"tick {scheduled} replica={replica} fence={entry['cronlease_fence']} " in message
    assert entry["cronlease_attempt"] == 1 and entry["cronlease_manual"] is False
    if "cronlease_outcome" in entry:
        assert entry["cronlease_outcome"] == "succeeded"
        assert message.startswith(f"{entry['cronlease_task']}: succeeded in ")
        assert isinstance(entry["cronlease_duration"], float)
    else:
        assert message.startswith(f"{entry['cronlease_task']}: started, ")
