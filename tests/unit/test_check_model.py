"""The model ``cronlease check`` prints: next fire times as real wall times of the task's zone.

A cron task in Europe/Berlin is listed across the spring change of 2024-03-31
(02:00-03:00 does not exist) and the autumn one of 2024-10-27: whatever instant
the schedule picks, the time shown is that instant's wall time there, with the
offset the zone has at that instant.
"""

from __future__ import annotations

import itertools
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cronlease.cli.check import describe
from cronlease.config import Config, load_config

BERLIN = ZoneInfo("Europe/Berlin")


def config_with(tmp_path: Path, body: str) -> Config:
    path = tmp_path / "cronlease.toml"
    path.write_text(textwrap.dedent(body))
    return load_config(path)


@pytest.mark.parametrize(
    "start", ["2024-03-29T12:00:00+00:00", "2024-10-25T12:00:00+00:00"], ids=["spring", "autumn"]
)
def test_fire_times_are_real_local_times_with_their_offsets(tmp_path: Path, start: str) -> None:
    config = config_with(
        tmp_path,
        """
        [tasks.nightly]
        command = "true"
        cron = "30 2 * * *"
        timezone = "Europe/Berlin"
        """,
    )
    model = describe(config, datetime.fromisoformat(start), 5)
    assert model["count"] == 5
    (task,) = model["tasks"]
    assert len(task["fires"]) == 5 and task["next"] == [f["local"] for f in task["fires"]]
    for fire in task["fires"]:
        local = datetime.fromisoformat(fire["local"])
        utc = datetime.fromisoformat(fire["utc"].replace("Z", "+00:00"))
        assert local == utc  # the same instant
        assert fire["slot"] == round(utc.timestamp() * 1000)
        # a wall time that exists in Berlin, with the offset Berlin has at that instant
        there = utc.astimezone(BERLIN)
        assert local.utcoffset() == there.utcoffset(), fire
        assert local.replace(tzinfo=None) == there.replace(tzinfo=None), fire
    instants = [f["slot"] for f in task["fires"]]
    assert instants == sorted(set(instants))  # (how often the fold fires is the evaluator's)


def test_an_every_task_is_shown_in_utc(tmp_path: Path) -> None:
    config = config_with(tmp_path, '[tasks.sync]\ncommand = "true"\nevery = "90s"\n')
    now = datetime(2024, 3, 31, 0, 59, tzinfo=timezone.utc)
    (task,) = describe(config, now, 4)["tasks"]
    utcs = [datetime.fromisoformat(f["utc"].replace("Z", "+00:00")) for f in task["fires"]]
    assert [b - a for a, b in itertools.pairwise(utcs)] == [timedelta(seconds=90)] * 3
    assert all(f["local"] == f["utc"] and f["utc"].endswith("Z") for f in task["fires"])
